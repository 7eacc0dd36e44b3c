#!/usr/bin/env bash
# Sets FlexSN up on Debian 12 and runs the main job.
#
#   bash utils/setup.sh          install, configure, build, run the main job
#   bash utils/setup.sh build    install, configure, build only
#
# Idempotent: packages already installed are not reinstalled, and the build
# is incremental. The main job compiles the bundled LIF neuron to CPU code
# and, when a CUDA toolkit is present, to an sm_90 cubin, C header and JSON
# manifest; then runs it on the CPU with flexsn-run on generated input,
# printing a spike summary. (No GPU is needed; the GPU is exercised through
# utils/device_run.sh on a machine that has one.)
set -euo pipefail
cd "$(dirname "$0")/.."

LLVM_VERSION=22
LLVM_DEB_VERSION="1:22.1.8-1~deb12u1"
LLVM_PACKAGES=(llvm-22-dev libmlir-22-dev mlir-22-tools llvm-22-tools libomp-22-dev
               clang-format-22 clang-tidy-22)
OTHER_PACKAGES=(cmake ninja-build g++ libgtest-dev libzstd-dev dpkg-dev python3
                python3-numpy python3-pip python3-pytest python3-torch
                python3-flake8 python3-h5py python3-pytest-xdist black codespell
                ccache)
LLVM_PREFIX=/usr/lib/llvm-${LLVM_VERSION}
BUILD_DIR=${FLEXSN_BUILD_DIR:-build}
CUDA_TOOLKIT=${FLEXSN_CUDA_TOOLKIT:-/usr/local/cuda}

log() { printf '\033[1m==> %s\033[0m\n' "$*"; }

# Tool output that is only noise when things work (apt's progress, CMake's
# probes for optional packages) goes to a log file, shown when a step fails.
LOG_DIR="$BUILD_DIR/setup-logs"
quietly() {
  local name=$1
  shift
  mkdir -p "$LOG_DIR"
  if ! "$@" >"$LOG_DIR/$name.log" 2>&1; then
    tail -n 40 "$LOG_DIR/$name.log" >&2
    echo "setup.sh: $name failed; full log: $LOG_DIR/$name.log" >&2
    return 1
  fi
}

# Runs a phase and says how long it took.
timed() {
  local start=$SECONDS
  "$@"
  printf '    (%s: %d s)\n' "$1" $((SECONDS - start))
}

as_root() {
  if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi
}

is_installed() {
  dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "install ok installed"
}

install_packages() {
  local missing=()
  for pkg in "${LLVM_PACKAGES[@]}" "${OTHER_PACKAGES[@]}"; do
    is_installed "$pkg" || missing+=("$pkg")
  done
  if [ ${#missing[@]} -eq 0 ]; then
    log "All packages present"
    return
  fi
  log "Installing: ${missing[*]} (a few minutes; output in $LOG_DIR/)"
  quietly apt-update as_root apt-get update -qq
  local pinned=()
  for pkg in "${missing[@]}"; do
    case " ${LLVM_PACKAGES[*]} " in
      *" $pkg "*) pinned+=("$pkg=$LLVM_DEB_VERSION") ;;
      *) pinned+=("$pkg") ;;
    esac
  done
  if ! quietly apt-install as_root env DEBIAN_FRONTEND=noninteractive \
      apt-get install -y -qq --no-install-recommends "${pinned[@]}" \
      2>/dev/null; then
    # The archive keeps only the newest point release of a package.
    log "LLVM $LLVM_DEB_VERSION is not available; installing the newest LLVM $LLVM_VERSION"
    quietly apt-install as_root env DEBIAN_FRONTEND=noninteractive \
        apt-get install -y -qq --no-install-recommends "${missing[@]}"
  fi
}

