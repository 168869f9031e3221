#!/bin/sh
# Proof on the node (Documentation/prove.rst), counted, not timed.
# `prove training --feeder feeder --neighbour 8` (a busy process per CPU of
# the 8-CPU guest, so the feeder CPUs have one too; they run while each side
# is measured, not while the profile switches) measures the feeder cores
# before and after and reports fewer foreign interruptions after (their 95%
# intervals apart; the scheduler tick is counted apart), then rolls the
# transaction back: no profile, the feeder
# off, every knob as before.  `switch --gate` with a planted harmful profile
# (a thread rule gives four busy processes pinned on the feeder CPUs nice
# -20, and a knob changes) is
# rolled back with exit 1 naming the figure, and the node reads as before:
# the knob, the processes' affinity, no active profile.  The training
# profile on a quiet node passes the same gate and stays.
. "$(dirname "$0")/lib.sh"
CTL=${MLTUNECTL:-/usr/sbin/mltunectl}
t_plan 11

[ -x "$CTL" ] || { t_diag "mltunectl missing"; exit 4; }
command -v jq >/dev/null || { t_diag "jq missing (--bin /usr/bin/jq)"; exit 4; }
HOGS=""
cleanup() {
	for p in $HOGS; do kill "$p" 2>/dev/null; done
	wait 2>/dev/null
	"$CTL" off >/dev/null 2>&1
}
trap cleanup EXIT

# The node as files say (mltunectl starts slowly in a loaded TCG guest):
# the knob, the switched profile's record, the feeder state, the partition.
snapshot() {
	printf 'swappiness=%s active=%s feeder=%s cg=%s\n' "$(cat /proc/sys/vm/swappiness)" \
		"$(jq -r .name /run/mltune/profile.json 2>/dev/null)" \
		"$(jq -r .active /run/mltune/feeder.json 2>/dev/null || echo false)" \
		"$(cat /sys/fs/cgroup/mltune-feeder/cpuset.cpus.partition 2>/dev/null)"
}
BEFORE=$(snapshot)
t_diag "node before: $BEFORE"

# 1. prove with feeder cores and a neighbour.
"$CTL" --json prove training --feeder feeder --neighbour 8 --rounds 2 --seconds 1 >/tmp/prove.json 2>/tmp/prove.err
rc=$?
t_check "prove training --feeder feeder --neighbour 8 exits 0 (rc $rc)" test "$rc" = 0
t_diag "$(jq -c '[.changes[] | {f: .figure, b: .before.value, bl: .before.low, bh: .before.high, a: .after.value, al: .after.low, ah: .after.high, v: .verdict}]' /tmp/prove.json 2>&1)"
t_diag "before: $(jq -c '.before.sources' /tmp/prove.json 2>&1)"
t_diag "after: $(jq -c '.after.sources' /tmp/prove.json 2>&1)"
t_check "fewer foreign interruptions after than before, the 95% intervals apart" \
	jq -e '.changes[] | select(.figure == "interruptions") | .after.high < .before.low and .verdict == "better"' /tmp/prove.json
t_check "the scheduler tick counted apart (ticks) where the probe is BPF ($(jq -r .before.probe /tmp/prove.json))" \
	jq -e '(.before.probe != "bpf") or ([.changes[].figure] | index("ticks") != null)' /tmp/prove.json
t_check "the loop ran in the feeder cgroup after, outside it before, on the same CPUs" \
	jq -e '.after.loop_cgroup == "/mltune-feeder" and .before.loop_cgroup == "" and .before.cpus == .after.cpus and .after.steps > 0' /tmp/prove.json
t_check "rolled back without --keep: every step, nothing failed" \
	jq -e '.kept == false and .rollback_failed == "" and (.applied | index("feeder")) != null' /tmp/prove.json
NOW=$(snapshot)
t_check "the node reads as before the proof ($NOW)" test "$NOW" = "$BEFORE"

# 2. A harmful profile, gated.
printf '#!/bin/sh\nwhile :; do :; done\n' >/tmp/mltune-hog
chmod +x /tmp/mltune-hog
# Pinned onto the feeder CPUs (the proof's), where the profile gives them
# nice -20.  Not SCHED_FIFO: two FIFO loops queued behind two others never
# run, never pass a quiescent state, and stall every RCU-tasks grace period
# (BPF attach and detach wait for one).
FEED=$(jq -r .before.cpus /tmp/prove.json)
for _ in 1 2 3 4; do taskset -c "$FEED" /tmp/mltune-hog & HOGS="$HOGS $!"; done
cat >/tmp/harm.toml <<'EOF'
description = "planted harm: busy processes at nice -20 (on the feeder cores)"
[sysctl]
"vm.swappiness" = { value = 33, reason = "a knob the rollback must put back" }
[[sched.rule]]
name = "hogs-on-feeders"
thread = "mltune-hog"
policy = "other"
nice = -20
reason = "planted harm"
[gate]
rounds = 2
seconds = 1
EOF
cat >/tmp/good.toml <<'EOF'
include = ["training"]
[gate]
rounds = 2
seconds = 1
EOF
aff() {
	for p in $HOGS; do
		printf '%s/%s ' "$(grep Cpus_allowed_list /proc/"$p"/status | tr -d '\t ')" "$(cut -d' ' -f41 /proc/"$p"/stat)"
	done
}
AFF=$(aff)
"$CTL" --json switch /tmp/harm.toml --gate >/tmp/gate.json 2>/tmp/gate.err
rc=$?
t_diag "$(grep -v measuring /tmp/gate.err)"
t_diag "$(jq -c '{verdict, kept, gate_failed, changes: [.changes[] | {figure, verdict, b: .before.value, bh: .before.high, a: .after.value, al: .after.low, gate_limit}]}' /tmp/gate.json 2>&1)"
t_check "switch --gate of the harmful profile exits 1 (rc $rc)" test "$rc" = 1
t_check "the gate names the figure that failed" \
	sh -c 'jq -e ".gate_failed != null and .kept == false" /tmp/gate.json && grep -q "switch --gate: $(jq -r .gate_failed /tmp/gate.json) .*rolled back" /tmp/gate.err'
NOW="$(snapshot) $(aff)"
t_check "the node reads as before the gated switch ($NOW)" test "$NOW" = "$BEFORE $AFF"

# 3. A good profile on a quiet node passes the same gate and stays.
for p in $HOGS; do kill "$p"; done
wait 2>/dev/null
HOGS=""
"$CTL" --json switch /tmp/good.toml --gate >/tmp/good.json 2>/tmp/good.err
rc=$?
t_diag "$(jq -c '{verdict, gate_failed, kept, measuring_s, changes: [.changes[] | {figure, verdict, b: .before.value, bh: .before.high, a: .after.value, al: .after.low}], after: .after.sources}' /tmp/good.json 2>&1)"
t_check "the training profile passes --gate on a quiet node and stays (rc $rc)" \
	sh -c "[ $rc = 0 ] && jq -e '.kept == true and .gate_failed == null' /tmp/good.json"
t_check "it is the active profile" test "$("$CTL" active --field profile)" = good
"$CTL" off >/dev/null 2>&1
t_done
