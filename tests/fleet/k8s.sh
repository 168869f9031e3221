#!/bin/bash
# The Kubernetes deployment (deploy/kubernetes, deploy/container), checked
# offline: no cluster, no container engine, no network on a warm run.
#
#   tests/fleet/k8s.sh [MLTUNECTL]     (default build/userspace/mltunectl)
#
# - Every manifest, and the stream `kubectl kustomize` renders, validates
#   against the Kubernetes API schema: tests/fleet/k8s-validate/validate.mjs
#   with the kubernetes-models and js-yaml versions pinned in its
#   package-lock.json, installed by `npm ci` once into
#   ${XDG_CACHE_HOME:-~/.cache}/mltune/npm-k8s-HASH (HASH: of the lock file).
#   Broken copies (hostNetwork: "yes", an unknown kind) must fail.
# - Debian 12's kubectl 1.20 (package kubernetes-client): `create
#   --dry-run=client` of every manifest and of `-k deploy/kubernetes`, and
#   `kustomize`. kubectl maps kinds to resources through API discovery even
#   for a client dry run ("unable to recognize ...: Get .../api"), so it runs
#   against an unreachable server whose discovery documents are seeded into
#   its cache directory; an unknown kind, which makes kubectl refresh them,
#   fails. Client-side schema validation needs the server's OpenAPI
#   document and is left to validate.mjs (--validate=false). Where
#   kubernetes-client is not installed (on these machines Google's kubectl
#   package holds /usr/bin/kubectl, and dpkg refuses the second), the same
#   package is fetched with `apt-get download` and unpacked into the cache.
# - The security settings of the DaemonSet and the RBAC rules, the profiles
#   of the ConfigMap (`mltunectl profile check`), the Containerfile (a lint of
#   our own) and the entrypoint (bash -n, shellcheck).
# - The entrypoint itself, against a fake node (tests/fixtures, with the knob
#   files of the profiles) and a fake API server (tests/fleet/fake-kube-api.py):
#   profile from the node label, from the default, kept while the API fails;
#   site profiles installed; switch, verify, `conformance`, NFD feature file,
#   metrics, drift reported; the NoSchedule taint until the first verify
#   passes; `off` on SIGTERM only when asked for, else the node handed over,
#   and the next pod adopting it without a switch. (NIC ring and channel
#   changes need real NICs: tests/fleet/k8s-node.sh in the guest.)
# Prints TAP lines ("ok N - ..." / "not ok N - ...", diagnostics as "# ...");
# exits 0 only when every check passed. Runs as root; needs node and npm,
# python3, jq, curl, and apt-get/dpkg-deb when kubernetes-client is not
# installed.
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT" || exit 1
M=${1:-$ROOT/build/userspace/mltunectl}
K8S=deploy/kubernetes
EP=$ROOT/deploy/container/entrypoint.sh
CF=$ROOT/deploy/container/Containerfile
VDIR=$ROOT/tests/fleet/k8s-validate
CACHE_ROOT=${XDG_CACHE_HOME:-${HOME:-/root}/.cache}/mltune
CAPS_WANTED="NET_ADMIN SYS_ADMIN SYS_MODULE SYS_NICE SYS_PTRACE"

T=$(mktemp -d /tmp/mltune-k8s.XXXXXX)
PIDS=()
cleanup() {
	local p
	for p in "${PIDS[@]}"; do
		kill -KILL "$p" 2>/dev/null
	done
	wait 2>/dev/null
	rm -rf "$T"
}
trap cleanup EXIT

n=0
failed=0
ok() {
	n=$((n + 1))
	echo "ok $n - $*"
}
notok() {
	n=$((n + 1))
	failed=$((failed + 1))
	echo "not ok $n - $*"
}
# check DESC CMD...: ok when CMD succeeds; else its output as diagnostics.
check() {
	local desc=$1
	shift
	if "$@" >"$T/out" 2>&1; then
		ok "$desc"
	else
		notok "$desc"
		head -n 40 "$T/out" | sed 's/^/# /'
	fi
}
# wait_for SECONDS CMD...: until CMD succeeds (every 0.2 s).
wait_for() {
	local end=$((SECONDS + $1))
	shift
	until "$@"; do
		[ "$SECONDS" -lt "$end" ] || return 1
		sleep 0.2
	done
}

# The resource manifests: every YAML file but the kustomization.
mapfile -t MANIFESTS < <(find "$K8S" -maxdepth 1 -name '*.yaml' ! -name kustomization.yaml | sort)

# ---- the schema validator (npm ci into the cache, once per lock file) -------

