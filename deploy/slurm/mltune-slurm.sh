# shellcheck shell=sh disable=SC2034  # MLT_ERR, MLT_DID: read by the callers
# mltune for Slurm: the functions the prolog, the epilog and the
# node-features helper share (POSIX sh; sourced, not run).
#
# Installed as /usr/share/mltune/slurm/mltune-slurm.sh beside the scripts;
# each script sources the copy next to itself, so a tree copied elsewhere
# (the tests: /root/fleet/slurm) works as it is. MLTUNE_SLURM_LIB names
# another copy.
#
# slurmd runs Prolog and Epilog with an environment of its own (SLURM_*
# variables, no PATH, nothing of slurmd's environment), so the settings
# come from a file: /etc/default/mltune-slurm (MLTUNE_SLURM_CONFIG names
# another), shell assignments of these variables (defaults after '='):
#
#   MLTUNE_SLURM_DEFAULT_PROFILE=   the node's default profile: what jobs
#                                   that ask for none run on and what the
#                                   epilog returns to; empty: the 'profile'
#                                   of /etc/mltune/mltune.toml, else training
#   MLTUNE_SLURM_FEATURE_PREFIX=mltune_
#                                   feature NAME = PREFIX + profile name
#   MLTUNE_SLURM_UNREQUESTED=default
#                                   a job that asks for no profile runs on
#                                   the default profile (default), or on
#                                   whatever is active (keep)
#   MLTUNE_SLURM_DRAIN=1            drain the node with the reason when a
#                                   switch or verify fails (0: only exit
#                                   non-zero; Slurm then drains it as
#                                   "Prolog error")
#   MLTUNE_SLURM_CONFLICT=requeue   a job that asks for another profile
#                                   than the jobs running on the node (a
#                                   shared node): refused, never a drain;
#                                   requeue (pending again, retried after
#                                   Slurm's requeue delay), hold (requeued
#                                   and held until 'scontrol release') or
#                                   cancel; a job that cannot be requeued
#                                   (not a batch job, --no-requeue) is
#                                   cancelled
#   MLTUNE_SLURM_PERSIST=1          node-features MLTUNE_P also makes P the
#                                   boot profile (mltunectl persist), as
#                                   node_features/helpers reboots the node
#   MLTUNE_SLURM_MLTUNECTL=mltunectl
#   MLTUNE_SLURM_STATE=/run/mltune/slurm
#                                   which job asked for which profile
#   MLTUNE_SLURM_NODE_CONFIG=/etc/mltune/mltune.toml
#
# Variables already set in the environment win over the file (the tests
# run the scripts by hand that way).

PATH=/usr/sbin:/usr/bin:/sbin:/bin
export PATH

mlt_conf=${MLTUNE_SLURM_CONFIG:-/etc/default/mltune-slurm}
if [ -r "$mlt_conf" ]; then
	# The environment wins: remember what it set, read the file, restore.
	_mlt_saved=$(env | grep '^MLTUNE_SLURM_' | sed "s/'/'\\\\''/g; s/^\([^=]*\)=\(.*\)$/\1='\2'/")
	# shellcheck disable=SC1090
	. "$mlt_conf"
	eval "$_mlt_saved"
	unset _mlt_saved
fi
MLT_PREFIX=${MLTUNE_SLURM_FEATURE_PREFIX:-mltune_}
# A profile name after the prefix, as a basic regular expression (grep,
# sed): a letter or digit, then letters, digits, '_' and '-'. mltunectl
# enforces the rest of its rule (the length) and says so.
MLT_NAME_BRE='[A-Za-z0-9][A-Za-z0-9_-]*'
MLT_CTL=${MLTUNE_SLURM_MLTUNECTL:-mltunectl}
MLT_STATE=${MLTUNE_SLURM_STATE:-/run/mltune/slurm}
MLT_NODE_CONFIG=${MLTUNE_SLURM_NODE_CONFIG:-/etc/mltune/mltune.toml}
MLT_TAG=${MLT_TAG:-mltune-slurm}
MLT_ERR="" MLT_DID=""  # set by mlt_ensure for its callers

