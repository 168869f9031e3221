#!/bin/sh
# A profile as one unit on a real kernel (issue "one profile, one
# transaction"): every domain mltune touches is switched, verified and
# returned to what was there before, together.
#   - eth0 down: `switch training` exits 0 and reports what it skipped,
#     `verify training` exits 0 and its --json lists every domain; the
#     profile's module (tcp_bbr) is loaded before its knob (bbr);
#   - a snapshot of every setting any domain touches, taken before anything
#     ran, is identical after switch training, switch inference, off;
#   - a driver refusal in the middle of the NIC commit leaves the snapshot
#     unchanged and names the nic step;
#   - a fault injected after each step (MLTUNE_FAIL_STEP) leaves the
#     snapshot unchanged and the error names the step;
#   - kill -9 of `mltunectl switch` at random points, at every step boundary
#     and inside the modules step (MLTUNE_STOP_AT), and while modprobe
#     loads its module (off waits for it), then `off`: snapshot;
#   - limits are bounds: fs.file-max=9999999 survives switch training;
#   - the plain sysfs write: with `mltunectl follow --listen` standing in
#     for the package's udev rule, `echo training > .../profile` brings
#     every domain in line, a profile whose NIC settings the kernel refuses
#     puts the module back on training, `echo baseline` and off restore.
# Needs ethtool, jq and nccl_mimic (tests/vm/run --bin ...).
. "$(dirname "$0")/lib.sh"
M=/usr/sbin/mltunectl
for b in ethtool jq nccl_mimic; do
	command -v $b >/dev/null || { echo "1..0 # SKIP $b not in the guest"; exit 4; }
done
[ -d /sys/class/net/eth1 ] || { echo "1..0 # SKIP needs both NICs"; exit 4; }
t_plan 26
T=/tmp/node-test
rm -rf $T; mkdir -p $T

# The mimic's threads ("NCCL Progress 8", "NCCL Service  0", "mimic-worker")
# live until $T/release exists: the test process whose policies are compared.
nccl_mimic --delay 100 --spawn-after 300 --run 600000 --hold $T/release >$T/mimic.log &
mpid=$!
i=0
while ! grep -q "^spawn result" $T/mimic.log && [ $i -lt 600 ]; do sleep 0.1; i=$((i + 1)); done
cleanup() {
	touch $T/release
	[ -n "${fpid:-}" ] && kill "$fpid" 2>/dev/null
	rm -f /etc/mltune/profiles/bad.toml /etc/mltune/profiles/drvfail.toml
	echo -bad >/sys/kernel/mltune/profiles/control 2>/dev/null
	$M off >/dev/null 2>&1
	ip link set eth0 up 2>/dev/null
}
trap cleanup EXIT

# Knob paths of both shipped profiles (every knob a profile domain touches).
knob_paths() {
	for p in training inference; do
		$M --json profile show $p | jq -r '.knobs[].path'
	done | sort -u
}
KNOBS=$(knob_paths)

# Every setting any domain touches (tests/guest/lib.sh), the mimic's threads.
snapshot() { node_settings "$KNOBS" "$mpid"; }
same() { # same NAME: the snapshot equals the one taken at boot
	snapshot >$T/now
	if cmp -s $T/boot $T/now; then t_ok "$1"; else
		t_fail "$1"; diff $T/boot $T/now | sed 's/^/# /' | head -n 30
	fi
}

ip link set eth1 up
ip link set eth0 down
snapshot >$T/boot
t_diag "snapshot: $(wc -l <$T/boot) settings, $(echo $KNOBS | wc -w) knobs"

# ---- 1. eth0 down: the switch skips what it cannot take and says so ------------
if $M switch training >$T/sw.out 2>&1; then
	if grep -q "eth0.*irq.affinity: the interface is down" $T/sw.out; then
		t_ok "switch training with eth0 down exits 0 and reports the skipped IRQs"
	else t_fail "switch training reports eth0's IRQs as skipped"; sed 's/^/# /' $T/sw.out | tail -n 20; fi
