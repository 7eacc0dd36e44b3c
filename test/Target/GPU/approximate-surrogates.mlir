// With approximate-surrogates, LIF's backward evaluates its sigmoid
// surrogate with the GPU's approximate exp (one ex2.approx after a scaling
// multiply, no range reduction) and reciprocal; by default it keeps
// libdevice's correctly rounded expf and rcp.rn. The forward has no
// surrogate.
// REQUIRES: cuda-toolkit
// RUN: flexsn-opt %neurons/lif.mlir \
// RUN:   '--flexsn-lower-to-nvvm=variants=forward,backward storage-types=f16 save-in-storage-type approximate-surrogates format=isa toolkit=%cuda_toolkit' \
// RUN: | flexsn-translate --flexsn-to-ptx | FileCheck %s
// RUN: flexsn-opt %neurons/lif.mlir \
// RUN:   '--flexsn-lower-to-nvvm=variants=backward storage-types=f16 format=isa toolkit=%cuda_toolkit' \
// RUN: | flexsn-translate --flexsn-to-ptx | FileCheck %s --check-prefix=EXACT

// CHECK-LABEL: .visible .entry lif_forward_f16_vec(
// CHECK-NOT:     ex2
// CHECK-NOT:     rcp
// CHECK-LABEL: .visible .entry lif_backward_f16_vec(
// CHECK-NOT:     rcp.rn
// CHECK-NOT:     fma.rm
// CHECK:         mul.rn.f32 [[T:%r[0-9]+]], %r{{[0-9]+}}, 0f3FB8AA3B;
// CHECK-NEXT:    ex2.approx.f32 %r{{[0-9]+}}, [[T]];
// CHECK:         rcp.approx.f32
// CHECK-NOT:     rcp.rn
// CHECK-LABEL: .visible .entry lif_backward_f16_scalar(

// EXACT-LABEL: .visible .entry lif_backward_f16_vec(
// EXACT-NOT:     rcp.approx
// EXACT:         fma.rm.f32
// EXACT:         ex2.approx.ftz.f32
// EXACT:         rcp.rn.f32
// EXACT-NOT:     rcp.approx
// EXACT-LABEL: .visible .entry lif_backward_f16_scalar(