# mlt_log LEVEL MESSAGE: the journal (syslog tag mltune-slurm) and stderr.
mlt_log() {
	_lvl=$1; shift
	logger -t "$MLT_TAG" -p "daemon.$_lvl" -- "$*" 2>/dev/null || :
	echo "$MLT_TAG: $*" >&2
}

# Milliseconds since the epoch (GNU date; seconds elsewhere).
mlt_now_ms() {
	_t=$(date +%s%N 2>/dev/null)
	case $_t in *N|'') echo $(($(date +%s) * 1000)) ;; *) echo $((_t / 1000000)) ;; esac
}

# The node's name in Slurm: slurmd sets SLURMD_NODENAME for Prolog and
# Epilog; else the short host name (NodeName=hostname, the usual case).
mlt_node() {
	if [ -n "${SLURMD_NODENAME:-}" ]; then echo "$SLURMD_NODENAME"; else hostname -s 2>/dev/null || uname -n; fi
}

# mlt_timeout SECONDS CMD...: CMD, killed after SECONDS where timeout(1)
# exists (a Slurm command must not hang a prolog until PrologEpilogTimeout).
mlt_timeout() {
	_secs=$1; shift
	if command -v timeout >/dev/null 2>&1; then timeout "$_secs" "$@"; else "$@"; fi
}

# The active profile ("" when none), as mltunectl prints that field of
# 'active --json' (no JSON is parsed here). Exit 1 when mltunectl fails.
mlt_active() {
	"$MLT_CTL" active --field profile 2>/dev/null
}

# The default profile: MLTUNE_SLURM_DEFAULT_PROFILE, else the 'profile' of
# the node configuration as mltunectl reads it (config show --field
# profile), else training.
mlt_default_profile() {
	if [ -n "${MLTUNE_SLURM_DEFAULT_PROFILE:-}" ]; then
		echo "$MLTUNE_SLURM_DEFAULT_PROFILE"; return
	fi
	_p=""
	if [ -r "$MLT_NODE_CONFIG" ]; then
		_p=$("$MLT_CTL" config show -c "$MLT_NODE_CONFIG" --field profile 2>/dev/null)
	fi
	echo "${_p:-training}"
}

# mlt_profiles_of CONSTRAINTS: the profiles a job's constraint expression
# asks for, one per line, in order, no duplicates. Slurm passes the
# expression as the user wrote it (SLURM_JOB_CONSTRAINTS, e.g.
# "mltune_inference&gpu", "[rack1|rack2]&mltune_training*2"). A feature
# PREFIXNAME is profile NAME; "!PREFIXNAME" (not) and PREFIXconf_* (the
# conformance features of node-features) ask for none.
mlt_profiles_of() {
	printf '%s\n' "$1" | tr -c 'A-Za-z0-9_*!.=-' '\n' |
		sed -n "s/^${MLT_PREFIX}\(${MLT_NAME_BRE}\)\(\*[0-9]*\)\{0,1\}\$/\1/p" |
		grep -v '^conf_' | awk '!seen[$0]++'
}

# The first line worth quoting from mltunectl's output: its error line
# without the "mltunectl: error: " lead, else the first non-empty line;
# at most 200 characters, on one line.
mlt_first_error() {
	_l=$(printf '%s\n' "$1" | sed -n 's/^mltunectl: error: //p' | head -n 1)
	[ -n "$_l" ] || _l=$(printf '%s\n' "$1" | sed '/^[[:space:]]*$/d' | head -n 1)
	printf '%s' "$_l" | tr -d '\r' | tr '\t' ' ' | cut -c 1-200
}

