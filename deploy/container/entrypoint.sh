#!/bin/bash
# mltune DaemonSet entrypoint: keep one node on the profile its label names.
#
# Container mode: the node's root file system is mounted at /host and every
# command runs as `mltunectl --sysroot /host ...`, in the node's network and
# PID namespaces (hostNetwork, hostPID; checked below), so NIC settings,
# thread policies and kernel modules act on the node.
#
# Every MLTUNE_INTERVAL seconds:
#   1. the wanted profile: the node label mltune.io/profile, else the default
#      (ConfigMap mltune-config, key default-profile), else none;
#   2. the site profiles of ConfigMap mltune-profiles are installed as
#      /etc/mltune/profiles/NAME.toml on the node (after `profile check`),
#      so that `active`, `metrics`, `verify NAME` and `conformance`, the
#      host's own mltunectl included, find them by name; a node file of the
#      same name that lacks the marker line is left alone (it wins, as it
#      would for any mltunectl on the node);
#   3. `switch NAME` when the wanted profile, its content (profile show) or
#      the node's active profile changed, `off` for "none" -- unless the
#      node already is on it: a new pod (a rolling update, a restart)
#      adopts the node's state (see "Handing the node over" below); and a
#      change that resets links waits (see "Disruptive changes");
#   4. `verify NAME` (the differences are logged when they change) and
#      `conformance`: an 8-hex-digit hash when the node is in line with its
#      active profile (exit 0), drifted (exit 1), unknown (anything else);
#      the first verify that passes on this boot removes the node's taint
#      (see "The taint");
#   5. node-feature-discovery labels, written atomically (temporary file in
#      the same directory, renamed; NFD skips hidden files) to
#      /etc/kubernetes/node-feature-discovery/features.d/mltune:
#        mltune.io/active-profile=NAME       ("none" without one)
#        mltune.io/conformance=HASH|drifted|unknown   (with a profile only)
#      with an NFD expiry time of 3 intervals + 60 s, so the labels vanish
#      when this pod stops refreshing them. The key is not mltune.io/profile:
#      that label is the administrator's request, and NFD owns (overwrites,
#      and deletes when the file goes) every label it publishes;
#   6. Prometheus metrics for node_exporter's textfile collector
#      (`metrics -o`), where that directory exists on the node.
# Settings drift is reported (conformance=drifted, the verify log), not
# corrected: whoever changed a setting may mean it (`mltunectl drift show`
# on the node says who). A different active profile is corrected.
#
# Reading the node: through the API server with the pod's service account
# (RBAC: get and patch on nodes) and NODE_NAME from the downward API, with
# curl and jq from Debian. The downward API cannot expose node labels, and
# an init container or sidecar copying them would need the same access.
# The token is passed to curl through a file descriptor, never on its
# command line (which every process of the node could read, hostPID), and
# re-read each time (projected tokens rotate). Each round reads the Node
# from the API server's cache (resourceVersion=0): the label, whether the
# node is cordoned (spec.unschedulable), its taints. When the API does not
# answer, the last wanted profile stays; the default applies only to a node
# the API says has no label.
#
# Handing the node over: a pod that starts on a node already on the wanted
# profile does not switch it. It adopts the node's state when the node's
# record of the last switch (MLTUNE_STATE_FILE, below /run: this boot only)
# names the same profile content, or when `verify NAME` passes; a rolling
# update or a restarted pod so writes nothing to the node. On SIGTERM the
# pod leaves the node as it is (MLTUNE_OFF_ON_EXIT=false, the default) and
# keeps the feature file, whose expiry time removes the labels if no pod
# follows. MLTUNE_OFF_ON_EXIT=true (opt-in) runs `mltunectl off` instead
# and removes the feature file: deleting the DaemonSet then leaves no tuned
# node behind, but every pod replacement resets the node (NIC rings and
# channels reconfigured twice, links reset under running jobs, thread
# policies reset), and `off` also removes what `mltunectl persist` and
# `boot apply` wrote on the node. To return nodes to their baseline before
# removing the DaemonSet, label them mltune.io/profile=none. A command
# running when SIGTERM arrives is finished first (a switch is never cut).
#
# Disruptive changes: ring and channel changes reset a NIC's link (the
# driver reinitialises its queues), which breaks the connections of the
# jobs running there. Before a switch the pod asks `mltunectl nic diff
# --profile NAME --json` what it would change on the node's NICs (for
# "none": whether the active profile sets rings or channels, which `off`
# restores); a ring or channel change is applied only while the node is
# cordoned (spec.unschedulable: kubectl cordon/drain), inside
# MLTUNE_DISRUPTIVE_WINDOW, or when the node is being brought up (its first
# verify on this boot has not passed yet and it carries the taint below, so
# nothing was scheduled on it since it registered). Otherwise the switch
# waits, logged, and the pod is not ready (its node is not on the wanted
# profile); other switches apply at once. When the pod cannot reach the
# node's NICs (no shared network namespace) a switch leaves them alone and
# is never disruptive.
#
# The taint: a node is not ready for GPU jobs until it is tuned. The pod
# puts the taint MLTUNE_TAINT (effect NoSchedule) on its node when it
# starts on a node whose first verify on this boot has not passed, and
# removes it after the first `verify` that passes (for "none": once the
# node is off). Register nodes with the taint (kubelet
# --register-with-taints=mltune.io/unverified=:NoSchedule) so that no pod
# lands there before the DaemonSet's; the DaemonSet tolerates it. Both are
# merge patches of spec.taints carrying the node's resourceVersion (a
# concurrent change makes the API server refuse it; retried next round).
# A verified node is never tainted again on this boot: a pod replacement
# does not take the node out of scheduling.
#
# Environment (defaults in brackets):
#   NODE_NAME                    this node (downward API spec.nodeName)
#   MLTUNE_INTERVAL              seconds between rounds [60]
#   MLTUNE_LABEL                 node label naming the profile [mltune.io/profile]
#   MLTUNE_PROFILE               a profile name; set, the API is never asked (tests, plain containers)
#   MLTUNE_DEFAULT_PROFILE_FILE  file holding the default profile name, re-read each round
#   MLTUNE_DEFAULT_PROFILE       the default when that file is not there
#   MLTUNE_PROFILE_DIR           site profiles, NAME.toml [/etc/mltune-k8s/profiles]
#   MLTUNE_FEATURE_FILE          node path of the NFD feature file; empty: none
#   MLTUNE_METRICS_FILE          node path of the .prom file; empty: none
#   MLTUNE_OFF_ON_EXIT           run `off` on SIGTERM [false]
#   MLTUNE_TAINT                 NoSchedule taint key until the first verify passes [mltune.io/unverified]; empty: none
#   MLTUNE_DISRUPTIVE_WINDOW     UTC HH:MM-HH:MM when ring/channel changes may apply uncordoned; empty: never
#   MLTUNE_STATE_FILE            node path of the pod's record of the node [/run/mltune/daemonset.json]
#   MLTUNE_REQUIRE_HOST_NAMESPACES  refuse to start outside the node's net and PID namespaces [true]
#   MLTUNE_READY_FILE            exists while the node is on its profile [/tmp/mltune-ready]
#   MLTUNE_SYSROOT [/host], MLTUNE_BIN [/usr/sbin/mltunectl]
#   MLTUNE_SA_DIR [/var/run/secrets/kubernetes.io/serviceaccount], MLTUNE_API_SERVER
#     [https://$KUBERNETES_SERVICE_HOST:$KUBERNETES_SERVICE_PORT], MLTUNE_API_RETRIES [5]
set -uo pipefail

