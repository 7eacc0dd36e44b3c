// RUN: flexsn-opt %s --split-input-file '--flexsn-autodiff=storage-types=f32,f16' \
// RUN:   --convert-flexsn-to-gpu | FileCheck %s
// RUN: not flexsn-opt %S/Inputs/many-channel-gradients.mlir \
// RUN:   --flexsn-autodiff --convert-flexsn-to-gpu -o /dev/null 2>&1 \
// RUN: | FileCheck %s --check-prefix=TOO-MANY

// A block's workgroup memory holds a slot per channel its neurons may
// touch for each per-channel gradient (256 x width + 2 floats each), at
// most 48 KiB: with seven, the f16 backward kernel takes 4 lanes per
// thread where its forward takes 8 (at 8 it would need 57,400 bytes and
// ptxas would reject it).

// CHECK-DAG: vector_width = 8, vector_entry = "seven_forward_f16_vec"
// CHECK-DAG: vector_width = 4, vector_entry = "seven_backward_f16_vec"
// CHECK-DAG: vector_width = 4, vector_entry = "seven_backward_f32_vec"

// Forty-eight do not fit even one lane per thread.
// TOO-MANY: error: a GPU kernel holds at most 49152 bytes of per-channel and scalar gradient sums per block; 48 per-channel and 0 scalar parameter gradients need more

flexsn.neuron @seven inputs(%x: f32) states(%v: f32) outputs(y)
    params(%p0: f32 = 1.0 trainable per_channel, %p1: f32 = 1.0 trainable per_channel, %p2: f32 = 1.0 trainable per_channel, %p3: f32 = 1.0 trainable per_channel, %p4: f32 = 1.0 trainable per_channel, %p5: f32 = 1.0 trainable per_channel, %p6: f32 = 1.0 trainable per_channel) {
  %t0 = arith.mulf %x, %p0 : f32
  %t1 = arith.mulf %t0, %p1 : f32
  %t2 = arith.mulf %t1, %p2 : f32
  %t3 = arith.mulf %t2, %p3 : f32
  %t4 = arith.mulf %t3, %p4 : f32
  %t5 = arith.mulf %t4, %p5 : f32
  %t6 = arith.mulf %t5, %p6 : f32
  %h = arith.addf %v, %t6 : f32
  flexsn.yield %h, %h : f32, f32
}
