#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# GPU feeding-loop latency on a real GPU node: mltune-gpu-loop (per step an
# async host-to-device copy, a one-thread kernel launch, a stream
# synchronize) alone, next to busy neighbours, and placed by mltunectl exec
# and the feeder cores. Per case the median over the rounds of the helper's
# mean/p50/p99/p99.9/max step latency, and the ratios. Results:
# bench/feeder_gpu/README.md; every round's JSON and the machine's
# description under bench/feeder_gpu/results/<date>-<hostname>/.
#
#   bench/feeder_gpu/run.sh [--mltunectl PATH] [--helper PATH] [--gpu N]
#       [--rounds R] [--steps S] [--neighbour N] [--register-mib M]
#       [--cases LIST] [--out DIR]
#
# Cases (--cases, comma-separated; default all, run interleaved per round):
#   idle             the helper alone
#   neighbour        with N busy loops (default 2 per online CPU), unpinned
#   exec             mltunectl exec --gpu N -- helper, with the neighbours
#   feeder-cpuset    feeder on --mechanism cpuset; feeder run -- helper
#   feeder-sched_ext feeder on --mechanism sched_ext (n/a where refused)
#   feeder+exec      feeder on; feeder run -- mltunectl exec --gpu N -- helper
# Every case but idle runs with the neighbours. Root for exec and the feeder
# cases; idle and neighbour run as any user. MLTUNE_CUDA_LIB names another
# libcuda (the helper's --lib default), e.g. the unit tests' fake.
#
# Goal: feeder+exec p99.9 within 1.2x of idle and at least 50x better than
# the neighbour case (default Linux). A round whose helper exits non-zero
# fails the bench (exit 1), naming the case and the round.
set -eu
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
CTL=$ROOT/build/userspace/mltunectl
HELPER=$ROOT/build/userspace/mltune-gpu-loop
GPU=0
ROUNDS=3
STEPS=30000
NEIGHBOUR=$((2 * $(nproc)))
REGISTER_MIB=1024
CASES=idle,neighbour,exec,feeder-cpuset,feeder-sched_ext,feeder+exec
OUT=""

usage() { sed -n '11,13p' "$0" | sed '1s/^#   /usage: /; 2,$s/^# /       /' >&2; exit "${1:-2}"; }
die() { echo "feeder_gpu: $*" >&2; exit 1; }
number() { case $2 in '' | *[!0-9]*) echo "feeder_gpu: $1: '$2' is not a whole number" >&2; exit 2 ;; esac; }
while [ $# -gt 0 ]; do
	case $1 in -h | --help) usage 0 ;; esac
	[ $# -ge 2 ] || usage
	case $1 in
	--mltunectl) CTL=$2 ;;
	--helper) HELPER=$2 ;;
	--gpu) number "$1" "$2"; GPU=$2 ;;
	--rounds) number "$1" "$2"; ROUNDS=$2 ;;
	--steps) number "$1" "$2"; STEPS=$2 ;;
	--neighbour) number "$1" "$2"; NEIGHBOUR=$2 ;;
	--register-mib) number "$1" "$2"; REGISTER_MIB=$2 ;;
	--cases) CASES=$2 ;;
	--out) OUT=$2 ;;
	*) usage ;;
	esac
	shift 2
done
[ "$ROUNDS" -ge 1 ] || die "--rounds: at least 1"
cases=${CASES//,/ }
for c in $cases; do
	case $c in
	idle | neighbour) ;;
	exec | feeder-cpuset | feeder-sched_ext | feeder+exec)
		[ "$(id -u)" = 0 ] || die "case $c needs root (run as root, or --cases idle,neighbour)"
		[ -x "$CTL" ] || die "$CTL: no mltunectl (--mltunectl PATH)" ;;
	*) die "--cases: unknown case '$c'" ;;
	esac
done
[ -x "$HELPER" ] || die "$HELPER: no mltune-gpu-loop (--helper PATH)"
command -v jq >/dev/null || die "jq is needed"

OUT=${OUT:-$ROOT/bench/feeder_gpu/results/$(date -u +%Y%m%dT%H%M%SZ)-$(hostname -s)}
mkdir -p "$OUT"
: >"$OUT/rounds.jsonl"

LOAD_PIDS=""
FEEDER_ON=0
neighbours_start() {
	local i=0
	while [ $i -lt "$NEIGHBOUR" ]; do
		sh -c 'while :; do :; done' &
		LOAD_PIDS="$LOAD_PIDS $!"
		i=$((i + 1))
	done
	sleep 1 # spread over the CPUs
}
neighbours_stop() {
	local p
	for p in $LOAD_PIDS; do kill "$p" 2>/dev/null || true; done
	for p in $LOAD_PIDS; do wait "$p" 2>/dev/null || true; done
	LOAD_PIDS=""
}
feeder_off() {
	if [ "$FEEDER_ON" = 1 ]; then
		"$CTL" feeder off >/dev/null 2>&1 || echo "feeder_gpu: mltunectl feeder off failed" >&2
		FEEDER_ON=0
	fi
}
cleanup() { neighbours_stop; feeder_off; }
trap cleanup EXIT
trap 'exit 130' INT TERM

