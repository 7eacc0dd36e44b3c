#!/usr/bin/env bash
# Builds, on this machine (FlexSN tools and a CUDA toolkit, no GPU needed),
# what the GPU machine cannot build itself (see docs/GPU.md):
#
#   bash utils/gpu_bundle.sh [DIR]          DIR defaults to .device
#
# Into DIR (git-ignored; rebuilt from scratch on every run; at most ~60 MiB
# so that it fits the GPU runner's `carry`):
#   cache/          a flexsn.compile cache holding every compile of
#                   python/tests/kernel_checks.py, train_kernel_checks.py,
#                   and of `python3 -m bench` device-torch, device-ddp,
#                   lif, saved-storage, fx, block-train, recurrent and
#                   resnet (their --compile-only modes; lif's also serves
#                   placement and schedule) and of
#                   python/tests/test_torch_neurons.py, test_recurrent.py,
#                   test_fx.py,
#                   test_per_neuron_params.py,
#                   test_per_channel_params.py,
#                   test_spike_storage.py, test_kernel_modules.py,
#                   test_block_kernels.py, test_block_module.py,
#                   test_fuse.py, test_fuse_spikingjelly.py,
#                   test_layouts.py,
#                   test_spikingjelly_fidelity.py and
#                   test_against_spikingjelly.py and
#                   test_coupled_kernels.py (their CPU run). The GPU
#                   machine has no tools: there
#                   compile() serves these entries, found by the same
#                   arguments, with FLEXSN_CACHE_DIR=DIR/cache and
#                   FLEXSN_RUNTIME_LIB=DIR/libflexsn_runtime.so;
#   block.cubin     the fused block `python3 -m bench block` times;
#   libflexsn_runtime.so   a copy of the build's C runtime (libc only), which
#                   GpuKernel launches through;
#   lib/libomp.so.5 LLVM's OpenMP runtime, which the cached CPU kernels
#                   (kernels.so) need: the GPU machine has no LLVM, so
#                   utils/device_run.sh puts DIR/lib on LD_LIBRARY_PATH;
#   device_smoke    test/Runtime/device_smoke.c linked against the libcuda
#                   stub;
#   examples/       examples/consumer's programs (utils/build_examples.sh),
#                   with their runtime in lib/;
#   bundle.json     the commit, the toolkit, the number of cache entries.
#
# Carry DIR; utils/device_run.sh is the command to run there.
#
# Environment: FLEXSN_BUILD_DIR (default build), FLEXSN_CUDA_TOOLKIT (default
# /usr/local/cuda), PYTHON (a python3 with numpy and torch; found
# automatically). Prints the folder size at the end.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)

DIR=${1:-.device}
export FLEXSN_BUILD_DIR=${FLEXSN_BUILD_DIR:-build}
export FLEXSN_CUDA_TOOLKIT=${FLEXSN_CUDA_TOOLKIT:-/usr/local/cuda}
CUDA_TOOLKIT=$FLEXSN_CUDA_TOOLKIT
MAX_MIB=60

log() { printf '==> %s\n' "$*"; }
die() { printf 'gpu_bundle.sh: error: %s\n' "$*" >&2; exit 1; }

for tool in flexsn-compile flexsn-opt flexsn-translate; do
  [ -x "$FLEXSN_BUILD_DIR/bin/$tool" ] || die "$FLEXSN_BUILD_DIR/bin/$tool is missing: build FlexSN first"
done
[ -f "$FLEXSN_BUILD_DIR/lib/Runtime/libflexsn_runtime.so" ] ||
  die "$FLEXSN_BUILD_DIR/lib/Runtime/libflexsn_runtime.so is missing: build FlexSN first"
[ -x "$CUDA_TOOLKIT/bin/ptxas" ] || die "no $CUDA_TOOLKIT/bin/ptxas"
command -v gcc >/dev/null || die "gcc is not on PATH"

# A python3 with numpy and torch (Debian's /usr/bin/python3 has them).
PY=${PYTHON:-}
if [ -z "$PY" ]; then
  for cand in python3 /usr/bin/python3; do
    if command -v "$cand" >/dev/null &&
       "$cand" -c 'import numpy, torch' >/dev/null 2>&1; then
      PY=$cand
      break
    fi
  done
fi
[ -n "$PY" ] || die "no python3 with numpy and torch found (set PYTHON=...)"

