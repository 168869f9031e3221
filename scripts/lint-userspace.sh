#!/bin/bash
# clang-format check and clang-tidy over the C++ user space.
#   scripts/lint-userspace.sh [--tidy] [BUILD_DIR]
# Both run in make check (scripts/check.sh); --tidy adds clang-tidy-22
# (bookworm-security; $CLANG_TIDY names another) with .clang-tidy over
# BUILD_DIR's compile_commands.json (default build/userspace):
# 'make lint-tidy'.
set -euo pipefail
cd "$(dirname "$0")/.."
tidy=0
if [ "${1:-}" = --tidy ]; then tidy=1; shift; fi
build=${1:-build/userspace}
mapfile -t files < <(git ls-files 'userspace/*.cpp' 'userspace/*.hpp' 'tests/unit/*.cpp' 'tests/unit/*.hpp' 'tests/fuzz/*.cpp')
fmt=${CLANG_FORMAT:-clang-format}
"$fmt" --dry-run --Werror "${files[@]}"
echo "clang-format: clean (${#files[@]} files)"
[ "$tidy" = 1 ] || exit 0
[ -f "$build/compile_commands.json" ] || { echo "lint: configure $build first" >&2; exit 2; }
mapfile -t tus < <(printf '%s\n' "${files[@]}" | grep -E '\.cpp$' | grep -v '^tests/fuzz/')
tidy_bin=${CLANG_TIDY:-clang-tidy-22}
command -v "$tidy_bin" >/dev/null || { echo "lint: $tidy_bin not found: run 'make deps'" >&2; exit 2; }

# A translation unit that passed before with the same text, the same
# compile command, the same files it includes (ninja's dependency log:
# project and generated headers by content) and the same clang-tidy and
# .clang-tidy is not checked again: the cache key of each passing unit
# (scripts/tidy-keys.py) is kept in $MLTUNE_CACHE/clang-tidy. MLTUNE_TIDY_ALL=1
# checks every unit.
cache=${MLTUNE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/mltune}/clang-tidy
mkdir -p "$cache"
common=$({
	"$tidy_bin" --version
	git hash-object .clang-tidy
} | sha256sum | cut -c1-64)
todo=() keys=()
while read -r k tu; do
	[ "${MLTUNE_TIDY_ALL:-0}" != 1 ] && [ -e "$cache/$k" ] && continue
	todo+=("$tu"); keys+=("$k")
done < <(scripts/tidy-keys.py "$build" "$common" "${tus[@]}")
if [ ${#todo[@]} = 0 ]; then
	echo "$tidy_bin: clean (${#tus[@]} files, all unchanged since their last clean check)"
	exit 0
fi
# Each unit on its own, nproc at a time: a unit that passes is cached at
# once, so a run that fails or is stopped keeps what it has checked.
logdir=$build/clang-tidy.d
rm -rf "$logdir" && mkdir -p "$logdir"
for i in "${!todo[@]}"; do printf '%s %s\n' "${keys[$i]}" "${todo[$i]}"; done |
	LOGDIR=$logdir CACHE=$cache BUILD=$build TIDY=$tidy_bin xargs -P "$(nproc)" -L 1 sh -c '
		log=$LOGDIR/$(printf "%s" "$1" | tr / _).log
		if "$TIDY" --quiet -p "$BUILD" "$1" >"$log" 2>&1; then
			: >"$CACHE/$0"
		else
			printf "%s\n" "$1" >>"$LOGDIR/failed"
		fi'
cat "$logdir"/*.log >"$build/clang-tidy.log" 2>/dev/null
if [ -s "$logdir/failed" ]; then
	# The findings only (with the source line and caret), last, where a
	# log tail shows them; every unit's output is in clang-tidy.log.
	echo "$tidy_bin: findings in $(wc -l <"$logdir/failed") of ${#todo[@]} files (full log: $build/clang-tidy.log):"
	grep -A2 -E '^[^ ]+:[0-9]+:[0-9]+: (error|warning):' "$build/clang-tidy.log" | grep -v '^--$' || cat "$build/clang-tidy.log"
	exit 1
fi
echo "$tidy_bin: clean (${#todo[@]} files checked, $(( ${#tus[@]} - ${#todo[@]} )) unchanged since their last clean check)"
