#!/bin/sh
# GPU-feeder cores (Documentation/feeder.rst): with a busy loop on every CPU,
# sampling every runnable task's CPU (a fixed number of /proc scans, however
# slow the guest) finds no non-feeder task on a feeder CPU and no feeder task
# elsewhere; movable IRQs leave the feeder CPUs and come back exactly.  A mask
# change (2-3 -> 6-7, with either mechanism) is in effect when the CLI returns
# and takes IRQs, movable kthreads and the unbound
# workqueue cpumask off the new CPUs (giving the old ones back); `feeder off`
# after it still restores every affinity exactly.  On 7.2 (sched_ext): the
# scheduler's foreign counter stays 0, the scheduler stays attached after the
# CLI exits, and an injected error leads to the cpuset fallback reported by
# `feeder status`.  Real-time threads outside the feeder cgroup leave the
# feeder CPUs with either mechanism (sched_ext does not schedule them: its
# guard and the sweep at `feeder on` move them) and get their own affinity
# back at `feeder off`.  A SCHED_DEADLINE thread outside the feeder cgroup
# (its affinity must span its root domain, so no affinity can move it): the
# cpuset partition keeps it off the feeder CPUs; with sched_ext, which does
# not schedule it, `feeder status` reports it.
. "$(dirname "$0")/lib.sh"
CTL=${MLTUNECTL:-/usr/sbin/mltunectl}
FEEDER=2-3
SAMPLES=${FEEDER_SAMPLES:-6}
CG=/sys/fs/cgroup/mltune-feeder
t_plan 17

[ -x "$CTL" ] || { t_diag "mltunectl missing"; exit 4; }
PLANT=$(command -v noise_plant) || { t_diag "noise_plant missing (--bin build/userspace/noise_plant)"; exit 4; }
PIDS="" RTPIDS="" RT3=""
cleanup() { for p in $PIDS $RTPIDS; do kill "$p" 2>/dev/null; done; wait 2>/dev/null; "$CTL" feeder off >/dev/null 2>&1; }
trap cleanup EXIT

# sample CPUS N: prints the number of violations in N scans of every
# runnable task and the scan count ("violations scans"); CPUS is a
# space-separated list.  Counted, not timed: a loaded host makes the scans
# slower, never fewer.
sample() {
	_cpus=" $1 "; _v=0; _n=0
	while [ "$_n" -lt "$2" ]; do
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
load_off() { for p in $PIDS; do kill "$p" 2>/dev/null; done; wait $PIDS 2>/dev/null; PIDS=""; }

irq_snapshot() { for f in /proc/irq/*/smp_affinity_list; do echo "$f $(cat "$f")"; done; cat /proc/irq/default_smp_affinity; }
# Movable kthreads (not per-CPU, not PF_NO_SETAFFINITY): "pid comm cpulist".
# kworkers are left out: the kernel rebinds them with the workqueue cpumask.
kthread_snapshot() {
	# One awk over every stat file (a fork per process is minutes on a
	# loaded emulated guest): flags are stat field 9, $7 after the comm.
	cat /proc/[0-9]*/stat 2>/dev/null | awk '{
		pid = $1; comm = $0; sub(/^[^(]*\(/, "", comm); sub(/\) [^)]*$/, "", comm)
		rest = $0; sub(/^.*\) /, "", rest); split(rest, f, " ")
		if (!and(f[7], 0x00200000) || and(f[7], 0x04000000)) next
		if (comm ~ /^kworker\//) next
		cpus = ""; file = "/proc/" pid "/status"
		while ((getline line < file) > 0)
			if (line ~ /^Cpus_allowed_list:/) { sub(/^Cpus_allowed_list:[ \t]*/, "", line); cpus = line }
		close(file)
		print pid " " comm " " cpus
	}'
}
wq_mask() { cat /sys/devices/virtual/workqueue/cpumask 2>/dev/null || echo none; }
# in_range CPULIST LO HI: does CPULIST include a CPU in LO..HI?
in_range() {
	awk -v a="$1" -v lo="$2" -v hi="$3" 'BEGIN { n = split(a, r, ","); for (i = 1; i <= n; i++) {
		split(r[i], b, "-"); if (b[2] == "") b[2] = b[1];
		if (b[1] <= hi && b[2] >= lo) exit 0 } exit 1 }'
}
# movable_irqs_on LO HI: the IRQ files whose affinity includes a CPU in LO..HI
# and that accept a move elsewhere (an IRQ that refuses a move is not movable).
movable_irqs_on() {
	for f in /proc/irq/*/smp_affinity_list; do
		a=$(cat "$f")
		in_range "$a" "$1" "$2" || continue
		if echo 0 > "$f" 2>/dev/null; then echo "$f=$a"; echo "$a" > "$f"; fi
	done
}
# movable_kthreads_on LO HI: movable kthreads allowed on a CPU in LO..HI
# (single-CPU affinities are someone's choice and left alone).
movable_kthreads_on() {
	kthread_snapshot | while read -r pid comm cpus; do
		case $cpus in *,* | *-*) in_range "$cpus" "$1" "$2" && echo "$pid:$comm:$cpus" ;; esac
	done
}
# hex_has MASK BIT: is BIT set in the sysfs cpumask MASK (up to 32 CPUs)?
hex_has() { [ $(( 0x${1##*,} >> $2 & 1 )) = 1 ]; }

# allowed PID: the CPUs PID may run on.
allowed() { sed -n 's/^Cpus_allowed_list:[[:space:]]*//p' "/proc/$1/status"; }
# rt_start CPUS: a periodic SCHED_FIFO thread on CPUS; its pid in RT.
rt_start() {
	"$PLANT" rt rtplant "$1" 10 2000 > /tmp/rt.out & RT=$!; RTPIDS="$RTPIDS $RT"
	i=0; while ! grep -q '^pid' /tmp/rt.out && [ $i -lt 300 ]; do usleep 100000; i=$((i + 1)); done
	rm -f /tmp/rt.out
}

# Two real-time threads allowed on 2-4 before feeder on, and a DEADLINE one
rt_start 2-4; RT1=$RT
rt_start 2-4; RT2=$RT
# (2 ms of every 10 ms, spinning), started on CPU 2 and allowed everywhere.
"$PLANT" dl dlplant 2000 10000 2 > /tmp/dl.out & DL=$!; RTPIDS="$RTPIDS $DL"
t_wait 30 grep -q '^pid' /tmp/dl.out || t_diag "the DEADLINE thread did not start: $(cat /tmp/dl.out)"
# dl_looks N: how many of N looks, 50 ms apart, find it last ran on 2-3.
dl_looks() {
	_n=0 _on=0
	while [ $_n -lt "$1" ]; do
		case $(awk '{ sub(/^.*\) /, ""); print $37 }' /proc/$DL/stat) in 2|3) _on=$((_on + 1)) ;; esac
		_n=$((_n + 1)); usleep 50000
	done
	echo $_on
}
t_diag "before feeder on, the DEADLINE thread $DL was on 2-3 in $(dl_looks 10) of 10 looks"
irq_snapshot > /tmp/irq.before
kthread_snapshot > /tmp/kthreads.before
wq_before=$(wq_mask)
mech=cpuset; [ -e /sys/kernel/sched_ext/state ] && mech=sched_ext
t_check "feeder on ($mech)" "$CTL" feeder on --cpus $FEEDER
"$CTL" feeder status | sed 's/^/# /'
t_check "mechanism is $mech" sh -c "$CTL feeder status | grep -q '^mechanism: $mech'"

