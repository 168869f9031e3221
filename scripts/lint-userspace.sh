#!/bin/bash
# clang-format check and clang-tidy-16 over the C++ user space.
#   scripts/lint-userspace.sh [--tidy] [BUILD_DIR]
# Both run in make check (scripts/check.sh); --tidy adds clang-tidy-16
# with .clang-tidy over BUILD_DIR's compile_commands.json (default
# build/userspace): 'make lint-tidy'.
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
run=run-clang-tidy-16
if command -v "$run" >/dev/null; then
	"$run" -quiet -p "$build" -j "$(nproc)" "${tus[@]/#/$PWD/}" >"$build/clang-tidy.log" 2>&1 || { cat "$build/clang-tidy.log"; exit 1; }
else
	clang-tidy-16 --quiet -p "$build" "${tus[@]}"
fi
echo "clang-tidy-16: clean (${#tus[@]} files)"
