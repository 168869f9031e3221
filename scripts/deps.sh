#!/bin/bash
# Install every Debian package mltune needs. Root, no prompts, idempotent.
#   scripts/deps.sh          install what is missing
#   scripts/deps.sh --check  exit 0 when nothing is missing, 1 otherwise
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
export DEBIAN_FRONTEND=noninteractive

BASE_PKGS=(
	build-essential cmake ninja-build pkg-config git python3 kmod bc file ccache
	gcc-12 libelf-dev libssl3 zlib1g pahole
	qemu-system-x86 busybox-static cpio xz-utils zstd debootstrap dkms sparse
	libnl-3-dev libnl-genl-3-dev libnl-route-3-dev
	libcli11-dev libtomlplusplus-dev nlohmann-json3-dev
	libgtest-dev libgmock-dev googletest
	liburing-dev libnuma-dev numactl stress-ng
	linux-source-6.12
	clang-16 llvm-16 libclang-rt-16-dev clang-format clang-tidy-22
	ethtool iproute2 procps util-linux tuned jq strace rsync
	debhelper dh-dkms dpkg-dev fakeroot lintian qemu-utils e2fsprogs
	linux-perf prometheus
	openssh-client ansible ansible-lint curl shellcheck groff-base python3-docutils
)
BACKPORTS_PKGS=(libbpf-dev bpftool)

missing() {
	local p st
	for p in "$@"; do
		st=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
		[ "$st" = "install ok installed" ] || echo "$p"
	done
}

bpf_ok() {
	# libbpf >= 1.4 and bpftool >= 7.4 (bookworm's own 1.1/7.1 are too old)
	local lv bv
	lv=$(dpkg-query -W -f='${Version}' libbpf-dev 2>/dev/null || echo 0)
	bv=$(dpkg-query -W -f='${Version}' bpftool 2>/dev/null || echo 0)
	dpkg --compare-versions "$lv" ge 1:1.4 && dpkg --compare-versions "$bv" ge 7.4
}

# No linux-headers package is installed: each depends on its linux-image,
# whose installation builds an initramfs for a kernel this host never
# boots. scripts/kernels.sh unpacks the headers (with their common half
# and kbuild tools, which need libssl3, zlib1g and pahole) into the cache
# when a module is first built for a kernel.

if [ "$(id -u)" != 0 ]; then
	echo "deps.sh: must run as root (apt-get install)" >&2
	exit 1
fi

if [ "${1:-}" = --check ]; then
	[ -z "$(missing "${BASE_PKGS[@]}")" ] && bpf_ok && command -v npm >/dev/null
	exit
fi

changed=$("$here/apt-sources.sh")
stamp=/var/lib/apt/periodic/mltune-update-stamp
if [ "$changed" = 1 ] || [ ! -e "$stamp" ] ||
   [ -n "$(find "$stamp" -mmin +1440 2>/dev/null)" ]; then
	echo "deps: apt-get update"
	apt-get update -qq
	mkdir -p "$(dirname "$stamp")"; touch "$stamp"
fi

mapfile -t need < <(missing "${BASE_PKGS[@]}")
if [ "${#need[@]}" -gt 0 ]; then
	echo "deps: installing ${need[*]}"
	apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi
# tests/fleet/k8s.sh validates the manifests with npm packages: Node.js and
# npm, Debian's unless the machine already has them (a nodejs that bundles
# npm conflicts with Debian's npm package).
if ! command -v npm >/dev/null; then
	echo "deps: installing nodejs npm"
	apt-get install -y -qq --no-install-recommends nodejs npm >/dev/null
fi
if ! bpf_ok; then
	echo "deps: installing libbpf/bpftool from bookworm-backports"
	apt-get install -y -qq --no-install-recommends -t bookworm-backports \
		"${BACKPORTS_PKGS[@]}" >/dev/null
fi
echo "deps: all Debian packages present"
