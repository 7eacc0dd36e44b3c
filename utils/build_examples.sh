#!/usr/bin/env bash
# Builds examples/consumer's programs for the GPU machine, as a user builds
# them, into OUT_DIR:
#   consumer, consumer_gpu  CMake against FlexSN installed into a temporary
#                           prefix (CPU kernels; GPU kernels, runtime and
#                           the CUDA driver);
#   lif_gpu                 gpu.c from the single-file header, plain gcc.
# The shared libraries they need besides libcuda and libc go to LIB_DIR
# (the FlexSN runtime, LLVM's OpenMP runtime), to put on LD_LIBRARY_PATH.
#
#   bash utils/build_examples.sh OUT_DIR LIB_DIR
set -euo pipefail
cd "$(dirname "$0")/.."
out=$(mkdir -p "$1" && cd "$1" && pwd)
lib=$(mkdir -p "$2" && cd "$2" && pwd)
BUILD_DIR=${FLEXSN_BUILD_DIR:-build}
CUDA_TOOLKIT=${FLEXSN_CUDA_TOOLKIT:-/usr/local/cuda}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

cmake --install "$BUILD_DIR" --prefix "$work/prefix" > "$work/install.log"
cmake -S examples/consumer -B "$work/consumer" -G Ninja \
  -DCMAKE_PREFIX_PATH="$work/prefix" -DCONSUMER_GPU=ON > "$work/configure.log"
cmake --build "$work/consumer" > "$work/build.log"
cp "$work/consumer/consumer" "$work/consumer/consumer_gpu" "$out/"
cp -L "$work/prefix/lib/libflexsn_runtime.so" /usr/lib/llvm-22/lib/libomp.so.5 "$lib/"
PATH="$work/prefix/bin:$PATH" CUDA_HOME="$CUDA_TOOLKIT" \
  bash examples/consumer/build-single-header.sh "$work/single"
cp "$work/single/lif_gpu" "$out/"
