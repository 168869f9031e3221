#!/bin/bash
# Every skip of a make check run, and those tests/expected-skips does not
# list (scripts/check.sh; tests/host/skip_check.sh plants one).
#
#   scripts/skips.sh LOGDIR [SINCE]
#
# Reads LOGDIR/*.log (not guest-lane.log, which repeats the guest logs; with
# SINCE, only the logs newer than that file): TAP "ok N ... # SKIP reason"
# and "1..0 # SKIP reason", ctest's "(Skipped)" and "(Not Run)". Prints each
# skip as "skip LOG: TEXT" (LOG: the log's name without .log), then each
# that no entry of tests/expected-skips expects as "unexpected LOG: TEXT".
# Exit 0: every skip expected (or none); 1: some not; 2: tests/expected-skips
# cannot be read ("list ..." lines say why). MLTUNE_EXPECTED_SKIPS=FILE reads
# another list (the tests of this script).
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
if [ $# -lt 1 ] || [ ! -d "$1" ]; then
	echo "usage: scripts/skips.sh LOGDIR [SINCE]" >&2
	exit 2
fi
dir=$1
since=()
[ $# -ge 2 ] && since=(-newer "$2")
skips=$(cd "$dir" && find . -maxdepth 1 -name '*.log' ! -name guest-lane.log "${since[@]}" -printf '%f\0' |
	sort -z | xargs -0r grep -HE '^(# )*ok [0-9]+ .*# SKIP|^1\.\.0 # SKIP|\(Skipped\)$|\(Not Run\)$' -- |
	sed -E 's/^([^:]+)\.log:(# )*/\1: /')
[ -n "$skips" ] || exit 0
printf '%s\n' "$skips" | sed 's/^/skip /'
if ! unexpected=$(printf '%s\n' "$skips" |
	awk -v list="${MLTUNE_EXPECTED_SKIPS:-$ROOT/tests/expected-skips}" -v kernels="$("$ROOT/scripts/kernels.sh" matrix build)" \
		-f "$ROOT/scripts/skip-check.awk"); then
	printf '%s\n' "$unexpected" | sed 's/^/list /'
	exit 2
fi
[ -n "$unexpected" ] || exit 0
printf '%s\n' "$unexpected" | sed 's/^/unexpected /'
exit 1
