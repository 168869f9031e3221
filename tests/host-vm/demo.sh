#!/bin/bash
# Host-side VM test: the demo `make run` shows (tests/vm/guest/demo, booted
# by tests/vm/run-demo) holds on a real kernel: each of its summary lines
# ("ok N step" / "not ok N step") is a result here, all four steps are there,
# and the guest exits 0. One boot, about 30 s on an idle host.
# make check runs it only on make run's kernel, the newest of the matrix
# (scripts/check.sh). Usage: demo.sh [SERIES]
set -u
. "$(dirname "$0")/lib.sh"

steps=4
hv_begin $((steps + 1))
MLTUNE_VM_TIMEOUT=${MLTUNE_VM_TIMEOUT:-300} "$ROOT/tests/vm/run-demo" --kernel "$series" >"$tmp/demo.log" 2>&1
rc=$?
tr -d '\r' <"$tmp/demo.log" >"$tmp/demo.txt"
# The summary: the lines after "== 5. summary"
sed -n '/^== 5\. summary/,$p' "$tmp/demo.txt" | grep -E '^(not )?ok [0-9]+ ' >"$tmp/steps"
while read -r line; do
	case $line in
	ok\ *) ok "$series: demo step ${line#ok }" ;;
	*)	notok "$series: demo step ${line#not ok }"
		# the failed step's own output, from "== N." to its "=> " line
		k=${line#not ok }; k=${k%% *}
		sed -n "/^== $k\\./,/^=> /p" "$tmp/demo.txt" >"$tmp/step"; show "$tmp/step" 30 ;;
	esac
done <"$tmp/steps"
got=$(wc -l <"$tmp/steps")
time=$(sed -n 's/^demo: .* in \([0-9]*\) s of guest time.*/\1/p' "$tmp/demo.txt")
if [ "$rc" = 0 ] && [ "$got" = "$steps" ]; then
	ok "$series: the demo exits 0 with $steps steps (${time:-?} s of guest time)"
else
	notok "$series: the demo exits 0 with $steps steps (exit $rc, $got step lines)"
	show "$tmp/demo.txt" 15
fi
# A missing step line: its result counts as failed
while [ "$got" -lt "$steps" ]; do got=$((got + 1)); notok "$series: demo step $got (no summary line)"; done
hv_end
