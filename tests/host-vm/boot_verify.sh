#!/bin/bash
# Host-side VM test: 'mltunectl boot verify' in a guest booted with the
# fragment 'mltunectl boot show' computes for the guest's topology passes;
# in a guest booted without it, verify exits 1 with a diff naming the missing
# parameters.  Usage: boot_verify.sh [6.1|6.12|7.2]
#
# The fragment is computed on the host from the guest-q35 fake sysroot
# (tests/fixtures), which mirrors the guest tests/vm/run boots; the guest's own
# 'boot show' is compared with it, so a drift between the two fails the test.
set -u
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=${MLTUNE_BUILD:-$ROOT/build}
series=${1:-7.2}
ctl=$BUILD/userspace/mltunectl
n=0 pass=0 fail=0
ok() { n=$((n + 1)); pass=$((pass + 1)); echo "ok $n $*"; }
notok() { n=$((n + 1)); fail=$((fail + 1)); echo "not ok $n $*"; }
show() { sed 's/^/# /' "$1" | tail -n "${2:-25}"; }

echo "TAP version 13"
echo "1..4"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

if [ ! -x "$ctl" ]; then
	echo "# $ctl not built"
	echo "# Totals: pass:0 fail:1 xfail:0 xpass:0 skip:0 error:0"
	exit 1
fi
python3 "$ROOT/tests/fixtures/gen_fixtures.py" "$tmp/fx" guest-q35 >/dev/null
frag=$("$ctl" --sysroot "$tmp/fx/guest-q35" boot show --profile training 2>"$tmp/show.err")
case $frag in
*nohz_full=*) ok "boot show on the guest layout: $frag" ;;
*) notok "boot show on the guest layout"; show "$tmp/show.err"; frag="" ;;
esac

# 1. Booted with the fragment: verify passes, and the guest computes the same fragment.
MLTUNE_VM_TIMEOUT=${MLTUNE_VM_TIMEOUT:-120} "$ROOT/tests/vm/run" --kernel "$series" --no-build --no-module \
	--cmdline "$frag" -- sh -c \
	'mltunectl boot verify --profile training; rc=$?; echo "GUEST_FRAGMENT=$(mltunectl boot show --profile training)"; exit $rc' \
	>"$tmp/with.log" 2>&1
rc=$?
if [ "$rc" = 0 ] && grep -q "boot parameters match the plan" "$tmp/with.log"; then
	ok "$series: boot verify passes when booted with the fragment"
else
	notok "$series: boot verify passes when booted with the fragment (exit $rc)"; show "$tmp/with.log"
fi
guest=$(sed -n 's/^GUEST_FRAGMENT=//p' "$tmp/with.log" | tr -d '\r')
if [ -n "$guest" ] && [ "$guest" = "$frag" ]; then
	ok "$series: the guest computes the same fragment as its fixture"
else
	notok "$series: the guest computes the same fragment as its fixture"
	echo "# host (fixture): $frag"; echo "# guest:          $guest"
fi

# 2. Booted without it: verify exits 1 with a diff.
MLTUNE_VM_TIMEOUT=${MLTUNE_VM_TIMEOUT:-120} "$ROOT/tests/vm/run" --kernel "$series" --no-build --no-module \
	-- mltunectl boot verify --profile training >"$tmp/without.log" 2>&1
rc=$?
if [ "$rc" = 1 ] && grep -q "boot parameters differ from the plan" "$tmp/without.log" &&
	grep -q "expected: nohz_full=" "$tmp/without.log" &&
	grep -q "/sys/devices/system/cpu/isolated:" "$tmp/without.log"; then
	ok "$series: boot verify exits 1 with a diff when booted without the fragment"
else
	notok "$series: boot verify exits 1 with a diff when booted without the fragment (exit $rc)"
	show "$tmp/without.log"
fi
echo "# Totals: pass:$pass fail:$fail xfail:0 xpass:0 skip:0 error:0"
[ "$fail" = 0 ]
