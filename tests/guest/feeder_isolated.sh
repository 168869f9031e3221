#!/bin/sh
# Feeder cores in an isolated cpuset partition (`feeder on --partition
# isolated`, Documentation/feeder.rst).  Busy CPUs kick the scheduler's idle
# load balancer on the first idle CPU it knows of (a function-call IPI): an
# idle feeder core in a root partition takes those kicks, one in an isolated
# partition made while it was busy does not.  With six busy loops on the
# housekeeping CPUs and idle feeder CPUs 2-3, the function-call IPIs of 2-3
# are counted over a window of the busy CPU 0's ticks (counted, not timed:
# a loaded host makes the window slower, not shorter), first with a root
# partition, then with an isolated one; `feeder status` says which and why;
# a feeder task runs on a feeder CPU; `feeder off` gives the root cgroup its
# CPUs, the workqueue cpumask and the kernel's isolated set back exactly.
. "$(dirname "$0")/lib.sh"
CTL=${MLTUNECTL:-/usr/sbin/mltunectl}
CG=/sys/fs/cgroup/mltune-feeder
TICKS=${FEEDER_TICKS:-300}
t_plan 8

[ -x "$CTL" ] || { t_diag "mltunectl missing"; exit 4; }
PIDS="" TASK=""
loops_off() { for p in $PIDS $TASK; do kill "$p" 2>/dev/null; done; wait 2>/dev/null; PIDS="" TASK=""; }
cleanup() { loops_off; "$CTL" feeder off >/dev/null 2>&1; }
trap cleanup EXIT

# row LABEL CPU: the count of /proc/interrupts row LABEL on CPU.
row() { awk -v l="$1:" -v c="$2" '$1 == l { print $(c + 2) }' /proc/interrupts; }
# kicks: the function-call IPIs of CPUs 2 and 3 while CPU 0 takes $TICKS
# local timer interrupts (busy, it takes one a tick); at most 120 s.
kicks() {
	_a=$(($(row CAL 2) + $(row CAL 3))) _t=$(row LOC 0) _i=0
	while [ $(($(row LOC 0) - _t)) -lt "$TICKS" ] && [ $_i -lt 1200 ]; do sleep 0.1; _i=$((_i + 1)); done
	echo $(($(row CAL 2) + $(row CAL 3) - _a))
}
loops_on() { for i in 1 2 3 4 5 6; do sh -c 'while :; do :; done' & PIDS="$PIDS $!"; done; }
snapshot() {
	echo "root cpus: $(cat /sys/fs/cgroup/cpuset.cpus.effective 2>/dev/null)"
	echo "root isolated: $(cat /sys/fs/cgroup/cpuset.cpus.isolated 2>/dev/null)"
	echo "workqueue: $(cat /sys/devices/virtual/workqueue/cpumask 2>/dev/null)"
	echo "cpu isolated: $(cat /sys/devices/system/cpu/isolated)"
	echo "feeder cgroup: $([ -d $CG ] && echo present || echo absent)"
}
snapshot > /tmp/iso.before

t_check "feeder on --cpus 2-3 --mechanism cpuset (root partition)" "$CTL" feeder on --cpus 2-3 --mechanism cpuset
loops_on
root_k=$(kicks)
loops_off
"$CTL" feeder off >/dev/null

t_check "feeder on --cpus 2-3 --partition isolated" "$CTL" feeder on --cpus 2-3 --partition isolated
"$CTL" feeder status | sed 's/^/# /'
"$CTL" --json feeder status > /tmp/iso.json
t_check "status: an isolated partition, without load balancing, every feeder CPU held busy while it was made; the per-CPU kthreads that stay listed" \
	sh -c "jq -e '.mechanism == \"cpuset\" and .partition == \"isolated\" and .partition_type == \"isolated\" and
		(.partition_note | test(\"no load balancing\")) and (.partition_note | test(\"not every\") | not) and
		(.pinned_kthreads | any(.comm == \"ksoftirqd/2\")) and (.pinned_kthreads | all(.cpus == \"2\" or .cpus == \"3\" or (.cpus | test(\"-\"))))' /tmp/iso.json"
t_diag "/sys/devices/system/cpu/isolated with the partition: '$(cat /sys/devices/system/cpu/isolated)'"
if [ -e /sys/fs/cgroup/cpuset.cpus.isolated ]; then
	t_check "the kernel's isolated set (cpuset.cpus.isolated) is 2-3, as status says" \
		sh -c "test \"\$(cat /sys/fs/cgroup/cpuset.cpus.isolated)\" = 2-3 && jq -e '.kernel_isolated == \"2-3\"' /tmp/iso.json"
else
	t_check "the feeder cgroup is an isolated partition (this kernel has no cpuset.cpus.isolated)" \
		sh -c "test \"\$(cat $CG/cpuset.cpus.partition)\" = isolated"
fi

loops_on
iso_k=$(kicks)
t_check "root partition: idle feeder CPUs 2-3 take the idle load balancer's kicks ($root_k in $TICKS ticks of CPU 0)" \
	test "$root_k" -ge 20
t_check "isolated partition: at most a tenth of them ($iso_k against $root_k)" test $((iso_k * 10)) -le "$root_k"

"$CTL" feeder run -- sh -c 'while :; do :; done' & TASK=$!
t_wait 60 sh -c "grep -q . $CG/cgroup.procs"
pid=$(head -n 1 $CG/cgroup.procs)
cpu=$(awk '{ sub(/^.*\) /, ""); print $37 }' /proc/$pid/stat 2>/dev/null)
t_check "a feeder task runs on a feeder CPU (pid $pid on CPU $cpu)" sh -c "test '$cpu' = 2 || test '$cpu' = 3"
loops_off

"$CTL" feeder off
snapshot > /tmp/iso.after
t_check "feeder off restores the root cgroup's CPUs, the kernel's isolated sets and the workqueue cpumask" \
	diff /tmp/iso.before /tmp/iso.after
t_done