# No movable IRQ on a feeder CPU: an IRQ still there must refuse a move.
bad=$(movable_irqs_on 2 3)
t_check "no movable IRQ on feeder CPUs 2-3" test -z "$bad"
[ -z "$bad" ] || t_diag "movable on 2-3: $bad"

a1=$(allowed $RT1) a2=$(allowed $RT2)
ok=1; in_range "$a1" 2 3 && ok=0; in_range "$a2" 2 3 && ok=0
t_check "real-time threads allowed on 2-4 before feeder on are off feeder CPUs 2-3 ($a1, $a2)" test "$ok" = 1

if [ "$mech" = sched_ext ]; then
	# A real-time thread that starts on the feeder CPUs: the scheduler's
	# guard sees it switched in there and the watcher moves it (waited
	# for, counted: at most 300 looks).
	rt_start 2-3; RT3=$RT
	i=0; while [ "$(allowed $RT3)" = 2-3 ] && [ $i -lt 300 ]; do usleep 100000; i=$((i + 1)); done
	a3=$(allowed $RT3)
	"$CTL" feeder status | grep -E 'rt_foreign|real-time' | sed 's/^/# /'
	t_check "a real-time thread started on feeder CPUs 2-3 is moved off ($a3)" test "$a3" = 0-1,4-7
else
	t_skip "real-time guard (the cpuset partition keeps real-time threads off on $MLTUNE_VM_KERNEL)"
fi
if [ "$mech" = sched_ext ]; then
	t_check "the DEADLINE thread $DL is reported as one sched_ext cannot keep off" \
		sh -c "$CTL feeder status | grep -q '^DEADLINE thread $DL may run on feeder CPUs'"
else
	on=$(dl_looks 40)
	t_check "the DEADLINE thread $DL stays off feeder CPUs 2-3 ($on of 40 looks there)" test "$on" = 0
fi
# Gone before the sampling below (under sched_ext it may run on 2-3).
kill $DL 2>/dev/null; wait $DL 2>/dev/null

load_on
set -- $(sample "2 3" "$SAMPLES")
t_diag "$1 violations in $2 samples"
t_check "zero tasks of the wrong kind on the wrong CPUs ($2 samples)" test "$1" = 0 -a "$2" = "$SAMPLES"

