#!/bin/bash
# The whole test run behind 'make check' (and so .ci/run):
#   build (user space, the module for every matrix kernel, the kselftests),
#   lint (checkpatch --strict, sparse, clang-format, clang-tidy), unit tests (normal, ASan+UBSan,
#   bounded fuzzing), DKMS build check, the Debian packages, the node test
#   and the fleet test (Kubernetes, container mode, Slurm, Ansible) on the
#   Debian systemd guest, then the kselftest suite in a guest of every
#   bootable matrix kernel and the guest suites where its use is 'guest'
#   (scripts/kernel-matrix; compile-only kernels are built and never booted).
# Ends with the line "N passed, N failed, N skipped"; exit 1 if anything
# failed. Each stage's log is in build/check/; before the totals, what each
# failed test printed is repeated from its log.
#
#   scripts/check.sh [--vm-only] [--load] [--kernels "SERIES..."]   (default: every series of scripts/kernel-matrix)
#
# --load (make check-under-load): the whole check runs while stress-ng
# loads this machine ($MLTUNE_HOST_LOAD) and every guest
# ($MLTUNE_GUEST_LOAD); the suites must pass there too.
#
# Once the build is done, the guest stages (each guest one emulator thread)
# run in a lane of their own beside the rest (lint, unit tests, packages,
# node and fleet test), on the core a guest leaves free; their report
# follows the rest's. MLTUNE_CHECK_LANES=1 runs them one after the other instead.
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT" || exit 2
# vm_drop_void: a guest run the emulator voided is counted once, by its
# repeat (tests/vm/lib.sh)
# shellcheck source=tests/vm/lib.sh
. tests/vm/lib.sh
LOGS=$ROOT/build/check
mkdir -p "$LOGS"
# Logs written from here on are this run's (the skip list reads only those).
: >"$LOGS/.start"

vm_only=0
load=0
kernels=$(scripts/kernels.sh matrix build)
while [ $# -gt 0 ]; do
	case $1 in
	--vm-only) vm_only=1; shift ;;
	--load) load=1; shift ;;
	--kernels) kernels=$2; shift 2 ;;
	*) echo "check.sh: unknown argument '$1'" >&2; exit 2 ;;
	esac
done

# Every guest boot's hang detector, sized for a loaded host, not a speed
# check (each kselftest program has its own: MLTUNE_KSFT_TIMEOUT, see
# tests/vm/README.md). The host-side VM tests' boots take it too.
guest_timeout=${MLTUNE_GUEST_TIMEOUT:-3600}
export MLTUNE_VM_TIMEOUT=${MLTUNE_VM_TIMEOUT:-$guest_timeout}
lanes=${MLTUNE_CHECK_LANES:-2}
case $lanes in 1|2) ;; *) echo "check.sh: MLTUNE_CHECK_LANES is 1 or 2, got '$lanes'" >&2; exit 2 ;; esac

pass=0 fail=0 skip=0
failed_items=()
t0=$(date +%s)

note() { printf '%s\n' "$*"; }
count() { # count PASSED FAILED SKIPPED
	pass=$((pass + $1)); fail=$((fail + $2)); skip=$((skip + $3))
}

# stage NAME CMD...: one checked step; its output goes to build/check/NAME.log
# The background fetch of kernels and headers (started with the build):
# its exit status, its output into the stage's log. The status comes from
# the file the fetch writes last, not from wait: a job started before the
# guest lane's 'set -m' can be reaped with its status dropped (bash 5.2
# answered "wait: pid N is not a child of this shell", 127, on a cold
# cache, where the fetch outlives the build). Until the fetch is gone, it
# is waited for.
fetch_wait() {
	wait "$fetch_pid" 2>/dev/null
	while kill -0 "$fetch_pid" 2>/dev/null; do sleep 1; done
	cat "$LOGS/fetch-kernels.out"
	local rc
	rc=$(cat "$LOGS/fetch-kernels.rc" 2>/dev/null) ||
		{ echo "the kernel fetch ended without its status"; return 1; }
	return "$rc"
}

stage() {
	local name=$1 s rc; shift
	s=$(date +%s)
	"$@" >"$LOGS/$name.log" 2>&1
	rc=$?
	if [ $rc = 0 ]; then
		note "ok   $name ($(( $(date +%s) - s )) s)"
		count 1 0 0
	else
		note "FAIL $name (exit $rc; log: build/check/$name.log)"
		tail -n 25 "$LOGS/$name.log" | sed 's/^/     | /'
		count 0 1 0
		failed_items+=("$name")
	fi
	return $rc
}

