// RUN: flexsn-opt %s --split-input-file --flexsn-generate-kernels=variants=inference,final-state --convert-flexsn-to-gpu --cse | FileCheck %s
// RUN: flexsn-opt %s --split-input-file --flexsn-generate-kernels=storage-types=f16 --convert-flexsn-to-gpu | FileCheck %s --check-prefix=HALF

// Each kernel function becomes a vectorized and a scalar gpu.func taking bare
// pointers, then T, N, ld, then runtime parameters; the host functions go.
// The module lists each kernel with the signature its function carried.
// CHECK-LABEL: module attributes {flexsn.gpu_kernels = [
// CHECK-SAME:    #flexsn.compiled_kernel<"leaky_inference_f32", <"leaky", inference, f32,
// CHECK-SAME:      buffers = [<"x", input_sequence, f32, sequence, input 0>, <"v_init", initial_state, f32, per_neuron, state_init 0>, <"spike", output_sequence, f32, sequence, output 0>, <"v_seq", state_sequence, f32, sequence, state_seq 0>]
// CHECK-SAME:      params = [<"tau", 2.000000e+00 : f32, runtime>]>, vector_width = 4, vector_entry = "leaky_inference_f32_vec", scalar_entry = "leaky_inference_f32_scalar">
// CHECK-SAME:    #flexsn.compiled_kernel<"leaky_final_state_f32", <"leaky", "final-state", f32,
// CHECK-SAME:      <"v_final", final_state, f32, per_neuron, state_final 0>
// CHECK-SAME:    gpu.container_module
// CHECK-NOT:   func.func
// CHECK:       flexsn.neuron @leaky
// CHECK:       gpu.module @flexsn_kernels
// CHECK:         gpu.func @leaky_inference_f32_vec(%[[X:.*]]: !llvm.ptr, %{{.*}}: !llvm.ptr, %{{.*}}: !llvm.ptr, %{{.*}}: !llvm.ptr, %[[T:.*]]: i64, %[[N:.*]]: i64, %[[LD:.*]]: i64, %[[TAU:.*]]: f32) kernel
// CHECK-SAME:      known_block_size = array<i32: 256, 1, 1>
// Each thread owns four neurons; a full group uses 16-byte accesses.
// CHECK:           %[[C4:.*]] = arith.constant 4 : i64
// CHECK:           %[[FIRST:.*]] = arith.muli %{{.*}}, %[[C4]] : i64
// CHECK:           arith.cmpi slt, %[[FIRST]], %[[N]] : i64
// CHECK:           scf.for %[[STEP:.*]] = %{{.*}} to %[[T]]
// CHECK:             %[[ROW:.*]] = arith.muli %[[STEP]], %[[LD]] : i64
// CHECK:             %[[IDX:.*]] = arith.addi %[[ROW]], %[[FIRST]] : i64
// CHECK:             %[[P:.*]] = llvm.getelementptr %[[X]][%[[IDX]]] : (!llvm.ptr, i64) -> !llvm.ptr, f32
// CHECK:             llvm.load %[[P]] {alignment = 16 : i64} : !llvm.ptr -> vector<4xf32>
// CHECK:             arith.divf %{{.*}}, %[[TAU]] : f32
// CHECK:             llvm.store %{{.*}}, %{{.*}} {alignment = 16 : i64} : vector<4xf32>, !llvm.ptr
// The last, partial group walks its neurons one at a time.
// CHECK:           scf.for %{{.*}} = %[[FIRST]] to %[[N]]
// CHECK:             llvm.load %{{.*}} {alignment = 4 : i64} : !llvm.ptr -> f32
// CHECK:         gpu.func @leaky_inference_f32_scalar(
// CHECK-NOT:       vector<
// CHECK:           gpu.return
// CHECK:         gpu.func @leaky_final_state_f32_vec(

// Half storage: eight neurons per thread, still 16 bytes per access.
// HALF:        gpu.func @leaky_inference_f16_vec(
// HALF:          llvm.load %{{.*}} {alignment = 16 : i64} : !llvm.ptr -> vector<8xf16>
// HALF:          arith.extf %{{.*}} : f16 to f32
// HALF:          arith.truncf %{{.*}} : f32 to f16
flexsn.neuron @leaky inputs(%x: f32) states(%v: f32) outputs(spike)
    params(%tau: f32 = 2.0 runtime) {
  %dv = arith.subf %x, %v : f32
  %inc = arith.divf %dv, %tau : f32
  %h = arith.addf %v, %inc : f32
  %one = arith.constant 1.0 : f32
  %d = arith.subf %h, %one : f32
  %s = flexsn.spike %d surrogate(#flexsn.sigmoid) : f32
  flexsn.yield %s, %h : f32, f32
}
