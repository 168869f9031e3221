#!/bin/bash
# Kernel matrix for mltune: resolve, fetch and cache the Debian kernels the VM
# test bed boots and the module builds against.
#
#   scripts/kernels.sh matrix [USE]        print the matrix's series (scripts/kernel-matrix):
#                                          boot (default: every series a guest boots),
#                                          guest (those with the guest suites) or
#                                          build (every series the module builds for)
#   scripts/kernels.sh use SERIES          print its use: guest, ksft or build
#   scripts/kernels.sh resolve SERIES      print the full KVER of a series
#   scripts/kernels.sh fetch SERIES        cache vmlinuz + modules, print dir
#   scripts/kernels.sh headers SERIES      print the headers' build dir (the
#                                          headers are unpacked into the cache
#                                          first, never installed; 7.2's are
#                                          the sid chroot's)
#   scripts/kernels.sh headers --cached SERIES
#                                          the same without fetching: exit 1
#                                          where they are not there
#   scripts/kernels.sh list                print "SERIES KVER" for the matrix
#
# Overrides (exact KVER, e.g. 6.12.117+deb12-amd64): MLTUNE_KVER_<SERIES>
# with every '.' and '-' of the series as '_' (MLTUNE_KVER_6_12_rt).
# Cache: ${XDG_CACHE_HOME:-$HOME/.cache}/mltune/kernels/KVER and headers/KVER
# (never in the tree).
set -euo pipefail

MATRIX_FILE=$(dirname "$0")/kernel-matrix
# matrix_of USE: the series of that use, in the file's order
matrix_of() {
	awk -v want="$1" '!/^#/ && NF {
		u = $3 == "" ? "guest" : $3
		if (want == "build" || want == u || (want == "boot" && u != "build")) {
			printf "%s%s", sep, $1; sep = " "
		}
	} END { print "" }' "$MATRIX_FILE"
}
MATRIX=$(matrix_of build)
CACHE=${MLTUNE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/mltune}

die() { echo "kernels.sh: $*" >&2; exit 1; }

# Newest KVER of a series that has both a headers package and an image.
resolve() {
	local series=$1 var ov re cands
	var=${series//./_}; var=MLTUNE_KVER_${var//-/_}
	ov=${!var:-}
	if [ -n "$ov" ]; then echo "$ov"; return; fi
	# Cached answer, valid while the apt lists are unchanged.
	local stamp cachef=$CACHE/resolved-$series
	stamp=$(stat -c %Y /var/lib/apt/lists 2>/dev/null || echo 0)
	if [ -f "$cachef" ] && [ "$(sed -n 2p "$cachef")" = "$stamp" ]; then
		sed -n 1p "$cachef"; return
	fi
	re=$(awk -v s="$series" '!/^#/ && $1 == s { print $2 }' "$MATRIX_FILE")
	[ -n "$re" ] || die "unknown kernel series '$series' (matrix: $MATRIX)"
	re="^linux-headers-($re)\$"
	cands=$(apt-cache pkgnames linux-headers- 2>/dev/null |
		sed -nE "s/$re/\1/p" | sort -V -r)
	local k use
	use=$(use_of "$series")
	for k in $cands; do
		# a compile-only kernel needs its headers, a booted one its image too
		if [ "$use" = build ] || image_pkgs "$k" >/dev/null 2>&1; then
			mkdir -p "$CACHE" && printf '%s\n%s\n' "$k" "$stamp" >"$cachef"
			echo "$k"; return
		fi
	done
	die "no Debian kernel of series $series found in the apt lists (run 'make deps' first)"
}

use_of() {
	local u
	u=$(awk -v s="$1" '!/^#/ && $1 == s { print ($3 == "" ? "guest" : $3) }' "$MATRIX_FILE")
	[ -n "$u" ] || die "unknown kernel series '$1' (matrix: $MATRIX)"
	echo "$u"
}

# Packages that hold vmlinuz and the modules for KVER.
image_pkgs() {
	local k=$1 p
	case $k in
	7.*) # split packaging: vmlinuz in linux-binary-*, modules separately
		for p in "linux-binary-$k" "linux-modules-$k" "linux-base-$k"; do
			apt-cache show "$p" >/dev/null 2>&1 || return 1
		done
		echo "linux-binary-$k linux-modules-$k linux-base-$k" ;;
	*)
		for p in "linux-image-$k-unsigned" "linux-image-$k"; do
			if apt-cache show "$p" >/dev/null 2>&1; then echo "$p"; return 0; fi
		done
		return 1 ;;
	esac
}

# Debian's packages leave modules.dep to depmod at install time.
depmod_dir() {
	local dir=$1 k=$2 base
	[ -s "$dir/modules/modules.dep" ] && return 0
	base=$(mktemp -d)
	mkdir -p "$base/lib/modules"
	ln -s "$dir/modules" "$base/lib/modules/$k"
	depmod -b "$base" "$k" || die "depmod for $k failed"
	rm -rf "$base"
}