if [ "$mech" = sched_ext ]; then
	# The first counter: "foreign=" alone (not rt_foreign= or dl_foreign=).
	foreign=$("$CTL" --json feeder status | jq -r .sched_ext.foreign)
	t_check "sched_ext foreign dispatches = 0 (got $foreign)" test "$foreign" = 0
else
	t_skip "sched_ext foreign counter (no sched_ext on $MLTUNE_VM_KERNEL)"
fi

# Mask change in place, 2-3 -> 6-7, checked as soon as the CLI returned (it
# returns once the change is in effect).
# Everything follows: IRQs, movable kthreads and the unbound workqueue
# cpumask leave 6-7 and may use 2-3 again.
"$CTL" feeder on --cpus 6-7 >/tmp/change.out 2>&1 || { t_diag "feeder on --cpus 6-7 failed:"; sed 's/^/# /' /tmp/change.out; }
set -- $(sample "6 7" 2)
t_check "$mech: mask change 2-3 -> 6-7 in effect when the CLI returns ($1 violations in $2 samples)" test "$1" = 0 -a "$2" = 2
"$CTL" feeder status > /tmp/status.after
grep -E '^(mechanism|cpus|housekeeping|irqs|kthreads moved|partition):' /tmp/status.after | sed 's/^/# /'
want_part=. part_name=""
[ "$mech" = cpuset ] && want_part='^partition: root$' part_name=", partition root"
t_check "status after the mask change: cpus 6-7, housekeeping 0-5$part_name" \
	sh -c "grep -q '^cpus: 6-7$' /tmp/status.after && grep -q '^housekeeping: 0-5$' /tmp/status.after &&
		grep -q '$want_part' /tmp/status.after"
bad=$(movable_irqs_on 6 7)
def=$(cat /proc/irq/default_smp_affinity)
ok_def=0
hex_has "$def" 2 && hex_has "$def" 3 && ! hex_has "$def" 6 && ! hex_has "$def" 7 && ok_def=1
t_check "after the mask change: no movable IRQ on 6-7, default affinity $def has 2-3 back and not 6-7" \
	test -z "$bad" -a "$ok_def" = 1
[ -z "$bad" ] || t_diag "movable on 6-7: $bad"
kbad=$(movable_kthreads_on 6 7 | tr '\n' ' ')
wq=$(wq_mask)
ok_wq=1
if [ "$wq" != none ]; then hex_has "$wq" 6 || hex_has "$wq" 7 || ! hex_has "$wq" 2 && ok_wq=0; fi
t_check "after the mask change: no movable kthread on 6-7, workqueue cpumask $wq without 6-7 ($kbad)" \
	test -z "$kbad" -a "$ok_wq" = 1

if [ "$mech" = sched_ext ]; then
	t_check "still sched_ext after the CLI exited" sh -c "$CTL feeder status | grep -q 'mltune_feeder attached'"
	"$CTL" feeder inject-error
	# The kernel ejects the scheduler, the loader falls back: the status
	# line is the event (60 s bounds a hang, not the time it takes).
	fell_back() { "$CTL" feeder status | grep -q '^fallback: cpuset partition after sched_ext ejection'; }
	t_wait 60 fell_back
	"$CTL" feeder status | sed 's/^/# /'
	t_check "injected error: cpuset fallback reported" sh -c "$CTL feeder status | grep -q '^fallback: cpuset partition after sched_ext ejection: scheduler error'"
else
	t_skip "sched_ext stays attached (no sched_ext on $MLTUNE_VM_KERNEL)"
	t_skip "sched_ext ejection fallback (no sched_ext on $MLTUNE_VM_KERNEL)"
fi
load_off
"$CTL" feeder off
irq_snapshot > /tmp/irq.after
t_check "feeder off after the mask change restores every IRQ affinity exactly" diff /tmp/irq.before /tmp/irq.after
kthread_snapshot > /tmp/kthreads.after
# kthreads present both times (some come and go meanwhile)
kdiff=$(awk 'NR == FNR { b[$1 " " $2] = $3; next } ($1 " " $2) in b && b[$1 " " $2] != $3 { print $1 ":" $2 ":" b[$1 " " $2] "->" $3 }' \
	/tmp/kthreads.before /tmp/kthreads.after | tr '\n' ' ')
wq_after=$(wq_mask)
t_check "feeder off restores kthread affinities and the workqueue cpumask ($wq_before) exactly ($kdiff)" \
	test -z "$kdiff" -a "$wq_before" = "$wq_after"
a1=$(allowed $RT1) a2=$(allowed $RT2) a3=${RT3:+$(allowed $RT3)}
t_check "feeder off gives real-time threads their own CPUs back ($a1, $a2${RT3:+, $a3})" \
	test "$a1" = 2-4 -a "$a2" = 2-4 -a "${a3:-2-3}" = 2-3
t_done