configure_and_build() {
  if [ ! -f "$BUILD_DIR/build.ninja" ]; then
    log "Configuring in $BUILD_DIR"
    quietly cmake-configure cmake -G Ninja -S . -B "$BUILD_DIR" \
      -DCMAKE_BUILD_TYPE=Release \
      -DMLIR_DIR="$LLVM_PREFIX/lib/cmake/mlir" \
      -DLLVM_EXTERNAL_LIT="$LLVM_PREFIX/bin/lit" \
      -DFLEXSN_CUDA_TOOLKIT="$CUDA_TOOLKIT" -DFLEXSN_CCACHE=ON
  fi
  log "Building (about 4 minutes from scratch on two cores; seconds when up to date)"
  cmake --build "$BUILD_DIR"
}

run_main_job() {
  local work="$BUILD_DIR/main-job"
  rm -rf "$work" && mkdir -p "$work"
  log "Compiling the bundled LIF neuron to CPU code (flexsn-lower-to-cpu)"
  "$BUILD_DIR/bin/flexsn-opt" lib/Neurons/lif.mlir --flexsn-lower-to-cpu \
    -o "$work/lif.cpu.mlir"
  echo "wrote $work/lif.cpu.mlir ($(grep -c 'llvm.func @' "$work/lif.cpu.mlir") LLVM functions)"

  if [ -x "$CUDA_TOOLKIT/bin/ptxas" ]; then
    log "Compiling LIF for the GPU (sm_90): cubin, C header, manifest"
    "$BUILD_DIR/bin/flexsn-opt" lib/Neurons/lif.mlir \
      --flexsn-lower-to-nvvm="toolkit=$CUDA_TOOLKIT" -o "$work/lif.gpu.mlir"
    "$BUILD_DIR/bin/flexsn-translate" --flexsn-to-cubin "$work/lif.gpu.mlir" -o "$work/lif.cubin"
    "$BUILD_DIR/bin/flexsn-translate" --flexsn-to-header "$work/lif.gpu.mlir" -o "$work/lif.h"
    "$BUILD_DIR/bin/flexsn-translate" --flexsn-to-manifest "$work/lif.gpu.mlir" -o "$work/lif.json"
    ls -l "$work/lif.cubin" "$work/lif.h" "$work/lif.json" | awk '{print "wrote " $NF " (" $5 " bytes)"}'
  else
    log "No CUDA toolkit at $CUDA_TOOLKIT: skipping the GPU artifacts"
  fi

  log "Running LIF on the CPU with flexsn-run: T=100 steps, N=1000 neurons"
  /usr/bin/python3 - "$work/x.npy" <<'PY'
import sys
import numpy as np
# Constant drive per neuron, from below threshold to well above it.
drive = np.linspace(0.0, 2.0, 1000, dtype=np.float32)
np.save(sys.argv[1], np.tile(drive, (100, 1)))
PY
  "$BUILD_DIR/bin/flexsn-run" lib/Neurons/lif.mlir --variant=inference \
    --input=@"$work/x.npy" --output-dir="$work/out"
  /usr/bin/python3 - "$work" <<'PY'
import sys
import numpy as np
spikes = np.load(sys.argv[1] + "/out/out0.npy")
drive = np.load(sys.argv[1] + "/x.npy")[0]
T, N = spikes.shape
per_neuron = spikes.sum(axis=0)
print(f"spike summary: {int(spikes.sum())} spikes from {N} neurons over {T} steps "
      f"(mean rate {spikes.mean():.3f} per step)")
print(f"  silent neurons: {int((per_neuron == 0).sum())} "
      f"(LIF with tau=2 fires only for drive >= 1.0)")
for x in (0.5, 1.01, 1.5, 2.0):
    n = int(np.argmin(np.abs(drive - x)))
    print(f"  drive {drive[n]:.3f}: {int(per_neuron[n])} spikes")
PY
  log "Done"
}

# Makes `import flexsn` work for Debian's python3: a .pth file in the user
# site directory points at python/ (no package index needed).
install_python_package() {
  local site
  site=$(/usr/bin/python3 -m site --user-site)
  mkdir -p "$site"
  echo "$PWD/python" > "$site/flexsn.pth"
}

timed install_packages
timed configure_and_build
install_python_package
case "${1:-all}" in
  build) ;;
  all) timed run_main_job ;;
  *) echo "usage: $0 [build]" >&2; exit 2 ;;
esac
