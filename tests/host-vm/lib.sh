# Sourced by the host-side VM tests (not executable, so make check does not
# run it): the kernel series from $1, KTAP output with a Totals line, a
# scratch directory, and the check that mltunectl was built.
#   . "$(dirname "$0")/lib.sh"; hv_begin PLANNED
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=${MLTUNE_BUILD:-$ROOT/build}
series=${1:-7.2}
ctl=$BUILD/userspace/mltunectl
n=0 pass=0 fail=0
ok() { n=$((n + 1)); pass=$((pass + 1)); echo "ok $n $*"; }
notok() { n=$((n + 1)); fail=$((fail + 1)); echo "not ok $n $*"; }
show() { sed 's/^/# /' "$1" | tail -n "${2:-25}"; }
hv_totals() { echo "# Totals: pass:$pass fail:$fail xfail:0 xpass:0 skip:0 error:0"; }

# hv_begin PLANNED: the KTAP header and $tmp; exits failed when mltunectl
# is not built.
hv_begin() {
	echo "TAP version 13"
	echo "1..$1"
	tmp=$(mktemp -d)
	trap 'rm -rf "$tmp"' EXIT
	if [ ! -x "$ctl" ]; then
		echo "# $ctl not built"
		fail=1
		hv_totals
		exit 1
	fi
}

# hv_end: the Totals line; the exit status says whether everything passed.
hv_end() {
	hv_totals
	[ "$fail" = 0 ]
}
