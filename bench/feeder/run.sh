#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
# Feeder-core wake-up latency benchmark: one guest run per kernel
# (bench.sh in the guest, feeder_lat.c), p50/p99 wake-up latency of a 1 ms
# periodic feeder task with 2 busy loops per CPU, without isolation, with the
# cpuset partition and with the sched_ext scheduler (kernels that have it),
# and the ratios.  Results: bench/feeder/README.md.
#
#   bench/feeder/run.sh [--no-build] [--kernel S]... [SECONDS [ROUNDS]]
#                          (default: the matrix, 5 s per run, 3 rounds)
set -u
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
kernels="" nobuild=""
while [ $# -gt 0 ]; do
	case $1 in
	--kernel) kernels="$kernels $2"; shift 2 ;;
	--no-build) nobuild=--no-build; shift ;;
	*) break ;;
	esac
done
kernels=${kernels:-$("$ROOT/scripts/kernels.sh" matrix guest)}
secs=${1:-5}
rounds=${2:-3}
out=$ROOT/build/bench
mkdir -p "$out"
${CC:-cc} -O2 -Wall -Wextra -Werror -o "$out/feeder_lat" "$ROOT/bench/feeder/feeder_lat.c" || exit 1
logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT
rc=0
for k in $kernels; do
	echo "==== kernel $k"
	# $nobuild only once: the first guest run builds what it needs.
	MLTUNE_VM_TIMEOUT=${MLTUNE_VM_TIMEOUT:-$((300 + 3 * rounds * secs * 4))} \
		"$ROOT/tests/vm/run" --kernel "$k" $nobuild --bin "$out/feeder_lat" \
		--file "$ROOT/bench/feeder/bench.sh:/root/bench.sh" -- sh /root/bench.sh "$secs" "$rounds" \
		>"$logs/$k.log" 2>&1 || rc=1
	grep -v '^vm:   ' "$logs/$k.log"
	grep -q '^MEDIANS ' "$logs/$k.log" || rc=1
	nobuild=--no-build
done
echo "==== summary (TCG guest: absolute numbers are inflated, compare the ratios)"
cat "$logs"/*.log | sed -n 's/^MEDIANS //p'
cat "$logs"/*.log | sed -n 's/^RESULT //p'
exit $rc
