#!/bin/bash
# Build chroot for kernels whose kbuild tools need a newer glibc/gcc than
# bookworm has (7.2: built with gcc-16, kbuild needs glibc 2.38).
#
#   scripts/sid-chroot.sh ensure KVER    create (once) and print the chroot dir
#   scripts/sid-chroot.sh run KVER CMD.. run CMD inside it with /proc and the
#                                        source tree bind-mounted at /src
#
# Cached at ${XDG_CACHE_HOME:-$HOME/.cache}/mltune/sid-chroot-KVER.
set -euo pipefail
CACHE=${MLTUNE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/mltune}
MIRROR=${MLTUNE_DEBIAN_MIRROR:-http://deb.debian.org/debian}
die() { echo "sid-chroot.sh: $*" >&2; exit 1; }

ensure() {
	local k=$1 dir=$CACHE/sid-chroot-$1 tmp
	# An external-module build whose M= directory went away while it ran (a
	# source tree removed under a killed check) makes kbuild write its
	# output, and a Makefile of its own, into the headers: such a chroot is
	# made anew rather than used.
	if [ -f "$dir/.complete" ] && grep -qs '^export KBUILD_EXTMOD' "$dir/usr/src/linux-headers-$k/Makefile"; then
		echo "sid-chroot.sh: the headers in $dir were written by an interrupted build: making the chroot anew" >&2
		rm -f "$dir/.complete"
	fi
	if [ -f "$dir/.complete" ]; then echo "$dir"; return; fi
	command -v debootstrap >/dev/null || die "debootstrap missing (run 'make deps')"
	echo "sid-chroot.sh: creating build chroot for $k in $dir (about a minute)" >&2
	mkdir -p "$CACHE"
	tmp=$(mktemp -d "$CACHE/.sid.XXXXXX")
	if ! debootstrap --variant=minbase \
		--include=gcc,make,libc6-dev,libelf-dev,linux-headers-"$k" \
		sid "$tmp" "$MIRROR" >"$tmp.log" 2>&1; then
		tail -20 "$tmp.log" >&2
		rm -rf "$tmp"
		die "debootstrap of sid with linux-headers-$k failed (log above)"
	fi
	rm -f "$tmp.log"
	rm -rf "$dir"; mv "$tmp" "$dir"
	touch "$dir/.complete"
	echo "$dir"
}

# The mounts live in a private mount namespace of this run (unshare -m), so
# runs from several source trees at once each see their own /src, and a run
# that is killed leaves no mount behind.
run() {
	local k=$1 dir; shift
	dir=$(ensure "$k")
	local src=${MLTUNE_SRC:-$(cd "$(dirname "$0")/.." && pwd)}
	mkdir -p "$dir/src"
	unshare -m --propagation private /bin/sh -c '
		dir=$1 src=$2; shift 2
		mount -t proc proc "$dir/proc" && mount --bind "$src" "$dir/src" || exit 1
		exec chroot "$dir" /bin/sh -c '\''cd /src && "$@"'\'' sh "$@"' sh "$dir" "$src" "$@"
}

case ${1:-} in
ensure) ensure "$2" ;;
run) shift; run "$@" ;;
*) die "usage: sid-chroot.sh ensure KVER | run KVER CMD..." ;;
esac
