#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# The idle load balancer's kick of an idle feeder core: a function-call IPI
# (kick_ilb() -> nohz_csd_func) that busy CPUs send, about once a tick, to
# the first idle CPU of the scheduler's nohz.idle_cpus_mask that is a
# housekeeping CPU (find_new_ilb()).  A feeder core in a `root` cpuset
# partition has a scheduling domain, enters that mask when it idles, and is
# kicked although it cannot take their work.  Per kernel, in one guest, with
# six busy loops on the housekeeping CPUs and feeder CPUs 2-3 idle:
#
#   root      `feeder on --cpus 2-3 --mechanism cpuset` (a root partition)
#   isolated  the same cgroup made an `isolated` partition while 2-3 idle
#   isolated, made busy
#             made `isolated` while a loop runs on each of 2-3, then idle
#
# counted over 4 s of guest time: the function-call IPIs of CPUs 2 and 3
# (/proc/interrupts CAL, which also counts perf's own calls) and the
# functions they ran (perf, csd:csd_function_entry, kernels from 6.3).
# Results and their account: bench/noise/README.md.
#
#   bench/noise/ilb_kick.sh [--no-build] [KERNEL...]   (default: 6.12 7.2)
set -u
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
nobuild=""
[ "${1:-}" = --no-build ] && { nobuild=--no-build; shift; }
kernels=${*:-6.12 7.2}
out=$ROOT/build/bench/noise
mkdir -p "$out"
command -v perf >/dev/null || { echo "ilb_kick: perf missing (make deps)" >&2; exit 1; }
guest=$out/ilb_kick.guest.sh
cat >"$guest" <<'EOF'
#!/bin/sh
cal() { awk -v c=$1 '$1=="CAL:"{print $(c+2)}' /proc/interrupts; }
measure() {
	a2=$(cal 2) a3=$(cal 3)
	if perf record -q -e csd:csd_function_entry -C 2,3 -o /tmp/p.data -- sleep 4 >/dev/null 2>&1; then
		fn=$(perf script -i /tmp/p.data -F cpu,trace 2>/dev/null | sed 's/, csd=.*//; s/func=//' |
			sort | uniq -c | sort -rn | head -3 | awk '{printf "%s%s on %s x%s", s, $3, $2, $1; s="; "}')
	else
		sleep 4
		fn="(no csd tracepoints)"
	fi
	b2=$(cal 2) b3=$(cal 3)
	echo "ILB $1 | $((b2 - a2)) | $((b3 - a3)) | $fn"
}
cg=/sys/fs/cgroup/mltune-feeder
busy=
for i in 1 2 3 4 5 6; do (while :; do :; done) & busy="$busy $!"; done
mltunectl feeder on --cpus 2-3 --mechanism cpuset >/dev/null || { echo "ILB_FAIL feeder on"; exit 1; }
sleep 2
measure root
echo isolated >$cg/cpuset.cpus.partition || { echo "ILB_FAIL isolated partition"; exit 1; }
sleep 1
measure isolated
echo root >$cg/cpuset.cpus.partition
spin=
for c in 2 3; do
	sh -c "echo \$\$ > $cg/cgroup.procs; exec taskset -c $c sh -c 'while :; do :; done'" &
	spin="$spin $!"
done
sleep 1
echo isolated >$cg/cpuset.cpus.partition
kill $spin
sleep 1
measure "isolated, made busy"
echo root >$cg/cpuset.cpus.partition
kill $busy
mltunectl feeder off >/dev/null && echo ILB_DONE
EOF
rc=0
for k in $kernels; do
	log=$out/ilb_kick-$k.log
	"$ROOT/tests/vm/run" --kernel "$k" $nobuild --bin "$(command -v perf)" --timeout 900 \
		--file "$guest:/root/ilb_kick.sh" -- sh /root/ilb_kick.sh >"$log" 2>&1
	nobuild=--no-build
	if ! grep -q '^ILB_DONE' "$log"; then
		echo "ilb_kick: $k failed (log: $log)" >&2
		tail -n 20 "$log" >&2
		rc=1
		continue
	fi
	echo "==== $k: setup | CAL CPU 2 | CAL CPU 3 | functions run on 2-3 (perf)"
	sed -n 's/^ILB //p' "$log" | tr -d '\r'
done
exit $rc
