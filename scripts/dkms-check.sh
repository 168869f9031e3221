#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# make dkms-check: prove the DKMS package builds.
#
#   scripts/dkms-check.sh [KVER...]
#   scripts/dkms-check.sh --install [KVER]   (make dkms-install: add, build
#       and install for KVER, default the running kernel; kept installed)
#
# Assembles the DKMS source tree (kmod/ + dkms/dkms.conf) in
# /usr/src/mltune-<version>, runs "dkms add" and "dkms build -k KVER" for
# the 6.1 and 6.12 kernels of the matrix (6.12-rt too; KVER arguments:
# those), against their headers as scripts/kernels.sh unpacks them into the
# cache (--kernelsourcedir: this host installs no linux-headers package),
# then "dkms remove" and deletes the tree, also on failure; a leftover from
# an interrupted run is removed first, so the script is idempotent. Nothing
# is installed or loaded.
#
# 7.2: its kbuild tools need glibc 2.38 and gcc-16, so dkms on this
# bookworm host cannot build for it; the sid build chroot has no dkms.
# Instead the same MAKE[0] command dkms.conf gives is run on the same DKMS
# source tree inside the chroot (scripts/sid-chroot.sh) when the chroot
# exists. MLTUNE_DKMS_72=0 skips that.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
conf=$ROOT/dkms/dkms.conf
ver=$(sed -n 's/^PACKAGE_VERSION="\(.*\)"/\1/p' "$conf")
name=mltune
src=/usr/src/$name-$ver
die() { echo "dkms-check: $*" >&2; exit 1; }

command -v dkms >/dev/null || die "dkms missing (apt-get install dkms)"
[ "$(id -u)" = 0 ] || die "needs root (dkms writes /var/lib/dkms and /usr/src)"

cleanup() {
	dkms remove -m "$name" -v "$ver" --all >/dev/null 2>&1 || true
	rm -rf "$src"
}
install=0
if [ "${1:-}" = --install ]; then
	install=1
	shift
	set -- "${1:-$(uname -r)}"
	[ -f "/lib/modules/$1/build/Makefile" ] ||
		die "no headers for $1: apt-get install linux-headers-$1"
fi
[ "$install" = 1 ] || trap cleanup EXIT
cleanup

# The 6.1 and 6.12 kernels of the matrix, and their headers in the cache.
declare -A kdir
if [ "$install" = 0 ]; then
	matrix=()
	for s in $("$ROOT/scripts/kernels.sh" matrix build); do
		k=$("$ROOT/scripts/kernels.sh" resolve "$s") || die "cannot resolve kernel series $s"
		case $k in
		6.1.* | 6.12.*)
			kdir[$k]=$("$ROOT/scripts/kernels.sh" headers "$s") || die "no headers for $k"
			matrix+=("$k") ;;
		esac
	done
	[ $# -gt 0 ] || set -- "${matrix[@]}"
	for k in "$@"; do
		[ -n "${kdir[$k]:-}" ] || die "$k is not a 6.1 or 6.12 kernel of the matrix (${matrix[*]})"
	done
fi

# The DKMS source tree: kmod/ without build output, plus dkms.conf.
mkdir -p "$src"
(cd "$ROOT/kmod" && tar --exclude=generated --exclude='*.o' --exclude='*.ko' \
	--exclude='*.mod*' --exclude='.*.cmd' --exclude=Module.symvers \
	--exclude=modules.order -cf - .) | tar -xf - -C "$src"
cp "$conf" "$src/dkms.conf"
# The committed built-in profiles must match the TOML files.
if python3 -c 'import tomllib' 2>/dev/null && [ -d "$ROOT/userspace/profiles" ]; then
	python3 "$ROOT/kmod/scripts/gen_builtin.py" "$ROOT/userspace/profiles" \
		/tmp/mltune_builtin.h.$$ training inference
	if ! cmp -s /tmp/mltune_builtin.h.$$ "$src/mltune_builtin.h"; then
		rm -f /tmp/mltune_builtin.h.$$
		die "kmod/mltune_builtin.h is stale: run 'make -C kmod builtin' and commit it"
	fi
	rm -f /tmp/mltune_builtin.h.$$
fi

dkms add -m "$name" -v "$ver"
if [ "$install" = 1 ]; then
	dkms install -m "$name" -v "$ver" -k "$1"
	echo "dkms: $name/$ver installed for $1; load it with 'modprobe $name'"
	exit 0
fi
fail=0
for k in "$@"; do
	echo "dkms-check: dkms build $name/$ver for $k"
	if dkms build -m "$name" -v "$ver" -k "$k" --kernelsourcedir "${kdir[$k]}"; then
		echo "ok dkms build $k"
	else
		log=/var/lib/dkms/$name/$ver/build/make.log
		[ -f "$log" ] && tail -30 "$log" >&2
		echo "not ok dkms build $k"
		fail=1
	fi
done

if [ "${MLTUNE_DKMS_72:-1}" = 1 ]; then
	k72=$("$ROOT/scripts/kernels.sh" resolve 7.2 2>/dev/null || true)
	cache=${MLTUNE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/mltune}
	if [ -n "$k72" ] && [ -f "$cache/sid-chroot-$k72/.complete" ]; then
		echo "dkms-check: MAKE[0] of dkms.conf in the sid chroot for $k72"
		rm -rf "$src.72" && cp -a "$src" "$src.72"
		if MLTUNE_SRC="$src.72" "$ROOT/scripts/sid-chroot.sh" run "$k72" \
			make KDIR="/usr/src/linux-headers-$k72" modules >/dev/null &&
			[ -f "$src.72/mltune.ko" ]; then
			echo "ok chroot build $k72"
		else
			echo "not ok chroot build $k72"
			fail=1
		fi
		rm -rf "$src.72"
	else
		echo "ok chroot build 7.2 # SKIP no sid chroot (make deps creates it)"
	fi
fi
exit $fail
