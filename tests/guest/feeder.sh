#!/bin/sh
# GPU-feeder cores (Documentation/feeder.rst): with a busy loop on every CPU,
# sampling every runnable task's CPU for 10 s finds no non-feeder task on a
# feeder CPU and no feeder task elsewhere; movable IRQs leave the feeder CPUs
# and come back exactly.  On 7.2 (sched_ext): the scheduler's foreign counter
# stays 0, a mask change takes effect within 100 ms, and an injected error
# leads to the cpuset fallback reported by `feeder status`.
. "$(dirname "$0")/lib.sh"
CTL=${MLTUNECTL:-/usr/sbin/mltunectl}
FEEDER=2-3
SECS=${FEEDER_SAMPLE_SECS:-10}
CG=/sys/fs/cgroup/mltune-feeder
t_plan 9

[ -x "$CTL" ] || { t_diag "mltunectl missing"; exit 4; }
PIDS=""
cleanup() { for p in $PIDS; do kill "$p" 2>/dev/null; done; wait 2>/dev/null; "$CTL" feeder off >/dev/null 2>&1; }
trap cleanup EXIT

# samples CPUS: prints the number of violations over $SECS seconds and the
# sample count ("violations samples"); CPUS is a space-separated list.
sample() {
	_cpus=" $1 "; _end=$(( $(date +%s) + SECS )); _v=0; _n=0
	while [ "$(date +%s)" -lt "$_end" ]; do
		_f=" $(tr '\n' ' ' < $CG/cgroup.procs 2>/dev/null) "
		_r=$(cat /proc/[0-9]*/stat 2>/dev/null | awk -v F="$_f" -v C="$_cpus" '
			{ pid = $1; comm = $0; sub(/\) .*$/, ")", comm); sub(/^[^(]*/, "", comm);
			  sub(/^[^(]*\(.*\) /, "");
			  if ($1 != "R") next;
			  if (and($7, 0x00200000) && and($7, 0x04000000)) next;   # per-CPU kthread
			  feeder = index(F, " " pid " ") > 0; oncpu = index(C, " " $37 " ") > 0;
			  if (feeder != oncpu) { bad++; print "# pid " pid " " comm " flags=" $7 " feeder=" feeder " cpu=" $37 > "/dev/stderr" } }
			END { print bad + 0 }')
		_v=$((_v + _r)); _n=$((_n + 1))
	done
	echo "$_v $_n"
}

load_on() {
	i=0; while [ $i -lt 8 ]; do sh -c 'while :; do :; done' & PIDS="$PIDS $!"; i=$((i + 1)); done
	for i in 1 2; do "$CTL" feeder run -- sh -c 'while :; do :; done' & PIDS="$PIDS $!"; done
	# Sample only once both feeder loops are in the cgroup: a task joining
	# between the cgroup.procs read and the /proc scan would count as a
	# non-feeder task on a feeder CPU (mltunectl starts slowly under TCG).
	i=0; while [ "$(wc -l < $CG/cgroup.procs)" -lt 2 ] && [ $i -lt 300 ]; do usleep 100000; i=$((i + 1)); done
	sleep 1
}
load_off() { for p in $PIDS; do kill "$p" 2>/dev/null; done; wait 2>/dev/null; PIDS=""; }

irq_snapshot() { for f in /proc/irq/*/smp_affinity_list; do echo "$f $(cat "$f")"; done; cat /proc/irq/default_smp_affinity; }

irq_snapshot > /tmp/irq.before
mech=cpuset; [ -e /sys/kernel/sched_ext/state ] && mech=sched_ext
t_check "feeder on ($mech)" "$CTL" feeder on --cpus $FEEDER
"$CTL" feeder status | sed 's/^/# /'
t_check "mechanism is $mech" sh -c "$CTL feeder status | grep -q '^mechanism: $mech'"

# No movable IRQ on a feeder CPU: an IRQ still there must refuse a move.
bad=""
for f in /proc/irq/*/smp_affinity_list; do
	a=$(cat "$f")
	if awk -v a="$a" 'BEGIN { n = split(a, r, ","); for (i = 1; i <= n; i++) {
		split(r[i], b, "-"); if (b[2] == "") b[2] = b[1];
		if (b[1] <= 3 && b[2] >= 2) exit 0 } exit 1 }'; then
		if echo 0 > "$f" 2>/dev/null; then bad="$bad $f"; echo "$a" > "$f"; fi
	fi
done
t_check "no movable IRQ on feeder CPUs" test -z "$bad"

load_on
set -- $(sample "2 3")
t_diag "$1 violations in $2 samples"
t_check "zero tasks of the wrong kind on the wrong CPUs ($2 samples)" test "$1" = 0 -a "$2" -ge 3

if [ "$mech" = sched_ext ]; then
	foreign=$("$CTL" feeder status | sed -n 's/.*foreign=\([0-9]*\).*/\1/p')
	t_check "sched_ext foreign dispatches = 0 (got $foreign)" test "$foreign" = 0
	# Mask change in place: 2-3 -> 6-7, checked 100 ms later.
	"$CTL" feeder on --cpus 6-7 >/dev/null
	usleep 100000
	SECS=1; set -- $(sample "6 7")
	t_check "mask change effective within 100 ms ($1 violations)" test "$1" = 0
	t_check "still sched_ext after the CLI exited" sh -c "$CTL feeder status | grep -q 'mltune_feeder attached'"
	"$CTL" feeder inject-error
	sleep 2
	"$CTL" feeder status | sed 's/^/# /'
	t_check "injected error: cpuset fallback reported" sh -c "$CTL feeder status | grep -q '^fallback: cpuset partition after sched_ext ejection: scheduler error'"
else
	t_skip "sched_ext foreign counter (no sched_ext on $MLTUNE_VM_KERNEL)"
	t_skip "sched_ext mask change"
	t_skip "sched_ext stays attached"
	t_skip "sched_ext ejection fallback"
fi
load_off
"$CTL" feeder off
irq_snapshot > /tmp/irq.after
t_check "feeder off restores every IRQ affinity exactly" cmp /tmp/irq.before /tmp/irq.after
t_done
