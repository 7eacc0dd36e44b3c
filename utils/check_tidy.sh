#!/usr/bin/env bash
# Runs clang-tidy 22 (.clang-tidy; lib/Runtime and include/flexsn/Runtime
# name things the C way) over every source file of lib/, on all cores,
# and fails on any warning in lib/ or include/, naming it. Needs a build
# (its compile_commands.json and generated headers): utils/check.sh or
# utils/setup.sh build first. utils/check.sh runs it; setup.sh installs
# clang-tidy-22. About four minutes on two cores.
#
#   bash utils/check_tidy.sh [BUILD_DIR]      (default: build)
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${1:-${FLEXSN_BUILD_DIR:-build}}
LLVM_PREFIX=/usr/lib/llvm-22
[ -f "$BUILD_DIR/compile_commands.json" ] || {
  echo "check_tidy.sh: no $BUILD_DIR/compile_commands.json: build first" \
       "(bash utils/setup.sh build)" >&2
  exit 2
}
log="$BUILD_DIR/clang-tidy.log"
start=$SECONDS
# -quiet: only the diagnostics; the header filter keeps those of the
# generated .inc files and of LLVM's and MLIR's headers out.
"$LLVM_PREFIX/bin/run-clang-tidy" -p "$BUILD_DIR" -j "$(nproc)" -quiet \
  -clang-tidy-binary "$LLVM_PREFIX/bin/clang-tidy" \
  -header-filter="^$PWD/(include|lib)/" "^$PWD/lib/" >"$log" 2>&1 || {
  tail -n 40 "$log" >&2
  echo "check_tidy.sh: clang-tidy failed to run; full log: $log" >&2
  exit 1
}
# Each warning once (a file compiled twice, as the runtime's static and
# shared library, reports it twice).
mapfile -t warnings < <(grep -E '^/.*: (warning|error): ' "$log" | sort -u)
if [ "${#warnings[@]}" -ne 0 ]; then
  printf '%s\n' "${warnings[@]}" | sed "s|^$PWD/||" >&2
  echo "clang-tidy: ${#warnings[@]} warning(s) above (full log: $log)" >&2
  exit 1
fi

echo "clang-tidy: lib/ clean ($((SECONDS - start)) s)"
