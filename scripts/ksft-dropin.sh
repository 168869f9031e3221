#!/bin/bash
# make ksft-dropin: the kselftests as kernel CI builds them, dropped into a
# kernel tree (linux-source-6.12's tools/testing/selftests, staged in
# build/ksft by make selftests):
#   1. without MLTUNE_UAPI and without the mltune-dkms package, the build
#      stops with an error that names MLTUNE_UAPI;
#   2. make -C tools/testing/selftests TARGETS=mltune MLTUNE_UAPI=... builds
#      every program of the suite;
#   3. install (kselftest_install.sh's path) puts them, their settings and
#      kselftest-list.txt where run_kselftest.sh finds them: -l lists every
#      mltune test;
#   4. gen_tar packs them into kselftest.tar.gz.
# TAP, "# Totals:"; exit 0 only when every check passed.
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
src=$ROOT/build/ksft
out=$ROOT/build/ksft-dropin
[ -f "$src/tools/testing/selftests/run_kselftest.sh" ] || {
	echo "ksft-dropin: $src is not staged: run 'make selftests'" >&2; exit 2; }
rm -rf "$out" && mkdir -p "$out" || exit 2
cp -a "$src" "$out/tree" || exit 2
st=$out/tree/tools/testing/selftests
# A kernel tree never has the repository's kmod/ beside it.
rm -rf "$st/mltune" && cp -a "$ROOT/tests/selftests/mltune" "$st/mltune" || exit 2
uapi=$ROOT/kmod/include/uapi
# The suite's programs, as lib.mk's emit_tests names them ("mltune:PROG").
mapfile -t progs < <(make -s -C "$st/mltune" emit_tests MLTUNE_UAPI="$uapi" 2>/dev/null |
	sed -nE 's/^[^:]*:([^:]+)$/\1/p')

n=0 pass=0 fail=0 skip=0
ok() { n=$((n + 1)); pass=$((pass + 1)); echo "ok $n $*"; }
not_ok() { n=$((n + 1)); fail=$((fail + 1)); echo "not ok $n $*"; }
skip() { n=$((n + 1)); skip=$((skip + 1)); echo "ok $n $* # SKIP"; }
echo "TAP version 13"
echo "1..5"

# 1. No header: a clear error, not a compiler's. (Only when no mltune-dkms
# source is installed here; with it the header is found.)
if compgen -G '/usr/src/mltune-*/include/uapi/linux/mltune.h' >/dev/null; then
	skip "without MLTUNE_UAPI or mltune-dkms the build stops and names MLTUNE_UAPI (mltune-dkms is installed here)"
elif make -s -C "$st" TARGETS=mltune >"$out/noheader.log" 2>&1; then
	not_ok "without MLTUNE_UAPI or mltune-dkms the build stops and names MLTUNE_UAPI (it built)"
elif grep -q 'linux/mltune.h not found.*MLTUNE_UAPI' "$out/noheader.log"; then
	ok "without MLTUNE_UAPI or mltune-dkms the build stops and names MLTUNE_UAPI"
else
	not_ok "without MLTUNE_UAPI or mltune-dkms the build stops and names MLTUNE_UAPI"
	sed 's/^/# /' "$out/noheader.log" | tail -n 10
fi

# 2. The kernel-tree build.
if make -s -C "$st" TARGETS=mltune MLTUNE_UAPI="$uapi" >"$out/build.log" 2>&1; then
	missing=""
	for p in "${progs[@]}"; do [ -x "$st/mltune/$p" ] || missing="$missing $p"; done
	if [ ${#progs[@]} -gt 0 ] && [ -z "$missing" ]; then
		ok "make -C tools/testing/selftests TARGETS=mltune builds all ${#progs[@]} programs"
	else
		not_ok "make -C tools/testing/selftests TARGETS=mltune builds every program (missing:${missing:- the list})"
	fi
else
	not_ok "make -C tools/testing/selftests TARGETS=mltune builds every program"
	sed 's/^/# /' "$out/build.log" | tail -n 20
fi

# 3. install and run_kselftest.sh -l
inst=$out/install
if make -s -C "$st" TARGETS=mltune MLTUNE_UAPI="$uapi" install INSTALL_PATH="$inst" >"$out/install.log" 2>&1 &&
	[ -x "$inst/mltune/hostile_test" ] && [ -f "$inst/mltune/settings" ]; then
	ok "install puts the programs and their settings under INSTALL_PATH/mltune"
else
	not_ok "install puts the programs and their settings under INSTALL_PATH/mltune"
	sed 's/^/# /' "$out/install.log" | tail -n 20
fi
listed=$("$inst/run_kselftest.sh" -l 2>&1 | grep -c '^mltune:')
if [ "$listed" = "${#progs[@]}" ] && [ "$listed" -gt 0 ]; then
	ok "run_kselftest.sh -l lists every mltune test ($listed)"
else
	not_ok "run_kselftest.sh -l lists every mltune test (${#progs[@]}; it lists $listed)"
fi

# 4. gen_tar
tarball=$st/kselftest_install/kselftest-packages/kselftest.tar.gz
rm -f "$tarball"
make -s -C "$st" TARGETS=mltune MLTUNE_UAPI="$uapi" gen_tar >"$out/gen_tar.log" 2>&1
packed=$(tar -tzf "$tarball" 2>/dev/null)
if printf '%s\n' "$packed" | grep -qx './mltune/hostile_test' &&
	printf '%s\n' "$packed" | grep -qx './mltune/settings'; then
	ok "gen_tar packs the suite into kselftest.tar.gz"
else
	not_ok "gen_tar packs the suite into kselftest.tar.gz"
	sed 's/^/# /' "$out/gen_tar.log" | tail -n 20
fi
echo "# Totals: pass:$pass fail:$fail xfail:0 xpass:0 skip:$skip error:0"
[ "$fail" = 0 ]
