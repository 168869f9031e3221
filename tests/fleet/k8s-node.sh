#!/bin/sh
# The DaemonSet's entrypoint (deploy/container/entrypoint.sh) on a real node:
# the Debian guest, with its real NICs (e1000e and virtio-net: real drivers,
# real ring and channel changes), in a container as container.sh builds it
# (the node at /host, its network and PID namespaces), against a fake API
# server (tests/fleet/fake-kube-api.py) for its Node object. What kubelet
# would do -- start a pod, send SIGTERM, start the next -- the test does.
#
#   1. pod A on an untuned node: taints it, switches training (rings and
#      channels change), verifies, removes the taint;
#   2. a rolling update while a "job" runs (a process whose thread the
#      training profile's sched rule matched): A gets SIGTERM, pod B starts.
#      A sampler reads every NIC's rings and channels all along: they never
#      change; B adopts the node (no switch, no taint), the job's thread
#      policy stays;
#   3. a profile whose rings differ: B waits (the change would reset links)
#      until the node is cordoned, then switches;
#   4. back to training with MLTUNE_DISRUPTIVE_WINDOW covering the day: the
#      next pod switches at once.
# Runs as root in the guest (tests/fleet/guest.sh); needs bash, curl, jq,
# python3, ethtool, unshare. KTAP through lib.sh.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/ctr.sh"
FLEET=$(cd "$(dirname "$0")" && pwd)
EP=$FLEET/container/entrypoint.sh
M=mltunectl
for b in $M ethtool jq curl python3 bash unshare; do
	command -v "$b" >/dev/null || { echo "1..0 # SKIP $b not in the guest"; exit 4; }
done
t_plan 15
T=/var/tmp/mltune-k8s-node # /run is noexec
C=$T/root                  # where each pod's container root is mounted (ctr)
API=$T/api
NODE=$(hostname -s)
rm -rf "$T"
mkdir -p "$API/sa" "$T/profiles"
PIDS=""

# wait_for SECONDS CMD...: poll CMD every 0.2 s until it succeeds.
wait_for() {
	_end=$(($(date +%s) + $1)); shift
	until "$@" >/dev/null 2>&1; do
		[ "$(date +%s)" -ge "$_end" ] && return 1
		sleep 0.2
	done
}