NPM_DIR=""
install_validator() {
	local hash tmp
	for b in node npm; do
		command -v $b >/dev/null || {
			echo "$b is not installed (Debian: nodejs, npm)"
			return 1
		}
	done
	hash=$(sha256sum "$VDIR/package-lock.json" | cut -c1-16)
	NPM_DIR=$CACHE_ROOT/npm-k8s-$hash
	[ -f "$NPM_DIR/.complete" ] && return 0
	mkdir -p "$CACHE_ROOT" && tmp=$(mktemp -d "$CACHE_ROOT/.npm-k8s.XXXXXX") || return 1
	if ! { cp "$VDIR/package.json" "$VDIR/package-lock.json" "$tmp/" &&
		(cd "$tmp" && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error) &&
		touch "$tmp/.complete"; }; then
		rm -rf "$tmp"
		return 1
	fi
	rm -rf "$NPM_DIR"
	mv "$tmp" "$NPM_DIR"
}
validate() { node "$VDIR/validate.mjs" --modules "$NPM_DIR" "$@"; }
# to_json FILE: the YAML documents of FILE as a JSON array.
to_json() {
	node -e 'const y = require(process.argv[1]); const fs = require("fs");
		process.stdout.write(JSON.stringify(y.loadAll(fs.readFileSync(process.argv[2], "utf8")).filter(Boolean)))' \
		"$NPM_DIR/node_modules/js-yaml" "$1"
}
# expect_invalid FILE PATTERN [BREAKAGE]: validate.mjs rejects FILE, saying
# PATTERN; FILE has the BREAKAGE (a grep pattern) that the copy was made with.
expect_invalid() {
	local rc
	if [ -n "${3:-}" ] && ! grep -q -- "$3" "$1"; then
		echo "$1 lacks the breakage '$3' (the sed that made it no longer matches)"
		return 1
	fi
	validate "$1" >"$T/inv" 2>&1
	rc=$?
	cat "$T/inv"
	[ "$rc" = 1 ] && grep -q -- "$2" "$T/inv"
}

check "schema validator installed from the pinned package-lock.json (npm ci, cached outside the tree)" install_validator
if [ -n "$NPM_DIR" ] && [ -f "$NPM_DIR/.complete" ]; then
	for f in "${MANIFESTS[@]}"; do
		check "$f validates against the Kubernetes API schema (kubernetes-models)" validate "$f"
	done
	# Broken copies, made here: the validator is not a rubber stamp.
	sed 's/^\(      hostNetwork:\) true$/\1 "yes"/' "$K8S/daemonset.yaml" >"$T/broken-hostnetwork.yaml"
	sed 's/^kind: DaemonSet$/kind: Daemonset/' "$K8S/daemonset.yaml" >"$T/broken-kind.yaml"
	check "a DaemonSet with hostNetwork: \"yes\" fails schema validation" \
		expect_invalid "$T/broken-hostnetwork.yaml" "hostNetwork must be boolean" 'hostNetwork: "yes"'
	check "a document of an unknown kind (Daemonset) fails schema validation" \
		expect_invalid "$T/broken-kind.yaml" "unknown kind" "^kind: Daemonset"
	check "the kustomization is not a Kubernetes object (validate.mjs refuses unknown apiVersions)" \
		expect_invalid "$K8S/kustomization.yaml" "unknown apiVersion"
fi

# ---- Debian's kubectl 1.20, offline -------------------------------------------

KUBECTL=""
find_kubectl() {
	local ver dir tmp
	if [ "$(dpkg-query -W -f='${Status}' kubernetes-client 2>/dev/null)" = "install ok installed" ]; then
		KUBECTL=$(dpkg -L kubernetes-client | grep -m1 '/bin/kubectl$')
	else
		ver=$(apt-cache policy kubernetes-client 2>/dev/null | awk '$1 == "Candidate:" { print $2 }')
		case $ver in
		"" | "(none)")
			echo "kubernetes-client is neither installed nor known to apt (apt-get update?)"
			return 1
			;;
		esac
		dir=$CACHE_ROOT/kubernetes-client-$ver
		if [ ! -x "$dir/usr/bin/kubectl" ]; then
			echo "kubernetes-client is not installed: unpacking Debian's package $ver into $dir"
			mkdir -p "$T/deb" "$CACHE_ROOT" || return 1
			(cd "$T/deb" && apt-get download -q "kubernetes-client=$ver" 2>&1) || return 1
			tmp=$(mktemp -d "$CACHE_ROOT/.kubernetes-client.XXXXXX") || return 1
			dpkg-deb -x "$T"/deb/kubernetes-client_*.deb "$tmp" || return 1
			rm -rf "$dir"
			mv "$tmp" "$dir"
		fi
		KUBECTL=$dir/usr/bin/kubectl
	fi
	"$KUBECTL" version --client -o json >"$T/kv" 2>&1 || {
		cat "$T/kv"
		return 1
	}
	jq -e '.clientVersion.major == "1" and .clientVersion.minor == "20"' "$T/kv" >/dev/null || {
		echo "$KUBECTL is not kubectl 1.20:"
		cat "$T/kv"
		return 1
	}
}