# ctest NAME BUILDDIR [ARGS...]: counts every ctest test.
run_ctest() {
	local name=$1 dir=$2 log=$LOGS/$1.log total failed skipped; shift 2
	ctest --test-dir "$dir" --output-on-failure -j "$(nproc)" "$@" >"$log" 2>&1
	total=$(sed -nE 's/.* tests failed out of ([0-9]+).*/\1/p' "$log" | tail -1)
	failed=$(sed -nE 's/.* ([0-9]+) tests failed out of.*/\1/p' "$log" | tail -1)
	skipped=$(grep -cE '\(Skipped\)$|\(Not Run\)$|\(Disabled\)$' "$log")
	if [ -z "$total" ]; then
		note "FAIL $name: ctest ran no test (log: build/check/$name.log)"
		tail -n 15 "$log" | sed 's/^/     | /'
		count 0 1 0; failed_items+=("$name"); return
	fi
	local passed=$((total - failed - skipped))
	note "$( [ "$failed" = 0 ] && echo "ok  " || echo "FAIL") $name: $passed passed, $failed failed, $skipped skipped"
	if [ "$failed" != 0 ]; then
		grep -E '^\s+[0-9]+ - .*\(Failed|Timeout|SEGFAULT|Exception' "$log" | sed 's/^/     | /'
		failed_items+=("$name")
	fi
	count "$passed" "$failed" "$skipped"
}

# Parse the guest's kselftest KTAP: a harness program's "# Totals:" line
# counts its test cases; a program without one counts as one test.
tap_count() { awk -f "$ROOT/scripts/tap-count.awk" "$1"; }

# tap_stage NAME CMD...: a host test printing TAP and "# Totals:"; every
# test counts.
tap_stage() {
	local name=$1 log=$LOGS/$1.log rc p f k; shift
	"$@" >"$log" 2>&1
	rc=$?
	grep -E '^not ok ' "$log" | sed 's/^/     | /'
	read -r p f k < <(awk '/^# Totals: /{for(i=1;i<=NF;i++){split($i,kv,":");v[kv[1]]=kv[2]} print v["pass"]+0, v["fail"]+v["error"], v["skip"]+0; found=1} END{if(!found) print "0 0 0"}' "$log")
	if [ "$rc" != 0 ] && [ "$f" = 0 ]; then f=1; fi
	# No test ran: a skip only where the stage said why ("1..0 # SKIP
	# reason", listed and checked against tests/expected-skips below);
	# anything else is a failure.
	if [ "$p$f$k" = 000 ]; then
		if [ "$rc" = 0 ] && grep -qE '^1\.\.0 # SKIP' "$log"; then k=1; else f=1; fi
	fi
	note "$( [ "$f" = 0 ] && echo "ok  " || echo "FAIL") $name: $p passed, $f failed, $k skipped"
	[ "$f" != 0 ] && failed_items+=("$name")
	count "$p" "$f" "$k"
}

# The kselftests' soak sizes (MLTUNE_SOAK=1, tests/vm/README.md) run in one
# guest; the others run the kernel-CI sizes.
soak_kernel=${MLTUNE_SOAK_KERNEL:-6.12}

vm_suite() { # vm_suite SERIES
	local s=$1 log=$LOGS/vm-$1.log rc p f k kver soak=0
	kver=$(scripts/kernels.sh resolve "$s")
	[ "$s" = "$soak_kernel" ] && soak=1
	note "---- kselftests in the $s guest ($kver)$([ "$soak" = 1 ] && echo ', soak sizes')"
	MLTUNE_SOAK=$soak tests/vm/run --kernel "$s" --no-build --timeout "$guest_timeout" 2>&1 | tee "$log" |
		grep -E '^(not )?ok |^# (not )?ok |^vm: |^1\.\.|^# time: '
	rc=${PIPESTATUS[0]}
	vm_drop_void "$log"
	read -r p f k < <(tap_count "$log")
	# The module under test loaded: one check of its own (a guest where it
	# does not load runs nothing and exits 123).
	if grep -q '^vm: mltune loaded: ' "$log"; then
		p=$((p + 1))
	else
		note "FAIL kselftests $s: the mltune module did not load"; f=$((f + 1))
	fi
	if [ "$p" = 1 ] && [ "$f" = 0 ] && [ "$k" = 0 ]; then	# the load alone
		note "FAIL kselftests $s: no TAP result in the guest output"; f=1
	fi
	case $rc in
	0) ;;
	123) ;;	# counted above
	124|125|126) note "FAIL kselftests $s: the guest run failed (exit $rc, see $log)"; f=$((f + 1)) ;;
	*) [ "$f" = 0 ] && f=1 ;;
	esac
	note "TAP totals $s ($kver): $p passed, $f failed, $k skipped"
	[ "$f" != 0 ] && failed_items+=("kselftests-$s")
	count "$p" "$f" "$k"
}

