#!/bin/bash
# The decisions of deploy/slurm's prolog and epilog on the host, without a
# Slurm: squeue, scontrol, scancel and logger are stand-ins that record
# their calls (an overlay on /usr/bin in a mount namespace of this test's
# own, since the scripts set PATH themselves), mltunectl is a stand-in
# named by MLTUNE_SLURM_MLTUNECTL. tests/fleet/slurm.sh runs the same
# scripts under a real slurmd in the Debian guest; this covers the cases a
# real Slurm cannot be made to show on demand (squeue failing, requeue
# refused, a job owned by another user).
#
#   tests/fleet/slurm-scripts.sh         (as root; TAP, exit 0 when all pass)
#
# Checks: a profile conflict refuses the job (requeue, hold, cancel, the
# fallback to scancel, exit 1 only when Slurm takes nothing) and never
# drains the node; the reason is written to the job's output file as the
# job's owner; a stale job record (no such job in squeue) is dropped by the
# prolog and by the epilog; while squeue fails the records stay; a failed
# switch still drains.
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)

if [ "${1:-}" != --inside ]; then
	[ "$(id -u)" = 0 ] || { echo "1..0 # SKIP needs root (a mount namespace)"; exit 0; }
	exec unshare -m --propagation private "$0" --inside
fi

T=$(mktemp -d /tmp/mltune-slurm-scripts.XXXXXX)
trap 'rm -rf "$T"' EXIT
mkdir -p "$T/stubs" "$T/upper" "$T/work" "$T/state" "$T/jobs"
# The job's owner (uid 65534) writes its output file in $T/jobs.
chmod 0755 "$T" && chmod 1777 "$T/jobs"
CALLS=$T/calls

# The stand-ins. squeue: $T/slurm-jobs lists the node's jobs (its absence:
# squeue fails); -O STDOUT prints $T/jobs/JOB.out padded as squeue pads.
# scontrol/scancel: exit with $T/fail-VERB's content when it exists.
cat >"$T/stubs/squeue" <<EOF
#!/bin/sh
echo "squeue \$*" >>$CALLS
case "\$*" in
*STDOUT*) job=\$(echo "\$*" | sed -n 's/.*-j \\([0-9]*\\).*/\\1/p'); printf '%-60s\\n' "$T/jobs/\$job.out"; exit 0 ;;
esac
[ -f $T/slurm-jobs ] || { echo "squeue: error: Unable to contact slurm controller" >&2; exit 1; }
cat $T/slurm-jobs
EOF
for verb in scontrol scancel; do
	cat >"$T/stubs/$verb" <<EOF
