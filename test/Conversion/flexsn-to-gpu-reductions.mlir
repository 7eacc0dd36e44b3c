// RUN: flexsn-opt %s --flexsn-autodiff=storage-types=f32 --convert-flexsn-to-gpu --cse | FileCheck %s

// A backward kernel with a reduction (the trainable k's gradient) comes in
// two modes. Both add a block's threads by a warp shuffle tree, then its
// warps in order through workgroup memory. The atomic kernels then add each
// block's sum with one float atomic; the deterministic ones take the
// reduction scratch after the buffers, write each block's sum to the block's
// slot, and let the block that draws the last ticket add the slots in a
// fixed order.
// CHECK-LABEL: module attributes {flexsn.gpu_kernels = [
// CHECK-SAME:    #flexsn.compiled_kernel<"leaky_forward_f32", <"leaky", forward, f32,
// CHECK-SAME:      params = [<"k", 5.000000e-01 : f32, trainable>], workspace_sequences = 1, reduction_slots = 1>, vector_width = 4, vector_entry = "leaky_forward_f32_vec", scalar_entry = "leaky_forward_f32_scalar">
// CHECK-SAME:    #flexsn.compiled_kernel<"leaky_backward_f32", <"leaky", backward, f32,
// CHECK-SAME:      <"k_grad", param_gradient, f32, scalar, grad param "k">], params = [<"k", 5.000000e-01 : f32, trainable>], workspace_sequences = 1, reduction_slots = 1>, vector_width = 4, vector_entry = "leaky_backward_f32_vec", scalar_entry = "leaky_backward_f32_scalar">
// CHECK-SAME:    #flexsn.compiled_kernel<"leaky_backward_f32_deterministic", <"leaky", backward, f32,
// CHECK-SAME:      <"k_grad", param_gradient, f32, scalar, grad param "k">, <"reduction_scratch", reduction_scratch, f32, scratch, scratch>]
// CHECK-SAME:      vector_width = 4, deterministic = true, vector_entry = "leaky_backward_f32_deterministic_vec", scalar_entry = "leaky_backward_f32_deterministic_scalar">
// CHECK-SAME:    #flexsn.compiled_kernel<"leaky_forward_final_state_f32", <"leaky", forward, f32,

// CHECK:       gpu.func @leaky_backward_f32_vec(
// CHECK-SAME:      %[[GRAD:arg7]]: !llvm.ptr, %{{.*}}: i64
// CHECK-SAME:      workgroup(%[[SUMS:.*]] : memref<8xf32, #gpu.address_space<workgroup>>)
// CHECK-NOT:     gpu.func
// CHECK:         gpu.shuffle xor
// CHECK:         memref.store %{{.*}}, %[[SUMS]]
// CHECK:         gpu.barrier
// CHECK-COUNT-8: memref.load %[[SUMS]]
// CHECK:         llvm.atomicrmw fadd %[[GRAD]], %{{.*}} monotonic : !llvm.ptr, f32
// CHECK:       gpu.func @leaky_backward_f32_scalar(
// CHECK:         llvm.atomicrmw fadd

// CHECK:       gpu.func @leaky_backward_f32_deterministic_vec(
// CHECK-SAME:      %[[KGRAD:arg7]]: !llvm.ptr, %[[SCRATCH:arg8]]: !llvm.ptr, %{{.*}}: i64, %{{.*}}: i64, %{{.*}}: i64, %{{.*}}: f32)
// CHECK-SAME:      workgroup(%[[WARPS:.*]] : memref<8xf32, #gpu.address_space<workgroup>>, %[[FLAG:.*]] : memref<1xi32, #gpu.address_space<workgroup>>)
// CHECK-NOT:     llvm.atomicrmw fadd
// CHECK:         %[[GRID:.*]] = gpu.grid_dim x
// CHECK-NEXT:    %[[BLOCKS:.*]] = arith.index_castui %[[GRID]] : index to i64
// Each warp leader stores its sum; thread 0 adds the warps in order.
// CHECK:         gpu.shuffle xor
// CHECK:         memref.store %{{.*}}, %[[WARPS]]
// CHECK:         gpu.barrier
// CHECK-COUNT-8: memref.load %[[WARPS]]
// CHECK:         %[[SLOT:.*]] = llvm.getelementptr %[[SCRATCH]][%{{.*}}] : (!llvm.ptr, i64) -> !llvm.ptr, f32
// CHECK-NEXT:    llvm.store %{{.*}}, %[[SLOT]]
// The slot is published before the ticket is drawn.
// CHECK-NEXT:    nvvm.memory.barrier <gpu>
// CHECK-NEXT:    %[[TICKET:.*]] = llvm.atomicrmw add %[[SCRATCH]], %{{.*}} monotonic : !llvm.ptr, i32
// CHECK:         arith.cmpi eq, %[[TICKET]]
// CHECK:         memref.store %{{.*}}, %[[FLAG]]
// CHECK:         gpu.barrier
// CHECK:         %[[LAST:.*]] = memref.load %[[FLAG]]
// CHECK:         %[[IS_LAST:.*]] = arith.cmpi ne, %[[LAST]]
// The last block reads every block's slot, strided over its threads.
// CHECK:         scf.if %[[IS_LAST]] {
// CHECK-NEXT:      nvvm.memory.barrier <gpu>
// CHECK:           scf.for %{{.*}} = %{{.*}} to %[[BLOCKS]] step %{{.*}}
// CHECK:             llvm.load volatile
// CHECK:           gpu.shuffle xor
// CHECK:           gpu.barrier
// CHECK:           llvm.store %{{.*}}, %[[KGRAD]]
// CHECK:       gpu.func @leaky_backward_f32_deterministic_scalar(
// CHECK-NOT:     llvm.atomicrmw fadd
// CHECK:         llvm.atomicrmw add
// CHECK:         gpu.return
flexsn.neuron @leaky inputs(%x: f32) states(%v: f32) outputs(spike)
    params(%k: f32 = 0.5 trainable) {
  %dv = arith.subf %x, %v : f32
  %inc = arith.mulf %dv, %k : f32
  %h = arith.addf %v, %inc : f32
  %one = arith.constant 1.0 : f32
  %d = arith.subf %h, %one : f32
  %s = flexsn.spike %d surrogate(#flexsn.sigmoid) : f32
  flexsn.yield %s, %h : f32, f32
}
