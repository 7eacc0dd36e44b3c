#!/usr/bin/env bash
# Builds FlexSN with AddressSanitizer, LeakSanitizer and
# UndefinedBehaviorSanitizer (FLEXSN_ENABLE_SANITIZERS) in its own build
# tree and runs the check-flexsn suite there: any sanitizer report fails the
# test that triggered it.
#
#   bash utils/check_sanitizers.sh [BUILD_DIR]     default: build-sanitize
#
# A BUILD_DIR that utils/fuzz.sh configured (build-fuzz: clang, ASan and
# UBSan with libFuzzer's coverage) is used as it is: CI runs the suite
# there, after the fuzz smoke run, so that one instrumented build serves
# both.
#
# Run after utils/setup.sh (which installs the packages).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${1:-build-sanitize}
start=$(date +%s)
LLVM_PREFIX=/usr/lib/llvm-22
if grep -q '^FLEXSN_ENABLE_FUZZERS:BOOL=ON' "$BUILD_DIR/CMakeCache.txt" \
    2>/dev/null; then
  echo "==> $BUILD_DIR is a fuzzing build (ASan and UBSan): using it as it is"
else
  cmake -G Ninja -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=Release \
    -DFLEXSN_ENABLE_SANITIZERS=ON -DMLIR_DIR="$LLVM_PREFIX/lib/cmake/mlir" \
    -DLLVM_EXTERNAL_LIT="$LLVM_PREFIX/bin/lit" >/dev/null
fi
echo "==> building with sanitizers in $BUILD_DIR (several minutes on two cores)"
cmake --build "$BUILD_DIR"
# A report is an error: the process exits non-zero and its lit test fails.
#   allow_user_poisoning=0  libMLIR.so (Debian's) is not instrumented, while
#       LLVM's allocator headers poison memory in our instrumented code: the
#       two disagree about what is poisoned (false use-after-poison).
#   use_sigaltstack=0  LLVM installs its own alternate signal stack on the
#       tools' worker thread; ASan would unmap it as its own at thread exit.
export ASAN_OPTIONS=detect_leaks=1:halt_on_error=1:allow_user_poisoning=0:use_sigaltstack=0
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
# The JIT compiles serial CPU kernels in this build (lib/Runner): with
# OpenMP regions, LeakSanitizer's exit-time tracer crashes (signal 11). The
# thread-count test is unsupported here.
echo "==> check-flexsn under the sanitizers"
cmake --build "$BUILD_DIR" --target check-flexsn
echo "==> sanitizer check passed in $(($(date +%s) - start)) s"