# An unreachable API server (port 9 of this host) with the discovery
# documents of the kinds deploy/kubernetes uses, as a 1.20+ server lists
# them, in kubectl's discovery cache (fresh: kubectl keeps them 10 minutes).
seed_discovery() {
	local d=$T/kube/cache/discovery/127.0.0.1_9
	local verbs='["create","delete","deletecollection","get","list","patch","update","watch"]'
	# res NAME KIND NAMESPACED [SHORTNAMES-JSON]
	res() { printf '{"name":"%s","singularName":"","namespaced":%s,"kind":"%s","verbs":%s,"shortNames":%s}' "$1" "$3" "$2" "$verbs" "${4:-[]}"; }
	# list GROUPVERSION RESOURCE...
	list() {
		local gv=$1 first=1 r
		shift
		printf '{"kind":"APIResourceList","apiVersion":"v1","groupVersion":"%s","resources":[' "$gv"
		for r in "$@"; do
			[ "$first" = 1 ] || printf ','
			printf '%s' "$r"
			first=0
		done
		printf ']}\n'
	}
	group() { printf '{"name":"%s","versions":[{"groupVersion":"%s","version":"v1"}],"preferredVersion":{"groupVersion":"%s","version":"v1"}}' "$1" "$2" "$2"; }
	mkdir -p "$d/v1" "$d/apps/v1" "$d/rbac.authorization.k8s.io/v1" || return 1
	printf '{"kind":"APIGroupList","apiVersion":"v1","groups":[%s,%s,%s]}\n' \
		"$(group "" v1)" "$(group apps apps/v1)" \
		"$(group rbac.authorization.k8s.io rbac.authorization.k8s.io/v1)" >"$d/servergroups.json"
	list v1 "$(res namespaces Namespace false '["ns"]')" "$(res nodes Node false '["no"]')" \
		"$(res serviceaccounts ServiceAccount true '["sa"]')" "$(res configmaps ConfigMap true '["cm"]')" \
		"$(res pods Pod true '["po"]')" >"$d/v1/serverresources.json"
	list apps/v1 "$(res daemonsets DaemonSet true '["ds"]')" "$(res deployments Deployment true '["deploy"]')" \
		>"$d/apps/v1/serverresources.json"
	list rbac.authorization.k8s.io/v1 "$(res clusterroles ClusterRole false)" \
		"$(res clusterrolebindings ClusterRoleBinding false)" "$(res roles Role true)" \
		"$(res rolebindings RoleBinding true)" >"$d/rbac.authorization.k8s.io/v1/serverresources.json"
	cat >"$T/kube/config" <<-EOF
		apiVersion: v1
		kind: Config
		clusters:
		- name: offline
		  cluster: {server: "https://127.0.0.1:9"}
		users:
		- name: offline
		  user: {token: offline}
		contexts:
		- name: offline
		  context: {cluster: offline, user: offline, namespace: default}
		current-context: offline
	EOF
}
kc() { "$KUBECTL" --kubeconfig "$T/kube/config" --cache-dir "$T/kube/cache" --request-timeout=5s "$@"; }
# dry_run FILE: kubectl create --dry-run=client of FILE names one object per document.
dry_run() {
	local docs
	kc create --dry-run=client --validate=false -o name -f "$1" >"$T/dr" 2>&1 || {
		cat "$T/dr"
		return 1
	}
	docs=$(validate "$1" | grep -c '^ok ')
	cat "$T/dr"
	[ "$(grep -c / "$T/dr")" = "$docs" ]
}
# The objects of all manifests (documents with a kind).
object_count() { cat "${MANIFESTS[@]}" | grep -c '^kind: '; }
kustomize_renders() {
	kc kustomize "$K8S" >"$T/rendered.yaml" || return 1
	validate "$T/rendered.yaml" >"$T/rv"
	local rc=$?
	cat "$T/rv"
	[ "$rc" = 0 ] && [ "$(grep -c '^ok ' "$T/rv")" = "$(object_count)" ]
}
dry_run_kustomization() {
	kc create --dry-run=client --validate=false -o name -k "$K8S" >"$T/k" 2>&1
	local rc=$?
	cat "$T/k"
	[ "$rc" = 0 ] && [ "$(grep -c / "$T/k")" = "$(object_count)" ]
}
expect_dry_run_failure() {
	! kc create --dry-run=client --validate=false -o name -f "$1" >"$T/dr" 2>&1 &&
		grep -q 'unable to recognize' "$T/dr"
}

check "Debian's kubectl 1.20 (kubernetes-client)" find_kubectl
if [ -n "$KUBECTL" ] && [ -x "$KUBECTL" ] && seed_discovery; then
	for f in "${MANIFESTS[@]}"; do
		check "kubectl create --dry-run=client $f (offline)" dry_run "$f"
	done
	check "kubectl create --dry-run=client of an unknown kind fails offline" \
		expect_dry_run_failure "$T/broken-kind.yaml"
	check "kubectl kustomize $K8S renders every manifest's objects, valid" kustomize_renders
	check "kubectl create --dry-run=client -k $K8S (offline)" dry_run_kustomization
fi

# ---- what the manifests say -----------------------------------------------------

# kustomization.yaml lists exactly the manifests of the directory.
kustomization_complete() {
	local listed present
	listed=$(sed -n '/^resources:/,/^[a-z]/s/^  - //p' "$K8S/kustomization.yaml" | sort)
	present=$(printf '%s\n' "${MANIFESTS[@]}" | sed 's|.*/||' | sort)
	[ "$listed" = "$present" ] || {
		echo "listed:"
		echo "$listed"
		echo "present:"
		echo "$present"
		return 1
	}
}
check "kustomization.yaml lists every manifest of $K8S" kustomization_complete

