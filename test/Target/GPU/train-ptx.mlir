// PLIF's training kernels: the forward writes its saved sequence, the
// backward runs in reverse and reduces the trainable w's gradient with a
// warp shuffle tree, the block's warps through shared memory, and one
// atomic add per block; no local memory.
// REQUIRES: cuda-toolkit
// RUN: flexsn-opt %neurons/plif.mlir \
// RUN:   '--flexsn-lower-to-nvvm=variants=forward,backward storage-types=f32 format=isa toolkit=%cuda_toolkit' \
// RUN: | flexsn-translate --flexsn-to-ptx | FileCheck %s --implicit-check-not=.local

// CHECK-LABEL: .visible .entry plif_forward_f32_vec(
// CHECK:         ld.global.v4.b32
// CHECK:         st.global.v4.b32
// CHECK-LABEL: .visible .entry plif_backward_f32_vec(
// CHECK-COUNT-5: shfl.sync.bfly.b32
// CHECK:         st.shared
// CHECK:         bar.sync
// CHECK:         atom.global.add.f32
// CHECK-NOT:     atom.global.add.f32
// CHECK-LABEL: .visible .entry plif_backward_f32_scalar(
// CHECK:         atom.global.add.f32
// The deterministic mode: block sums through shared memory, a fence before
// the ticket (an integer atomic), volatile reads of the other blocks' slots
// by the last block; no float atomics.
// CHECK-LABEL: .visible .entry plif_backward_f32_deterministic_vec(
// CHECK-NOT:     atom.global.add.f32
// CHECK:         st.shared
// CHECK:         bar.sync
// CHECK:         membar.gl
// CHECK-NEXT:    atom.global.add.u32
// CHECK:         ld.volatile.global
// CHECK-NOT:     atom.global.add.f32
// CHECK-LABEL: .visible .entry plif_backward_f32_deterministic_scalar(
// CHECK-NOT:     atom.global.add.f32
// CHECK:         membar.gl
// CHECK-NEXT:    atom.global.add.u32
