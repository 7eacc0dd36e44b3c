#!/usr/bin/env bash
# Fails on a tracked C or C++ file that clang-format 22 (.clang-format)
# would change, one over 1,000 lines or a function over 150 in lib/,
# include/ or tools/ (docs/Contributing.md), a Python file that black
# (pyproject.toml) would change, or a misspelling codespell finds
# (.codespellrc), naming it; `--fix` formats the C, C++ and Python files in
# place. utils/check.sh runs it; setup.sh installs clang-format-22, black
# and codespell.
set -euo pipefail
cd "$(dirname "$0")/.."
CLANG_FORMAT=${CLANG_FORMAT:-/usr/lib/llvm-22/bin/clang-format}
# flexsn-pygen writes it (tuples on one line each).
BLACK_EXCLUDE='python/flexsn/_dialect\.py'
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  mapfile -t files < <(git ls-files '*.c' '*.h' '*.cpp')
  mapfile -t pys < <(git ls-files '*.py')
  mapfile -t texts < <(git ls-files | grep -vE \
    '\.(png|svg|json|jsonl|npy|nir|h5)$|^test/Fuzz/(corpus|regressions)/')
else  # a source tree without its history
  mapfile -t files < <(find include lib tools test examples -type f \
    \( -name '*.c' -o -name '*.h' -o -name '*.cpp' \) | sort)
  mapfile -t pys < <(find python bench test utils -name '*.py' | sort)
  mapfile -t texts < <(find include lib tools test examples python bench \
    utils docs -type f -not -path 'test/Fuzz/*' \
    \( -name '*.[ch]' -o -name '*.cpp' -o -name '*.py' -o -name '*.td' \
    -o -name '*.md' -o -name '*.mlir' -o -name '*.sh' \) | sort)
fi
if [ "${1:-}" = "--fix" ]; then
  "$CLANG_FORMAT" -i "${files[@]}"
  black --quiet --force-exclude "$BLACK_EXCLUDE" "${pys[@]}"
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
if ! black --check --quiet --force-exclude "$BLACK_EXCLUDE" "${pys[@]}" \
    2>/dev/null; then
  echo "black: not formatted (bash utils/check_format.sh --fix):" >&2
  { black --check --force-exclude "$BLACK_EXCLUDE" "${pys[@]}" 2>&1 || true; } |
    sed -n 's/^would reformat /  /p' >&2
  status=1
fi
if ! codespell "${texts[@]}" >&2; then
  echo "codespell: the misspellings above (a word that is a name: add it" \
       "to .codespellrc)" >&2
  status=1
fi
[ "$status" -eq 0 ] || exit 1
echo "clang-format: ${#files[@]} files formatted, none over 1,000 lines;" \
     "black: Python formatted; codespell: no misspelling"