# mlt_ensure PROFILE: the node on PROFILE, verified. Nothing is written
# when PROFILE is active and verify finds no difference (every job start
# costs one 'active' and one 'verify'); else one 'switch' (a transaction:
# on failure nothing is left half-applied) and a 'verify'. On failure
# MLT_ERR says what failed; returns 1.
mlt_ensure() {
	_want=$1
	MLT_ERR=""
	_act=$(mlt_active)
	if [ "$_act" = "$_want" ] && "$MLT_CTL" verify "$_want" >/dev/null 2>&1; then
		MLT_DID="already on $_want"
		return 0
	fi
	if ! _out=$("$MLT_CTL" switch "$_want" 2>&1); then
		MLT_ERR="switch to $_want failed: $(mlt_first_error "$_out")"
		return 1
	fi
	if ! _out=$("$MLT_CTL" verify "$_want" 2>&1); then
		MLT_ERR="verify $_want failed after the switch: $(mlt_first_error "$_out")"
		return 1
	fi
	MLT_DID="switched from ${_act:-no profile} to $_want"
	return 0
}

# mlt_drain REASON: drain this node with REASON ("mltune: " in front), so
# that no further job lands on it until an administrator resumes it.
mlt_drain() {
	_reason="mltune: $1"
	[ "${MLTUNE_SLURM_DRAIN:-1}" = 1 ] || { mlt_log err "$_reason (not drained: MLTUNE_SLURM_DRAIN=0)"; return 0; }
	_node=$(mlt_node)
	if mlt_timeout 60 scontrol update nodename="$_node" state=drain reason="$_reason" >/dev/null 2>&1; then
		mlt_log err "drained $_node: $_reason"
	else
		mlt_log err "could not drain $_node (scontrol failed): $_reason"
	fi
}

# mlt_refuse JOBID REASON: the job cannot run here now (it asks for
# another profile than the jobs running on this shared node), which says
# nothing about the node: it is not drained. REASON goes where the job's
# owner looks (a line in the job's output file, written as the owner, and
# the job's AdminComment), then MLTUNE_SLURM_CONFLICT says what happens to
# the job: requeue (default), hold or cancel. Returns 1 only when Slurm
# took none of these (the caller must not let the job start then).
mlt_refuse() {
	_job=$1 _why="mltune: $2"
	_policy=${MLTUNE_SLURM_CONFLICT:-requeue}
	case $_policy in
	requeue|hold|cancel) ;;
	*) mlt_log warning "MLTUNE_SLURM_CONFLICT=$_policy is not requeue, hold or cancel: using requeue"; _policy=requeue ;;
	esac
	case $_policy in
	requeue) _what="the job is requeued" ;;
	hold) _what="the job is requeued and held (scontrol release $_job)" ;;
	cancel) _what="the job is cancelled" ;;
	esac
	mlt_tell_job "$_job" "$_why; $_what (mltune prolog on $(mlt_node), MLTUNE_SLURM_CONFLICT=$_policy)"
	mlt_timeout 60 scontrol update jobid="$_job" admincomment="$_why" >/dev/null 2>&1 ||
		mlt_log warning "job $_job: could not set its AdminComment"
	_did=""
	case $_policy in
	requeue) mlt_timeout 60 scontrol requeue "$_job" >/dev/null 2>&1 && _did=requeued ;;
	hold) mlt_timeout 60 scontrol requeuehold "$_job" >/dev/null 2>&1 && _did="requeued and held" ;;
	esac
	# Not requeueable (an salloc/srun job, --no-requeue, JobRequeue=0), or
	# the policy says so.
	if [ -z "$_did" ] && mlt_timeout 60 scancel "$_job" >/dev/null 2>&1; then
		_did=cancelled
	fi
	if [ -z "$_did" ]; then
		mlt_log err "job $_job refused, but Slurm neither requeued nor cancelled it: $_why"
		return 1
	fi
	mlt_log notice "job $_job $_did (MLTUNE_SLURM_CONFLICT=$_policy): $2"
	return 0
}

