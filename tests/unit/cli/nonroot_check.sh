#!/bin/sh
# A switch by a user who is not root says it needs root, not which file
# refused: run as nobody (setpriv) on a tree whose /run/mltune is root's.
#   nonroot_check.sh MLTUNECTL
# Exit 77 (ctest: skipped) where this cannot run: not root, or no setpriv.
set -u
m=$1
if [ "$(id -u)" != 0 ] || ! command -v setpriv >/dev/null; then
	echo "nonroot_check: needs root and setpriv"
	exit 77
fi
t=$(mktemp -d /tmp/mltune-nonroot.XXXXXX)
trap 'rm -rf "$t"' EXIT
mkdir -p "$t/run/mltune" "$t/proc/sys/vm"
echo 60 >"$t/proc/sys/vm/swappiness"
chmod 755 "$t" "$t/run" "$t/run/mltune"
printf '[sysctl]\n"vm.swappiness" = { value = 5 }\n' >"$t/p.toml"
chmod 644 "$t/p.toml"
err=$(MLTUNE_NO_SERVICE=1 setpriv --reuid=65534 --regid=65534 --clear-groups \
	"$m" --sysroot "$t" switch "$t/p.toml" 2>&1 >/dev/null)
rc=$?
want="mltunectl: error: changing the node needs root (CAP_SYS_ADMIN"
case $err in
"$want"*) ;;
*) echo "nonroot_check: want '$want...', got (exit $rc): $err"; exit 1 ;;
esac
[ "$rc" = 1 ] || { echo "nonroot_check: exit $rc, want 1"; exit 1; }
[ "$(cat "$t/proc/sys/vm/swappiness")" = 60 ] || { echo "nonroot_check: the knob changed"; exit 1; }
echo "nonroot_check: $err"
