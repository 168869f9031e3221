#!/bin/bash
# Host-side VM test: 'mltunectl boot verify' in a guest booted with the
# fragment 'mltunectl boot show' computes for the guest's topology passes;
# in a guest booted without it, verify exits 1 with a diff naming the missing
# parameters.  Usage: boot_verify.sh [6.1|6.12|7.2]
#
# Two boots: the first (no extra parameters) checks the failing verify and
# takes the fragment from the guest's own 'boot show'; the second boots with
# it.  Under a minute per kernel on an idle host.
set -u
. "$(dirname "$0")/lib.sh"

hv_begin 3
vm() { MLTUNE_VM_TIMEOUT=${MLTUNE_VM_TIMEOUT:-120} "$ROOT/tests/vm/run" --kernel "$series" --no-build --no-module "$@"; }

# 1. Booted without the fragment: verify exits 1 with a diff; the guest's own
#    'boot show' gives the fragment for the second boot.
vm -- sh -c 'mltunectl boot verify --profile training; echo "VERIFY_RC=$?";
	echo "GUEST_FRAGMENT=$(mltunectl boot show --profile training)"' >"$tmp/without.log" 2>&1
rc=$(sed -n 's/^VERIFY_RC=//p' "$tmp/without.log" | tr -d '\r')
frag=$(sed -n 's/^GUEST_FRAGMENT=//p' "$tmp/without.log" | tr -d '\r')
if [ "$rc" = 1 ] && grep -q "boot parameters differ from the plan" "$tmp/without.log" &&
	grep -q "expected: nohz_full=" "$tmp/without.log" &&
	grep -q "/sys/devices/system/cpu/isolated:" "$tmp/without.log"; then
	ok "$series: boot verify exits 1 with a diff when booted without the fragment"
else
	notok "$series: boot verify exits 1 with a diff when booted without the fragment (verify exit '$rc')"
	show "$tmp/without.log"
fi
case $frag in
*nohz_full=*) ok "$series: boot show in the guest: $frag" ;;
*) notok "$series: boot show in the guest gives a fragment with nohz_full"; show "$tmp/without.log"; frag="" ;;
esac
# The guest-q35 fixture mirrors this guest; older kernels under TCG may see no
# SMT siblings, which changes the plan, so a mismatch is only reported.
python3 "$ROOT/tests/fixtures/gen_fixtures.py" "$tmp/fx" guest-q35 >/dev/null &&
	fixture=$("$ctl" --sysroot "$tmp/fx/guest-q35" boot show --profile training 2>/dev/null)
[ "${fixture:-}" = "$frag" ] || echo "# note: the guest-q35 fixture gives '${fixture:-}'"

# 2. Booted with the fragment: verify passes.
vm --cmdline "$frag" -- mltunectl boot verify --profile training >"$tmp/with.log" 2>&1
rc=$?
if [ -n "$frag" ] && [ "$rc" = 0 ] && grep -q "boot parameters match the plan" "$tmp/with.log"; then
	ok "$series: boot verify passes when booted with the fragment"
else
	notok "$series: boot verify passes when booted with the fragment (exit $rc)"; show "$tmp/with.log"
fi
hv_end