# mlt_tell_job JOBID LINE: LINE at the end of the job's output file
# (squeue's StdOut, Slurm's patterns expanded), written as the job's owner
# (SLURM_JOB_UID/SLURM_JOB_GID of the prolog's environment), so that a
# user's symlink there cannot make root write elsewhere and the file stays
# the user's. Nothing when the path or the owner is unknown.
mlt_tell_job() {
	_uid=${SLURM_JOB_UID:-} _gid=${SLURM_JOB_GID:-}
	[ -n "$_uid" ] || return 0
	[ -n "$_gid" ] || _gid=$(id -g "$_uid" 2>/dev/null) || return 0
	_path=$(mlt_timeout 30 squeue -h -j "$1" -O 'STDOUT:4096' 2>/dev/null | sed 's/[[:space:]]*$//' | head -n 1)
	# An absolute path with Slurm's patterns expanded (a '%' left: unknown).
	case $_path in *%*) return 0 ;; /*) ;; *) return 0 ;; esac
	command -v setpriv >/dev/null 2>&1 || return 0
	# shellcheck disable=SC2016 # expanded by the inner shell, as the owner
	setpriv --reuid="$_uid" --regid="$_gid" --clear-groups -- \
		sh -c 'printf "%s\n" "$1" >>"$2"' sh "$2" "$_path" 2>/dev/null ||
		mlt_log warning "job $1: could not write to its output file $_path"
}

# ---- which jobs run here on which profile -------------------------------
# A node runs its jobs on one profile. $MLT_STATE/job.ID holds the profile
# of each job whose prolog succeeded here ("-" when it asked for none);
# the epilog removes it. A record whose epilog never ran (slurmd restarted,
# the epilog killed by PrologEpilogTimeout) is dropped by the next prolog or
# epilog, which compares the records with the jobs Slurm has on the node
# (mlt_reconcile); /run is cleared by a reboot. Prologs and epilogs of one
# node take $MLT_STATE/lock.

mlt_state_init() { mkdir -p "$MLT_STATE" 2>/dev/null && chmod 0755 "$MLT_STATE" 2>/dev/null; :; }

# mlt_locked CMD...: CMD under the node's mltune-slurm lock (flock), so that
# two prologs (or a prolog and an epilog) of jobs sharing the node decide
# one after the other. Without flock: CMD unlocked.
mlt_locked() {
	if command -v flock >/dev/null 2>&1; then
		# A descriptor above what the callers use; the lock goes with it.
		( flock -w 600 9 || { mlt_log err "lock $MLT_STATE/lock: timed out"; exit 1; }
		  "$@" ) 9>"$MLT_STATE/lock"
	else
		"$@"
	fi
}

# mlt_record JOBID PROFILE: job JOBID runs here on PROFILE ("-": any).
mlt_record() { [ -z "$1" ] || echo "$2" >"$MLT_STATE/job.$1" 2>/dev/null || :; }

# The jobs Slurm has on this node, one id a line: configuring (in their
# prolog), running, suspended or stopped. A completing job (its processes
# ended or being killed, its epilog pending) holds the node's profile no
# longer. Exit 1 when squeue cannot answer.
mlt_slurm_jobs() {
	mlt_timeout 30 squeue -h -w "$(mlt_node)" -t CONFIGURING,RUNNING,SUSPENDED,STOPPED -o %A
}

# mlt_reconcile: drop the record of every job Slurm does not have on this
# node any more. When squeue fails, the records stay (logged): a record
# too many refuses a job, one too few would switch the node under a job.
mlt_reconcile() {
	set -- "$MLT_STATE"/job.*
	[ -f "$1" ] || return 0
	if ! _jobs=$(mlt_slurm_jobs 2>/dev/null); then
		mlt_log warning "squeue failed: the job records in $MLT_STATE were not compared with Slurm's jobs"
		return 0
	fi
	for _f in "$@"; do
		_id=${_f##*/job.}
		printf '%s\n' "$_jobs" | grep -qx -- "$_id" && continue
		rm -f "$_f"
		mlt_log notice "job $_id: Slurm has no such job on $(mlt_node) any more (its epilog did not run here): record removed"
	done
}

# The records of other jobs than $1: "JOBID PROFILE" lines.
mlt_other_jobs() {
	for _f in "$MLT_STATE"/job.*; do
		[ -f "$_f" ] || continue
		_id=${_f##*/job.}
		[ "$_id" = "$1" ] && continue
		printf '%s %s\n' "$_id" "$(cat "$_f" 2>/dev/null)"
	done
}
