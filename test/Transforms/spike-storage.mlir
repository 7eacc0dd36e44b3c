// RUN: flexsn-opt %s '--flexsn-generate-kernels=variants=inference,final-state storage-types=f16 spike-storage=dense,u8' \
// RUN: | FileCheck %s
// RUN: flexsn-opt %s '--flexsn-generate-kernels=variants=inference spike-storage=u8' \
// RUN:   --convert-flexsn-to-gpu | FileCheck %s --check-prefix=GPU
// RUN: flexsn-opt %s '--flexsn-generate-kernels=variants=inference spike-storage=u8' \
// RUN:   --convert-flexsn-to-scf | FileCheck %s --check-prefix=CPU

// spike-storage=u8 adds kernels whose spike outputs (flexsn.spike results,
// detached or not, and the spike outputs of applied neurons) are i8
// sequences; every other output keeps the storage type.

flexsn.neuron @fire inputs(%x: f32) states(%v: f32) outputs(spike, trace)
    params(%th: f32 = 1.0 runtime) {
  %h = arith.addf %v, %x : f32
  %d = arith.subf %h, %th : f32
  %s = flexsn.spike %d surrogate(#flexsn.atan) : f32
  %sd = flexsn.detach %s : f32
  %keep = arith.subf %h, %sd : f32
  flexsn.yield %sd, %h, %keep : f32, f32, f32
}

// The second output of @relay is its inner neuron's spike: a spike output.
flexsn.neuron @relay inputs(%x: f32) states(%v: f32) outputs(y, s) {
  %y, %s, %v1 = flexsn.apply @fire_fixed(%x, %v) : (f32, f32) -> (f32, f32, f32)
  flexsn.yield %y, %s, %v1 : f32, f32, f32
}

flexsn.neuron @fire_fixed inputs(%x: f32) states(%v: f32) outputs(h, spike) {
  %h = arith.addf %v, %x : f32
  %s = flexsn.spike %h surrogate(#flexsn.atan) : f32
  %keep = arith.subf %h, %s : f32
  flexsn.yield %h, %s, %keep : f32, f32, f32
}

// CHECK-LABEL: func.func @fire_inference_f16(
// CHECK-SAME:    memref<?x?xf16>, %{{.*}}: memref<?xf16>, %{{.*}}: memref<?x?xf16>, %{{.*}}: memref<?x?xf16>, %{{.*}}: memref<?x?xf16>, %{{.*}}: f32)
// CHECK-NOT:     spikes =
// CHECK-LABEL: func.func @fire_inference_f16_spikes_u8(
// CHECK-SAME:    %{{.*}}: memref<?x?xf16>, %{{.*}}: memref<?xf16>, %[[S:.*]]: memref<?x?xi8>, %[[TR:.*]]: memref<?x?xf16>, %{{.*}}: memref<?x?xf16>, %{{.*}}: f32)
// CHECK-SAME:    <"spike", output_sequence, i8, sequence>, <"trace", output_sequence, f16, sequence>
// CHECK-SAME:    spikes = u8
// CHECK:         flexsn.scan @fire {{.*}} outs(%[[S]], %[[TR]] : memref<?x?xi8>, memref<?x?xf16>)
// CHECK-LABEL: func.func @fire_final_state_f16(
// CHECK-LABEL: func.func @fire_final_state_f16_spikes_u8(
// CHECK-SAME:    memref<?x?xi8>, %{{.*}}: memref<?x?xf16>, %{{.*}}: memref<?xf16>
// CHECK-LABEL: func.func @relay_inference_f16_spikes_u8(
// CHECK-SAME:    <"y", output_sequence, f16, sequence>, <"s", output_sequence, i8, sequence>
// CHECK-LABEL: func.func @fire_fixed_inference_f16_spikes_u8(
// CHECK-SAME:    <"h", output_sequence, f16, sequence>, <"spike", output_sequence, i8, sequence>

// The GPU kernel converts the spike with fptoui and stores the thread's
// four bytes (f32 sets the width: 16 bytes of floats) as one 4-byte
// aligned vector; the f32 trace is a 16-byte vector.
// GPU:       flexsn.gpu_kernels = [#flexsn.compiled_kernel<"fire_inference_f32_spikes_u8", {{.*}}spikes = u8>, vector_width = 4>
// GPU-LABEL: gpu.func @fire_inference_f32_spikes_u8_vec(
// GPU-COUNT-4: arith.fptoui %{{.*}} : f32 to i8
// GPU:         llvm.store %{{.*}}, %{{.*}} {alignment = 4 : i64} : vector<4xi8>, !llvm.ptr
// GPU:         llvm.store %{{.*}}, %{{.*}} {alignment = 16 : i64} : vector<4xf32>, !llvm.ptr
// GPU-LABEL: gpu.func @fire_inference_f32_spikes_u8_scalar(
// GPU:         arith.fptoui %{{.*}} : f32 to i8
// GPU:         llvm.store %{{.*}}, %{{.*}} {alignment = 1 : i64} : i8, !llvm.ptr

// CPU-LABEL: func.func @fire_inference_f32_spikes_u8(
// CPU:         arith.fptoui %{{.*}} : f32 to i8
// CPU:         memref.store %{{.*}}, %{{.*}} : memref<?x?xi8>
