#!/bin/sh
# Drift attribution (Documentation/noise.rst) on a real kernel: with the
# watcher running and a one-knob profile applied, a planted writer (a
# program named mlt-writer) changes a managed sysctl and an IRQ affinity and
# makes a thread SCHED_FIFO; `verify` names it with its pid for the sysctl
# (text and JSON, with the value it wrote and the one before), `drift show`
# for the IRQ affinity (either of its two files) and the thread.  A write the
# kernel refuses leaves no record; `drift stop` removes the watcher.
. "$(dirname "$0")/lib.sh"
CTL=${MLTUNECTL:-/usr/sbin/mltunectl}
t_plan 10

[ -x "$CTL" ] || { t_diag "mltunectl missing"; exit 4; }
PLANT=$(command -v noise_plant) || { t_diag "noise_plant missing (--bin build/userspace/noise_plant)"; exit 4; }
command -v jq >/dev/null || { t_diag "jq missing (--bin /usr/bin/jq)"; exit 4; }
W=/tmp/drift-test
mkdir -p $W
SWAP=$(cat /proc/sys/vm/swappiness)
IRQ=""
IRQ_AFF=""
S=""
cleanup() {
	[ -n "$S" ] && kill "$S" 2>/dev/null
	"$CTL" drift stop >/dev/null 2>&1
	"$CTL" switch baseline >/dev/null 2>&1
	echo "$SWAP" > /proc/sys/vm/swappiness
	[ -n "$IRQ" ] && echo "$IRQ_AFF" > /proc/irq/$IRQ/smp_affinity_list 2>/dev/null
}
trap cleanup EXIT

ip link set eth0 up
IRQ=$(awk '/eth0-rx-0/ { sub(":", "", $1); print $1 }' /proc/interrupts)
[ -n "$IRQ" ] || { t_diag "no eth0-rx-0 IRQ"; exit 1; }
IRQ_AFF=$(cat /proc/irq/$IRQ/smp_affinity_list)

"$CTL" drift start >$W/start.out 2>&1 && t_ok "drift watcher starts (BPF programs pass the verifier)" ||
	{ t_fail "drift watcher starts"; sed 's/^/# /' $W/start.out; t_done; exit 1; }
"$CTL" --json drift status >$W/st.json
m=$(jq -r .missing $W/st.json)
[ "$(jq -r .running $W/st.json)" = true ] && [ -z "$m" ] && t_ok "drift status: running, every hook present" ||
	t_fail "drift status: running, every hook present (missing: $m)"
# A profile of one knob: what the planted writer changes is this test's
# alone, and the NICs stay as the boot left them for the suites after it.
cat >$W/drift.toml <<EOF
description = "drift attribution test: one managed sysctl"
[sysctl]
"vm.swappiness" = { value = 1, reason = "a managed setting for the planted writer" }
EOF
# The switch itself must hold: nothing below is set by hand.
"$CTL" switch $W/drift.toml >$W/switch.out 2>&1 && [ "$(cat /proc/sys/vm/swappiness)" = 1 ] &&
	t_ok "switch to the one-knob profile: vm.swappiness = 1" ||
	{ t_fail "switch to the one-knob profile: vm.swappiness = 1"; sed 's/^/# /' $W/switch.out; }

out=$($PLANT write mlt-writer /proc/sys/vm/swappiness 60 /proc/irq/$IRQ/smp_affinity_list 1)
PID=${out#pid }
t_diag "mlt-writer was pid $PID"
# A refused write leaves the record of the last successful one.
$PLANT write mlt-writer /proc/sys/vm/swappiness bogus >/dev/null 2>&1

"$CTL" --json verify $W/drift.toml >$W/v.json 2>$W/v.err
jq -e --argjson p "$PID" '.differences[] | select(.key == "vm.swappiness") | .changed_by |
	select(.comm == "mlt-writer" and .pid == $p and .new == "60")' $W/v.json >/dev/null &&
	t_ok "verify --json: vm.swappiness changed_by mlt-writer with its pid" ||
	{ t_fail "verify --json: vm.swappiness changed_by mlt-writer with its pid"; jq -c '.differences[] |
		select(.key == "vm.swappiness")' $W/v.json | sed 's/^/# /'; }
[ "$(jq -r '.differences[] | select(.key == "vm.swappiness") | .changed_by.old' $W/v.json)" = 1 ] &&
	t_ok "the old value is recorded (1)" || t_fail "the old value is recorded (1)"
"$CTL" verify $W/drift.toml >$W/v.txt 2>&1
grep -q "vm.swappiness: current '60', expected '1'; changed by mlt-writer (pid $PID" $W/v.txt &&
	t_ok "verify names the writer and its pid" ||
	{ t_fail "verify names the writer and its pid"; grep swappiness $W/v.txt | sed 's/^/# /'; }

# The IRQ affinity, by either of its files.
ok=1
for f in smp_affinity smp_affinity_list; do
	"$CTL" --json drift show --path /proc/irq/$IRQ/$f >$W/irq.json 2>&1 || ok=0
	jq -e --argjson p "$PID" '.writes[0] | select(.comm == "mlt-writer" and .pid == $p and .new == "1"
		and .op == "irq_affinity")' $W/irq.json >/dev/null || ok=0
done
[ $ok = 1 ] && t_ok "drift show names the writer of IRQ $IRQ's affinity" ||
	{ t_fail "drift show names the writer of IRQ $IRQ's affinity"; sed 's/^/# /' $W/irq.json; }
# (verify checks no IRQ affinity of this one-knob profile: the writer of an
# IRQ's affinity is named by drift show above; the NIC suite checks verify's
# IRQ differences.)

# Scheduling of a thread.
$PLANT sleep victim 100000 & S=$!
out=$($PLANT setsched mlt-writer $S 5)
SP=${out#pid }
"$CTL" --json drift show --tid $S >$W/s.json 2>&1
jq -e --argjson p "$SP" '.writes[0] | select(.comm == "mlt-writer" and .pid == $p and
	.op == "sched_setscheduler" and (.new | test("policy=1 prio=5")))' $W/s.json >/dev/null &&
	t_ok "drift show names who made thread $S SCHED_FIFO" ||
	{ t_fail "drift show names who made thread $S SCHED_FIFO"; sed 's/^/# /' $W/s.json; }
kill $S; wait $S 2>/dev/null; S=""

stopped=$("$CTL" drift stop 2>&1)
[ "$stopped" = "drift watcher stopped" ] && [ ! -e /sys/fs/bpf/mltune-drift ] &&
	[ "$("$CTL" --json drift status | jq -r .running)" = false ] &&
	t_ok "drift stop removes the watcher" || { t_fail "drift stop removes the watcher"; echo "# $stopped"; }
# A second stop has nothing to stop, and says so.
again=$("$CTL" --json drift stop 2>&1)
[ "$(echo "$again" | jq -r .stopped)" = false ] &&
	[ "$("$CTL" drift stop 2>&1)" = "drift watcher was not running: nothing to stop" ] &&
	t_ok "drift stop with no watcher says nothing ran" || { t_fail "drift stop with no watcher says nothing ran"; echo "# $again"; }
t_done