daemonset_policy() {
	to_json "$K8S/daemonset.yaml" >"$T/ds.json" || return 1
	jq -e --arg caps "$CAPS_WANTED" '
		.[0].spec.template.spec as $p | $p.containers[0] as $c | $c.securityContext as $s |
		[ ($p.hostNetwork == true), ($p.hostPID == true),
		  ($p.priorityClassName == "system-node-critical"),
		  (.[0].spec.updateStrategy.type == "RollingUpdate"),
		  ($s.privileged == false), ($s.allowPrivilegeEscalation == false),
		  ($s.readOnlyRootFilesystem == true), ($s.seccompProfile.type == "RuntimeDefault"),
		  ($s.capabilities.drop == ["ALL"]),
		  (($s.capabilities.add | sort | join(" ")) == $caps),
		  ([$c.volumeMounts[] | select(.mountPath == "/host")][0].mountPropagation == "HostToContainer"),
		  ([$p.volumes[] | select(.name == "host")][0].hostPath.path == "/"),
		  ($c.resources.requests.cpu != null and $c.resources.requests.memory != null),
		  ($c.resources.limits.cpu != null and $c.resources.limits.memory != null),
		  ([$c.env[] | select(.name == "NODE_NAME")][0].valueFrom.fieldRef.fieldPath == "spec.nodeName"),
		  ([$c.env[] | select(.name == "MLTUNE_OFF_ON_EXIT")][0].value == "false"),
		  ([$c.env[] | select(.name == "MLTUNE_TAINT")][0].value == "mltune.io/unverified"),
		  any($p.tolerations[]; .key == "mltune.io/unverified" and .operator == "Exists" and .effect == "NoSchedule"),
		  ($c.image | test(":latest$") | not),
		  ($p.serviceAccountName == "mltune") ] | all' "$T/ds.json" >/dev/null || {
		echo "the DaemonSet lacks one of: hostNetwork, hostPID, system-node-critical, RollingUpdate,"
		echo "privileged false, allowPrivilegeEscalation false, readOnlyRootFilesystem, seccomp RuntimeDefault,"
		echo "drop ALL, add exactly $CAPS_WANTED, / at /host with HostToContainer, requests and limits,"
		echo "NODE_NAME from spec.nodeName, MLTUNE_OFF_ON_EXIT false (hand-over), MLTUNE_TAINT mltune.io/unverified"
		echo "and its toleration, a non-latest image, serviceAccountName mltune"
		jq '.[0].spec.template.spec.containers[0].securityContext' "$T/ds.json"
		return 1
	}
	# A comment above every added capability says why.
	awk '/^ +add:$/ { inadd = 1; next }
		inadd && /^ +- [A-Z_]+$/ { if (prev !~ /^ +#/) { print "no comment above " $2; bad = 1 } }
		inadd && !/^ +(#|- )/ { inadd = 0 }
		{ prev = $0 }
		END { exit bad }' "$K8S/daemonset.yaml"
}
check "DaemonSet: host namespaces, / at /host (HostToContainer), no privileged, drop ALL + $CAPS_WANTED each with its reason, critical priority, rolling update, resources, hand-over on exit, the taint and its toleration" daemonset_policy

rbac_least() {
	to_json "$K8S/rbac.yaml" >"$T/rbac.json" || return 1
	if ! jq -e '[.[] | select(.kind == "ClusterRole")] as $r | ($r | length) == 1 and
		$r[0].rules == [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "patch"]}]' "$T/rbac.json" >/dev/null ||
		! jq -e '[.[] | select(.kind == "ClusterRoleBinding")][0] |
			.roleRef.name == "mltune-node-tainter" and .subjects == [{"kind": "ServiceAccount", "name": "mltune", "namespace": "mltune-system"}]' \
			"$T/rbac.json" >/dev/null; then
		jq . "$T/rbac.json"
		return 1
	fi
	# No other RBAC object anywhere.
	! grep -l '^kind: \(Role\|RoleBinding\)$' "${MANIFESTS[@]}"
}
check "RBAC: get and patch (the taint) on nodes only, bound to the mltune service account" rbac_least

labels_everywhere() {
	local f bad=0
	for f in "${MANIFESTS[@]}"; do
		to_json "$f" | jq -e 'all(.[]; .metadata.labels["app.kubernetes.io/name"] == "mltune" and
			.metadata.labels["app.kubernetes.io/part-of"] == "mltune")' >/dev/null || {
			echo "$f: an object without app.kubernetes.io/name and part-of = mltune"
			bad=1
		}
	done
	return $bad
}
check "every object carries the app.kubernetes.io labels" labels_everywhere

