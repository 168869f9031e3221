#!/bin/bash
# Every mltunectl subcommand run with --sysroot on a fixture touches nothing
# outside it: under strace, any file outside the tree, any netlink or other
# socket, and any program started other than mltunectl itself fails the
# command's check. The exit code of the command does not matter (several
# refuse a tree on purpose); what it touches does.
#
#   tests/host/sysroot_sandbox.sh [MLTUNECTL] [FIXTURES_DIR]
#
# Allowed outside the tree, the process's own runtime: /proc/self and
# /proc/thread-self (its own status, namespaces, limits), /dev/null,
# glibc's sysconf reads of /sys/devices/system/cpu/{online,possible}, the
# mltunectl binary itself, and the directories above the tree (resolving
# its own path).  Prints TAP and "# Totals:".
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
M=${1:-$ROOT/build/userspace/mltunectl}
FIXTURES=${2:-$ROOT/build/userspace/tests/unit/fixtures}
command -v strace >/dev/null || { echo "1..0 # SKIP strace is not installed"; exit 0; }
[ -x "$M" ] && [ -d "$FIXTURES/hgx-2s-8gpu" ] || { echo "1..0 # SKIP build mltunectl and the fixtures first"; exit 0; }

T=$(mktemp -d /tmp/mltune-sandbox.XXXXXX)
trap 'rm -rf "$T"' EXIT
FIX=$T/node
cp -a "$FIXTURES/hgx-2s-8gpu" "$FIX"
# The files of both shipped profiles' knobs, as a writable node has them.
for p in training inference; do
	"$M" --json profile show $p | jq -r '.knobs[].path'
done | sort -u | while read -r path; do
	mkdir -p "$FIX$(dirname "$path")"
	case $path in
	*transparent_hugepage/enabled) echo "always [madvise] never" ;;
	*transparent_hugepage/defrag) echo "always defer defer+madvise [madvise] never" ;;
	*tcp_rmem|*tcp_wmem) echo "4096 131072 6291456" ;;
	*congestion_control) echo cubic ;;
	*) echo 0 ;;
	esac >"$FIX$path"
done
printf '[sysctl]\n"vm.swappiness" = { value = 5 }\n' >"$FIX/check.toml"