SYSROOT=${MLTUNE_SYSROOT:-/host}
MLTUNECTL=${MLTUNE_BIN:-/usr/sbin/mltunectl}
INTERVAL=${MLTUNE_INTERVAL:-60}
LABEL=${MLTUNE_LABEL:-mltune.io/profile}
PROFILE_DIR=${MLTUNE_PROFILE_DIR:-/etc/mltune-k8s/profiles}
FEATURE_FILE=${MLTUNE_FEATURE_FILE-/etc/kubernetes/node-feature-discovery/features.d/mltune}
METRICS_FILE=${MLTUNE_METRICS_FILE-/var/lib/prometheus/node-exporter/mltune.prom}
OFF_ON_EXIT=${MLTUNE_OFF_ON_EXIT:-false}
TAINT=${MLTUNE_TAINT-mltune.io/unverified}
WINDOW=${MLTUNE_DISRUPTIVE_WINDOW:-}
STATE_FILE=${MLTUNE_STATE_FILE:-/run/mltune/daemonset.json}
REQUIRE_NS=${MLTUNE_REQUIRE_HOST_NAMESPACES:-true}
READY_FILE=${MLTUNE_READY_FILE:-/tmp/mltune-ready}
SA_DIR=${MLTUNE_SA_DIR:-/var/run/secrets/kubernetes.io/serviceaccount}
API_RETRIES=${MLTUNE_API_RETRIES:-5}
SITE_DIR=/etc/mltune/profiles
MARKER="# Managed by the mltune DaemonSet (ConfigMap mltune-profiles); edits here are overwritten"