# Guest integration tests (tests/guest) and host-side VM tests (tests/host-vm).
guest_suite() { # guest_suite SERIES
	local s=$1 log=$LOGS/guest-$1.log rc p f k t
	local names
	# every executable *.sh except the sourced helpers in lib.sh
	names=$(cd tests/guest && for t in *.sh; do
		[ -x "$t" ] && [ "$t" != lib.sh ] && printf '%s ' "$t"; done)
	if [ -n "$names" ]; then
		note "---- guest integration tests in the $s guest"
		# jq reads mltunectl's JSON; perf cross-checks noise (linux-perf)
		local bins=(--bin /usr/sbin/ethtool --bin /usr/bin/jq --bin /usr/bin/perf)
		# test helper programs built with the unit tests (e.g. nccl_mimic)
		# (a missing one would turn its test into a SKIP: fail instead)
		for b in build/userspace/nccl_mimic build/userspace/noise_plant; do
			if [ -x "$b" ]; then
				bins+=(--bin "$ROOT/$b")
			else
				note "FAIL guest helper $b was not built"
				count 0 1 0; failed_items+=("guest-helper-$s")
			fi
		done
		tests/vm/run --kernel "$s" --no-build "${bins[@]}" \
			--timeout "$guest_timeout" \
			--file tests/guest:/tests/guest \
			-- sh -c "KSFT_DIR=/tests/guest run-kselftests $names" 2>&1 |
			sed 's/selftests: mltune: /guest: /' | tee "$log" |
			grep -E '^(not )?ok |^# (not )?ok |^vm: '
		rc=${PIPESTATUS[0]}
		vm_drop_void "$log"
		read -r p f k < <(sed 's/ guest: / selftests: /' "$log" | tap_count /dev/stdin)
		[ "$p$f$k" = 000 ] && f=1
		case $rc in 0) ;; *) [ "$f" = 0 ] && f=1 ;; esac
		note "guest totals $s: $p passed, $f failed, $k skipped"
		[ "$f" != 0 ] && failed_items+=("guest-$s")
		count "$p" "$f" "$k"
	fi
	# demo.sh checks what make run shows, on make run's kernel (the newest
	# the matrix boots): one boot there, none on the others (not a skip:
	# make run boots no other kernel).
	local run_kernel; run_kernel=$(scripts/kernels.sh matrix boot | awk '{print $NF}')
	for t in tests/host-vm/*.sh; do
		[ -x "$t" ] || continue
		local n; n=$(basename "$t" .sh)
		if [ "$n" = demo ] && [ "$s" != "$run_kernel" ]; then
			note "---- host-vm demo: on make run's kernel $run_kernel only"
			continue
		fi
		note "---- host-vm $n ($s)"
		"$t" "$s" >"$LOGS/host-vm-$n-$s.log" 2>&1
		rc=$?
		grep -E '^(not )?ok ' "$LOGS/host-vm-$n-$s.log"
		read -r p f k < <(awk '/^# Totals: /{for(i=1;i<=NF;i++){split($i,kv,":");v[kv[1]]=kv[2]} print v["pass"]+0, v["fail"]+v["error"], v["skip"]+0; found=1} END{if(!found) print "0 0 0"}' "$LOGS/host-vm-$n-$s.log")
		if [ "$rc" != 0 ] && [ "$f" = 0 ]; then f=1; fi
		[ "$p$f$k" = 000 ] && { [ "$rc" = 0 ] && p=1 || f=1; }
		[ "$f" != 0 ] && { failed_items+=("host-vm-$n-$s"); tail -n 20 "$LOGS/host-vm-$n-$s.log" | sed 's/^/     | /'; }
		count "$p" "$f" "$k"
	done
}

# deb_suite NAME CMD...: a suite on the Debian packages (tests/node/run,
# tests/fleet/run), after make deb: its TAP lines shown, its "N passed,
# N failed, N skipped" counted; the log is build/check/NAME.log.
deb_suite() {
	local name=$1 log=$LOGS/$1.log p f k s
	shift
	if [ "$debs_built" != 1 ]; then
		note "skip $name: the packages did not build"
		count 0 0 1
		return
	fi
	s=$(date +%s)
	"$@" >"$log" 2>&1
	vm_drop_void "$log"
	grep -E '^(not )?ok [0-9]+ |^vm: ' "$log"
	read -r p f k < <(sed -nE 's/^([0-9]+) passed, ([0-9]+) failed, ([0-9]+) skipped$/\1 \2 \3/p' "$log" | tail -1)
	if [ -z "$p" ]; then
		note "FAIL $name: no totals (log: build/check/$name.log)"
		tail -n 15 "$log" | sed 's/^/     | /'
		p=0 f=1 k=0
	fi
	note "$name totals: $p passed, $f failed, $k skipped ($(( $(date +%s) - s )) s)"
	[ "$f" != 0 ] && failed_items+=("$name")
	count "$p" "$f" "$k"
}

# The Debian packages (make deb, lintian clean), then on the Debian systemd
# guest (its image is built once and cached) tests/node/run: the packages
# installed, booted, used and purged; and tests/fleet/run: Kubernetes
# manifests, container mode, Slurm and Ansible. Every TAP line counts.
debs_built=0
deb_suites() {
	note "---- Debian packages, the node test and the fleet test"
	stage deb make -s deb && debs_built=1
	deb_suite node-test tests/node/run
	deb_suite fleet-test tests/fleet/run
}

# guest_stages: the kselftests in a guest of every bootable matrix kernel,
# and the guest suites where its use is 'guest'.
guest_stages() {
	for s in $kernels; do
		if [ -f "$LOGS/build-kmod-$s.log" ] && [[ " ${failed_items[*]} " == *" build-kmod-$s "* ]]; then
			note "skip kselftests $s: the module did not build"
			count 0 0 1
			continue
		fi
		case $(scripts/kernels.sh use "$s") in
		build) note "---- $s: compile-only (built above, never booted)" ;;
		ksft) vm_suite "$s" ;;
		*) vm_suite "$s"; guest_suite "$s" ;;
		esac
	done
}

# What runs in the background goes with the check: the load, and the guest
# lane with its guests (the lane is a process group of its own).
load_pid='' lane_pid=''
stop_background() {
	[ -z "$lane_pid" ] || kill -- "-$lane_pid" 2>/dev/null
	[ -z "$load_pid" ] || kill "$load_pid" 2>/dev/null
	wait 2>/dev/null
}
trap stop_background EXIT
trap 'exit 130' INT TERM

if [ "$load" = 1 ]; then
	host_load=${MLTUNE_HOST_LOAD:---cpu 2 --vm 1 --vm-bytes 2G}
	export MLTUNE_VM_GUEST_LOAD=${MLTUNE_GUEST_LOAD:---cpu 2 --vm 1 --vm-bytes 128M}
	# shellcheck disable=SC2086 # stress-ng options, split on purpose
	stress-ng $host_load >"$LOGS/host-load.log" 2>&1 &
	load_pid=$!
	note "---- under load: stress-ng $host_load here, stress-ng $MLTUNE_VM_GUEST_LOAD in every guest"
fi

# The guest lane: guest_stages in the background, its output in
# build/check/guest-lane.log, its counts and failed items in
# build/check/guest-lane.state for lane_join.
lane_start() {
	note "---- the guest stages run beside the rest from here (progress: build/check/guest-lane.log)"
	rm -f "$LOGS/guest-lane.state"
	set -m	# the lane in a process group of its own, for stop_background
	(
		local n0=${#failed_items[@]}
		# shellcheck disable=SC2030 # the lane's own counts, for lane_join
		pass=0 fail=0 skip=0
		guest_stages
		{ echo "$pass $fail $skip"; printf '%s\n' "${failed_items[@]:n0}"; } >"$LOGS/guest-lane.state"
	) >"$LOGS/guest-lane.log" 2>&1 </dev/null &
	lane_pid=$!
	set +m
}
lane_join() {
	local p f k item
	wait "$lane_pid"
	lane_pid=''
	cat "$LOGS/guest-lane.log"
	if ! { read -r p f k && [ -n "$k" ]; } <"$LOGS/guest-lane.state" 2>/dev/null; then
		note "FAIL the guest lane ended without its counts (log: build/check/guest-lane.log)"
		count 0 1 0; failed_items+=("guest-lane"); return
	fi
	count "$p" "$f" "$k"
	while read -r item; do [ -n "$item" ] && failed_items+=("$item"); done < <(tail -n +2 "$LOGS/guest-lane.state")
}

if [ "$vm_only" = 0 ]; then
	note "---- build"
	# Every kernel's headers and every booted kernel's image are fetched
	# into the cache (downloads and unpacking, minutes on a fresh cache,
	# nothing on a warm one) while user space compiles; each fetch holds a
	# lock, so a module build or a guest that needs one first waits for it.
	rm -f "$LOGS/fetch-kernels.rc"
	(
		rc=0
		for s in $kernels; do scripts/kernels.sh headers "$s" >/dev/null || rc=1; done
		for s in $kernels; do
			[ "$(scripts/kernels.sh use "$s")" = build ] || scripts/kernels.sh fetch "$s" >/dev/null || rc=1
		done
		echo "$rc" >"$LOGS/fetch-kernels.rc"
	) >"$LOGS/fetch-kernels.out" 2>&1 &
	fetch_pid=$!
	stage build-userspace make -s userspace
	for s in $kernels; do stage "build-kmod-$s" make -s "kmod-$s"; done
	stage build-selftests make -s selftests
	[ "$lanes" = 2 ] && lane_start

	note "---- lint"
	stage checkpatch make -s checkpatch
	stage sparse make -s sparse
	# clang-format, and clang-tidy-22 over build/userspace's compile commands
	[ -x scripts/lint-userspace.sh ] && stage lint-userspace scripts/lint-userspace.sh --tidy build/userspace

	if [ -f CMakeLists.txt ]; then
		note "---- unit tests"
		run_ctest unit build/userspace
		if stage build-asan make -s asan-build; then
			run_ctest unit-asan build/asan -LE fuzz
		fi
		if stage build-fuzz make -s fuzz-build; then
			run_ctest fuzz build/fuzz -L fuzz
		fi
		# every subcommand with --sysroot touches nothing outside the tree
		tap_stage sysroot-sandbox tests/host/sysroot_sandbox.sh
		# a skip planted in a real fleet check is counted and fails the skip check
		tap_stage skip-check tests/host/skip_check.sh
	fi
	note "---- the kselftests dropped into a kernel tree"
	tap_stage ksft-dropin make -s ksft-dropin
	note "---- VM bed failure paths"
	stage vm-failpaths make -s vm-failpaths
	if [ -x scripts/dkms-check.sh ]; then
		note "---- dkms"
		stage dkms-check scripts/dkms-check.sh
	fi
	deb_suites
	# the fetch started with the build: waited for, its failure named
	stage fetch-kernels fetch_wait
fi
if [ -n "$lane_pid" ]; then
	note "---- the guest lane (build/check/guest-lane.log)"
	lane_join
else
	guest_stages
fi

# Why each failed suite failed, from its log: what a failed test printed
# before its "not ok" (scripts/tap-failures.awk), else the log's tail. A CI
# run shows this output, never the logs in build/check.
for item in "${failed_items[@]}"; do
	case $item in
	host-vm-*|guest-helper-*) continue ;;	# printed where they failed
	kselftests-*) log=$LOGS/vm-${item#kselftests-}.log ;;
	*) log=$LOGS/$item.log ;;
	esac
	[ -s "$log" ] || continue
	note "---- why $item failed (build/check/${log##*/})"
	if why=$(awk -f scripts/tap-failures.awk "$log"); then
		printf '%s\n' "$why" | head -n 200
	else
		tail -n 30 "$log" | sed 's/^/     | /'
	fi