# The ConfigMap's profiles load (include training, values in range).
configmap_profiles() {
	local f
	to_json "$K8S/configmap-profiles.yaml" >"$T/cm.json" || return 1
	mkdir -p "$T/cm"
	jq -r '.[0].data | keys[]' "$T/cm.json" >"$T/cm.keys"
	[ -s "$T/cm.keys" ] || {
		echo "no profile in the ConfigMap"
		return 1
	}
	while read -r f; do
		jq -j --arg k "$f" '.[0].data[$k]' "$T/cm.json" >"$T/cm/$f"
		"$M" profile check "$T/cm/$f" || return 1
	done <"$T/cm.keys"
	grep -q '^include = \["training"\]' "$T/cm/site-training.toml" || {
		echo "site-training.toml does not include training"
		return 1
	}
}
check "ConfigMap mltune-profiles: every profile passes mltunectl profile check (site-training includes training)" configmap_profiles

# ---- Containerfile and entrypoint -------------------------------------------

containerfile_lint() {
	local args image ref bad=0 dest
	# ARG defaults before the first FROM, then every FROM resolved with them.
	args=$(sed -n '1,/^FROM /s/^ARG \([A-Za-z_][A-Za-z0-9_]*\)=\(.*\)$/\1=\2/p' "$CF")
	grep -q '^FROM ' "$CF" || {
		echo "no FROM"
		return 1
	}
	while read -r image; do
		ref=$image
		while read -r kv; do
			[ -n "$kv" ] || continue
			ref=${ref//\$\{${kv%%=*}\}/${kv#*=}}
			ref=${ref//\$${kv%%=*}/${kv#*=}}
		done <<<"$args"
		case $ref in
		*'$'*) echo "FROM $image: unresolved ($ref)" && bad=1 ;;
		*@sha256:*) [[ $ref =~ @sha256:[0-9a-f]{64}$ ]] || { echo "FROM $ref: malformed digest" && bad=1; } ;;
		*:latest) echo "FROM $ref: 'latest' is not a pin" && bad=1 ;;
		*/*:* | [!/]*:*) ;; # a tag on the last component
		*) echo "FROM $ref: neither a tag nor a digest" && bad=1 ;;
		esac
		case $ref in
		*debian:bookworm* | *debian:12*) ;;
		*) echo "FROM $ref: not Debian 12 (bookworm)" && bad=1 ;;
		esac
	done < <(sed -n 's/^FROM \([^ ]*\).*/\1/p' "$CF")
	grep -q '^USER ' "$CF" || {
		echo "no USER"
		bad=1
	}
	grep -q '^ENTRYPOINT \["' "$CF" || {
		echo "no ENTRYPOINT in exec form"
		bad=1
	}
	dest=$(sed -n 's/^COPY entrypoint\.sh \([^ ]*\)$/\1/p' "$CF")
	if [ -z "$dest" ] || ! grep -q "^ENTRYPOINT \[\"$dest\"\]" "$CF"; then
		echo "ENTRYPOINT is not the copied entrypoint.sh ($dest)"
		bad=1
	fi
	grep -q 'mltunectl_\*\.deb' "$CF" || {
		echo "the mltunectl package is not installed from the build context"
		bad=1
	}
	if grep 'apt-get install' "$CF" | grep -qv -- '--no-install-recommends'; then
		echo "apt-get install without --no-install-recommends"
		bad=1
	fi
	grep -q 'rm -rf /var/lib/apt/lists' "$CF" || {
		echo "the apt lists stay in the image"
		bad=1
	}
	return $bad
}
check "Containerfile: Debian 12 base pinned by tag or digest (no latest), package from the context, USER and ENTRYPOINT" containerfile_lint
check "entrypoint.sh: bash -n" bash -n "$EP"
# scripts/deps.sh installs shellcheck: without it, this check fails.
check "entrypoint.sh and k8s.sh: shellcheck" shellcheck -x "$EP" "$ROOT/tests/fleet/k8s.sh"

# ---- the entrypoint against a fake node ---------------------------------------

FIX=$T/node
make_node() {
	[ -x "$M" ] || {
		echo "no mltunectl at $M (build it first)"
		return 1
	}
	python3 "$ROOT/tests/fixtures/gen_fixtures.py" "$T/fx" workstation-1gpu >/dev/null || return 1
	mv "$T/fx/workstation-1gpu" "$FIX" || return 1
	# The knob files of every profile used below, as a node has them.
	{
		for p in training inference "$T/cm/site-training.toml"; do
			"$M" --json profile show "$p" | jq -r '.knobs[].path'
		done
	} | sort -u | while read -r path; do
		mkdir -p "$FIX${path%/*}"
		case $path in
		*transparent_hugepage/enabled) echo "always [madvise] never" ;;
		*transparent_hugepage/defrag) echo "always defer defer+madvise [madvise] never" ;;
		*tcp_rmem | *tcp_wmem) echo "4096 131072 6291456" ;;
		*congestion_control) echo cubic ;;
		*) echo 7 ;;
		esac >"$FIX$path"
	done
	mkdir -p "$FIX/var/lib/prometheus/node-exporter" "$FIX/etc/mltune/profiles"
	# The node's own profile "hostown" (no marker) and the ConfigMap's one of
	# that name; a ConfigMap profile that does not load.
	printf 'description = "the node'\''s own"\ninclude = ["inference"]\n' >"$FIX/etc/mltune/profiles/hostown.toml"
	mkdir -p "$T/profiles"
	cp "$T/cm/"*.toml "$T/profiles/"
	printf 'include = ["training"]\n' >"$T/profiles/hostown.toml"
	printf '[sysctl]\n"vm.swappiness" = { value = 5, resaon = "typo" }\n' >"$T/profiles/broken.toml"
	# The entrypoint labels conformance from `mltunectl conformance`.
	"$M" conformance --help >/dev/null 2>&1 || {
		echo "$M has no conformance subcommand"
		return 1
	}
}
check "fake node: fixture workstation-1gpu with the profiles' knob files" make_node