# The helper's --device: the GPU's CUDA index. Everything runs with
# CUDA_DEVICE_ORDER=PCI_BUS_ID (as exec sets it), so that it is GPU N of
# the topology; under exec, CUDA_VISIBLE_DEVICES lists the rank's GPUs and
# the device is N's place in that list.
export CUDA_DEVICE_ORDER=PCI_BUS_ID
EXEC_DEVICE=""
case " $cases " in *" exec "* | *" feeder+exec "*)
	spec=$("$CTL" --json --dry-run exec --gpu "$GPU" -- true) || die "mltunectl exec --gpu $GPU --dry-run failed"
	echo "$spec" >"$OUT/exec-spec.json"
	EXEC_DEVICE=$(echo "$spec" | jq --argjson g "$GPU" '.gpus | index($g)')
	[ "$EXEC_DEVICE" != null ] || die "GPU $GPU is not in its rank's GPUs: $spec" ;;
esac
helper_args() { echo "--device $1 --steps $STEPS --register-mib $REGISTER_MIB"; }

# run_helper CASE ROUND COMMAND...: one round's JSON, or the bench fails.
run_helper() {
	local c=$1 r=$2 base st
	shift 2
	base=$OUT/$c-r$r
	st=0
	"$@" >"$base.out" 2>"$base.err" || st=$?
	if [ "$st" != 0 ]; then
		[ "$st" = 3 ] && echo "feeder_gpu: no NVIDIA driver (the helper cannot load libcuda)" >&2
		die "case $c round $r: '$*' exited $st: $(tail -n 3 "$base.err")"
	fi
	grep '^{' "$base.out" | tail -n 1 >"$base.json"
	jq -e . "$base.json" >/dev/null 2>&1 || die "case $c round $r: no JSON in $base.out"
	jq -c --arg case "$c" --argjson round "$r" '{case: $case, round: $round} + .' "$base.json" >>"$OUT/rounds.jsonl"
	printf '  %-17s round %s: p50 %s us, p99.9 %s us, max %s us\n' "$c" "$r" \
		"$(jq .p50_us "$base.json")" "$(jq .p999_us "$base.json")" "$(jq .max_us "$base.json")"
}

# feeder_on CASE ROUND MECHANISM: 0 when on; 1 when refused (the reason
# in $OUT/CASE-rR.on).
feeder_on() {
	if "$CTL" feeder on --mechanism "$3" >"$OUT/$1-r$2.on" 2>&1; then
		FEEDER_ON=1
		return 0
	fi
	return 1
}

SCX_NA=""
run_case() {
	local c=$1 r=$2
	# shellcheck disable=SC2046 # helper_args is words
	case $c in
	idle) run_helper "$c" "$r" "$HELPER" $(helper_args "$GPU") ;;
	neighbour)
		neighbours_start
		run_helper "$c" "$r" "$HELPER" $(helper_args "$GPU")
		neighbours_stop ;;
	exec)
		neighbours_start
		run_helper "$c" "$r" "$CTL" exec --gpu "$GPU" -- "$HELPER" $(helper_args "$EXEC_DEVICE")
		neighbours_stop ;;
	feeder-cpuset)
		feeder_on "$c" "$r" cpuset || die "case $c round $r: feeder on failed: $(cat "$OUT/$c-r$r.on")"
		neighbours_start
		run_helper "$c" "$r" "$CTL" feeder run -- "$HELPER" $(helper_args "$GPU")
		neighbours_stop
		feeder_off ;;
	feeder-sched_ext)
		[ -z "$SCX_NA" ] || return 0
		if ! feeder_on "$c" "$r" sched_ext; then
			[ "$r" = 1 ] || die "case $c round $r: feeder on failed after round 1 worked: $(cat "$OUT/$c-r$r.on")"
			SCX_NA=$(tr '\n' ' ' <"$OUT/$c-r$r.on")
			echo "  $c: n/a: $SCX_NA"
			return 0
		fi
		neighbours_start
		run_helper "$c" "$r" "$CTL" feeder run -- "$HELPER" $(helper_args "$GPU")
		neighbours_stop
		feeder_off ;;
	feeder+exec)
		feeder_on "$c" "$r" auto || die "case $c round $r: feeder on failed: $(cat "$OUT/$c-r$r.on")"
		neighbours_start
		run_helper "$c" "$r" "$CTL" feeder run -- "$CTL" exec --gpu "$GPU" -- "$HELPER" $(helper_args "$EXEC_DEVICE")
		neighbours_stop
		feeder_off ;;
	esac
}