# Keep the folder out of git: .gitignore lists /.device/, and so does the
# local exclude file (which also covers other folder names).
case "$DIR" in
  /*) ;;
  *)
    if [ -d .git ]; then
      mkdir -p .git/info
      touch .git/info/exclude
      entry="/${DIR#./}"
      entry="${entry%/}/"
      grep -qxF "$entry" .git/info/exclude || echo "$entry" >>.git/info/exclude
    fi
    ;;
esac

# Start from an empty folder, but never wipe something that is not ours: a
# bundle (.flexsn-bundle), or a folder holding nothing but a compile cache.
if [ -e "$DIR" ]; then
  if [ -f "$DIR/.flexsn-bundle" ] || [ -z "$(ls -A "$DIR" | grep -vx cache)" ]; then
    rm -rf "$DIR"
  else
    die "$DIR exists and is not a bundle (no .flexsn-bundle); remove it first"
  fi
fi
mkdir -p "$DIR"
echo "made by utils/gpu_bundle.sh; rebuilt from scratch on every run" >"$DIR/.flexsn-bundle"
DIR=$(cd "$DIR" && pwd)
export FLEXSN_CACHE_DIR=$DIR/cache
START=$(date +%s)

# --- 1. The compile cache -------------------------------------------------
log "compiling into $FLEXSN_CACHE_DIR"
"$PY" python/tests/kernel_checks.py --compile-only
"$PY" python/tests/train_kernel_checks.py --compile-only
"$PY" python/tests/channel_kernel_checks.py --compile-only
"$PY" python/tests/bit_spike_checks.py --compile-only
"$PY" -m bench device-torch --compile-only
"$PY" -m bench lif --compile-only
"$PY" -m bench saved-storage --compile-only
# Its timed targets are the benchmark's business, not the bundle's: a miss
# on a busy machine still leaves its cache entries.
"$PY" -m bench fx --compile-only --out "$DIR/fx" ||
  log "bench fx: a compile-time target was missed (see $DIR/fx); continuing"
"$PY" -m bench device-ddp --compile-only
"$PY" -m bench block --compile-only --cubin "$DIR/block.cubin"
"$PY" -m bench block-train --compile-only
"$PY" -m bench recurrent --compile-only
"$PY" -m bench resnet --compile-only
# The package's tests compile with flexsn.compile's default targets (CPU and
# CUDA where the toolkit is): their CPU run here fills the entries their
# CUDA cases use there.
log "compiling what python/tests uses (their CPU run)"
"$PY" -m pytest -q -p no:cacheprovider python/tests/test_torch_neurons.py \
  python/tests/test_fx.py python/tests/test_per_neuron_params.py \
  python/tests/test_per_channel_params.py \
  python/tests/test_spike_storage.py \
  python/tests/test_kernel_modules.py python/tests/test_saved_storage.py \
  python/tests/test_block_kernels.py python/tests/test_block_module.py \
  python/tests/test_fuse.py python/tests/test_fuse_spikingjelly.py \
  python/tests/test_layouts.py python/tests/test_spikingjelly_fidelity.py \
  python/tests/test_against_spikingjelly.py python/tests/test_recurrent.py \
  python/tests/test_coupled_kernels.py python/tests/test_delay.py \
  >"$DIR/pytest-compile.log" 2>&1 ||
  die "the CPU tests failed while filling the cache: see $DIR/pytest-compile.log"
# Unfinished builds of a failed compile are no use there.
find "$FLEXSN_CACHE_DIR" -mindepth 2 -maxdepth 2 -name '.build-*' \
  -exec rm -rf {} +

# --- 2. The runtime and its device smoke test ------------------------------
cp "$FLEXSN_BUILD_DIR/lib/Runtime/libflexsn_runtime.so" "$DIR/"
mkdir -p "$DIR/lib"
cp -L /usr/lib/llvm-22/lib/libomp.so.5 "$DIR/lib/"
if [ -f test/Runtime/device_smoke.c ]; then
  log "compiling device_smoke"
  gcc -std=c99 -O2 -I"$CUDA_TOOLKIT/include" -Iinclude -Iinclude/flexsn/Runtime \
    test/Runtime/device_smoke.c lib/Runtime/flexsn_runtime.c \
    lib/Runtime/flexsn_runtime_cuda.c \
    -o "$DIR/device_smoke" -L"$CUDA_TOOLKIT/lib64/stubs" -lcuda -ldl \
    -lpthread || log "device_smoke did not build (skipped)"
fi

# examples/consumer's programs, built as a user builds them: against an
# installed FlexSN with CMake (consumer, consumer_gpu; the runtime they link
# is the copy in DIR/lib, on LD_LIBRARY_PATH there), and from the
# single-file header with plain gcc (lif_gpu).
log "building examples/consumer"
bash utils/build_examples.sh "$DIR/examples" "$DIR/lib"

# --- 3. bundle.json ----------------------------------------------------------
"$PY" - "$DIR" "$ROOT" "$CUDA_TOOLKIT" <<'EOF'
import json, os, subprocess, sys, time
out, root, toolkit = sys.argv[1:4]
def run(*argv):
    try:
        return subprocess.run(argv, stdout=subprocess.PIPE,
                              stderr=subprocess.DEVNULL,
                              text=True).stdout.strip()
    except OSError:
        return ""
cache = os.path.join(out, "cache")
entries = sum(1 for key in os.listdir(cache)
              for build in os.listdir(os.path.join(cache, key))
              if os.path.isfile(os.path.join(cache, key, build, "done")))
ptxas = run(os.path.join(toolkit, "bin", "ptxas"), "--version").splitlines()
b = dict(format="flexsn-device-bundle", version=2,
         created=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
         git_commit=run("git", "-C", root, "rev-parse", "HEAD"),
         git_dirty=bool(run("git", "-C", root, "status", "--porcelain",
                            "--untracked-files=no")),
         ptxas=ptxas[-1] if ptxas else "", cache="cache",
         cache_entries=entries,
         device_smoke="device_smoke" if os.path.exists(
             os.path.join(out, "device_smoke")) else None)
json.dump(b, open(os.path.join(out, "bundle.json"), "w"), indent=1)
print("    %d cache entries, commit %s%s" % (
    entries, b["git_commit"][:12], " (dirty)" if b["git_dirty"] else ""))
EOF

# --- 4. Size -------------------------------------------------------------------
BYTES=$(du -sb "$DIR" | cut -f1)
MIB=$(( (BYTES + 1048575) / 1048576 ))
echo "bundle: $DIR  $(du -sh "$DIR" | cut -f1) ($BYTES bytes) in $(( $(date +%s) - START )) s"
if [ "$MIB" -gt "$MAX_MIB" ]; then
  die "the bundle is ${MIB} MiB, over ${MAX_MIB} MiB"
fi
