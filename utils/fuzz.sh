#!/usr/bin/env bash
# Builds the fuzz targets with libFuzzer, ASan and UBSan (clang-22, in
# build-fuzz/) and runs them (docs/Testing.md, "Fuzzing").
#
#   bash utils/fuzz.sh smoke               CI: every target replays its seeds
#                                          and regressions, then runs a fixed
#                                          number of mutations from a fixed
#                                          seed (the same inputs every run)
#   bash utils/fuzz.sh run SECONDS [NAME...]  open-ended: each named target
#                                          (npy, parser, pipeline, runtime;
#                                          default all) for SECONDS from a
#                                          random seed
#
# smoke starts from an empty corpus each time, so a red smoke run means the
# code changed, never that the fuzzer got lucky. run keeps each target's
# growing corpus in build-fuzz/fuzz/corpus/NAME, so a later run goes on
# from it; a crash leaves its input in build-fuzz/fuzz/artifacts/NAME and
# fails the script: fix it and add the input to test/Fuzz/regressions/NAME.
# Run after utils/setup.sh (which installs the LLVM packages); this
# installs clang-22 and its libFuzzer runtime if they are missing.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
BUILD_DIR=${FLEXSN_FUZZ_BUILD_DIR:-build-fuzz}
LLVM_PREFIX=/usr/lib/llvm-22
CUDA_TOOLKIT=${FLEXSN_CUDA_TOOLKIT:-/usr/local/cuda}
ALL_TARGETS=(npy parser pipeline runtime)

# smoke's mutations per target, about a minute each under ASan on two
# cores, and its seed (docs/Testing.md). The pipeline target only replays
# its seeds and regressions (0): its runs through LLVM's code generator did
# not repeat exactly even with fixed addresses; the parser target mutates
# the same inputs.
SMOKE_SEED=1
declare -A SMOKE_RUNS=([npy]=3000000 [parser]=40000 [pipeline]=0
                       [runtime]=3000000)

