#!/bin/sh
# Add the extra Debian suites mltune needs, pinned low so that nothing on the
# host is upgraded from them by accident:
#   bookworm-backports (priority 100): libbpf >= 1.4, bpftool >= 7.4
#   sid (priority 1): only ever used through 'apt-get download' for the 7.2
#   kernel image, and by debootstrap for the 7.2 build chroot.
#   bullseye, bullseye-security (priority 1): only ever used through
#   'apt-get download' for the 5.10 headers of the compile-only matrix kernel.
# Idempotent; prints whether anything changed.
set -eu
MIRROR=${MLTUNE_DEBIAN_MIRROR:-http://deb.debian.org/debian}
SECURITY_MIRROR=${MLTUNE_DEBIAN_SECURITY_MIRROR:-http://deb.debian.org/debian-security}
src=/etc/apt/sources.list.d/mltune.sources
pin=/etc/apt/preferences.d/mltune
want_src="Types: deb
URIs: $MIRROR
Suites: bookworm-backports
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: $MIRROR
Suites: sid
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: $MIRROR
Suites: bullseye
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: $SECURITY_MIRROR
Suites: bullseye-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
"
want_pin="Package: *
Pin: release a=bookworm-backports
Pin-Priority: 100

Package: *
Pin: release a=unstable
Pin-Priority: 1

Package: *
Pin: release n=bullseye
Pin-Priority: 1

Package: *
Pin: release n=bullseye-security
Pin-Priority: 1
"
changed=0
if [ "$(cat "$src" 2>/dev/null)" != "$(printf '%s' "$want_src")" ]; then
	printf '%s' "$want_src" >"$src"; changed=1
fi
if [ "$(cat "$pin" 2>/dev/null)" != "$(printf '%s' "$want_pin")" ]; then
	printf '%s' "$want_pin" >"$pin"; changed=1
fi
echo "$changed"