cmds=(
	"profile list" "profile show training" "profile check $FIX/check.toml"
	"audit" "--json audit" "verify training" "--json verify inference" "diff training inference"
	"--dry-run switch training" "switch training" "switch inference" "active" "--json status"
	"recommend" "metrics" "metrics -o /var/lib/prometheus/node-exporter/mltune.prom" "conformance"
	"off" "switch training" "switch baseline" "off"
	"persist --profile training" "config show" "config check" "--dry-run config apply" "persist --remove"
	"topology" "--json topology" "plan" "exec --gpu 0 --dry-run -- true"
	"boot show" "boot apply" "boot verify" "boot remove"
	"nic show" "nic diff -p training"
	"sched list --profile training" "sched apply --profile training" "sched reset"
	"sched watch --profile training"
	"feeder status" "feeder on --cpus 2-3" "feeder off"
	"pool status" "noise --duration 0.2 --probe proc" "drift status"
)
echo "TAP version 13"
echo "1..$((${#cmds[@]} + 1))"
n=0 pass=0 fail=0
outside() { # outside LOG: paths, sockets and programs outside the tree, one a line
	awk -v fix="$FIX" -v self="$M" '
	function allowed(p) {
		# the tree, or a directory above it (resolving the path of the tree)
		return index(p, fix) == 1 || index(fix, p "/") == 1 || p == self ||
			p ~ /^\/proc\/(self|thread-self)(\/|$)/ ||
			p == "/dev/null" || p ~ /^\/sys\/devices\/system\/cpu\/(online|possible)$/
	}
	/^[0-9]+ +socket\(/ { print "socket: " $0; next }
	/^[0-9]+ +execve\(/ { if (match($0, /"[^"]*"/) && !allowed(substr($0, RSTART + 1, RLENGTH - 2))) print "exec: " $0; next }
	/"/ {
		if (match($0, /"\/[^"]*"/)) {
			p = substr($0, RSTART + 1, RLENGTH - 2)
			if (!allowed(p)) print "file: " $0
		}
	}' "$1"
}
for c in "${cmds[@]}"; do
	n=$((n + 1))
	# shellcheck disable=SC2086 # the command's words
	strace -f -qq -e trace=%file,%network,execve -o "$T/log" "$M" --sysroot "$FIX" $c >"$T/out" 2>&1
	rc=$?
	bad=$(outside "$T/log" | sort -u)
	if [ -z "$bad" ]; then
		echo "ok $n mltunectl --sysroot FIX $c (exit $rc): nothing outside the tree"
		pass=$((pass + 1))
	else
		echo "not ok $n mltunectl --sysroot FIX $c (exit $rc)"
		echo "$bad" | head -n 10 | sed 's/^/# /'
		fail=$((fail + 1))
	fi
done
# The metrics are valid for Prometheus (promtool, Debian's prometheus
# package) and follow a switch: the active profile's series and the state
# of its domains change with it.
n=$((n + 1))
if ! command -v promtool >/dev/null; then
	echo "not ok $n metrics: promtool is not installed (scripts/deps.sh installs prometheus)"
	fail=$((fail + 1))
else
	prom=$FIX/var/lib/prometheus/node-exporter/mltune.prom
	bad=""
	"$M" --sysroot "$FIX" off >/dev/null 2>&1
	"$M" --sysroot "$FIX" metrics -o /var/lib/prometheus/node-exporter/mltune.prom || bad="metrics -o failed"
	before=$(cat "$prom" 2>/dev/null)
	promtool check metrics <"$prom" >"$T/lint" 2>&1 || bad="$bad; promtool (off): $(head -c 300 "$T/lint")"
	grep -q '^mltune_profile_active' "$prom" && bad="$bad; a profile is active after off"
	grep -q '^mltune_in_line 0$' "$prom" || bad="$bad; in_line is not 0 after off"
	"$M" --sysroot "$FIX" switch training >/dev/null 2>&1 || bad="$bad; switch training failed"
	"$M" --sysroot "$FIX" metrics -o /var/lib/prometheus/node-exporter/mltune.prom || bad="$bad; metrics -o failed"
	promtool check metrics <"$prom" >"$T/lint" 2>&1 || bad="$bad; promtool (training): $(head -c 300 "$T/lint")"
	grep -q '^mltune_profile_active{profile="training",backend="direct"} 1$' "$prom" ||
		bad="$bad; no mltune_profile_active for training"
	grep -q '^mltune_domain_state{domain="knobs",state="applied"} 1$' "$prom" || bad="$bad; knobs not applied"
	[ "$before" != "$(cat "$prom")" ] || bad="$bad; the metrics did not change with the switch"
	"$M" --sysroot "$FIX" off >/dev/null 2>&1
	if [ -z "$bad" ]; then
		echo "ok $n metrics: promtool check metrics passes, and the series follow off and switch training"
		pass=$((pass + 1))
	else
		echo "not ok $n metrics:$bad"
		fail=$((fail + 1))
	fi
fi
# The Grafana dashboard (deploy/grafana) asks only for metrics mltunectl
# writes, and every query is PromQL that promtool parses (as recording rules,
# the template variable $instance replaced by a regex).
n=$((n + 1))
dash=$ROOT/deploy/grafana/mltune-dashboard.json
if ! command -v promtool >/dev/null || ! command -v jq >/dev/null; then
	echo "not ok $n dashboard: promtool or jq is not installed (scripts/deps.sh installs them)"
	fail=$((fail + 1))
else
	bad=""
	"$M" --sysroot "$FIX" switch training >/dev/null 2>&1 || bad="switch training failed"
	"$M" --sysroot "$FIX" metrics >"$T/metrics" 2>&1 || bad="$bad; metrics failed"
	"$M" --sysroot "$FIX" off >/dev/null 2>&1
	jq -r '.. | objects | .expr? // empty' "$dash" >"$T/exprs" || bad="$bad; $dash is not JSON"
	[ -s "$T/exprs" ] || bad="$bad; no query in the dashboard"
	for m in $(grep -oE 'mltune_[a-z_]+' "$T/exprs" | sort -u); do
		grep -q "^# TYPE $m " "$T/metrics" || bad="$bad; $m is not a metric of mltunectl metrics"
	done
	{
		echo "groups:"
		echo "- name: dashboard"
		echo "  rules:"
		i=0
		while read -r e; do
			i=$((i + 1))
			printf '  - record: dashboard:query_%d\n    expr: %s\n' "$i" \
				"$(printf '%s' "$e" | sed 's/\$instance/.*/g' | jq -Rs .)"
		done <"$T/exprs"
	} >"$T/rules.yml"
	promtool check rules "$T/rules.yml" >"$T/rules.log" 2>&1 || bad="$bad; promtool: $(head -c 300 "$T/rules.log")"
	if [ -z "$bad" ]; then
		echo "ok $n dashboard: $(wc -l <"$T/exprs") queries parse and name only metrics mltunectl writes"
		pass=$((pass + 1))
	else
		echo "not ok $n dashboard:$bad"
		fail=$((fail + 1))
	fi
fi
echo "# Totals: pass:$pass fail:$fail xfail:0 xpass:0 skip:0 error:0"
[ "$fail" = 0 ]