WANT=""         # the profile the node should have, "none" for its baseline
WANT_FROM=""    # where WANT came from, for the log
APPLIED=""      # WANT and its content hash after the last successful switch/off
ACTIVE="none"   # the node's active profile (mltunectl active)
CONFORMANCE=""  # HASH, drifted or unknown; empty without a profile
NODE_JSON=""    # the Node object of the last API read ("" without the API)
VERIFIED=0      # 1 once a verify passed on this node on this boot (the state file)
SHARES_NET=0    # 1 when mltunectl reaches the node's NICs (its network namespace)
DISRUPTION=""   # what makes the pending switch disruptive, for the log
ALLOWED=""      # why a disruptive switch may go ahead now, for the log
RECORDED_KEY="" # the node's record: the content last applied on this boot
ADOPTING=1      # the pod's first apply: adopt a node already on its profile
STOP=0
declare -A SAID=()

log() { printf 'mltune: %s\n' "$*" >&2; }
# say_once KEY MESSAGE: log MESSAGE when KEY last said something else.
say_once() {
	[ "${SAID[$1]:-}" = "$2" ] && return 0
	SAID[$1]=$2
	log "$2"
}
die() {
	log "error: $*"
	exit 1
}
truthy() {
	case ${1,,} in
	1 | true | yes | on) return 0 ;;
	esac
	return 1
}
mlt() { "$MLTUNECTL" --sysroot "$SYSROOT" "$@"; }
# A profile name that is also a valid label value: mltunectl's names
# ([A-Za-z0-9][A-Za-z0-9_-]{0,30}) that end in a letter or digit.
valid_name() { [[ $1 =~ ^[A-Za-z0-9]([A-Za-z0-9_-]{0,29}[A-Za-z0-9])?$ ]]; }