# The NICs (devices with a driver) and what a ring or channel change shows.
nics=$(for n in /sys/class/net/*; do [ -e "$n/device" ] && basename "$n"; done)
nic_state() {
	for n in $nics; do
		ethtool -g "$n" 2>&1 | sed "s/^/$n rings: /"
		ethtool -l "$n" 2>&1 | sed "s/^/$n channels: /"
	done
}

# ---- the fake API server and the "pods" ----------------------------------------
printf 'fleet-token' >"$API/token"
cp "$API/token" "$API/sa/token"
: >"$API/sa/ca.crt"
jq -n --arg n "$NODE" '{kind: "Node", apiVersion: "v1",
	metadata: {name: $n, resourceVersion: "1", labels: {"kubernetes.io/hostname": $n, "mltune.io/profile": "training"}},
	spec: {}}' >"$API/node.json"
python3 "$FLEET/fake-kube-api.py" "$API" &
PIDS="$PIDS $!"
api_edit() {
	jq "$1 | .metadata.resourceVersion = (.metadata.resourceVersion | tonumber + 1 | tostring)" \
		"$API/node.json" >"$API/.edit" && mv "$API/.edit" "$API/node.json"
}
api_tainted() { jq -e 'any(.spec.taints[]?; .key == "mltune.io/unverified")' "$API/node.json" >/dev/null; }
requests() { wc -l <"$API/requests" 2>/dev/null || echo 0; }
# gets_since N K: K GET requests after the first N (K rounds of the pod).
gets_since() { [ "$(tail -n +"$(($1 + 1))" "$API/requests" | grep -c '^GET ')" -ge "$2" ]; }

# A profile whose e1000e rings differ from training's ("max").
cat >"$T/profiles/rings.toml" <<'EOF'
description = "training with 1024-descriptor rings on e1000e"
include = ["training"]

[nic."e1000e"]
rings = { rx = 1024, tx = 1024 }
EOF

# pod NAME [ENV...]: the entrypoint as the DaemonSet runs it, in a container.
# ctr runs in a background subshell (WRAP, whose exit status is the pod's);
# the pod's process, the one the kubelet would signal, is that subshell's
# only child (unshare, which execs through sh, chroot and env into bash):
# POD. Signalling WRAP instead would leave the pod running.
pod() {
	_name=$1; shift
	ctr -- env MLTUNE_SYSROOT=/host MLTUNE_BIN=/usr/sbin/mltunectl MLTUNE_INTERVAL=1 NODE_NAME="$NODE" \
		MLTUNE_API_SERVER="http://127.0.0.1:$(cat "$API/port")" MLTUNE_SA_DIR="/host$API/sa" \
		MLTUNE_PROFILE_DIR="/host$T/profiles" MLTUNE_READY_FILE="/host$T/$_name.ready" "$@" \
		bash "/host$EP" 2>"$T/$_name.log" &
	WRAP=$!
	PIDS="$PIDS $WRAP"
	wait_for 30 sh -c "[ \"\$(ps -o pid= --ppid $WRAP | wc -l)\" = 1 ]" ||
		t_diag "pod $_name: no single child of $WRAP: $(ps -o pid=,args= --ppid "$WRAP" | tr '\n' ';')"
	POD=$(ps -o pid= --ppid "$WRAP" | tr -d ' ' | head -n 1)
	PIDS="$PIDS $POD"
}
# t_stop NAME POD WRAP LOG: SIGTERM to the pod's process, which exits 0
# within 60 s. In this shell (WRAP is its child), not in t_check's subshell.
t_stop() {
	kill -TERM "$2"
	if wait_for 60 sh -c "! kill -0 $2 2>/dev/null" && wait "$3"; then
		t_ok "$1"
	else
		t_fail "$1"
		tail -n 5 "$T/$4.log" | sed 's/^/# /'
	fi
}
ready() { [ -e "$T/$1.ready" ]; }
# A "job" on the node: a process the training profile's sched rule matches.
cp /usr/bin/sleep "$T/NCCL Progress 0"
"$T/NCCL Progress 0" 100000 &
job=$!
PIDS="$PIDS $job"
policy() { chrt -p "$job" 2>&1; ps -o ni= -p "$job"; }

cleanup() {
	for p in $PIDS; do kill "$p" 2>/dev/null; done
	wait 2>/dev/null
	$M off >/dev/null 2>&1
	rm -f /run/mltune/daemonset.json /etc/kubernetes/node-feature-discovery/features.d/mltune \
		/etc/mltune/profiles/rings.toml
}
trap cleanup EXIT
wait_for 10 test -s "$API/port" || t_diag "the fake API server did not start"
$M off >/dev/null 2>&1
rm -f /run/mltune/daemonset.json
s0=$(nic_state)
t_diag "NICs: $(printf "%s" "$nics" | tr "\n" " ")"

# ---- 1. pod A on an untuned node ---------------------------------------------------
pod A
A=$POD A_WRAP=$WRAP
a_done() { ready A && ! api_tainted && grep -q "removed the taint" "$T/A.log"; }
t_check "pod A: tainted the node, switched training, verified, removed the taint, ready" wait_for 300 a_done
a_tainted_first() {
	grep -q "tainted node $NODE mltune.io/unverified:NoSchedule until its first verify passes" "$T/A.log" &&
		[ "$(grep -c '^PATCH ' "$API/requests")" = 2 ] &&
		grep -q "resets NIC links (.*): going ahead, the node is being brought up" "$T/A.log"
}
t_check "pod A: the taint came first; the ring/channel change went ahead because the node was being brought up" a_tainted_first
s1=$(nic_state)
changed() { [ "$s0" != "$s1" ]; }
t_check "training changed the NICs' rings or channels (so a reset would show)" changed
pol1=$(policy)
t_diag "job thread: $(printf "%s" "$pol1" | tr "\n" " ")"

# ---- 2. a rolling update with the job running ------------------------------------
# The sampler: one hash of every NIC's rings and channels per pass, until
# told to stop; the states seen are the distinct consecutive hashes.
: >"$T/samples"
( while [ ! -e "$T/sampler.stop" ]; do nic_state | md5sum >>"$T/samples"; done ) &
sampler=$!
wait_for 30 test -s "$T/samples" || t_diag "the sampler took no sample in 30 s"
feat=/etc/kubernetes/node-feature-discovery/features.d/mltune
t_stop "rollout: pod A exits 0 on SIGTERM (MLTUNE_OFF_ON_EXIT unset)" "$A" "$A_WRAP" A
handed() { grep -q "leaving the node as it is for the next pod" "$T/A.log" && [ -e "$feat" ]; }
t_check "rollout: A left the node as it is, labels included" handed
n=$(requests)
pod B
B=$POD B_WRAP=$WRAP
t_check "rollout: pod B is ready" wait_for 300 ready B
adopted() {
	grep -q "adopted the node's state: training is active" "$T/B.log" && ! grep -q "node switched" "$T/B.log" &&
		! tail -n +"$((n + 1))" "$API/requests" | grep -q '^PATCH '
}
t_check "rollout: B adopted the node: no switch, no taint" adopted
touch "$T/sampler.stop"
wait "$sampler"
untouched() {
	# A reset would show: training's rings differ from the driver's.
	[ "$s0" != "$s1" ] || { echo "training left rings and channels as the driver had them"; return 1; }
	_states=$(uniq "$T/samples" | wc -l)
	[ "$_states" = 1 ] && [ "$(wc -l <"$T/samples")" -ge 2 ] && [ "$(nic_state)" = "$s1" ] && return 0
	echo "$(wc -l <"$T/samples") samples, $_states states (expected: 1)"
	printf '%s\n' "$s1" >"$T/s1"
	nic_state | diff "$T/s1" -
	return 1
}
t_check "rollout: rings and channels never changed (sampled all along the rollout)" untouched
job_kept() {
	case $pol1 in *SCHED_DEADLINE*|*" -10") ;; *) echo "training did not set the job's policy: $pol1"; return 1 ;; esac
	[ "$(policy)" = "$pol1" ] || { echo "now: $(policy)"; return 1; }
}
t_check "rollout: the job's thread policy is as training set it (SCHED_DEADLINE or nice -10)" job_kept

# ---- 3. a disruptive change waits for the cordon ----------------------------------
n=$(requests)
api_edit '.metadata.labels["mltune.io/profile"] = "rings"'
waits() {
	grep -q "switch to rings waits: it would reset NIC links (.*rings.rx [0-9]* -> 1024" "$T/B.log" &&
		! ready B && gets_since "$n" 3 && [ "$(nic_state)" = "$s1" ]
}
t_check "relabelled rings: B does not switch uncordoned (logged, not ready, NICs unchanged)" wait_for 120 waits
api_edit '.spec.unschedulable = true'
s2_ok() { ready B && grep -q "going ahead, node $NODE is cordoned" "$T/B.log" && [ "$(nic_state)" != "$s1" ]; }
t_check "cordoned: B switches to rings (the rings change), ready" wait_for 120 s2_ok
t_check "the node is on rings and verifies" sh -c "[ \"\$($M active --field profile)\" = rings ] && $M verify rings >/dev/null"
t_stop "B exits 0 on SIGTERM" "$B" "$B_WRAP" B
api_edit '.spec.unschedulable = false | .metadata.labels["mltune.io/profile"] = "training"'

# ---- 4. the window -----------------------------------------------------------------
pod C MLTUNE_DISRUPTIVE_WINDOW=00:00-24:00
C=$POD C_WRAP=$WRAP
windowed() { ready C && grep -q "going ahead, inside the window 00:00-24:00 UTC" "$T/C.log" && [ "$(nic_state)" = "$s1" ]; }
t_check "inside MLTUNE_DISRUPTIVE_WINDOW an uncordoned node switches back to training (rings as before)" \
	wait_for 120 windowed
t_stop "C exits 0 on SIGTERM" "$C" "$C_WRAP" C
for p in A B C; do
	t_diag "---- pod $p"
	sed 's/^/# /' "$T/$p.log" | tail -n 12
done
t_done