mode=${1:-}
case "$mode" in
  smoke) targets=("${ALL_TARGETS[@]}") ;;
  run)
    seconds=${2:?"usage: fuzz.sh run SECONDS [NAME...]"}
    shift 2
    targets=("$@")
    [ ${#targets[@]} -gt 0 ] || targets=("${ALL_TARGETS[@]}") ;;
  *) sed -n '2,21p' "$0"; exit 2 ;;
esac

log() { printf '==> %s\n' "$*"; }
as_root() { if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi; }

apt_install() {
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
    --no-install-recommends "$@" >/dev/null
}
if [ ! -x "$LLVM_PREFIX/bin/clang++" ] ||
    [ ! -e "$LLVM_PREFIX/lib/clang/22/lib/linux/libclang_rt.fuzzer-x86_64.a" ]; then
  log "Installing clang-22 and libclang-rt-22-dev (libFuzzer)"
  # clang at the version of the LLVM packages utils/setup.sh installed
  # first; else the archive's (stale package lists get refreshed).
  llvm_version=$(dpkg-query -W -f='${Version}' llvm-22-dev 2>/dev/null || true)
  apt_install "clang-22=$llvm_version" \
      "libclang-rt-22-dev=$llvm_version" 2>/dev/null ||
    apt_install clang-22 libclang-rt-22-dev 2>/dev/null || {
      as_root apt-get update -qq >/dev/null
      apt_install clang-22 libclang-rt-22-dev
    }
fi

start=$SECONDS
if [ ! -f "$BUILD_DIR/build.ninja" ]; then
  cmake -G Ninja -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_C_COMPILER="$LLVM_PREFIX/bin/clang" \
    -DCMAKE_CXX_COMPILER="$LLVM_PREFIX/bin/clang++" \
    -DFLEXSN_ENABLE_FUZZERS=ON -DMLIR_DIR="$LLVM_PREFIX/lib/cmake/mlir" \
    -DLLVM_EXTERNAL_LIT="$LLVM_PREFIX/bin/lit" \
    -DFLEXSN_CUDA_TOOLKIT="$CUDA_TOOLKIT" >/dev/null
fi
log "Building the fuzz targets in $BUILD_DIR (several minutes from scratch on two cores)"
cmake --build "$BUILD_DIR" --target flexsn-fuzzers
log "Built in $((SECONDS - start)) s"

# As in utils/check_sanitizers.sh: Debian's libMLIR.so is not instrumented.
export ASAN_OPTIONS=detect_leaks=1:allow_user_poisoning=0:use_sigaltstack=0
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1

work="$BUILD_DIR/fuzz"
seeds="$work/seeds"
rm -rf "$seeds"
/usr/bin/python3 utils/fuzz_corpus.py "$seeds/mlir" >/dev/null

fixed_addresses=()
if [ "$mode" = smoke ]; then
  if setarch "$(uname -m)" -R true 2>/dev/null; then
    fixed_addresses=(setarch "$(uname -m)" -R)
  else
    log "setarch -R is not allowed here: addresses are randomized, so the smoke run's inputs may differ between runs"
  fi
fi

status=0
summary=()
for name in "${targets[@]}"; do
  binary="$BUILD_DIR/test/Fuzz/flexsn-$name-fuzzer"
  if [ ! -x "$binary" ]; then
    log "No $binary (the runtime target needs cuda.h): skipped"
    continue
  fi
  artifacts="$work/artifacts/$name"
  args=(-print_final_stats=1 -timeout=60 -rss_limit_mb=6144
        -artifact_prefix="$artifacts/")
  if [ "$mode" = smoke ]; then
    corpus="$work/smoke-corpus/$name"
    rm -rf "$corpus"
    # The same inputs every run: a fixed seed and count, no reloading of
    # the corpus directory (on a timer), and no address randomization
    # (pointer-keyed hash tables walk in address order, and the coverage
    # that steers the mutations follows).
    args+=(-runs="${SMOKE_RUNS[$name]}" -seed="$SMOKE_SEED" -reload=0)
    what="${SMOKE_RUNS[$name]} inputs from seed $SMOKE_SEED"
    [ "${SMOKE_RUNS[$name]}" -ne 0 ] || what="its seeds and regressions, replayed"
  else
    corpus="$work/corpus/$name"
    args+=(-max_total_time="$seconds")
    what="$seconds s"
  fi
  mkdir -p "$corpus" "$artifacts"
  inputs=("$corpus")
  case "$name" in
    npy) args+=(-dict=test/Fuzz/npy.dict -max_len=4096)
         inputs+=(test/Fuzz/corpus/npy) ;;
    parser | pipeline)
         args+=(-dict=test/Fuzz/flexsn.dict -max_len=16384)
         inputs+=("$seeds/mlir") ;;
    runtime) args+=(-max_len=512)
         inputs+=(test/Fuzz/corpus/runtime) ;;
  esac
  [ -d "test/Fuzz/regressions/$name" ] && inputs+=("test/Fuzz/regressions/$name")
  log "Fuzzing $name: $what"
  log_file="$work/$name.log"
  if ! "${fixed_addresses[@]}" "$binary" "${args[@]}" "${inputs[@]}" \
      >"$log_file" 2>&1; then
    status=1
    log "$name FAILED; the report:"
    grep -v '^#[0-9]' "$log_file" | tail -n 60
  fi
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log_file")
  last=$(grep -E '^#[0-9]+' "$log_file" | tail -n 1 || true)
  cov=$(sed -n 's/.* cov: \([0-9]*\).*/\1/p' <<<"$last")
  ft=$(sed -n 's/.* ft: \([0-9]*\).*/\1/p' <<<"$last")
  units=$(find "$corpus" -type f | wc -l)
  summary+=("$(printf '%-9s %10s execs  cov %6s  ft %7s  corpus %5s' \
    "$name" "${execs:-?}" "${cov:-?}" "${ft:-?}" "$units")")
done

log "Fuzzing summary ($mode)"
printf '    %s\n' "${summary[@]}"
exit "$status"