preflight() {
	local ns theirs ours
	[ -x "$MLTUNECTL" ] || die "$MLTUNECTL is not an executable (MLTUNE_BIN)"
	[ -d "$SYSROOT/proc" ] || die "$SYSROOT/proc does not exist: mount the node's / at $SYSROOT (hostPath)"
	[[ $INTERVAL =~ ^[1-9][0-9]*$ ]] || die "MLTUNE_INTERVAL must be a positive number of seconds, not '$INTERVAL'"
	[[ $API_RETRIES =~ ^[1-9][0-9]*$ ]] || die "MLTUNE_API_RETRIES must be a positive number, not '$API_RETRIES'"
	if [ -n "$WINDOW" ] && ! window_minutes >/dev/null; then
		die "MLTUNE_DISRUPTIVE_WINDOW must be HH:MM-HH:MM (UTC), not '$WINDOW'"
	fi
	if [ -n "$TAINT" ] && ! [[ $TAINT =~ ^([a-z0-9]([-a-z0-9.]*[a-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$ ]]; then
		die "MLTUNE_TAINT must be a taint key (such as mltune.io/unverified), not '$TAINT'"
	fi
	if [ "$(readlink "$SYSROOT/proc/1/ns/net" 2>/dev/null)" = "$(readlink /proc/self/ns/net)" ]; then
		SHARES_NET=1
	fi
	truthy "$REQUIRE_NS" || return 0
	for ns in net pid; do
		[ -L "$SYSROOT/proc/1/ns/$ns" ] ||
			die "no $SYSROOT/proc/1/ns/$ns: $SYSROOT is not the root of a running node (mount the node's / there, with its /proc)"
		theirs=$(readlink -v "$SYSROOT/proc/1/ns/$ns" 2>&1) ||
			die "cannot read $SYSROOT/proc/1/ns/$ns ($theirs): the container needs CAP_SYS_PTRACE to compare the node's namespaces with its own"
		ours=$(readlink "/proc/self/ns/$ns")
		[ "$theirs" = "$ours" ] ||
			die "this container has its own $ns namespace ($ours, the node's is $theirs): run it with hostNetwork: true and hostPID: true"
	done
}

api_server() {
	if [ -n "${MLTUNE_API_SERVER:-}" ]; then
		printf '%s' "$MLTUNE_API_SERVER"
		return 0
	fi
	local host=${KUBERNETES_SERVICE_HOST:-} port=${KUBERNETES_SERVICE_PORT_HTTPS:-${KUBERNETES_SERVICE_PORT:-443}}
	[ -n "$host" ] || return 1
	case $host in
	*:*) host="[$host]" ;; # IPv6
	esac
	printf 'https://%s:%s' "$host" "$port"
}

# api METHOD PATH [BODY]: one request to the API server with the service
# account's token; BODY (a JSON merge patch) for PATCH. The response body on
# stdout; exit non-zero (curl's) when the server cannot be reached or
# answers with an error.
api() {
	local server
	server=$(api_server) || {
		log "KUBERNETES_SERVICE_HOST is not set (not in a pod?): set MLTUNE_PROFILE"
		return 1
	}
	[ -n "${NODE_NAME:-}" ] || {
		log "NODE_NAME is not set: give it spec.nodeName (downward API)"
		return 1
	}
	local token
	token=$(<"$SA_DIR/token") || return 1
	if [ $# -ge 3 ]; then
		curl --silent --show-error --fail --max-time 10 --cacert "$SA_DIR/ca.crt" \
			--header @<(printf 'Authorization: Bearer %s\n' "$token") \
			--header 'Accept: application/json' --header 'Content-Type: application/merge-patch+json' \
			--request "$1" --data-binary "$3" "$server$2"
	else
		curl --silent --show-error --fail --max-time 10 --cacert "$SA_DIR/ca.crt" \
			--header @<(printf 'Authorization: Bearer %s\n' "$token") \
			--header 'Accept: application/json' --request "$1" "$server$2"
	fi
}

# read_node [fresh]: the Node object into NODE_JSON, from the API server's
# cache, or with "fresh" the latest (for a patch built on it); exit 1 when
# the API server cannot tell.
read_node() {
	local q="?resourceVersion=0" json
	[ "${1:-}" = fresh ] && q=""
	json=$(api GET "/api/v1/nodes/$NODE_NAME$q") || return 1
	jq -e '.kind == "Node" or .metadata.name != null' >/dev/null 2>&1 <<<"$json" || return 1
	NODE_JSON=$json
}
node_label() { jq -r --arg key "$LABEL" '.metadata.labels[$key] // ""' <<<"$NODE_JSON"; }
node_cordoned() { [ -n "$NODE_JSON" ] && jq -e '.spec.unschedulable == true' >/dev/null <<<"$NODE_JSON"; }
node_tainted() {
	[ -n "$NODE_JSON" ] && [ -n "$TAINT" ] &&
		jq -e --arg k "$TAINT" 'any(.spec.taints[]?; .key == $k and .effect == "NoSchedule")' >/dev/null <<<"$NODE_JSON"
}

# set_taint add|remove: put the NoSchedule taint TAINT on this node, or take
# it off: a merge patch of spec.taints (the whole list, other taints kept)
# with the resourceVersion it was built on.
set_taint() {
	read_node fresh || return 1
	if [ "$1" = add ]; then
		node_tainted && return 0
	else
		node_tainted || return 0
	fi
	local patched
	patched=$(api PATCH "/api/v1/nodes/$NODE_NAME" "$(jq -c --arg k "$TAINT" --arg op "$1" '
		[.spec.taints[]? | select(.key != $k or .effect != "NoSchedule")] as $others |
		{metadata: {resourceVersion: .metadata.resourceVersion},
		 spec: {taints: (if $op == "add" then $others + [{key: $k, effect: "NoSchedule"}] else $others end)}}' \
		<<<"$NODE_JSON")") || return 1
	NODE_JSON=$patched
}

default_profile() {
	local v=""
	if [ -n "${MLTUNE_DEFAULT_PROFILE_FILE:-}" ] && [ -r "$MLTUNE_DEFAULT_PROFILE_FILE" ]; then
		v=$(tr -d '[:space:]' <"$MLTUNE_DEFAULT_PROFILE_FILE")
	fi
	printf '%s' "${v:-${MLTUNE_DEFAULT_PROFILE:-}}"
}

# desired: set WANT; exit 1 (WANT unchanged) when it cannot be known now.
desired() {
	local want from
	if [ -n "${MLTUNE_PROFILE:-}" ]; then
		want=$MLTUNE_PROFILE from="MLTUNE_PROFILE"
	else
		read_node || {
			log "cannot read node ${NODE_NAME:-?} (label $LABEL) from the API server"
			return 1
		}
		want=$(node_label)
		from="node label $LABEL"
		if [ -z "$want" ]; then
			want=$(default_profile)
			want=${want:-none}
			from="default (node without label $LABEL)"
		fi
	fi
	if ! valid_name "$want"; then
		say_once want "refusing profile '$want' ($from): not a profile name ([A-Za-z0-9_-], up to 31, starting and ending with a letter or digit)"
		return 1
	fi
	[ "$want" = "$WANT" ] || log "wanted profile: $want ($from)"
	WANT=$want WANT_FROM=$from
}

# sync_profiles: install the ConfigMap's profiles as the node's site profiles.
sync_profiles() {
	local f name dest tmpd out
	[ -d "$PROFILE_DIR" ] || return 0
	for f in "$PROFILE_DIR"/*.toml; do
		[ -f "$f" ] || continue
		out=""
		name=${f##*/}
		name=${name%.toml}
		if ! valid_name "$name"; then
			say_once "sync:$name" "skipping $f: '$name' is not a profile name"
			continue
		fi
		dest=$SYSROOT$SITE_DIR/$name.toml
		if [ -e "$dest" ] && [ "$(head -n 1 "$dest")" != "$MARKER" ]; then
			say_once "sync:$name" "not installing profile $name: the node has its own $SITE_DIR/$name.toml (without the DaemonSet's marker line), which mltunectl uses for '$name'"
			continue
		fi
		if [ -e "$dest" ] && { printf '%s\n' "$MARKER" && cat "$f"; } | cmp -s - "$dest"; then
			continue
		fi
		if ! { mkdir -p "$SYSROOT$SITE_DIR" && tmpd=$(mktemp -d "$SYSROOT$SITE_DIR/.mltune-k8s.XXXXXX"); }; then
			say_once "sync:$name" "cannot write to $SITE_DIR on the node"
			continue
		fi
		# Checked where it will live (includes resolve as they will), then
		# renamed into place: mltunectl never reads half a file.
		if { printf '%s\n' "$MARKER" && cat "$f"; } >"$tmpd/$name.toml" &&
			out=$(mlt profile check "$tmpd/$name.toml" 2>&1) &&
			chmod 0644 "$tmpd/$name.toml" && mv -f "$tmpd/$name.toml" "$dest"; then
			log "installed profile $name as $SITE_DIR/$name.toml"
			SAID[sync:$name]=""
		else
			say_once "sync:$name" "profile $name of $f refused: ${out:-cannot write it}"
		fi
		rm -rf "$tmpd"
	done
}

read_active() {
	local a
	a=$(mlt --json active 2>/dev/null | jq -r '.profile // "none"' 2>/dev/null) || a=""
	ACTIVE=${a:-unknown}
}

# ---- the node's record: what this DaemonSet did on this boot ---------------
# MLTUNE_STATE_FILE on the node (below /run: gone with a reboot, and keyed
# to the boot ID besides): the profile content last switched to or adopted,
# and whether a verify has passed. A new pod reads it to adopt the node and
# to know whether the node still needs its taint.

boot_id() { tr -d '\n' <"$SYSROOT/proc/sys/kernel/random/boot_id" 2>/dev/null; }
load_state() {
	local json
	json=$(cat "$SYSROOT$STATE_FILE" 2>/dev/null) || return 0
	[ "$(jq -r '.boot_id // ""' 2>/dev/null <<<"$json")" = "$(boot_id)" ] || return 0
	RECORDED_KEY=$(jq -r '.key // ""' <<<"$json")
	if jq -e '.verified == true' >/dev/null 2>&1 <<<"$json"; then
		VERIFIED=1
	fi
	log "the node's record ($STATE_FILE): ${RECORDED_KEY%% *} applied on this boot, verified: $([ "$VERIFIED" = 1 ] && echo yes || echo no)"
}
save_state() {
	jq -n --arg b "$(boot_id)" --arg k "$RECORDED_KEY" --argjson v "$([ "$VERIFIED" = 1 ] && echo true || echo false)" \
		'{boot_id: $b, key: $k, verified: $v}' | write_file_atomic "$SYSROOT$STATE_FILE" ||
		say_once state "cannot write $STATE_FILE on the node"
}

# ---- disruptive changes ---------------------------------------------------

# window_minutes: MLTUNE_DISRUPTIVE_WINDOW as "START END", minutes after
# 00:00 UTC; exit 1 when it is not HH:MM-HH:MM.
window_minutes() {
	local a b
	[[ $WINDOW =~ ^([01][0-9]|2[0-3]):([0-5][0-9])-(([01][0-9]|2[0-3]):[0-5][0-9]|24:00)$ ]] || return 1
	a=$((10#${BASH_REMATCH[1]} * 60 + 10#${BASH_REMATCH[2]}))
	b=${BASH_REMATCH[3]}
	echo "$a $((10#${b%%:*} * 60 + 10#${b##*:}))"
}
in_window() {
	local se start end now
	[ -n "$WINDOW" ] && se=$(window_minutes) || return 1
	read -r start end <<<"$se"
	now=$((10#$(date -u +%H) * 60 + 10#$(date -u +%M)))
	if [ "$start" -le "$end" ]; then
		[ "$now" -ge "$start" ] && [ "$now" -lt "$end" ]
	else
		[ "$now" -ge "$start" ] || [ "$now" -lt "$end" ]
	fi
}

# disruptive: whether bringing the node to WANT resets NIC links: a ring or
# channel change that `nic diff` plans, or `off` while the active profile
# sets rings or channels (off restores them). DISRUPTION says which; a diff
# that fails counts as disruptive (unknown). Never when mltunectl cannot
# reach the node's NICs: the switch leaves them alone then.
disruptive() {
	local out rc
	DISRUPTION=""
	[ "$SHARES_NET" = 1 ] || return 1
	if [ "$WANT" = none ]; then
		case $ACTIVE in none | unknown) return 1 ;; esac
		out=$(mlt --json profile show "$ACTIVE" 2>/dev/null) || {
			DISRUPTION="profile $ACTIVE cannot be read, so what off restores is unknown"
			return 0
		}
		DISRUPTION=$(jq -r '[.nic[]? | .key | select(test("(^|[ .])(rings|channels)\\."))] | unique | join(", ")' <<<"$out" 2>/dev/null)
		[ -n "$DISRUPTION" ] || return 1
		DISRUPTION="off restores what $ACTIVE set: $DISRUPTION"
		return 0
	fi
	out=$(mlt --json nic diff --profile "$WANT" 2>/dev/null)
	rc=$?
	case $rc in
	0) return 1 ;;
	1)
		DISRUPTION=$(jq -r '[.changes[]? | select(.setting | test("^(rings|channels)\\.")) |
			"\(.interface) \(.setting) \(.from) -> \(.to)"] | join(", ")' <<<"$out" 2>/dev/null) || {
			DISRUPTION="nic diff printed no JSON, so whether links reset is unknown"
			return 0
		}
		[ -n "$DISRUPTION" ]
		;;
	*)
		DISRUPTION="mltunectl nic diff --profile $WANT failed (exit $rc), so whether links reset is unknown"
		return 0
		;;
	esac
}

# disruption_allowed: a disruptive switch may go ahead now; ALLOWED says why.
disruption_allowed() {
	ALLOWED=""
	if node_cordoned; then
		ALLOWED="node $NODE_NAME is cordoned"
	elif in_window; then
		ALLOWED="inside the window $WINDOW UTC"
	elif [ "$VERIFIED" = 0 ] && { node_tainted || [ -n "${MLTUNE_PROFILE:-}" ]; }; then
		ALLOWED="the node is being brought up (no verify passed on this boot${TAINT:+, tainted $TAINT})"
	fi
	[ -n "$ALLOWED" ]
}

# ---- switching ------------------------------------------------------------

# set_applied KEY: the node is on WANT (KEY: its content), recorded.
set_applied() {
	APPLIED=$1
	RECORDED_KEY=$1
	SAID[apply]=""
	: >"$READY_FILE" 2>/dev/null
	save_state
}

# apply: bring the node to WANT when needed.
apply() {
	local key out rc how=""
	if [ "$WANT" = none ]; then
		key=none
	else
		key="$WANT $(mlt --json profile show "$WANT" 2>/dev/null | sha256sum)"
	fi
	read_active
	if [ "$key" = "$APPLIED" ] && [ "$ACTIVE" = "$WANT" ]; then
		return 0
	fi
	# A new pod on a node already on WANT: hand-over, no switch.
	if [ "$ADOPTING" = 1 ] && [ "$ACTIVE" = "$WANT" ]; then
		if [ "$WANT" = none ]; then
			how="no profile is active"
		elif [ "$RECORDED_KEY" = "$key" ]; then
			how="the node's record names this content"
		elif mlt verify "$WANT" >/dev/null 2>&1; then
			how="verify $WANT passes"
		fi
	fi
	ADOPTING=0
	if [ -n "$how" ]; then
		log "adopted the node's state: $WANT is active and $how; nothing switched ($WANT_FROM)"
		set_applied "$key"
		return 0
	fi
	if disruptive; then
		if ! disruption_allowed; then
			say_once apply "switch to $WANT waits: it would reset NIC links ($DISRUPTION); it is applied once node ${NODE_NAME:-?} is cordoned${WINDOW:+ or inside the window $WINDOW UTC}"
			rm -f "$READY_FILE"
			return 0
		fi
		log "switch to $WANT resets NIC links ($DISRUPTION): going ahead, $ALLOWED"
	fi
	if [ "$WANT" = none ]; then
		out=$(mlt off 2>&1)
	else
		out=$(mlt switch "$WANT" 2>&1)
	fi
	rc=$?
	if [ "$rc" = 0 ]; then
		log "node switched to $WANT ($WANT_FROM):"
		printf '%s\n' "$out" | sed 's/^/  /' >&2
		set_applied "$key"
	else
		# Logged once per distinct failure; retried every round.
		say_once apply "switching to $WANT failed (exit $rc), retrying every ${INTERVAL}s: $out"
		APPLIED=""
		rm -f "$READY_FILE"
	fi
	read_active
}

# ---- the taint ------------------------------------------------------------

# taint_until_verified: a node without a passed verify on this boot gets the
# taint (once; retried each round while the API refuses).
taint_until_verified() {
	[ -n "$TAINT" ] && [ -n "$NODE_JSON" ] && [ "$VERIFIED" = 0 ] || return 0
	node_tainted && return 0
	if set_taint add; then
		log "tainted node $NODE_NAME $TAINT:NoSchedule until its first verify passes"
		SAID[taint]=""
	else
		say_once taint "cannot put the taint $TAINT on node $NODE_NAME (RBAC: patch on nodes); retrying every ${INTERVAL}s"
	fi
}

# verified: a verify passed (for "none": the node is off). The first one on
# this boot is recorded; the taint comes off.
verified() {
	if [ "$VERIFIED" = 0 ]; then
		VERIFIED=1
		save_state
	fi
	[ -n "$TAINT" ] && node_tainted || return 0
	if set_taint remove; then
		log "verify passed: removed the taint $TAINT from node $NODE_NAME"
		SAID[untaint]=""
	else
		say_once untaint "cannot remove the taint $TAINT from node $NODE_NAME; retrying every ${INTERVAL}s"
	fi
}

check() {
	local out rc
	CONFORMANCE=""
	if [ "$WANT" = none ] && [ "$ACTIVE" = none ]; then
		verified
		return 0
	fi
	if [ "$WANT" != none ]; then
		out=$(mlt verify "$WANT" 2>&1)
		rc=$?
		case $rc in
		0) say_once verify "verify $WANT: the node matches" ;;
		*) say_once verify "verify $WANT (exit $rc): $out" ;;
		esac
		if [ "$rc" = 0 ] && [ "$ACTIVE" = "$WANT" ]; then
			verified
		fi
	fi
	out=$(mlt conformance 2>/dev/null)
	rc=$?
	if [ "$rc" = 0 ] && [[ $out =~ ^[0-9a-f]{8}$ ]]; then
		CONFORMANCE=$out
	elif [ "$rc" = 1 ]; then
		CONFORMANCE=drifted
	else
		CONFORMANCE=unknown
	fi
	say_once conformance "conformance: $CONFORMANCE"
}

