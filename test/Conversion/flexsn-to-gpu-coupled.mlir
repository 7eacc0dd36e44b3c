// RUN: flexsn-opt %neurons/plif.mlir --flexsn-autodiff --flexsn-couple-kernels --convert-flexsn-to-gpu | FileCheck %s

// A coupled kernel's two entries take H after T, N and ld; a block runs one
// sample, each thread four neurons (the vector entry, samples of up to
// 1024) or one (the scalar entry, up to 256), so they hold two slots of
// the sample's coupled outputs in workgroup memory. There is no
// deterministic twin: the sums across neurons are atomic.
// CHECK-LABEL: module attributes {flexsn.gpu_kernels = [
// CHECK-SAME: #flexsn.compiled_kernel<"plif_backward_f32_coupled", <"plif", backward, f32,
// CHECK-SAME: coupled_input = 0, coupled_output = 0>, vector_width = 4, vector_entry = "plif_backward_f32_coupled_vec", scalar_entry = "plif_backward_f32_coupled_scalar">
// CHECK-NOT: plif_backward_f32_coupled_deterministic
// CHECK: gpu.func @plif_forward_f32_coupled_vec(%{{.*}}: !llvm.ptr, %{{.*}}: !llvm.ptr, %{{.*}}: !llvm.ptr, %{{.*}}: !llvm.ptr, %{{.*}}: !llvm.ptr, %{{.*}}: !llvm.ptr, %[[T:.*]]: i64, %[[N:.*]]: i64, %[[LD:.*]]: i64, %[[H:.*]]: i64, %{{.*}}: f32) workgroup(%[[SLOTS:.*]] : memref<2048xf32, #gpu.address_space<workgroup>>) kernel
// CHECK-SAME: known_block_size = array<i32: 256, 1, 1>
// The block's sample and the thread's neurons within it.
// CHECK: gpu.thread_id x
// CHECK: gpu.block_id x
// CHECK: arith.muli %{{.*}}, %[[H]] : i64
// The time loop: each step's drive over the sample's H outputs, skipping
// the zero ones, then the step, then one barrier.
// CHECK: scf.for %{{.*}} = %{{.*}} to %[[T]] step %{{.*}} iter_args(
// CHECK: scf.for %{{.*}} = %{{.*}} to %[[H]] step %{{.*}} iter_args(
// CHECK: memref.load %[[SLOTS]]
// CHECK: arith.cmpf une
// CHECK: math.fma
// CHECK: gpu.barrier
// CHECK-NEXT: scf.yield
// CHECK: gpu.func @plif_forward_f32_coupled_scalar({{.*}}) workgroup(%{{.*}} : memref<512xf32, #gpu.address_space<workgroup>>) kernel
// The backward kernels sum PLIF's w gradient across the block, then add it
// atomically.
// CHECK: gpu.func @plif_backward_f32_coupled_vec({{.*}}) workgroup(%{{.*}} : memref<2048xf32, #gpu.address_space<workgroup>>, %{{.*}} : memref<8xf32, #gpu.address_space<workgroup>>) kernel
// CHECK: gpu.shuffle xor
// CHECK: llvm.atomicrmw fadd