else t_fail "switch training with eth0 down exits 0"; sed 's/^/# /' $T/sw.out | tail -n 20; fi
if $M --json verify training >$T/v.json 2>$T/v.err; then
	doms=$(jq -r '[.domains[].domain] | join(",")' $T/v.json)
	states=$(jq -r '[.domains[].state] | join(",")' $T/v.json)
	if [ "$doms" = modules,knobs,nic,sched,hugepages ] &&
		[ "$states" = match,match,match,match,not-applicable ]; then
		t_ok "verify training exits 0 and --json lists every domain"
	else t_fail "verify --json domains: $doms = $states"; fi
else t_fail "verify training exits 0"; jq -c '.differences[]' $T/v.json | sed 's/^/# /' | head; cat $T/v.err; fi
if [ -d /sys/module/tcp_bbr ] && [ "$(cat /proc/sys/net/ipv4/tcp_congestion_control)" = bbr ]; then
	t_ok "switch training loaded tcp_bbr (modprobe) before setting bbr"
else t_fail "tcp_bbr loaded and bbr set ($(cat /proc/sys/net/ipv4/tcp_congestion_control))"; fi
if [ "$(cat /sys/block/nvme0n1/queue/wbt_lat_usec)" = 0 ] && grep -q "\[none\]" /sys/block/nvme0n1/queue/scheduler; then
	t_ok "switch training set the NVMe disk's [block.\"nvme*\"] settings"
else t_fail "nvme0n1: wbt_lat_usec $(cat /sys/block/nvme0n1/queue/wbt_lat_usec), $(cat /sys/block/nvme0n1/queue/scheduler)"; fi
progress_tid=$(sed -n 's/^named tid=\([0-9]*\) name="NCCL Progress 8".*/\1/p' $T/mimic.log)
pol=$(stat_of /proc/$mpid/task/$progress_tid policy)
nice=$(stat_of /proc/$mpid/task/$progress_tid nice)
if [ "$pol" = 6 ] || [ "$nice" = -10 ]; then t_ok "switch training set the NCCL thread rule (policy $pol, nice $nice)"; else
	t_fail "switch training set the NCCL thread rule (policy $pol, nice $nice)"; fi
if $M --json active >$T/a.json && [ "$(jq -r .profile $T/a.json)" = training ] &&
	[ "$(jq -r '.domains[] | select(.domain == "nic") | .state' $T/a.json)" = applied ]; then
	t_ok "active: training, every profile domain applied"
else t_fail "active"; jq -c '.domains[]' $T/a.json | sed 's/^/# /'; fi

# ---- 2. inference, then training: no drift; then off: the boot snapshot -------
t_check "switch inference" $M switch inference
t_check "switch training after inference" $M switch training
if $M --json verify training >$T/v2.json && [ "$(jq '.differences | length' $T/v2.json)" = 0 ]; then
	t_ok "switch inference then training leaves no drift in any domain"
else t_fail "no drift after inference -> training"; jq -c '.differences[]' $T/v2.json | sed 's/^/# /' | head; fi
t_check "off" $M off
same "switch training, switch inference, off: every setting as at boot"

# ---- 3. a fault after each step: nothing changed, the step named -------------
for step in modules knobs nic sched; do
	if MLTUNE_FAIL_STEP=$step $M switch training >$T/f.out 2>&1; then
		t_fail "fault after $step: switch must fail"
	elif grep -q "^mltunectl: error: $step apply: fault injected" $T/f.out; then
		same "fault after $step: node as before, error names the step"
	else t_fail "fault after $step: error names the step"; sed 's/^/# /' $T/f.out; fi
done

# A real driver error in the middle of the NIC commit, after the modules,
# the knobs and the e1000e's settings are in: virtio-net without
# notification coalescing takes rx-frames 1 only (EINVAL), which the plan
# cannot know. Everything goes back; the step and the reason are named.
mkdir -p /etc/mltune/profiles
printf 'include = ["training"]\n[nic."virtio_net"]\ncoalesce = { rx-frames = 2 }\n' \
	>/etc/mltune/profiles/drvfail.toml
