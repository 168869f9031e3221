#!/bin/sh
# One guest run: apply rings+coalesce+channels+features to both NICs N times
# through mltunectl vs the equivalent ethtool program invocations.
#   tests/vm/run --kernel 6.12 --bin /usr/sbin/ethtool --file bench/nic:/bench/nic -- sh /bench/nic/bench.sh
# Results: bench/nic/README.md.
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
exec "$ROOT/tests/vm/run" --kernel "${KERNEL:-6.12}" --bin /usr/sbin/ethtool \
	--file "$ROOT/bench/nic:/bench/nic" -- sh /bench/nic/bench.sh "${N:-20}"