#!/bin/sh
echo "$verb \$*" >>$CALLS
for w in "\$@"; do [ -f "$T/fail-$verb-\$w" ] && exit 1; done
exit 0
EOF
done
cat >"$T/stubs/logger" <<EOF
#!/bin/sh
echo "logger \$*" >>$T/journal
EOF
cat >"$T/mltunectl" <<EOF
#!/bin/sh
echo "mltunectl \$*" >>$CALLS
case "\$*" in
"active --field profile") cat $T/active ;;
"config show"*) echo training ;;
"verify "*) [ "\$2" = "\$(cat $T/active)" ] ;;
"switch broken") echo "mltunectl: error: knobs apply: refused" >&2; exit 1 ;;
"switch "*) echo "\$2" >$T/active ;;
*) exit 2 ;;
esac
EOF
chmod 0755 "$T"/stubs/* "$T/mltunectl"
if ! mount -t overlay overlay -o "lowerdir=$T/stubs:/usr/bin,upperdir=$T/upper,workdir=$T/work" /usr/bin; then
	echo "1..0 # SKIP no overlay mount for the Slurm stand-ins"
	exit 0
fi

export MLTUNE_SLURM_MLTUNECTL=$T/mltunectl MLTUNE_SLURM_STATE=$T/state MLTUNE_SLURM_CONFIG=$T/none \
	SLURMD_NODENAME=gpu-node-1
S=$ROOT/deploy/slurm

n=0 failed=0
check() {
	local desc=$1
	shift
	n=$((n + 1))
	if "$@" >"$T/out" 2>&1; then
		echo "ok $n - $desc"
	else
		failed=$((failed + 1))
		echo "not ok $n - $desc"
		sed 's/^/# /' "$T/out" | head -n 30
		sed 's/^/# calls: /' "$CALLS"
	fi
}
# setup ACTIVE SLURM-JOBS RECORD...: the node on ACTIVE, squeue listing
# SLURM-JOBS ("-": squeue fails), records "ID=PROFILE".
setup() {
	echo "$1" >"$T/active"
	# shellcheck disable=SC2086 # the job ids, one a line
	if [ "$2" = - ]; then rm -f "$T/slurm-jobs"; else printf '%s\n' $2 >"$T/slurm-jobs"; fi
	shift 2
	rm -f "$T/state"/job.* "$T"/fail-* "$T/jobs"/*
	: >"$CALLS"
	: >"$T/journal"
	local r
	for r in "$@"; do echo "${r#*=}" >"$T/state/job.${r%%=*}"; done
}
# prolog JOB CONSTRAINTS [ENV...]: the prolog as slurmd runs it; RC.
prolog() {
	local job=$1 c=$2
	shift 2
	env SLURM_JOB_ID="$job" SLURM_JOB_CONSTRAINTS="$c" SLURM_JOB_UID=65534 SLURM_JOB_GID=65534 "$@" \
		sh "$S/prolog" 2>>"$T/stderr"
	RC=$?
}
epilog() {
	env SLURM_JOB_ID="$1" sh "$S/epilog" 2>>"$T/stderr"
	RC=$?
}
called() { grep -qxF -- "$1" "$CALLS" || { echo "no call: $1"; return 1; }; }
not_called() { ! grep -q -- "$1" "$CALLS" || { echo "unexpected call matching: $1"; return 1; }; }
no_drain() { not_called "state=drain"; }
journal_has() { grep -qF -- "$1" "$T/journal" || { echo "not in the journal: $1"; cat "$T/journal"; return 1; }; }

echo "TAP version 13"

# ---- profile conflicts --------------------------------------------------------
REASON="job 9 asks for profile training, but job(s) 7 run on gpu-node-1 on inference: a node runs one profile at a time (ask for whole nodes: --exclusive)"
setup inference "7 9" 7=inference
prolog 9 mltune_training
conflict_requeued() {
	[ "$RC" = 0 ] && no_drain && called "scontrol requeue 9" &&
		called "scontrol update jobid=9 admincomment=mltune: $REASON" &&
		not_called "^mltunectl switch" && [ "$(cat "$T/active")" = inference ] &&
		[ -f "$T/state/job.7" ] && [ ! -e "$T/state/job.9" ] &&
		journal_has "job 9 requeued (MLTUNE_SLURM_CONFLICT=requeue)"
}
check "conflict on a shared node: the job is requeued (default), the node is not drained nor switched, exit 0" conflict_requeued
told_as_owner() {
	grep -qxF "mltune: $REASON; the job is requeued (mltune prolog on gpu-node-1, MLTUNE_SLURM_CONFLICT=requeue)" "$T/jobs/9.out" &&
		[ "$(stat -c %u "$T/jobs/9.out")" = 65534 ]
}
check "the reason is in the job's output file, which is the job owner's (uid 65534), not root's" told_as_owner

setup inference "7 9" 7=inference
prolog 9 mltune_training MLTUNE_SLURM_CONFLICT=hold
held() { [ "$RC" = 0 ] && no_drain && called "scontrol requeuehold 9" && not_called "^scancel"; }
check "MLTUNE_SLURM_CONFLICT=hold: requeued and held" held

setup inference "7 9" 7=inference
prolog 9 mltune_training MLTUNE_SLURM_CONFLICT=cancel
cancelled() { [ "$RC" = 0 ] && no_drain && called "scancel 9" && not_called "requeue"; }
check "MLTUNE_SLURM_CONFLICT=cancel: cancelled" cancelled

setup inference "7 9" 7=inference
touch "$T/fail-scontrol-requeue"
prolog 9 mltune_training
fallback() { [ "$RC" = 0 ] && no_drain && called "scontrol requeue 9" && called "scancel 9" && journal_has "job 9 cancelled"; }
check "a job Slurm cannot requeue (salloc, --no-requeue) is cancelled instead" fallback

setup inference "7 9" 7=inference
touch "$T/fail-scontrol-requeue" "$T/fail-scancel-9"
prolog 9 mltune_training
nothing_took() { [ "$RC" = 1 ] && not_called "state=drain" && journal_has "Slurm neither requeued nor cancelled it"; }
check "when Slurm takes neither, the prolog exits 1 (the job must not start), still without its own drain" nothing_took

setup inference "7 9" 7=inference
prolog 9 mltune_inference
same_profile() { [ "$RC" = 0 ] && no_drain && not_called "requeue" && [ -f "$T/state/job.9" ]; }
check "a job asking for the running profile joins the node" same_profile

# ---- stale records --------------------------------------------------------------
setup inference "10" 5=inference
prolog 10 mltune_training
stale_dropped() {
	[ "$RC" = 0 ] && no_drain && not_called "requeue" && [ ! -e "$T/state/job.5" ] &&
		[ "$(cat "$T/active")" = training ] && [ "$(cat "$T/state/job.10")" = training ] &&
		journal_has "job 5: Slurm has no such job on gpu-node-1 any more (its epilog did not run here): record removed"
}
check "prolog: a record of a job Slurm does not have (a missed epilog) is dropped; the job switches the node" stale_dropped

setup inference "" 10=inference 6=inference
epilog 10
epilog_heals() { [ "$RC" = 0 ] && [ ! -e "$T/state/job.6" ] && [ "$(cat "$T/active")" = training ] && no_drain; }
check "epilog: a stale record does not keep the node on the job's profile; it returns to the default" epilog_heals

setup inference - 5=inference
prolog 10 mltune_training
squeue_down() {
	[ "$RC" = 0 ] && [ -f "$T/state/job.5" ] && called "scontrol requeue 10" && no_drain &&
		journal_has "squeue failed: the job records"
}
check "while squeue fails, records stay (the job is refused, not run on a switched node), nothing drained" squeue_down

# ---- a failed switch still drains -------------------------------------------------
setup training "11"
prolog 11 mltune_broken
drains() {
	[ "$RC" = 1 ] && grep -q "^scontrol update nodename=gpu-node-1 state=drain reason=mltune: switch to broken failed: knobs apply: refused" "$CALLS"
}
check "a failed switch drains the node with the reason and exits 1" drains

# ---- no JSON through sed --------------------------------------------------------
no_sed_json() { ! grep -n -- "--json active\|sed.*\"profile\"" "$S/mltune-slurm.sh" "$S/prolog" "$S/epilog" "$S/node-features"; }
check "the scripts read mltunectl's fields with --field, never its JSON with sed" no_sed_json

echo "1..$n"
echo "$((n - failed)) passed, $failed failed"
[ "$failed" = 0 ]