done

# Every skip with its reason, from every runner's log of this run (TAP
# "# SKIP", ctest); a skip that tests/expected-skips does not list (per
# kernel, with the reason it cannot run there) fails the check
# (scripts/skips.sh).
skip_report=$(scripts/skips.sh "$LOGS" "$LOGS/.start")
skip_rc=$?
skips=$(printf '%s\n' "$skip_report" | sed -n 's/^skip //p')
if [ -n "$skips" ]; then
	note "---- skipped ($(printf '%s\n' "$skips" | wc -l), each with its reason)"
	printf '%s\n' "$skips" | sed 's/^/     /'
fi
if [ "$skip_rc" = 2 ]; then
	note "FAIL tests/expected-skips cannot be read:"
	printf '%s\n' "$skip_report" | sed -n 's/^list /     /p'
	count 0 1 0; failed_items+=("expected-skips")
elif [ "$skip_rc" = 1 ]; then
	unexpected=$(printf '%s\n' "$skip_report" | sed -n 's/^unexpected //p')
	note "FAIL $(printf '%s\n' "$unexpected" | wc -l) skip(s) not in tests/expected-skips (each fails the check):"
	printf '%s\n' "$unexpected" | sed 's/^/     /'
	count 0 "$(printf '%s\n' "$unexpected" | wc -l)" 0; failed_items+=("unexpected-skips")
fi

note "----"
note "check took $(( $(date +%s) - t0 )) s"
[ ${#failed_items[@]} -gt 0 ] && note "failed: ${failed_items[*]}"
# shellcheck disable=SC2031 # the lane's counts are merged by lane_join
echo "$pass passed, $fail failed, $skip skipped"
# shellcheck disable=SC2031
[ "$fail" = 0 ]