fetch() {
	local series=$1 k dir tmp p
	k=$(resolve "$series")
	dir=$CACHE/kernels/$k
	if [ -f "$dir/.complete" ]; then depmod_dir "$dir" "$k"; echo "$dir"; return; fi
	# One fetch of a kernel at a time: a concurrent run (the guest lane of
	# scripts/check.sh beside the rest) waits for it and uses what it unpacked.
	mkdir -p "$CACHE"
	local lock
	exec {lock}>"$CACHE/.fetch-$k.lock"
	flock "$lock"
	if [ -f "$dir/.complete" ]; then exec {lock}>&-; echo "$dir"; return; fi
	echo "kernels.sh: fetching kernel $k into $dir" >&2
	tmp=$(mktemp -d "$CACHE/.fetch.XXXXXX")
	trap 'rm -rf "$tmp"' RETURN
	for p in $(image_pkgs "$k") ; do
		(cd "$tmp" && apt-get download -qq -o APT::Sandbox::User=root "$p" >&2) || die "cannot download $p"
	done
	mkdir -p "$tmp/root"
	for p in "$tmp"/*.deb; do dpkg-deb -x "$p" "$tmp/root"; done
	local vmlinuz="" c
	for c in "$tmp/root/boot/vmlinuz-$k" "$tmp/root/usr/lib/modules/$k/vmlinuz" \
		 "$tmp/root/lib/modules/$k/vmlinuz"; do
		if [ -f "$c" ]; then vmlinuz=$c; break; fi
	done
	[ -n "$vmlinuz" ] || die "no vmlinuz in the packages of $k"
	[ -d "$tmp/root/lib/modules/$k" ] || [ -d "$tmp/root/usr/lib/modules/$k" ] ||
		die "no modules in the packages of $k"
	rm -rf "$dir"; mkdir -p "$dir"
	cp "$vmlinuz" "$dir/vmlinuz"
	if [ -d "$tmp/root/usr/lib/modules/$k" ]; then
		mv "$tmp/root/usr/lib/modules/$k" "$dir/modules"
	else
		mv "$tmp/root/lib/modules/$k" "$dir/modules"
	fi
	for c in "$tmp/root/boot/config-$k" "$tmp/root/usr/lib/linux/$k/config" \
		 "$dir/modules/config"; do
		if [ -f "$c" ]; then cp "$c" "$dir/config"; break; fi
	done
	rm -f "$dir/modules/vmlinuz"
	echo "$k" >"$dir/kver"
	depmod_dir "$dir" "$k"
	touch "$dir/.complete"
	exec {lock}>&-
	echo "$dir"
}

# A series' headers (7.2's aside, which the sid chroot has): headers,
# common headers and kbuild tools unpacked into the cache, where their
# relative scripts/ and tools/ links resolve. Not installed: the headers
# package depends on its linux-image, whose installation builds an
# initramfs for a kernel this host never boots (and bullseye's 5.10 cannot
# be installed here at all).
fetch_headers() {
	local k=$1 dir=$CACHE/headers/$1 tmp p deps lock
	if [ -f "$dir/.complete" ]; then return; fi
	mkdir -p "$CACHE/headers"
	# One fetch of a header set at a time (the guest lane builds its
	# kernel's module beside the rest), as for kernels.
	exec {lock}>"$CACHE/.fetch-headers-$k.lock"
	flock "$lock"
	if [ -f "$dir/.complete" ]; then exec {lock}>&-; return; fi
	echo "kernels.sh: fetching the headers of $k into $dir" >&2
	tmp=$(mktemp -d "$CACHE/.fetch.XXXXXX")
	trap 'rm -rf "$tmp"; exec {lock}>&-; trap - RETURN' RETURN
	# Its common half and kbuild tools, as its Depends name them
	# (linux-headers-6.12.117+deb12-common-rt, linux-kbuild-6.12.117+deb12);
	# not its linux-image, which installing the package would pull in.
	deps=$(apt-cache show "linux-headers-$k" | sed -n 's/^Depends: //p' | head -1 | tr ',' '\n' |
		sed -E 's/^ *//; s/[ |].*//' | grep -E '^linux-(headers-.*-common.*|kbuild-.*)$')
	[ "$(printf '%s\n' "$deps" | grep -c .)" = 2 ] ||
		die "linux-headers-$k: cannot find its common headers and kbuild packages in its Depends"
	for p in "linux-headers-$k" $deps; do
		(cd "$tmp" && apt-get download -qq -o APT::Sandbox::User=root "$p" >&2) || die "cannot download $p"
	done
	mkdir -p "$tmp/root"
	for p in "$tmp"/*.deb; do dpkg-deb -x "$p" "$tmp/root"; done
	[ -f "$tmp/root/usr/src/linux-headers-$k/Makefile" ] || die "no kbuild Makefile in the headers of $k"
	# the Makefile includes its common half by absolute path
	sed -i "s|^include /usr/src/|include $dir/usr/src/|" "$tmp/root/usr/src/linux-headers-$k/Makefile"
	rm -rf "$dir"; mv "$tmp/root" "$dir"
	touch "$dir/.complete"
}

headers() {
	local k cached=0 dir
	if [ "$1" = --cached ]; then cached=1; shift; fi
	k=$(resolve "$1")
	case $k in
	7.*) dir=$CACHE/sid-chroot-$k/usr/src/linux-headers-$k ;;
	*)
		[ "$cached" = 1 ] || fetch_headers "$k"
		dir=$CACHE/headers/$k/usr/src/linux-headers-$k ;;
	esac
	[ "$cached" = 0 ] || [ -f "$dir/Makefile" ] || return 1
	echo "$dir"
}

cmd=${1:-list}; shift || true
case $cmd in
resolve) resolve "$1" ;;
fetch) fetch "$1" ;;
headers) headers "$@" ;;
image-pkgs) image_pkgs "$(resolve "$1")" ;;
list) for s in $MATRIX; do echo "$s $(resolve "$s") $(use_of "$s")"; done ;;
matrix)
	case ${1:-boot} in
	boot|guest|build) matrix_of "${1:-boot}" ;;
	*) die "kernels.sh matrix: unknown use '$1' (boot, guest or build)" ;;
	esac ;;
use) use_of "$1" ;;
*) die "usage: kernels.sh matrix [USE]|use|resolve|fetch|headers|list [SERIES]" ;;
esac