knob() { tr -d '\n' <"$FIX/proc/sys/$1"; }
feature() { grep -qx -- "$1" "$FIX/etc/kubernetes/node-feature-discovery/features.d/mltune" 2>/dev/null; }
FEAT=$FIX/etc/kubernetes/node-feature-discovery/features.d/mltune
# run_ep LOG ENV...: the entrypoint in the background, every second, on FIX.
run_ep() {
	local log=$1
	shift
	env MLTUNE_SYSROOT="$FIX" MLTUNE_BIN="$M" MLTUNE_INTERVAL=1 MLTUNE_REQUIRE_HOST_NAMESPACES=false \
		MLTUNE_PROFILE_DIR="$T/profiles" MLTUNE_READY_FILE="$T/ready" "$@" "$EP" 2>"$log" &
	EP_PID=$!
	PIDS+=("$EP_PID")
}
# stop_ep: SIGTERM, and the entrypoint exits 0 within 15 s.
stop_ep() {
	local _
	kill -TERM "$EP_PID" 2>/dev/null || return 1
	for _ in $(seq 75); do
		kill -0 "$EP_PID" 2>/dev/null || break
		sleep 0.2
	done
	if kill -0 "$EP_PID" 2>/dev/null; then
		echo "still running 15 s after SIGTERM"
		return 1
	fi
	wait "$EP_PID"
}