if $M switch drvfail >$T/d.out 2>&1; then
	t_fail "a driver refusal in the NIC commit: switch must fail"
	sed 's/^/# /' $T/d.out
elif grep -q "^mltunectl: error: nic apply" $T/d.out && grep -qiE "invalid argument|not supported" $T/d.out; then
	same "a driver refusal in the NIC commit: node as before, the nic step and the kernel's reason named"
else t_fail "a driver refusal in the NIC commit: error names the step"; sed 's/^/# /' $T/d.out; fi
rm -f /etc/mltune/profiles/drvfail.toml

# ---- 4. kill -9 of the switch at random points, then off ----------------------
# killed_then_off PID WHAT: kill -9 of the switch PID, then off; ok=0 (and
# WHAT with the difference shown) unless every setting is as at boot.
killed_then_off() {
	kill -9 $1 2>/dev/null
	wait $1 2>/dev/null
	$M off >$T/off.out 2>&1 || { ok=0; sed 's/^/# /' $T/off.out; }
	snapshot >$T/now
	cmp -s $T/boot $T/now || { ok=0; t_diag "$2:"; diff $T/boot $T/now | sed 's/^/# /' | head -n 20; }
}
ok=1
for n in 1 2 3 4 5 6; do
	$M switch training >/dev/null 2>&1 &
	p=$!
	sleep "0.$(( (RANDOM % 9) + 1 ))$(( RANDOM % 10 ))"
	killed_then_off $p "kill $n"
done
[ $ok = 1 ] && t_ok "kill -9 of switch at 6 random points, then off: every setting as at boot" ||
	t_fail "kill -9 of switch, then off"

# ---- 4b. kill -9 at every step boundary and inside the modules step -------------
# MLTUNE_STOP_AT stops the switch there (SIGSTOP): the kill lands at that
# point whatever the load on the machine.
stopped() { [ "$(sed -E 's/^.*\) (.).*/\1/' /proc/$1/stat 2>/dev/null)" = T ]; }
ok=1
for at in modules/recorded modules/applied knobs/applied nic/applied sched/applied boot/applied; do
	MLTUNE_STOP_AT=$at $M switch training >/dev/null 2>&1 &
	p=$!
	t_wait 300 stopped $p || { ok=0; t_diag "$at: the switch did not stop there"; }
	killed_then_off $p "killed at $at"
done
[ $ok = 1 ] && t_ok "kill -9 at every step boundary and inside the modules step, then off: every setting as at boot" ||
	t_fail "kill -9 at every step boundary and inside the modules step, then off"

# ---- 4c. a switch killed while modprobe loads its module ------------------------
# modprobe holds the node lock it inherits: off waits for it to end, then
# unloads what it loaded. This modprobe waits for $T/go, which the test
# creates once off has either ended or waits for the lock.
mkdir -p $T/slow
real=$(command -v modprobe)
{
	echo '#!/bin/sh'
	echo ": >$T/modprobe.started"
	echo "while [ ! -e $T/go ]; do sleep 0.1; done"
	echo "$real \"\$@\""
	echo 'rc=$?'
	echo ": >$T/modprobe.done"
	echo 'exit $rc'
} >$T/slow/modprobe
chmod +x $T/slow/modprobe
rm -f $T/go $T/modprobe.started $T/modprobe.done
PATH=$T/slow:$PATH $M switch training >/dev/null 2>&1 &
p=$!
t_wait 300 test -e $T/modprobe.started || t_diag "the switch never ran modprobe"
kill -9 $p 2>/dev/null
wait $p 2>/dev/null
$M off >$T/off.out 2>&1 &
o=$!
off_waits() { grep -qE "^[0-9]+: *-> *FLOCK .* $o " /proc/locks; }
off_waits_or_ended() { off_waits || ! kill -0 $o 2>/dev/null; }
t_wait 300 off_waits_or_ended
if off_waits; then blocked=1; else blocked=0; fi
: >$T/go
wait $o
orc=$?
t_wait 300 test -e $T/modprobe.done
snapshot >$T/now
if [ $blocked = 1 ] && [ $orc = 0 ] && cmp -s $T/boot $T/now; then
	t_ok "a switch killed while modprobe runs: off waits for modprobe, then every setting as at boot"
