#!/bin/sh
# [hugepages] on a real kernel: hugetlbfs pages per NUMA node as a domain of
# the switch.
#   - switch sets the 2 MiB counts of node 0 and the last node with a knob,
#     verify and active read them back;
#   - a count changed behind mltune's back is drift: verify names it;
#   - a refused allocation: the switch stopped before the hugepages step
#     (MLTUNE_STOP_AT), memory filled (tmpfs, no swap), then let go: the
#     kernel gives fewer pages than asked, the switch fails naming the count
#     and rolls back every domain before it; the node is as before it;
#   - a fault planted after the step (MLTUNE_FAIL_STEP) rolls it back;
#   - off puts back the counts and the knob as they were before the first
#     switch.
# Needs jq (tests/vm/run --bin /usr/bin/jq).
. "$(dirname "$0")/lib.sh"
M=/usr/sbin/mltunectl
[ -x "$M" ] || { echo "1..0 # SKIP no mltunectl in the guest"; exit 4; }
command -v jq >/dev/null || { echo "1..0 # SKIP jq not in the guest"; exit 4; }
H=hugepages/hugepages-2048kB/nr_hugepages
N0=/sys/devices/system/node/node0
[ -e "$N0/$H" ] || { echo "1..0 # SKIP this kernel has no 2 MiB hugetlbfs pages ($N0/$H)"; exit 4; }
t_plan 9
T=$(mktemp -d)
last=$(ls -d /sys/devices/system/node/node[0-9]* | sed 's/.*node//' | sort -n | tail -n 1)
NL=/sys/devices/system/node/node$last
tbl="0 = 32"
[ "$last" != 0 ] && tbl="$tbl, $last = 16"
t_diag "NUMA nodes 0-$last; [hugepages] \"2M\" = { $tbl }"
b0=$(cat "$N0/$H") bl=$(cat "$NL/$H") sw0=$(cat /proc/sys/vm/swappiness)
mkdir -p /etc/mltune/profiles
printf '[sysctl]\n"vm.swappiness" = { value = 7, reason = "the test knob" }\n[hugepages]\n"2M" = { %s }\n' "$tbl" >/etc/mltune/profiles/hp.toml
# The counts and the knob as "node0 nodeLAST swappiness".
now() { echo "$(cat "$N0/$H") $(cat "$NL/$H") $(cat /proc/sys/vm/swappiness)"; }
want_hp="32 $([ "$last" != 0 ] && echo 16 || echo 32) 7"

t_check "switch hp (a knob and 2 MiB pages on nodes 0 and $last)" "$M" switch hp
[ "$(now)" = "$want_hp" ] && t_ok "the kernel has the counts and the knob ($(now))" ||
	t_fail "the kernel has the counts and the knob: $(now), wanted $want_hp"
if "$M" verify hp >$T/v.out 2>&1 &&
	[ "$("$M" --json active | jq -r '.domains[] | select(.domain == "hugepages") | .state')" = applied ]; then
	t_ok "verify hp exits 0 and active reports hugepages applied"
else t_fail "verify hp and active"; sed 's/^/# /' $T/v.out; fi

# ---- drift: a count written behind mltune's back ---------------------------
echo 0 >"$N0/$H"
if "$M" --json verify hp >$T/d.json 2>&1; then t_fail "verify hp exits 1 after node0's count changed"; else
	if jq -e '.differences[] | select(.domain == "hugepages" and .key == "node0 2M" and .current == "0")' \
		$T/d.json >/dev/null; then
		t_ok "verify hp exits 1 and names node0 2M as drifted"
	else t_fail "verify hp names node0 2M"; sed 's/^/# /' $T/d.json | head -n 20; fi
fi
"$M" switch hp >/dev/null 2>&1

# ---- a refused allocation ---------------------------------------------------
# Half of node 0's free memory in 2 MiB pages passes the plan; the memory
# is then filled while the switch waits before the hugepages step.
free_kb=$(sed -nE 's/^Node 0 MemFree: +([0-9]+) kB/\1/p' "$N0/meminfo")
big=$((free_kb / 2 / 2048))
printf '[sysctl]\n"vm.swappiness" = { value = 3, reason = "the test knob" }\n[hugepages]\n"2M" = { 0 = %s }\n' "$big" >/etc/mltune/profiles/hpbig.toml
stopped() { [ "$(sed -E 's/^.*\) (.).*/\1/' /proc/$1/stat 2>/dev/null)" = T ]; }
MLTUNE_STOP_AT=sched/applied "$M" switch hpbig >$T/big.out 2>&1 &
p=$!
if t_wait 300 stopped $p; then
	mkdir -p $T/fill && mount -t tmpfs -o size=100% none $T/fill
	fill_mb=$(($(sed -nE 's/^MemFree: +([0-9]+) kB/\1/p' /proc/meminfo) / 1024 - 96))
	dd if=/dev/zero of=$T/fill/x bs=1048576 count=$fill_mb 2>/dev/null
	t_diag "asking for $big pages of node 0 with $(sed -nE 's/^Node 0 MemFree: +([0-9]+) kB/\1/p' "$N0/meminfo") kB free there"
	kill -CONT $p
	wait $p; rc=$?
	rm -f $T/fill/x; umount $T/fill
	if [ $rc != 0 ] && grep -q 'hugepages node0 2M: the kernel set [0-9]* of '"$big"' pages' $T/big.out &&
		grep -q 'rolled back: sched, nic, knobs, modules' $T/big.out; then
		t_ok "a refused allocation fails the switch naming the count, every domain before rolled back"
	else t_fail "a refused allocation (exit $rc)"; sed 's/^/# /' $T/big.out; fi
	[ "$(now)" = "$want_hp" ] && t_ok "after the refused switch: counts and knob of hp ($(now))" ||
		t_fail "after the refused switch: $(now), wanted $want_hp"
else
	t_fail "the switch did not stop before the hugepages step"; kill -9 $p; wait $p
	t_fail "after the refused switch (not run)"
fi

# ---- a fault after the step --------------------------------------------------
"$M" switch baseline >/dev/null 2>&1
before=$(now)
if MLTUNE_FAIL_STEP=hugepages "$M" switch hp >$T/f.out 2>&1; then t_fail "MLTUNE_FAIL_STEP=hugepages fails the switch"
elif [ "$(now)" = "$before" ]; then t_ok "a fault after the hugepages step rolls it back ($(now))"
else t_fail "a fault after the hugepages step: $(now), wanted $before"; sed 's/^/# /' $T/f.out; fi

# ---- off ---------------------------------------------------------------------
"$M" switch hp >/dev/null 2>&1
t_check "off" "$M" off
[ "$(now)" = "$b0 $bl $sw0" ] && t_ok "off: counts and knob as before the first switch ($(now))" ||
	t_fail "off: $(now), wanted $b0 $bl $sw0"
rm -f /etc/mltune/profiles/hp.toml /etc/mltune/profiles/hpbig.toml
rm -rf $T
t_done
