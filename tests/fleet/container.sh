#!/bin/sh
# Container mode on the Debian guest: mltunectl in a mount namespace of its
# own whose root is a container's (the guest's /usr and /etc, read-only),
# with the node's root at /host, sharing the node's network and PID
# namespaces (a Kubernetes pod with hostNetwork and hostPID, the host's /
# mounted at /host). It switches training, verifies and turns everything off
# there; the node (seen from outside the container) follows, and a snapshot of
# every setting any domain touches is the same before and after. A container
# with a PID namespace of its own is refused with the reason, nothing applied.
# Runs as root in the guest (tests/fleet/run); needs ethtool, jq, chrt.
. "$(dirname "$0")/lib.sh"
M=mltunectl
for b in $M ethtool jq chrt unshare; do
	command -v $b >/dev/null || { echo "1..0 # SKIP $b not in the guest"; exit 4; }
done
t_plan 10
T=/var/tmp/mltune-container-test   # /run is noexec
C=$T/root
mkdir -p $T

# A thread the training profile's sched rule matches (comm "NCCL Progress 0").
cp /usr/bin/sleep "$T/NCCL Progress 0"
"$T/NCCL Progress 0" 100000 &
tpid=$!
cleanup() {
	kill $tpid 2>/dev/null
	$M off >/dev/null 2>&1
}
trap cleanup EXIT

knobs=$(for p in training inference; do $M --json profile show $p | jq -r '.knobs[].path'; done | sort -u)
# Every setting any domain touches (tests/guest/lib.sh), the thread's policy.
snapshot() { node_settings "$knobs" "$tpid"; }
# unchanged NAME: the node's snapshot is the one taken before the switch.
unchanged() {
	snapshot >$T/now
	if diff $T/before $T/now >$T/diff; then
		t_ok "$1"
	else
		t_fail "$1"
		sed 's/^/# /' $T/diff | head -30
	fi
}

# ctr [UNSHARE-OPTIONS] -- CMD...: CMD in a container (tests/fleet/ctr.sh).
. "$(dirname "$0")/ctr.sh"

$M off >/dev/null 2>&1
snapshot >$T/before

out=$(ctr -- $M --sysroot /host -v switch training 2>&1)
t_check "container: switch training (host at /host, host network and PIDs) exits 0" test $? = 0
echo "$out" | sed 's/^/# /'
j=$(ctr -- $M --sysroot /host --json verify training 2>&1)
rc=$?
t_check "container: verify training exits 0" test $rc = 0
# The NIC and sched domains were acted on, not skipped.
t_check "container: verify --json: the nic and sched domains are in line, not skipped" sh -c '
	echo "$1" | jq -e "[.domains[] | select(.domain == \"nic\" or .domain == \"sched\")] |
		length == 2 and all(.state == \"match\" and .checked > 0)" >/dev/null || {
		echo "$1" | jq -c ".domains[]"; false; }' sh "$j"
t_check "node: active is training and verify training exits 0 outside the container" \
	sh -c "$M active | grep -q training && $M verify training"
t_check "node: the matching thread got the rule's policy (DEADLINE, or its fallback nice -10)" \
	sh -c "chrt -p $tpid | grep -q SCHED_DEADLINE || [ \"\$(ps -o ni= -p $tpid | tr -d ' ')\" = -10 ]"
out=$(ctr -- $M --sysroot /host off 2>&1)
t_check "container: off exits 0" test $? = 0
echo "$out" | sed 's/^/# /'
unchanged "node: every setting is as before the container's switch"

# A container with a PID namespace of its own cannot reach the node's
# threads: refused, with the reason, nothing applied.
out=$(ctr --pid --fork -- $M --sysroot /host switch training 2>&1)
rc=$?
t_check "container without hostPID: switch training is refused (exit $rc)" test $rc != 0
t_check "container without hostPID: the error names the PID namespace" sh -c 'echo "$1" | grep -q "own PID namespace"' sh "$out"
unchanged "node: nothing applied by the refused switch"
t_done
