#!/bin/sh
# One guest run: apply rings+coalesce+channels+features to both NICs N rounds
# per batch, R batches, through mltunectl vs the equivalent ethtool program
# invocations; prints the medians and the ratio.  Results: bench/nic/README.md.
#   bench/nic/run.sh                         (N=20 R=5 KERNEL=6.12)
#   MLTUNECTL=build/nic2/mltunectl bench/nic/run.sh   an already built mltunectl (no make)
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
nobuild=--no-build
[ -n "$MLTUNECTL" ] || nobuild=
M=${MLTUNECTL:-$ROOT/build/userspace/mltunectl}
case $M in /*) ;; *) M=$ROOT/$M ;; esac
exec "$ROOT/tests/vm/run" --kernel "${KERNEL:-6.12}" $nobuild --bin /usr/sbin/ethtool --bin "$M" \
	--file "$ROOT/bench/nic:/bench/nic" -- sh -c "cp '$M' /usr/sbin/mltunectl && sh /bench/nic/bench.sh ${N:-20} ${R:-5}"
