#!/bin/sh
# The layer rule of libmltune (scripts/check-layers.py) holds on this tree,
# and the check fails on each kind of violation planted in a copy of it: an
# upward include, a domain including another domain, another folder's
# private header, a public header including a private one, and a listed
# exception that no longer occurs.
#   layers_check.sh SRCDIR
set -eu
src=$1
check=$src/scripts/check-layers.py
py=$(command -v python3) || { echo "layers_check: python3 missing: run 'make deps'" >&2; exit 1; }
pass=0 fail=0
ok() { pass=$((pass + 1)); echo "ok - $1"; }
bad() { fail=$((fail + 1)); echo "not ok - $1"; }

if "$py" "$check" "$src/userspace/lib"; then ok "the tree holds the layer rule"; else bad "the tree holds the layer rule"; fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# plant NAME FILE LINE EXPECT [new]: a copy of the library with LINE added
# at the top of FILE (a new file with "new") must fail the check with a
# message containing EXPECT.
plant() {
	rm -rf "${tmp:?}/lib" && cp -r "$src/userspace/lib" "$tmp/lib"
	f=$tmp/lib/$2
	if [ "${5:-}" = new ]; then : > "$f"; fi
	[ -f "$f" ] || { bad "$1: $2 missing"; return; }
	{ printf '%s\n' "$3"; cat "$f"; } > "$f.new" && mv "$f.new" "$f"
	if out=$("$py" "$check" "$tmp/lib"); then
		bad "$1: the check passed"
	elif printf '%s\n' "$out" | grep -qF -- "$4"; then
		ok "$1"
	else
		bad "$1: expected '$4' in: $out"
	fi
}
plant "upward include (base includes node)" src/base/cpulist.cpp '#include "mltune/node.hpp"' \
	'layer 0 (base) includes layer 3 (node)'
plant "model includes a domain" src/topology/topology.cpp '#include "mltune/feeder.hpp"' \
	'layer 1 (topology) includes layer 2 (feeder)'
plant "domain includes another domain" src/nic/plan.cpp '#include "mltune/sched.hpp"' \
	'domain nic includes domain sched'
plant "private header of another folder" src/node/follow.cpp '#include "switch/undo.hpp"' \
	'includes a private header of switch/'
plant "public header includes a private one" include/mltune/pool.hpp '#include "base/state_file.hpp"' \
	'a public header includes a private one'
plant "public header without an owner" include/mltune/zzz_new.hpp '#include "mltune/result.hpp"' \
	'a public header without an owner folder' new
# A listed exception that is gone fails: the list only shrinks.
rm -rf "${tmp:?}/lib" && cp -r "$src/userspace/lib" "$tmp/lib"
sed -i '/#include "sched\/internal.hpp"/d' "$tmp/lib/src/profile/sections.cpp"
if out=$("$py" "$check" "$tmp/lib"); then
	bad "a stale exception fails the check"
elif printf '%s\n' "$out" | grep -qF 'no longer occurs'; then
	ok "a stale exception fails the check"
else
	bad "a stale exception fails the check: $out"
fi
echo "layers_check: $pass passed, $fail failed"
[ "$fail" = 0 ]
