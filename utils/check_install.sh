#!/usr/bin/env bash
# Checks FlexSN as a user gets it, outside the build tree:
#   1. cmake --install into a fresh prefix; examples/consumer configured,
#      built and run against it (and, with a CUDA toolkit, its GPU program,
#      also built from the single-file header with plain gcc);
#   2. the Debian package (cpack -G DEB) installed with apt (as root; else
#      only built), then flexsn-opt from /usr/bin, the user lit
#      configuration (examples/neuron-tests) and the consumer against /usr,
#      then the package removed again.
# Needs a build: utils/check.sh makes one.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
BUILD_DIR=$(cd "${FLEXSN_BUILD_DIR:-build}" && pwd)
CUDA_TOOLKIT=${FLEXSN_CUDA_TOOLKIT:-/usr/local/cuda}
LIT=/usr/lib/llvm-22/bin/lit
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

log() { printf '\033[1m==> %s\033[0m\n' "$*"; }

gpu=OFF
[ -x "$CUDA_TOOLKIT/bin/ptxas" ] && gpu=ON
# Programs linking libcuda start only where the driver is.
has_driver() { /usr/bin/python3 -c 'import ctypes; ctypes.CDLL("libcuda.so.1")' 2>/dev/null; }

# Builds and runs examples/consumer in $1 against the FlexSN that
# CMAKE_PREFIX_PATH (the rest of the arguments) finds.
consumer() {
  local dir=$1
  shift
  cmake -S "$root/examples/consumer" -B "$dir" -G Ninja -DCONSUMER_GPU=$gpu \
    "$@" > "$dir.configure.log"
  cmake --build "$dir" > "$dir.build.log"
  "$dir/consumer"
  if [ "$gpu" = ON ] && has_driver; then "$dir/consumer_gpu"; fi
}

log "cmake --install into a fresh prefix"
cmake --install "$BUILD_DIR" --prefix "$work/prefix" > "$work/install.log"
log "examples/consumer against it (GPU kernels: $gpu)"
consumer "$work/consumer" -DCMAKE_PREFIX_PATH="$work/prefix"
if [ "$gpu" = ON ]; then
  log "examples/consumer/gpu.c from the single-file header, with plain gcc"
  PATH="$work/prefix/bin:$PATH" CUDA_HOME="$CUDA_TOOLKIT" \
    bash examples/consumer/build-single-header.sh "$work/single"
  if has_driver; then "$work/single/lif_gpu"; fi
fi

log "cpack -G DEB"
(cd "$work" && cpack -G DEB --config "$BUILD_DIR/CPackConfig.cmake" \
   -B "$work/deb" > "$work/cpack.log")
deb=$(ls "$work"/deb/flexsn_*.deb)
dpkg-deb -f "$deb" Package Version Architecture Depends
if [ "$(id -u)" -ne 0 ] || ! command -v apt-get > /dev/null; then
  echo "check_install.sh: not root: $(basename "$deb") built, not installed"
  exit 0
fi
if dpkg -s flexsn > /dev/null 2>&1; then
  echo "check_install.sh: a flexsn package is already installed; not replacing it" >&2
  exit 1
fi

log "apt-get install $(basename "$deb")"
trap 'apt-get purge -y -qq flexsn > /dev/null 2>&1 || true; rm -rf "$work"' EXIT
apt-get install -y -qq --no-install-recommends "$deb" > "$work/apt.log"
/usr/bin/flexsn-opt --version
log "examples/neuron-tests with the installed tools"
LIT_OUTPUT_DIR="$work/lit" "$LIT" -v examples/neuron-tests
log "examples/consumer against /usr"
consumer "$work/consumer-usr"
log "installed, tested and removed: $(basename "$deb")"
