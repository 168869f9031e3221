#!/bin/sh
# Guest side of bench/feeder/run.sh: p99 wake-up latency of a feeder task
# (feeder_lat: 1 ms absolute-timer period) with a busy-loop load on every CPU,
# in three setups, interleaved over R rounds:
#   none      - no isolation: feeder_lat pinned to the feeder CPUs (taskset),
#               sharing them with the load;
#   cpuset    - mltunectl feeder on --mechanism cpuset (cgroup v2 root partition);
#   sched_ext - mltunectl feeder on --mechanism sched_ext (kernels with sched_ext).
# The load is 2 busy loops per CPU, started once as ordinary tasks outside the
# feeder cgroup (with a mechanism on they are kept off the feeder CPUs, without
# one they compete there).  Prints per setup the median over the rounds of
# p50, p99 and max, and the ratios none/cpuset and none/sched_ext.
#
#   bench.sh [SECONDS [ROUNDS [FEEDER_CPUS]]]     (default 5 s, 3 rounds, 2-3)
SECS=${1:-5}
R=${2:-3}
FEEDER=${3:-2-3}
CTL=/usr/sbin/mltunectl
LAT=$(command -v feeder_lat) || { echo "feeder_lat missing"; exit 1; }
ncpu=$(nproc)
kernel=${MLTUNE_VM_KERNEL:-$(uname -r)}

setups="none cpuset"
[ -e /sys/kernel/sched_ext/state ] && setups="$setups sched_ext"

PIDS=""
cleanup() { for p in $PIDS; do kill "$p" 2>/dev/null; done; wait 2>/dev/null; "$CTL" feeder off >/dev/null 2>&1; }
trap cleanup EXIT INT TERM
i=0
while [ $i -lt $((2 * ncpu)) ]; do sh -c 'while :; do :; done' & PIDS="$PIDS $!"; i=$((i + 1)); done
sleep 1

echo "# feeder_lat: ${SECS} s per run, 1 ms period, feeder CPUs $FEEDER, $((2 * ncpu)) busy loops on $ncpu CPUs, $R rounds, kernel $kernel"
r=1
while [ $r -le "$R" ]; do
	for s in $setups; do
		if [ "$s" = none ]; then
			out=$(taskset -c "$FEEDER" "$LAT" "$SECS")
		else
			if ! "$CTL" feeder on --cpus "$FEEDER" --mechanism "$s" >/tmp/on.log 2>&1; then
				echo "# round $r $s: feeder on failed: $(cat /tmp/on.log)"
				continue
			fi
			out=$("$CTL" feeder run -- "$LAT" "$SECS")
			"$CTL" feeder off >/dev/null 2>&1 || echo "# round $r $s: feeder off failed"
		fi
		echo "# round $r $s: $out"
		echo "$s $out" >>/tmp/results
	done
	r=$((r + 1))
done

median() { sort -n | awk '{a[NR] = $1} END {if (NR == 0) print "n/a"; else print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2}'; }
field() { grep "^$1 " /tmp/results | sed -n "s/.* $2=\([0-9.]*\).*/\1/p" | median; }
printf '%-10s %10s %10s %10s %10s\n' setup samples p50_us p99_us max_us
for s in none cpuset sched_ext; do
	if grep -q "^$s " /tmp/results 2>/dev/null; then
		printf '%-10s %10s %10s %10s %10s\n' "$s" "$(field "$s" samples)" "$(field "$s" p50_us)" \
			"$(field "$s" p99_us)" "$(field "$s" max_us)"
	else
		printf '%-10s %10s %10s %10s %10s\n' "$s" n/a n/a n/a n/a
	fi
done
ratio() { # ratio SETUP FIELD: none's median / SETUP's median
	a=$(field none "$2"); b=$(field "$1" "$2")
	case "$a $b" in *n/a*) echo n/a ;; *) awk -v a="$a" -v b="$b" 'BEGIN { if (b > 0) printf "%.1fx\n", a / b; else print "n/a" }' ;; esac
}
for s in cpuset sched_ext; do
	echo "RESULT $kernel $s: p50 none/$s $(ratio "$s" p50_us), p99 none/$s $(ratio "$s" p99_us)"
done
for s in none cpuset sched_ext; do
	grep -q "^$s " /tmp/results 2>/dev/null &&
		echo "MEDIANS $kernel $s p50=$(field "$s" p50_us) p99=$(field "$s" p99_us) max=$(field "$s" max_us)" ||
		echo "MEDIANS $kernel $s p50=n/a p99=n/a max=n/a"
done
