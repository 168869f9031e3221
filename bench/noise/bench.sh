#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
# Guest side of bench/noise/run.sh: foreign interruptions per second on the
# feeder cores of the guest's CPU plan under a fixed noisy load, per setup.
#
#   sh bench.sh SECONDS ROUNDS SETUP...
#     SETUP: none, cpuset (root partition), isolated (isolated partition,
#            `feeder on --partition isolated`), sched_ext, boot (booted with the boot isolation
#            of `mltunectl boot show`, nothing else), boot+cpuset (the full
#            training setup: boot isolation, the training profile, feeder
#            cores)
#
# Load, the same in every setup, on the whole machine: stress-ng (4 CPU, 2
# timer, 1 fork, 1 socket and 1 I/O stressors: with the feeder tasks more
# tasks than the guest's 8 CPUs), pings answered through eth0 (a device IRQ)
# and pings both ways over a veth pair between the root network namespace
# and another one.  On each feeder core a busy task of the
# feeder cgroup is the core's own work (a feeder thread spinning), so the
# tick runs wherever nohz_full does not stop it.  Prints
#   RESULT setup round cpu interruptions seconds
#   SOURCE setup round id count name...
set -u
SECS=$1
ROUNDS=$2
shift 2
CTL=mltunectl
IP=/usr/sbin/ip
CG=/sys/fs/cgroup/mltune-feeder
FEEDER=$($CTL --json plan | jq -r .feeder)
[ -n "$FEEDER" ] || { echo "bench: the plan has no feeder CPUs" >&2; exit 1; }
echo "FEEDER $FEEDER"
echo "CMDLINE $(cat /proc/cmdline)"
echo "BOOT $($CTL boot show 2>/dev/null | tail -n 1)"
# cpus of a cpulist, one per word
expand() { echo "$1" | tr ',' '\n' | awk -F- '{ for (i = $1; i <= ($2 == "" ? $1 : $2); i++) print i }'; }
CPUS=$(expand "$FEEDER")
LOAD=""
OWN=""

net_up() {
	ip link set lo up
	ip link set eth0 up
	ip addr add 10.0.2.15/24 dev eth0 2>/dev/null
	ping -c 1 -W 10 10.0.2.2 >/dev/null 2>&1
	[ -f /root/veth.ko ] && insmod /root/veth.ko
	unshare -n sleep 100000 & NS=$!
	sleep 1
	$IP link add v0 type veth peer name v1
	$IP link set v1 netns $NS
	$IP addr add 10.9.0.1/24 dev v0
	$IP link set v0 up
	nsenter -t $NS -n $IP addr add 10.9.0.2/24 dev v1
	nsenter -t $NS -n $IP link set v1 up
	nsenter -t $NS -n $IP link set lo up
}

load_on() {
	stress-ng --cpu 4 --timer 2 --fork 1 --sock 1 --io 1 --timeout 0 -q >/dev/null 2>&1 & LOAD="$LOAD $!"
	ping -A -q 10.0.2.2 >/dev/null 2>&1 & LOAD="$LOAD $!"
	ping -A -q 10.9.0.2 >/dev/null 2>&1 & LOAD="$LOAD $!"
	nsenter -t $NS -n ping -A -q 10.9.0.1 >/dev/null 2>&1 & LOAD="$LOAD $!"
	sleep 2
}
load_off() {
	for p in $LOAD; do kill $p 2>/dev/null; done
	pkill stress-ng 2>/dev/null
	wait $LOAD 2>/dev/null
	LOAD=""
}

# The feeder cgroup's own work: one spinning task per feeder core.
own_on() {
	mkdir -p $CG
	for c in $CPUS; do
		sh -c "echo \$\$ > $CG/cgroup.procs && exec taskset -c $c noise_plant busy feeder$c" & OWN="$OWN $!"
	done
}
own_off() {
	for p in $OWN; do kill $p 2>/dev/null; done
	wait $OWN 2>/dev/null
	OWN=""
}

setup_on() {
	case $1 in
	none|boot) ;;
	cpuset|boot+cpuset) $CTL switch training >/dev/null 2>&1 || echo "bench: switch training failed" >&2
		$CTL feeder on --mechanism cpuset >/dev/null || echo "bench: feeder on failed" >&2 ;;
	sched_ext) $CTL switch training >/dev/null 2>&1 || echo "bench: switch training failed" >&2
		$CTL feeder on --mechanism sched_ext >/dev/null || echo "bench: feeder on failed" >&2 ;;
	isolated) $CTL switch training >/dev/null 2>&1 || echo "bench: switch training failed" >&2
		$CTL feeder on --partition isolated >/dev/null || echo "bench: feeder on failed" >&2 ;;
	esac
}
setup_off() {
	case $1 in
	none|boot) ;;
	*) $CTL feeder off >/dev/null; $CTL switch baseline >/dev/null 2>&1 ;;
	esac
	rmdir $CG 2>/dev/null
}

measure() { # measure SETUP ROUND
	$CTL --json noise --cpus "$FEEDER" --duration "$SECS" --own-cgroup /mltune-feeder >/tmp/n.json 2>/tmp/n.err ||
		{ echo "bench: noise failed: $(cat /tmp/n.err)" >&2; return; }
	jq -r --arg s "$1" --arg r "$2" '.seconds as $t | .per_cpu[] |
		"RESULT \($s) \($r) \(.cpu) \(.interruptions) \($t)"' /tmp/n.json
	jq -r --arg s "$1" --arg r "$2" '.per_cpu[] | .sources[] | select(.interruption and (.own | not)) |
		"SOURCE \($s) \($r) \(.id) \(.count) \(.name)"' /tmp/n.json
	jq -r --arg s "$1" --arg r "$2" '.per_cpu[] | .details[] |
		"DETAIL \($s) \($r) \(.what):\(.function) \(.count)"' /tmp/n.json
	[ "$(jq -r .probe /tmp/n.json)" = bpf ] || echo "bench: probe $(jq -r .probe /tmp/n.json): $(jq -r .fallback /tmp/n.json)" >&2
}

net_up
for setup in "$@"; do
	setup_on "$setup"
	own_on
	load_on
	for r in $(seq 1 "$ROUNDS"); do
		measure "$setup" "$r"
	done
	load_off
	own_off
	setup_off "$setup"
done
kill $NS 2>/dev/null
echo BENCH_DONE
