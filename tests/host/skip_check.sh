#!/bin/bash
# A planted skip in a real fleet check: tests/fleet/run with one part made
# to skip (MLTUNE_FLEET_SKIP) reports it as a skip, not a pass, and make
# check's skip check (scripts/skips.sh, the one scripts/check.sh uses)
# fails on it as unexpected, naming it; listed in an expected-skips file it
# passes; the same run without the planted skip skips nothing. Runs the
# fleet test's host parts only (tests/fleet/run --host-only, about 20 s).
# Prints TAP and "# Totals:".
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
T=$(mktemp -d /tmp/mltune-skip-check.XXXXXX)
trap 'rm -rf "$T"' EXIT
n=0 pass=0 fail=0
check() { # check WHAT CONDITION...
	local what=$1
	shift
	n=$((n + 1))
	if "$@"; then
		pass=$((pass + 1)); echo "ok $n - $what"
	else
		fail=$((fail + 1)); echo "not ok $n - $what"
	fi
}
# fleet_run NAME [SKIP]: the host parts into $T/NAME; their logs as make
# check keeps them, in $T/NAME/logs/fleet-test.log.
fleet_run() {
	MLTUNE_BUILD=$T/$1 MLTUNE_FLEET_SKIP=${2:-} "$ROOT/tests/fleet/run" --host-only >"$T/$1.out" 2>&1
	echo $? >"$T/$1.rc"
	mkdir -p "$T/$1/logs"
	cp "$T/$1/fleet/fleet-test.log" "$T/$1/logs/fleet-test.log" 2>/dev/null
}
totals() { tail -n 1 "$T/$1.out"; }

fleet_run forced k8s
check "planted: the run passes what ran and counts the skipped part as a skip" \
	grep -qxE '[1-9][0-9]* passed, 0 failed, 1 skipped' <(totals forced)
check "planted: the run exits 0 (a skip is not a failure of the run)" [ "$(cat "$T/forced.rc")" = 0 ]
"$ROOT/scripts/skips.sh" "$T/forced/logs" >"$T/forced.skips"
src=$?
check "planted: make check's skip check fails (exit 1)" [ "$src" = 1 ]
check "planted: and names it as unexpected, with its reason" \
	grep -qxF 'unexpected fleet-test: 1..0 # SKIP k8s: not run (MLTUNE_FLEET_SKIP)' "$T/forced.skips"
printf '* fleet-test k8s: not run -- planted by tests/host/skip_check.sh\n' >"$T/expected"
MLTUNE_EXPECTED_SKIPS=$T/expected "$ROOT/scripts/skips.sh" "$T/forced/logs" >"$T/listed.skips"
src=$?
check "planted and listed: the skip check passes" [ "$src" = 0 ]
check "planted and listed: and still lists it" \
	grep -qxF 'skip fleet-test: 1..0 # SKIP k8s: not run (MLTUNE_FLEET_SKIP)' "$T/listed.skips"

fleet_run clean
check "without it: every check ran and passed, none skipped" \
	grep -qxE '[1-9][0-9]* passed, 0 failed, 0 skipped' <(totals clean)
"$ROOT/scripts/skips.sh" "$T/clean/logs" >"$T/clean.skips"
src=$?
check "without it: the skip check passes" [ "$src" = 0 ]
check "without it: and lists nothing" [ ! -s "$T/clean.skips" ]
echo "1..$n"
echo "# Totals: pass:$pass fail:$fail xfail:0 xpass:0 skip:0 error:0"
[ "$fail" = 0 ]
