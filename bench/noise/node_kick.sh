#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
# The idle load balancer's kick on a live node (a real GPU node, or a
# guest): idle feeder cores beside busy loops, with `feeder on` making a
# root partition and with `feeder on --partition isolated`, alternating
# which goes first in each round.  Per setup and feeder CPU, from
# /proc/interrupts (no BPF needed): function-call IPIs (CAL, where the kick
# lands), reschedule IPIs (RES) and local timer interrupts (LOC) per
# second, the median over rounds with its distribution-free 95% interval;
# then the ratio of the CAL medians, root over isolated.  Restores the node
# (`feeder off`, loops stopped) however it ends; a round that fails stops
# the run with exit 1 and no figures.  Needs root and a POSIX shell with awk
# and mktemp; nothing else.
#
#   bench/noise/node_kick.sh [--ctl PATH] [--cpus LIST] [--loops N] [--seconds S] [--rounds R]
#     --ctl      mltunectl to run (default: mltunectl on PATH)
#     --cpus     feeder CPUs (default: the plan's, `feeder on --cpus feeder`)
#     --loops    busy loops outside the feeder cgroup (default: 2 per online CPU)
#     --seconds  window per setup and round (default 5)
#     --rounds   rounds (default 7: the interval needs at least 6)
set -u
CTL=mltunectl CPUS=feeder LOOPS="" SECS=5 ROUNDS=7
while [ $# -gt 0 ]; do
	case $1 in
	--ctl) CTL=$2; shift 2 ;;
	--cpus) CPUS=$2; shift 2 ;;
	--loops) LOOPS=$2; shift 2 ;;
	--seconds) SECS=$2; shift 2 ;;
	--rounds) ROUNDS=$2; shift 2 ;;
	*) echo "node_kick: unknown argument '$1' (see the head of $0)" >&2; exit 2 ;;
	esac
done
die() { echo "node_kick: $*" >&2; exit 1; }
[ "$(id -u)" = 0 ] || die "needs root (it makes cpuset partitions)"
command -v "$CTL" >/dev/null || die "$CTL not found (--ctl PATH)"
"$CTL" --json feeder status | grep -q '"active": *false' || die "the feeder is on: run '$CTL feeder off' first"
# The CPUs `feeder on` would take, as --dry-run says them.
FEEDER=$("$CTL" --dry-run feeder on --cpus "$CPUS" --mechanism cpuset | sed -n 's/^would keep CPUs \([0-9,-]*\) .*/\1/p')
[ -n "$FEEDER" ] || die "no feeder CPUs for --cpus $CPUS"
LIST=$(echo "$FEEDER" | tr ',' '\n' | awk -F- '{ for (i = $1; i <= ($2 == "" ? $1 : $2); i++) print i }' | tr '\n' ' ')
[ -n "$LOOPS" ] || LOOPS=$((2 * $(grep -c '^processor' /proc/cpuinfo)))
PIDS=""
TMP=$(mktemp -d) || die "mktemp failed"
stop_loops() { for p in $PIDS; do kill "$p" 2>/dev/null; done; wait $PIDS 2>/dev/null; PIDS=""; }
cleanup() { stop_loops; "$CTL" feeder off >/dev/null 2>&1; rm -rf "$TMP"; }
trap cleanup EXIT
trap 'exit 130' INT TERM

# counts: "CPU CAL RES LOC" for each feeder CPU, by /proc/interrupts' columns.
counts() {
	awk -v want=" $LIST " 'NR == 1 { for (i = 1; i <= NF; i++) { c = substr($i, 4); col[i] = c }; next }
		$1 == "CAL:" || $1 == "RES:" || $1 == "LOC:" { for (i = 2; i <= NF && (i - 1) in col; i++) v[substr($1, 1, 3), col[i - 1]] = $i }
		END { n = split(want, w, " "); for (k = 1; k <= n; k++) print w[k], v["CAL", w[k]] + 0, v["RES", w[k]] + 0, v["LOC", w[k]] + 0 }' /proc/interrupts
}

