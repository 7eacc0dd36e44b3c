// A fused block (test/Pipelines/Inputs/bn_lif_block.mlir: batch-norm apply,
// LIF, residual add) compiles to one GPU kernel, vectorized and scalar, with
// a C host stub taking C and S for its per-channel scale and shift. Its
// vector kernel has two 16-byte loads, the initial state's before the
// loop and x's in it (the residual add reads the x the neuron read), and
// 16-byte stores (y, the final v).
// REQUIRES: cuda-toolkit
// RUN: flexsn-opt %S/../../Pipelines/Inputs/bn_lif_block.mlir \
// RUN:   '--flexsn-lower-to-nvvm=format=isa variants=inference toolkit=%cuda_toolkit' \
// RUN: | flexsn-translate --flexsn-to-ptx | FileCheck %s --implicit-check-not=.local
// RUN: flexsn-opt %S/../../Pipelines/Inputs/bn_lif_block.mlir \
// RUN:   '--flexsn-lower-to-nvvm=variants=inference toolkit=%cuda_toolkit' \
// RUN: | flexsn-translate --flexsn-to-header | FileCheck %s --check-prefix=HEADER

// CHECK-LABEL: .visible .entry bn_lif_inference_f32_vec(
// CHECK:         ld.global.v4.b32
// CHECK:         ld.global.v4.b32
// CHECK-NOT:     ld.global.v4.b32
// CHECK:         st.global.v4.b32
// CHECK-LABEL: .visible .entry bn_lif_inference_f32_scalar(

// HEADER:      static inline flexsn_status flexsn_bn_lif_inference_f32(flexsn_stream stream, int64_t T, int64_t N, int64_t ld, int64_t C, int64_t S,
// HEADER-NEXT:     const float *x,
// HEADER-NEXT:     const float *v_init,
// HEADER-NEXT:     float *y,
// HEADER-NEXT:     float *v,
// HEADER-NEXT:     const float *scale,
// HEADER-NEXT:     const float *shift) {
// HEADER:        return flexsn_launch_channels(
