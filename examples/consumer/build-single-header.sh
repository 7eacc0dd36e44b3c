#!/usr/bin/env bash
# Builds gpu.c without CMake: LIF compiled to a single-file header (the
# kernels and the FlexSN runtime in one lif.h), then plain gcc. Needs
# flexsn-opt and flexsn-translate on PATH (an installed FlexSN) and the CUDA
# toolkit, for ptxas and for the program's own use of cuda.h and libcuda.
#
#   bash examples/consumer/build-single-header.sh <output dir>
#   <output dir>/lif_gpu
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=${1:?usage: build-single-header.sh <output dir>}
cuda=${CUDA_HOME:-/usr/local/cuda}
neurons=${FLEXSN_NEURONS_DIR:-$(dirname "$(command -v flexsn-opt)")/../share/flexsn/neurons}
mkdir -p "$out"

flexsn-opt "$neurons/lif.mlir" \
  --flexsn-lower-to-nvvm="variants=inference storage-types=f32 toolkit=$cuda" |
  flexsn-translate --flexsn-to-header --flexsn-header-single-file \
    -o "$out/lif.h"
# -I: where lif.h is, and cuda.h for the program's own driver calls; the
# header itself needs neither. -ldl -lpthread: for glibc before 2.34.
gcc -std=c99 -O2 -Wall -Wextra -Werror -DLIF_SINGLE_HEADER \
  -I"$out" -I"$cuda/include" "$here/gpu.c" \
  -L"$cuda/lib64/stubs" -lcuda -ldl -lpthread -lm -o "$out/lif_gpu"
