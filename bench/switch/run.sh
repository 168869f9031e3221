#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
# Profile switch benchmark in one guest run: the module's in-kernel switch
# vs a C loop of open/write/close vs a shell echo loop (switch_bench.c).
#
#   bench/switch/run.sh [--kernel 6.1|6.12|7.2] [SWITCHES]
set -eu
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
kernel=${MLTUNE_VM_KERNEL:-6.12}
if [ "${1:-}" = --kernel ]; then
	kernel=$2
	shift 2
fi
n=${1:-200}
out=$ROOT/build/bench
mkdir -p "$out"
${CC:-cc} -static -O2 -Wall -Wextra -Werror -o "$out/switch_bench" \
	"$ROOT/bench/switch/switch_bench.c"
# Static, so --file is enough; a fixed guest path works for any host path.
exec "$ROOT/tests/vm/run" --kernel "$kernel" \
	--file "$out/switch_bench:/usr/local/bin/switch_bench" \
	-- /usr/local/bin/switch_bench "$n"
