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
#      the node's active profile changed, `off` for "none";
#   4. `verify NAME` (the differences are logged when they change) and
#      `conformance`: an 8-hex-digit hash when the node is in line with its
#      active profile (exit 0), drifted (exit 1), unknown (anything else);
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
# Reading the label: through the API server with the pod's service account
# (RBAC: get on nodes, nothing else) and NODE_NAME from the downward API,
# with curl and jq from Debian. The downward API cannot expose node labels,
# and an init container or sidecar copying them would need the same access.
# The token is passed to curl through a file descriptor, never on its
# command line (which every process of the node could read, hostPID), and
# re-read each time (projected tokens rotate). Only the object's metadata is
# asked for (PartialObjectMetadata), from the API server's cache
# (resourceVersion=0). When the API does not answer, the last wanted profile
# stays; the default applies only to a node the API says has no label.
#
# Pod termination (SIGTERM): with MLTUNE_OFF_ON_EXIT=true (the default),
# `mltunectl off` returns the node to its baseline and the feature file is
# removed: deleting the DaemonSet, or taking a node out of its node
# affinity, leaves no tuned node behind. The price: a rolling update puts
# each node on its baseline between the old pod's exit and the new pod's
# switch (NIC rings and channels are reconfigured twice, thread policies
# reset), and `off` also removes what `mltunectl persist` and `boot apply`
# wrote on the node: on a node managed by this DaemonSet, do not manage
# mltune by hand as well. With MLTUNE_OFF_ON_EXIT=false the node keeps its
# profile across pod restarts and updates; label a node mltune.io/profile=none
# to return it to its baseline before removing the DaemonSet. A command
# running when SIGTERM arrives is finished first (a switch is never cut).
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
#   MLTUNE_OFF_ON_EXIT           run `off` on SIGTERM [true]
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
OFF_ON_EXIT=${MLTUNE_OFF_ON_EXIT:-true}
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

# node_label: print the value of LABEL on this node ("" when it has none);
# exit 1 when the API server cannot tell.
node_label() {
	local server token
	server=$(api_server) || {
		log "KUBERNETES_SERVICE_HOST is not set (not in a pod?): set MLTUNE_PROFILE"
		return 1
	}
	[ -n "${NODE_NAME:-}" ] || {
		log "NODE_NAME is not set: give it spec.nodeName (downward API)"
		return 1
	}
	token=$(<"$SA_DIR/token") || return 1
	curl --silent --show-error --fail --max-time 10 \
		--cacert "$SA_DIR/ca.crt" \
		--header @<(printf 'Authorization: Bearer %s\n' "$token") \
		--header 'Accept: application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1, application/json' \
		"$server/api/v1/nodes/$NODE_NAME?resourceVersion=0" |
		jq -er --arg key "$LABEL" '.metadata.labels[$key] // ""'
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
		want=$(node_label) || {
			log "cannot read label $LABEL of node ${NODE_NAME:-?} from the API server"
			return 1
		}
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

# apply: bring the node to WANT when needed.
apply() {
	local key out rc
	if [ "$WANT" = none ]; then
		key=none
	else
		key="$WANT $(mlt --json profile show "$WANT" 2>/dev/null | sha256sum)"
	fi
	read_active
	if [ "$key" = "$APPLIED" ] && [ "$ACTIVE" = "$WANT" ]; then
		return 0
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
		APPLIED=$key
		SAID[apply]=""
		: >"$READY_FILE" 2>/dev/null
	else
		# Logged once per distinct failure; retried every round.
		say_once apply "switching to $WANT failed (exit $rc), retrying every ${INTERVAL}s: $out"
		APPLIED=""
		rm -f "$READY_FILE"
	fi
	read_active
}

check() {
	local out rc
	CONFORMANCE=""
	[ "$WANT" = none ] && [ "$ACTIVE" = none ] && return 0
	if [ "$WANT" != none ]; then
		out=$(mlt verify "$WANT" 2>&1)
		rc=$?
		case $rc in
		0) say_once verify "verify $WANT: the node matches" ;;
		*) say_once verify "verify $WANT (exit $rc): $out" ;;
		esac
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
	else
		log "SIGTERM: leaving the node on its profile (MLTUNE_OFF_ON_EXIT=$OFF_ON_EXIT)"
	fi
	if [ -n "$FEATURE_FILE" ]; then
		rm -f "$SYSROOT$FEATURE_FILE"
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
