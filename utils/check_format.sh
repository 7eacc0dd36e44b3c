#!/usr/bin/env bash
# Fails on a tracked C or C++ file that clang-format 22 (.clang-format)
# would change, one over 1,000 lines or a function over 150 in lib/,
# include/ or tools/ (docs/Contributing.md), naming it;
# `--fix` formats them in place. utils/check.sh runs it; setup.sh installs
# clang-format-22.
set -euo pipefail
cd "$(dirname "$0")/.."
CLANG_FORMAT=${CLANG_FORMAT:-/usr/lib/llvm-22/bin/clang-format}
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  mapfile -t files < <(git ls-files '*.c' '*.h' '*.cpp')
else  # a source tree without its history
  mapfile -t files < <(find include lib tools test examples -type f \
    \( -name '*.c' -o -name '*.h' -o -name '*.cpp' \) | sort)
fi
if [ "${1:-}" = "--fix" ]; then
  "$CLANG_FORMAT" -i "${files[@]}"
  exit 0
fi
unformatted=()
for f in "${files[@]}"; do
  "$CLANG_FORMAT" --dry-run --Werror "$f" >/dev/null 2>&1 ||
    unformatted+=("$f")
done
long=()
for f in "${files[@]}"; do
  lines=$(wc -l <"$f")
  [ "$lines" -le 1000 ] || long+=("$f: $lines lines")
done
status=0
if [ "${#unformatted[@]}" -ne 0 ]; then
  echo "clang-format: not formatted (bash utils/check_format.sh --fix):" >&2
  printf '  %s\n' "${unformatted[@]}" >&2
  status=1
fi
if [ "${#long[@]}" -ne 0 ]; then
  echo "over 1,000 lines (split by what each part does):" >&2
  printf '  %s\n' "${long[@]}" >&2
  status=1
fi
# No function over 150 lines in lib/, include/ and tools/.
/usr/bin/python3 utils/check_function_size.py || status=1
[ "$status" -eq 0 ] || exit 1
echo "clang-format: ${#files[@]} files formatted, none over 1,000 lines"