{
	echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
	echo "uname: $(uname -a)"
	echo "nproc: $(nproc)"
	echo "cpu: $(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n 1)"
	echo "cmdline: $(cat /proc/cmdline)"
	if command -v nvidia-smi >/dev/null; then
		nvidia-smi -L | sed 's/^/nvidia-smi: /'
	else
		echo "nvidia-smi: not installed"
	fi
	[ -x "$CTL" ] && echo "mltunectl: $("$CTL" --version 2>&1 | head -n 1)"
	echo "helper: $HELPER (lib ${MLTUNE_CUDA_LIB:-libcuda.so.1})"
	echo "settings: gpu $GPU, $ROUNDS rounds, $STEPS steps, $NEIGHBOUR neighbours, register $REGISTER_MIB MiB, cases $cases"
} >"$OUT/machine.txt"

echo "# feeder_gpu: GPU $GPU, $ROUNDS rounds of $STEPS steps, $NEIGHBOUR busy neighbours on $(nproc) CPUs; $OUT"
r=1
while [ "$r" -le "$ROUNDS" ]; do
	for c in $cases; do run_case "$c" "$r"; done
	r=$((r + 1))
done
name=$(jq -rs 'map(.name) | first // "?"' "$OUT/rounds.jsonl")
echo "gpu: $name" >>"$OUT/machine.txt"

# The table: medians over the rounds, us; p99.9 against idle's. Then the
# goal's two ratios.
jq -rs --arg cases "$cases" --arg scx "$SCX_NA" '
	def median: sort | if length == 0 then null
		elif length % 2 == 1 then .[(length - 1) / 2] else (.[length / 2 - 1] + .[length / 2]) / 2 end;
	def num: if . == null then "n/a" else tostring end;
	def x2: (. * 100 | round) as $x | "\($x / 100 | floor).\($x % 100 | tostring | if length == 1 then "0" + . else . end)x";
	def ratio(a; b): if a == null or b == null or b == 0 then null else a / b end;
	def verdict(ok): if ok == null then "not measured" elif ok then "met" else "missed" end;
	(group_by(.case) | map({key: .[0].case, value: {
		rounds: length, mean: (map(.mean_us) | median), p50: (map(.p50_us) | median),
		p99: (map(.p99_us) | median), p999: (map(.p999_us) | median), max: (map(.max_us) | median),
		reg: (map(.register_ms_per_gib) | map(select(. != null)) | median)}}) | from_entries) as $m
	| $m.idle.p999 as $idle | $m.neighbour.p999 as $nb | $m["feeder+exec"].p999 as $fe
	| (["case", "rounds", "mean_us", "p50_us", "p99_us", "p99.9_us", "max_us", "p99.9/idle", "reg_ms/GiB"] | @tsv),
	  ($cases | split(" ")[] as $c | $m[$c] as $s
	   | if $s == null then [$c, "n/a", "n/a", "n/a", "n/a", "n/a", "n/a", "n/a", "n/a"]
	     else [$c, $s.rounds, $s.mean, $s.p50, $s.p99, $s.p999, $s.max, ratio($s.p999; $idle), $s.reg] | map(num) end
	   | @tsv),
	  (if $scx != "" then "#feeder-sched_ext: n/a: \($scx)" else empty end),
	  "#goal: feeder+exec p99.9 within 1.2x of idle and >= 50x better than neighbour (default Linux)",
	  "#  feeder+exec / idle p99.9:      " + (ratio($fe; $idle) | if . == null then "n/a" else x2 end) +
	    " (goal <= 1.20x: " + verdict(if $fe == null or $idle == null then null else $fe <= 1.2 * $idle end) + ")",
	  "#  neighbour / feeder+exec p99.9: " + (ratio($nb; $fe) | if . == null then "n/a" else x2 end) +
	    " (goal >= 50.00x: " + verdict(if $fe == null or $nb == null then null else $nb >= 50 * $fe end) + ")"
' "$OUT/rounds.jsonl" | awk -F '\t' '
	function f(v, d) { return v ~ /^[0-9.e+-]+$/ ? sprintf("%." d "f", v) : v }
	/^#/ { print substr($0, 2); next }
	NR == 1 { printf "%-17s %6s %10s %10s %10s %10s %10s %10s %10s\n", $1, $2, $3, $4, $5, $6, $7, $8, $9; next }
	{ r = f($8, 2); if (r != "n/a") r = r "x"
	  printf "%-17s %6s %10s %10s %10s %10s %10s %10s %10s\n", $1, $2, f($3, 1), f($4, 1), f($5, 1), f($6, 1), f($7, 1), r, f($9, 1) }
' | tee "$OUT/summary.txt"