# write_file_atomic DEST: stdin to DEST through a hidden temporary file in
# its directory, renamed into place.
write_file_atomic() {
	local dest=$1 tmp
	if ! { mkdir -p "${dest%/*}" && tmp=$(mktemp "${dest%/*}/.mltune.XXXXXX"); }; then
		return 1
	fi
	if cat >"$tmp" && chmod 0644 "$tmp" && mv -f "$tmp" "$dest"; then
		return 0
	fi
	rm -f "$tmp"
	return 1
}

write_features() {
	local active=$ACTIVE expiry
	[ -n "$FEATURE_FILE" ] || return 0
	valid_name "$active" || active=unknown
	expiry=$(date -u -d "+$((3 * INTERVAL + 60)) seconds" +%Y-%m-%dT%H:%M:%SZ)
	{
		echo "# Written by the mltune DaemonSet every ${INTERVAL}s; the labels expire when it stops."
		echo "# +expiry-time=$expiry"
		echo "mltune.io/active-profile=$active"
		if [ -n "$CONFORMANCE" ]; then
			echo "mltune.io/conformance=$CONFORMANCE"
		fi
	} | write_file_atomic "$SYSROOT$FEATURE_FILE" ||
		say_once features "cannot write $FEATURE_FILE on the node"
}

write_metrics() {
	local out
	[ -n "$METRICS_FILE" ] || return 0
	if [ ! -d "$SYSROOT${METRICS_FILE%/*}" ]; then
		say_once metrics "no ${METRICS_FILE%/*} on the node (no node_exporter textfile collector): no metrics file"
		return 0
	fi
	out=$(mlt metrics -o "$METRICS_FILE" 2>&1) || say_once metrics "metrics -o $METRICS_FILE failed: $out"
}