# The checks of the entrypoint's runs (each prints what it saw on failure).
ep_switched() {
	wait_for 20 feature "mltune.io/active-profile=site-training" &&
		wait_for 10 grep -qx "mltune.io/conformance=[0-9a-f]\{8\}" "$FEAT" &&
		[ "$(knob vm/dirty_ratio)" = 20 ] && [ -e "$T/ready" ] && return 0
	cat "$FEAT" "$T/ep1.log"
	return 1
}
ep_synced() {
	head -n 1 "$FIX/etc/mltune/profiles/site-training.toml" | grep -q "^# Managed by the mltune DaemonSet" &&
		grep -q "the node's own" "$FIX/etc/mltune/profiles/hostown.toml" &&
		[ ! -e "$FIX/etc/mltune/profiles/broken.toml" ] && grep -q "profile broken .* refused" "$T/ep1.log" &&
		grep -q "not installing profile hostown" "$T/ep1.log" &&
		[ -z "$(find "$FIX/etc/mltune/profiles" "${FEAT%/*}" -name ".mltune*")" ] && return 0
	cat "$T/ep1.log"
	return 1
}
ep_published() {
	local prom=$FIX/var/lib/prometheus/node-exporter/mltune.prom
	grep -q '^# +expiry-time=20[0-9-]*T[0-9:]*Z$' "$FEAT" &&
		grep -q '^mltune_profile_active{profile="site-training"' "$prom" && return 0
	cat "$FEAT"
	head -n 5 "$prom"
	return 1
}
ep_drift() {
	wait_for 10 feature "mltune.io/conformance=drifted" && [ "$(knob vm/swappiness)" = 60 ] &&
		wait_for 5 grep -q "verify site-training (exit 1)" "$T/ep1.log" && return 0
	cat "$FEAT" "$T/ep1.log"
	return 1
}
ep_off() {
	stop_ep && [ "$(knob vm/dirty_ratio)" = "$BEFORE" ] && [ ! -e "$FEAT" ] && [ ! -e "$T/ready" ] &&
		grep -q "SIGTERM: mltunectl off (exit 0)" "$T/ep1.log" && return 0
	cat "$T/ep1.log"
	return 1
}
# The fake API server's node (tests/fleet/fake-kube-api.py).
NODE_JSON_FILE=$T/api/node.json
# api_edit FILTER: the node changed by the jq FILTER, as an edit through the
# API would (resourceVersion bumped).
api_edit() {
	jq "$1 | .metadata.resourceVersion = (.metadata.resourceVersion | tonumber + 1 | tostring)" \
		"$NODE_JSON_FILE" >"$T/api/.edit" && mv "$T/api/.edit" "$NODE_JSON_FILE"
}
api_tainted() { jq -e 'any(.spec.taints[]?; .key == "mltune.io/unverified" and .effect == "NoSchedule")' "$NODE_JSON_FILE" >/dev/null; }
api_untainted() { ! api_tainted; }
# requests_since N PATTERN: a request after the first N matches PATTERN.
requests_since() { tail -n +"$(($1 + 1))" "$T/api/requests" | grep -q -- "$2"; }
request_count() { wc -l <"$T/api/requests"; }
ep_log_has() { grep -q -- "$2" "$1"; }

# The taint: a node whose first verify has not passed gets it at once, and
# keeps it while the switch fails (a knob file the node cannot write).
ep_tainted_while_failing() {
	local n
	wait_for 20 api_tainted && wait_for 20 ep_log_has "$T/ep2.log" "switching to stuck failed" &&
		[ ! -e "$T/ready" ] && n=$(request_count) &&
		wait_for 20 requests_since "$n" "^GET " && wait_for 20 requests_since "$((n + 1))" "^GET " &&
		api_tainted && grep -q "^PATCH /api/v1/nodes/gpu-node-1|Bearer k8s-test-token|.*|application/merge-patch+json|.*\"resourceVersion\"" \
		"$T/api/requests" && return 0
	cat "$T/ep2.log"
	cat "$NODE_JSON_FILE"
	tail -n 5 "$T/api/requests"
	return 1
}
ep_untainted_after_verify() {
	local verified removed
	wait_for 30 api_untainted && [ -e "$T/ready" ] &&
		verified=$(grep -n "verify stuck: the node matches" "$T/ep2.log" | head -n 1 | cut -d: -f1) &&
		removed=$(grep -n "removed the taint mltune.io/unverified" "$T/ep2.log" | head -n 1 | cut -d: -f1) &&
		[ -n "$verified" ] && [ -n "$removed" ] && [ "$verified" -lt "$removed" ] &&
		jq -e '.verified == true' "$FIX/run/mltune/daemonset.json" >/dev/null && return 0
	cat "$T/ep2.log"
	cat "$NODE_JSON_FILE"
	return 1
}
ep_label() {
	wait_for 20 feature "mltune.io/active-profile=inference" && [ "$(knob vm/swappiness)" = 0 ] &&
		grep -q "^GET /api/v1/nodes/gpu-node-1?resourceVersion=0|Bearer k8s-test-token|application/json|" \
			"$T/api/requests" && return 0
	cat "$T/ep2.log"
	tail -n 3 "$T/api/requests"
	return 1
}
ep_default() {
	wait_for 20 feature "mltune.io/active-profile=site-training" && return 0
	cat "$T/ep2.log"
	return 1
}
ep_api_down() {
	wait_for 20 ep_log_has "$T/ep2.log" "cannot read node gpu-node-1" &&
		feature "mltune.io/active-profile=site-training" && [ "$(knob vm/dirty_ratio)" = 20 ] && return 0
	cat "$T/ep2.log"
	return 1
}
ep_keep() {
	stop_ep && [ "$(knob vm/dirty_ratio)" = 20 ] && feature "mltune.io/active-profile=site-training" &&
		grep -q "leaving the node as it is for the next pod (MLTUNE_OFF_ON_EXIT=false)" "$T/ep2.log" && return 0
	cat "$T/ep2.log"
	return 1
}
# A new pod (a rolling update) adopts the node: no switch, no taint, ready.
ep_adopted() {
	wait_for 20 test -e "$T/ready" &&
		grep -q "adopted the node's state: site-training is active and the node's record names this content" "$T/ep3.log" &&
		! grep -q "node switched" "$T/ep3.log" && ! requests_since "$REQ3" "^PATCH " && api_untainted &&
		wait_for 20 feature "mltune.io/conformance=[0-9a-f]\{8\}" && return 0
	cat "$T/ep3.log"
	tail -n 5 "$T/api/requests"
	return 1
}
ep_handover_twice() {
	stop_ep && [ "$(knob vm/dirty_ratio)" = 20 ] && grep -q "leaving the node as it is" "$T/ep3.log" && return 0
	cat "$T/ep3.log"
	return 1
}

# The fake API server (tests/fleet/fake-kube-api.py): node gpu-node-1,
# labelled mltune.io/profile=stuck, untainted; token k8s-test-token.
start_api() {
	mkdir -p "$T/api/sa" || return 1
	printf 'k8s-test-token' >"$T/api/sa/token"
	cp "$T/api/sa/token" "$T/api/token"
	: >"$T/api/sa/ca.crt"
	jq -n '{kind: "Node", apiVersion: "v1",
		metadata: {name: "gpu-node-1", resourceVersion: "1",
			labels: {"kubernetes.io/hostname": "gpu-node-1", "mltune.io/profile": "stuck"}},
		spec: {}}' >"$NODE_JSON_FILE" || return 1
	python3 "$ROOT/tests/fleet/fake-kube-api.py" "$T/api" &
	PIDS+=("$!")
	wait_for 10 test -s "$T/api/port"
}
api_env() {
	echo NODE_NAME=gpu-node-1 MLTUNE_API_SERVER="http://127.0.0.1:$(cat "$T/api/port")" \
		MLTUNE_SA_DIR="$T/api/sa" MLTUNE_DEFAULT_PROFILE_FILE="$T/api/default-profile"
}

# expect_refusal SYSROOT PATTERN: the entrypoint exits 1 at once, saying PATTERN.
expect_refusal() {
	local rc
	env MLTUNE_SYSROOT="$1" MLTUNE_BIN="$M" MLTUNE_PROFILE=training MLTUNE_READY_FILE="$T/ready" \
		timeout 20 "$EP" >"$T/refusal" 2>&1
	rc=$?
	cat "$T/refusal"
	[ "$rc" = 1 ] && grep -q -- "$2" "$T/refusal"
}
refuses_window() {
	local rc
	env MLTUNE_SYSROOT="$FIX" MLTUNE_BIN="$M" MLTUNE_PROFILE=training MLTUNE_READY_FILE="$T/ready" \
		MLTUNE_REQUIRE_HOST_NAMESPACES=false MLTUNE_DISRUPTIVE_WINDOW=22:00-25:00 \
		timeout 20 "$EP" >"$T/refusal" 2>&1
	rc=$?
	cat "$T/refusal"
	[ "$rc" = 1 ] && grep -q "MLTUNE_DISRUPTIVE_WINDOW must be HH:MM-HH:MM (UTC), not '22:00-25:00'" "$T/refusal"
}
refuses_namespaces() {
	# A root whose PID 1 is in other namespaces than this process (links
	# as the kernel names them), and the fixture, which has no /proc/1/ns.
	mkdir -p "$T/other/proc/1/ns" &&
		ln -sfn 'net:[1]' "$T/other/proc/1/ns/net" && ln -sfn 'pid:[1]' "$T/other/proc/1/ns/pid" &&
		expect_refusal "$T/other" "run it with hostNetwork: true and hostPID: true" &&
		expect_refusal "$FIX" "is not the root of a running node"
}

if [ -d "$FIX/proc" ]; then
	check "entrypoint refuses to start outside the node's namespaces (no hostNetwork/hostPID) and on a file tree" refuses_namespaces
	check "entrypoint refuses a malformed MLTUNE_DISRUPTIVE_WINDOW" refuses_window

	# 1. MLTUNE_PROFILE names a site profile of the ConfigMap.
	BEFORE=$(knob vm/dirty_ratio)
	run_ep "$T/ep1.log" MLTUNE_PROFILE=site-training MLTUNE_OFF_ON_EXIT=true
	check "entrypoint: switch site-training, verify, NFD labels active-profile and conformance (8 hex digits)" ep_switched
	check "entrypoint: ConfigMap profiles installed with the marker line; the node's own hostown.toml kept; a broken one refused" ep_synced
	check "entrypoint: NFD feature file carries an expiry time; metrics written for node_exporter" ep_published
	echo 60 >"$FIX/proc/sys/vm/swappiness"
	check "entrypoint: a setting changed behind its back is reported (conformance=drifted, verify logged), not undone" ep_drift
	check "entrypoint: with MLTUNE_OFF_ON_EXIT=true SIGTERM runs mltunectl off (node back on its baseline), removes the labels, exits 0" ep_off

	# 2. The profile from the node label, through a fake API server. The
	# node asks first for "stuck", whose vm.stat_interval the node cannot
	# write (a directory there): tainted until the first verify passes.
	printf 'include = ["inference"]\n[sysctl]\n"vm.stat_interval" = { value = 2, reason = "test" }\n' \
		>"$T/profiles/stuck.toml"
	rm -rf "$FIX/proc/sys/vm/stat_interval" && mkdir -p "$FIX/proc/sys/vm/stat_interval"
	if start_api; then
		echo site-training >"$T/api/default-profile"
		# shellcheck disable=SC2046 # api_env: NAME=VALUE words without spaces
		run_ep "$T/ep2.log" $(api_env)
		check "entrypoint: a node whose first verify has not passed is tainted mltune.io/unverified:NoSchedule (merge patch with its resourceVersion), and stays tainted while the switch fails" \
			ep_tainted_while_failing
		rmdir "$FIX/proc/sys/vm/stat_interval" && echo 1 >"$FIX/proc/sys/vm/stat_interval"
		check "entrypoint: the taint comes off after the first verify that passes (recorded on the node)" \
			ep_untainted_after_verify
		api_edit '.metadata.labels["mltune.io/profile"] = "inference"'
		check "entrypoint: profile from the node label mltune.io/profile=inference (API, service account token)" ep_label
		api_edit 'del(.metadata.labels["mltune.io/profile"])'
		check "entrypoint: a node without the label gets the default of ConfigMap mltune-config (site-training)" ep_default
		echo error >"$T/api/mode"
		check "entrypoint: while the API server fails, the node keeps its profile" ep_api_down
		: >"$T/api/mode"
		check "entrypoint: SIGTERM (MLTUNE_OFF_ON_EXIT unset: false) hands the node over: profile and labels stay" ep_keep

		# 3. The next pod (a rolling update): adopts the node, switches
		# nothing, puts no taint on it.
		REQ3=$(request_count)
		# shellcheck disable=SC2046
		run_ep "$T/ep3.log" $(api_env)
		check "entrypoint: a new pod adopts the node (no switch, no taint, ready, labels rewritten)" ep_adopted
		check "entrypoint: and hands it over again on SIGTERM" ep_handover_twice
	else
		notok "fake API server started (python3)"
	fi
	"$M" --sysroot "$FIX" off >/dev/null 2>&1
fi

[ "$failed" = 0 ]