else
	t_fail "a switch killed while modprobe runs: off waits for modprobe, then every setting as at boot"
	t_diag "off waited on the node lock: $blocked; its exit: $orc"
	sed 's/^/# /' $T/off.out
	diff $T/boot $T/now | sed 's/^/# /' | head -n 20
fi

# ---- 5. limits are bounds --------------------------------------------------------
old=$(cat /proc/sys/fs/file-max)
echo 9999999 >/proc/sys/fs/file-max
$M switch training >/dev/null 2>&1
if [ "$(cat /proc/sys/fs/file-max)" = 9999999 ]; then t_ok "switch training leaves fs.file-max=9999999"; else
	t_fail "switch training lowered fs.file-max to $(cat /proc/sys/fs/file-max)"; fi
t_check "verify training accepts fs.file-max=9999999" $M verify training
$M off >/dev/null
echo "$old" >/proc/sys/fs/file-max
same "off after the bounds check: every setting as at boot"

# ---- 6. the plain sysfs write; mltunectl follow does the rest ------------------
$M follow --listen >$T/follow.log 2>&1 &
fpid=$!
# followed GEN: the follower has handled the module's generation GEN (or a later one)
followed() { [ "$(jq -r '.last.generation' /run/mltune/follow.json 2>/dev/null || echo 0)" -ge "$1" ]; }
wait_followed() {
	i=0
	while ! followed "$1" && [ $i -lt 600 ]; do sleep 0.1; i=$((i + 1)); done
	followed "$1" || { t_diag "generation $1 not followed after 60 s"; sed 's/^/# /' $T/follow.log; }
}
gen() { cat /sys/kernel/mltune/generation; }
echo training >/sys/kernel/mltune/profile
wait_followed "$(gen)"
if $M verify training >$T/fv.out 2>&1 && [ -d /sys/module/tcp_bbr ] &&
	[ "$(cat /proc/sys/net/ipv4/tcp_congestion_control)" = bbr ]; then
	t_ok "echo training > profile: the follower brought modules, NIC and threads in line (verify 0, bbr set)"
else t_fail "echo training: verify after the follower"; sed 's/^/# /' $T/fv.out $T/follow.log | tail -n 20; fi
# A profile the module has, whose NIC setting the kernel refuses (an MTU
# beyond virtio-net's maximum): the module goes back to training.
cat /sys/kernel/mltune/profiles/training/knobs >$T/knobs
echo +bad >/sys/kernel/mltune/profiles/control
cat $T/knobs >/sys/kernel/mltune/profiles/bad/knobs
echo commit >/sys/kernel/mltune/profiles/bad/state
mkdir -p /etc/mltune/profiles
printf 'include = ["training"]\n[nic."virtio_net"]\nlink = { mtu = 65536 }\n' >/etc/mltune/profiles/bad.toml
echo bad >/sys/kernel/mltune/profile
g=$(gen)
wait_followed "$g"
i=0
while [ "$(cat /sys/kernel/mltune/profile)" != training ] && [ $i -lt 300 ]; do sleep 0.1; i=$((i + 1)); done
if [ "$(cat /sys/kernel/mltune/profile)" = training ] &&
	[ "$(jq -r '.last_failure.profile' /run/mltune/follow.json)" = bad ]; then
	t_ok "echo bad > profile: its NIC step fails, the follower puts the module back on training"
else t_fail "the follower rolls a failing profile back"; cat /run/mltune/follow.json | sed 's/^/# /'; fi
if $M --json active | jq -e '.domains[] | select(.domain == "follow") | .detail | test("last failure")' >/dev/null; then
	t_ok "active shows the follower's last failure"
else t_fail "active: follow domain"; $M active | sed 's/^/# /'; fi
echo baseline >/sys/kernel/mltune/profile
wait_followed "$(gen)"
$M off >/dev/null
same "echo baseline, then off: every setting as at boot"
t_done