shutdown() {
	local out rc=0
	rm -f "$READY_FILE"
	if truthy "$OFF_ON_EXIT"; then
		out=$(mlt off 2>&1)
		rc=$?
		log "SIGTERM: mltunectl off (exit $rc):"
		printf '%s\n' "$out" | sed 's/^/  /' >&2
		# The node is untuned: the next pod taints it until its verify.
		rm -f "$SYSROOT$STATE_FILE"
		if [ -n "$FEATURE_FILE" ]; then
			rm -f "$SYSROOT$FEATURE_FILE"
		fi
	else
		# Handed over: the next pod adopts the node; the labels stay until
		# it rewrites them (or expire, when no pod follows).
		log "SIGTERM: leaving the node as it is for the next pod (MLTUNE_OFF_ON_EXIT=$OFF_ON_EXIT)"
	fi
	write_metrics
	exit "$rc"
}

main() {
	local failures=0 pause
	preflight
	trap 'STOP=1' TERM INT
	rm -f "$READY_FILE"
	log "container mode: mltunectl --sysroot $SYSROOT, node ${NODE_NAME:-?}, every ${INTERVAL}s"
	load_state
	while [ "$STOP" = 0 ]; do
		if desired; then
			failures=0
		else
			failures=$((failures + 1))
			if [ -z "$WANT" ] && [ "$failures" -ge "$API_RETRIES" ]; then
				die "no profile after $failures tries; exiting so that the kubelet restarts the pod"
			fi
		fi
		if [ -n "$WANT" ] && [ "$STOP" = 0 ]; then
			taint_until_verified
			sync_profiles
			apply
			check
			write_features
			write_metrics
		fi
		[ "$STOP" = 0 ] || break
		pause=$INTERVAL
		if [ -z "$WANT" ] && [ "$pause" -gt 5 ]; then
			pause=5
		fi
		# In the background, so that SIGTERM ends the wait at once.
		sleep "$pause" &
		wait "$!"
		kill "$!" 2>/dev/null
	done
	shutdown
}

main "$@"
