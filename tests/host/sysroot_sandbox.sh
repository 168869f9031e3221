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
node_tree() { # node_tree FIXTURE DIR: a writable copy, as a node has it
	cp -a "$FIXTURES/$1" "$2"
	# node_exporter's textfile directory (metrics -o makes no directory)
	mkdir -p "$2/var/lib/prometheus/node-exporter"
	# The files of both shipped profiles' knobs, as a writable node has them.
	for p in training inference; do
		"$M" --json profile show $p | jq -r '.knobs[].path'
	done | sort -u | while read -r path; do
		mkdir -p "$2$(dirname "$path")"
		case $path in
		*transparent_hugepage/enabled) echo "always [madvise] never" ;;
		*transparent_hugepage/defrag) echo "always defer defer+madvise [madvise] never" ;;
		*tcp_rmem|*tcp_wmem) echo "4096 131072 6291456" ;;
		*congestion_control) echo cubic ;;
		*) echo 0 ;;
		esac >"$2$path"
	done
	printf '[sysctl]\n"vm.swappiness" = { value = 5 }\n' >"$2/check.toml"
}
node_tree hgx-2s-8gpu "$FIX"

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
	"prove training --cpus 0 --rounds 1 --seconds 0.2 --probe proc" "off"
)
echo "TAP version 13"
n=0 pass=0 fail=0
outside() { # outside LOG [TREE]: paths, sockets and programs outside the tree, one a line
	awk -v fix="${2:-$FIX}" -v self="$M" '
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
# confined LABEL TREE CMD [STRACE OPTIONS...]: one TAP line, ok when the
# command run with --sysroot TREE under strace touched nothing outside it.
confined() {
	local label=$1 tree=$2 c=$3 rc bad
	shift 3
	n=$((n + 1))
	# shellcheck disable=SC2086 # the command's words
	strace "$@" -f -qq -e trace=%file,%network,execve -o "$T/log" "$M" --sysroot "$tree" $c >"$T/out" 2>&1
	rc=$?
	bad=$(outside "$T/log" "$tree" | sort -u)
	if [ -z "$bad" ]; then
		echo "ok $n mltunectl --sysroot $label $c (exit $rc): nothing outside the tree"
		pass=$((pass + 1))
	else
		echo "not ok $n mltunectl --sysroot $label $c (exit $rc)"
		echo "$bad" | head -n 10 | sed 's/^/# /'
		fail=$((fail + 1))
	fi
}
for c in "${cmds[@]}"; do
	confined FIX "$FIX" "$c"
done
# The same on the 1024-CPU tree (xl-8s-1024cpu: 1024 CPUs, 40 NICs, 3,945
# IRQs, /proc/interrupts of 45 MB), for the looking commands whose work
# grows with the node: they discover the whole topology. They change
# nothing, so they run on the generated tree itself: a copy of its 23,000
# files takes some 8 s here, and the writers' paths do not depend on the
# node's size (they run on the 8-GPU copy above and the hostile trees
# below). strace stops only at the traced calls (--seccomp-bpf): about 2 s
# per discovery instead of 4.
xl_cmds=("--json topology" "plan" "audit" "verify training" "--dry-run switch training" "metrics")
XL=$FIXTURES/xl-8s-1024cpu
if [ -d "$XL" ]; then
	for c in "${xl_cmds[@]}"; do
		confined xl-8s-1024cpu "$XL" "$c" --seccomp-bpf
	done
else
	n=$((n + 1))
	echo "not ok $n the 1024-CPU fixture $XL is missing (tests/fixtures/gen_fixtures.py makes it)"
	fail=$((fail + 1))
fi
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

# ---- hostile trees ----------------------------------------------------------
# Trees whose symlinks lead out: absolute ones (as a node's own are, which
# must resolve inside the tree, as on the node), relative ones climbing
# with "../..", and loops. Every writing command runs on each under strace;
# nothing outside the tree may be opened for writing, created, renamed,
# removed or linked, and the files and directory outside stay as they were.
OUT=$T/outside
new_outside() { # the files outside, afresh for each tree
	rm -rf "$OUT" && mkdir -p "$OUT/dir"
	echo victim >"$OUT/victim"
	echo victim >"$OUT/dir/victim"
}
outside_state() { (cd "$OUT" && find . -printf '%p %s %T@\n' | sort && cat victim dir/victim) | md5sum; }
up=$(printf '../%.0s' $(seq 1 30))
hostile_tree() { # hostile_tree NAME KIND: a copy of the fixture with links out
	local d=$T/$1 k=$2 tgt tdir
	cp -a "$FIX" "$d"
	case $k in
	absolute) tgt=$OUT/victim tdir=$OUT/dir ;;
	relative) tgt=${up}${OUT#/}/victim tdir=${up}${OUT#/}/dir ;;
	loop) tgt=loop-a tdir=loop-b ;;
	esac
	for f in proc/sys/vm/swappiness proc/sys/vm/dirty_ratio sys/kernel/mm/transparent_hugepage/enabled; do
		rm -f "$d/$f"; ln -s "$tgt" "$d/$f"
	done
	[ "$k" = loop ] && { ln -s loop-b "$d/proc/sys/vm/loop-a"; ln -s loop-a "$d/proc/sys/vm/loop-b"; }
	rm -rf "$d/run" "$d/etc/mltune" "$d/etc/default/grub.d"
	mkdir -p "$d/etc/default" "$d/var/lib/prometheus/node-exporter"
	if [ "$k" = loop ]; then
		ln -s run "$d/run"; ln -s mltune "$d/etc/mltune"; ln -s grub.d "$d/etc/default/grub.d"
	else
		ln -s "$tdir" "$d/run"; ln -s "$tdir" "$d/etc/mltune"; ln -s "$tdir" "$d/etc/default/grub.d"
	fi
	rm -f "$d"/var/lib/prometheus/node-exporter/*
	ln -s "$tgt" "$d/var/lib/prometheus/node-exporter/mltune.prom"
	ln -s "$tgt" "$d/var/lib/prometheus/node-exporter/mltune.prom.mltune-tmp"
	printf '%s\n' "$d"
}
# Writes to a path outside the tree in an strace log: an open for writing or
# creating, or a call that makes, removes or renames a name.
writes_outside() {
	awk -v fix="$1" '
	# relative: below a descriptor of the tree; /proc/self/fd/N: a file
	# this process opened (linkat of an O_TMPFILE file)
	function inside(p) { return index(p, fix) == 1 || p !~ /^\// || p ~ /^\/proc\/self\/fd\// }
	/^[0-9]+ +(open|openat|openat2|creat)\(/ && /O_WRONLY|O_RDWR|O_CREAT|O_TRUNC/ {
		if (match($0, /"[^"]*"/) && !inside(substr($0, RSTART + 1, RLENGTH - 2)) &&
		    substr($0, RSTART + 1, RLENGTH - 2) != "/dev/null") print; next }
	/^[0-9]+ +(rename|renameat|renameat2|unlink|unlinkat|mkdir|mkdirat|rmdir|symlink|symlinkat|link|linkat)\(/ {
		s = $0
		while (match(s, /"[^"]*"/)) { p = substr(s, RSTART + 1, RLENGTH - 2); if (!inside(p)) { print; break } s = substr(s, RSTART + RLENGTH) }
	}' "$2"
}
writers=(
	"switch training" "switch inference" "off" "switch training" "switch baseline"
	"persist --profile training" "persist --remove" "config apply" "boot apply" "boot remove"
	"metrics -o /var/lib/prometheus/node-exporter/mltune.prom" "feeder on --cpus 2-3" "feeder off" "off"
)
for kind in absolute relative loop; do
	new_outside
	tree=$(hostile_tree "hostile-$kind" "$kind")
	before_out=$(outside_state)
	bad=""
	for c in "${writers[@]}"; do
		# shellcheck disable=SC2086 # the command's words
		strace -f -qq -e trace=%file -o "$T/log" "$M" --sysroot "$tree" $c >"$T/out" 2>&1
		w=$(writes_outside "$tree" "$T/log" | head -n 3)
		[ -z "$w" ] || bad="$bad; $c: $w"
	done
	[ "$(outside_state)" = "$before_out" ] || bad="$bad; a file or directory outside the tree changed"
	n=$((n + 1))
	if [ -z "$bad" ]; then
		echo "ok $n hostile tree ($kind symlinks): ${#writers[@]} writing commands, 0 writes outside"
		pass=$((pass + 1))
	else
		echo "not ok $n hostile tree ($kind symlinks):$bad" | head -c 2000; echo
		fail=$((fail + 1))
	fi
done

# What acts only on the live kernel refuses a file tree with exit 2, and
# makes no system call on this machine's threads.
for c in "exec --gpu 0 -- true" "sched apply --profile training" "sched reset" "nic show" "nic apply -p training"; do
	n=$((n + 1))
	# shellcheck disable=SC2086 # the command's words
	strace -f -qq -e trace=sched_setaffinity,sched_setattr,set_mempolicy,execve -o "$T/log" \
		"$M" --sysroot "$FIX" $c >"$T/out" 2>&1
	rc=$?
	acts=$(grep -E 'sched_setaffinity|sched_setattr|set_mempolicy|execve\("[^"]*true"' "$T/log" | head -n 2)
	if [ "$rc" = 2 ] && [ -z "$acts" ]; then
		echo "ok $n mltunectl --sysroot FIX $c: refused with exit 2 ($(head -c 120 "$T/out" | tr '\n' ' '))"
		pass=$((pass + 1))
	else
		echo "not ok $n mltunectl --sysroot FIX $c: exit $rc, expected 2${acts:+; acted: $acts}"
		fail=$((fail + 1))
	fi
done

# Looking and dry runs create nothing in /run/mltune, and off leaves no lock.
n=$((n + 1))
clean=$T/clean
cp -a "$FIXTURES/hgx-2s-8gpu" "$clean"
cp -a "$FIX/proc/sys" "$clean/proc/" 2>/dev/null
rm -rf "$clean/run/mltune"
made=""
for c in "profile list" "audit" "verify training" "--dry-run switch training" "active" "--json status" "metrics" \
	"conformance" "topology" "plan" "feeder status" "pool status" "drift status" "sched list --profile training" \
	"--dry-run config apply" "boot show" "--dry-run sched apply --profile training" "--dry-run off"; do
	# shellcheck disable=SC2086 # the command's words
	"$M" --sysroot "$clean" $c >/dev/null 2>&1
	[ -e "$clean/run/mltune" ] && { made="$made; $c: $(cd "$clean/run/mltune" && ls | tr '\n' ' ')"; rm -rf "$clean/run/mltune"; }
done
"$M" --sysroot "$clean" switch training >/dev/null 2>&1
"$M" --sysroot "$clean" off >/dev/null 2>&1
locks=$(cd "$clean/run/mltune" 2>/dev/null && ls ./*.lock 2>/dev/null | tr '\n' ' ')
if [ -z "$made$locks" ]; then
	echo "ok $n read-only commands and dry runs create nothing in /run/mltune; off leaves no lock file"
	pass=$((pass + 1))
else
	echo "not ok $n${made:+ created by a read:$made}${locks:+; after off: $locks}"
	fail=$((fail + 1))
fi
echo "1..$n"
echo "# Totals: pass:$pass fail:$fail xfail:0 xpass:0 skip:0 error:0"
[ "$fail" = 0 ]
