#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
# Huge-page pool benchmark in one guest run (hugepool_bench.c): obtaining
# and touching SIZE MiB of pinned memory from the pool vs malloc+mlock vs
# MAP_HUGETLB+mlock, and memcpy bandwidth pool vs 4 KiB pages.
#
#   bench/hugepool/run.sh [--kernel 6.1|6.12|7.2] [SIZE_MIB [ITERS]]
#
# The guest has 1.5 GiB in two 768 MiB nodes, so the pool side takes
# SIZE/2 from each node (default 512 MiB = 2 x 256 MiB).
set -eu
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
kernel=${MLTUNE_VM_KERNEL:-7.2}
if [ "${1:-}" = --kernel ]; then
	kernel=$2
	shift 2
fi
size=${1:-512}
iters=${2:-5}
out=$ROOT/build/bench
mkdir -p "$out"
${CC:-cc} -O2 -Wall -Wextra -Werror -I"$ROOT/kmod/include/uapi" \
	-o "$out/hugepool_bench" "$ROOT/bench/hugepool/hugepool_bench.c"
exec "$ROOT/tests/vm/run" --kernel "$kernel" --bin "$out/hugepool_bench" \
	-- hugepool_bench "$size" "$iters"
