// The LIF kernels compile to PTX with 16-byte global accesses in the
// vectorized kernels, scalar accesses in the fallbacks, 64-bit indexing, and
// no local memory (no spills, no stack).
// REQUIRES: cuda-toolkit
// RUN: flexsn-opt %neurons/lif.mlir \
// RUN:   '--flexsn-lower-to-nvvm=format=isa storage-types=f32,f16 toolkit=%cuda_toolkit' \
// RUN: | flexsn-translate --flexsn-to-ptx | FileCheck %s --implicit-check-not=.local

// CHECK: .target sm_90
// CHECK-LABEL: .visible .entry lif_inference_f32_vec(
// CHECK:         ld.global.v4.b32
// CHECK:         st.global.v4.b32
// CHECK-LABEL: .visible .entry lif_inference_f32_scalar(
// CHECK-NOT:     .entry
// CHECK:         ld.global.b32
// CHECK:         st.global.b32
// f16 groups of eight neurons still move 16 bytes per access.
// CHECK-LABEL: .visible .entry lif_inference_f16_vec(
// CHECK:         ld.global.v4.b32
// CHECK:         cvt.f32.f16
// CHECK:         cvt.rn.f16x2.f32
// CHECK:         st.global.v4.b32
// CHECK-LABEL: .visible .entry lif_final_state_f32_vec(
// CHECK-LABEL: .visible .entry lif_final_state_f16_scalar(