measure() { # measure SETUP ROUND
	case $1 in
	root) "$CTL" feeder on --cpus "$FEEDER" --mechanism cpuset >/dev/null ;;
	isolated) "$CTL" feeder on --cpus "$FEEDER" --mechanism cpuset --partition isolated >/dev/null ;;
	esac || die "feeder on ($1) failed"
	i=0; while [ $i -lt "$LOOPS" ]; do sh -c 'while :; do :; done' & PIDS="$PIDS $!"; i=$((i + 1)); done
	sleep 1
	counts >"$TMP/a"
	t0=$(cut -d' ' -f1 /proc/uptime)
	sleep "$SECS"
	counts >"$TMP/b"
	t1=$(cut -d' ' -f1 /proc/uptime)
	stop_loops
	"$CTL" feeder off >/dev/null || die "feeder off ($1) failed"
	paste -d' ' "$TMP/a" "$TMP/b" | awk -v s="$1" -v r="$2" -v t="$t0 $t1" '
		{ split(t, u, " "); d = u[2] - u[1]; printf "ROUND %s %s %s %.2f %.2f %.2f\n", s, r, $1, ($6 - $2) / d, ($7 - $3) / d, ($8 - $4) / d }'
}

echo "node_kick: feeder CPUs $FEEDER, $LOOPS busy loops, $ROUNDS rounds of $SECS s, $(uname -r)"
# one SETUP ROUND: a round's lines, shown and kept; a failed one ends the run.
one() { _o=$(measure "$1" "$2") || exit 1; echo "$_o" | tee -a "$TMP/rounds"; }
r=1
while [ $r -le "$ROUNDS" ]; do
	if [ $((r % 2)) = 1 ]; then one root $r; one isolated $r; else one isolated $r; one root $r; fi
	r=$((r + 1))
done
echo "setup | CPU | CAL/s median [95%] | RES/s median | LOC/s median"
awk '$1 == "ROUND" { k = $2 " " $4; cal[k] = cal[k] " " $5; res[k] = res[k] " " $6; loc[k] = loc[k] " " $7; keys[k] = 1
		tot[$2, $3] += $5; sets[$2] = 1 }
	function sort(s, a,   m, i, j, x) { m = split(s, a, " "); for (i = 1; i <= m; i++) for (j = i + 1; j <= m; j++)
		if (a[j] + 0 < a[i] + 0) { x = a[i]; a[i] = a[j]; a[j] = x }; return m }
	function med(s,   a, m) { m = sort(s, a); return m % 2 ? a[(m + 1) / 2] : (a[m / 2] + a[m / 2 + 1]) / 2 }
	# distribution-free 95% interval of the median: ranks j and m+1-j with
	# P(Binomial(m, 1/2) < j) <= 2.5% (bench/common/stats.py ci95)
	function ci(s,   a, m, j, k, p, c) { m = sort(s, a); j = 0; c = 0; p = 1; for (k = 0; k < m; k++) p /= 2
		for (k = 0; k < m / 2; k++) { c += p; if (c > 0.025) break; j = k + 1; p = p * (m - k) / (k + 1) }
		return j == 0 ? "[" a[1] ", " a[m] "]" : "[" a[j] ", " a[m + 1 - j] "]" }
	END { for (k in keys) { split(k, p, " "); printf "%s | %s | %s %s | %s | %s\n", p[1], p[2], med(cal[k]), ci(cal[k]), med(res[k]), med(loc[k]) | "sort" }
		close("sort")
		for (key in tot) { split(key, p, SUBSEP); all[p[1]] = all[p[1]] " " tot[key] }
		if (("root" in sets) && ("isolated" in sets)) { a = med(all["root"]); b = med(all["isolated"])
			printf "CAL/s over all feeder CPUs: root %s %s, isolated %s %s, ratio %s\n", a, ci(all["root"]), b, ci(all["isolated"]),
				(b > 0 ? sprintf("%.0fx", a / b) : "inf (none isolated)") } }' "$TMP/rounds"
