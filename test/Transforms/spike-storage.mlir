// RUN: flexsn-opt %s '--flexsn-generate-kernels=variants=inference,final-state storage-types=f16 spike-storage=dense,u8' \
// RUN: | FileCheck %s
// RUN: flexsn-opt %s '--flexsn-generate-kernels=variants=inference spike-storage=u8' \
// RUN:   --convert-flexsn-to-gpu | FileCheck %s --check-prefix=GPU
// RUN: flexsn-opt %s '--flexsn-generate-kernels=variants=inference spike-storage=u8' \
// RUN:   --convert-flexsn-to-scf | FileCheck %s --check-prefix=CPU
// RUN: flexsn-opt %s '--flexsn-generate-kernels=variants=inference,final-state storage-types=f16 spike-storage=bits neurons=fire' \
// RUN: | FileCheck %s --check-prefix=BITS
// RUN: flexsn-opt %s '--flexsn-generate-kernels=variants=inference spike-storage=bits neurons=fire' \
// RUN:   --convert-flexsn-to-gpu | FileCheck %s --check-prefix=GPU-BITS
// RUN: flexsn-opt %s '--flexsn-generate-kernels=variants=inference spike-storage=bits neurons=fire' \
// RUN:   --convert-flexsn-to-scf | FileCheck %s --check-prefix=CPU-BITS

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
// CHECK-NOT:     options =
// CHECK-LABEL: func.func @fire_inference_f16_spikes_u8(
// CHECK-SAME:    %{{.*}}: memref<?x?xf16>, %{{.*}}: memref<?xf16>, %[[S:.*]]: memref<?x?xi8>, %[[TR:.*]]: memref<?x?xf16>, %{{.*}}: memref<?x?xf16>, %{{.*}}: f32)
// CHECK-SAME:    <"spike", output_sequence, i8, sequence, output 0>, <"trace", output_sequence, f16, sequence, output 1>
// CHECK-SAME:    options = {spike_storage = "u8"}
// CHECK:         flexsn.scan @fire {{.*}} outs(%[[S]], %[[TR]] : memref<?x?xi8>, memref<?x?xf16>)
// CHECK-LABEL: func.func @fire_final_state_f16(
// CHECK-LABEL: func.func @fire_final_state_f16_spikes_u8(
// CHECK-SAME:    memref<?x?xi8>, %{{.*}}: memref<?x?xf16>, %{{.*}}: memref<?xf16>
// CHECK-LABEL: func.func @relay_inference_f16_spikes_u8(
// CHECK-SAME:    <"y", output_sequence, f16, sequence, output 0>, <"s", output_sequence, i8, sequence, output 1>
// CHECK-LABEL: func.func @fire_fixed_inference_f16_spikes_u8(
// CHECK-SAME:    <"h", output_sequence, f16, sequence, output 0>, <"spike", output_sequence, i8, sequence, output 1>

// The GPU kernel converts the spike with fptoui and stores the thread's
// four bytes (f32 sets the width: 16 bytes of floats) as one 4-byte
// aligned vector; the f32 trace is a 16-byte vector.
// GPU:       flexsn.gpu_kernels = [#flexsn.compiled_kernel<"fire_inference_f32_spikes_u8", {{.*}}options = {spike_storage = "u8"}>, vector_width = 4, vector_entry = "fire_inference_f32_spikes_u8_vec", scalar_entry = "fire_inference_f32_spikes_u8_scalar">
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

// spike-storage=bits: the spike outputs are i1 sequences, packed 8 per byte.
// BITS-LABEL: func.func @fire_inference_f16_spikes_bits(
// BITS-SAME:    %{{.*}}: memref<?x?xf16>, %{{.*}}: memref<?xf16>, %[[S:.*]]: memref<?x?xi1>, %[[TR:.*]]: memref<?x?xf16>, %{{.*}}: memref<?x?xf16>, %{{.*}}: f32)
// BITS-SAME:    <"spike", output_sequence, i1, sequence, output 0>, <"trace", output_sequence, f16, sequence, output 1>
// BITS-SAME:    options = {spike_storage = "bits"}
// BITS:         flexsn.scan @fire {{.*}} outs(%[[S]], %[[TR]] : memref<?x?xi1>, memref<?x?xf16>)
// BITS-LABEL: func.func @fire_final_state_f16_spikes_bits(
// BITS-SAME:    memref<?x?xi1>, %{{.*}}: memref<?x?xf16>, %{{.*}}: memref<?xf16>

// On the GPU a thread owns whole bytes: f32 kernels take 8 neurons per
// thread (two 16-byte vectors of floats), and pack the 8 spikes (bit l is
// lane l) into one byte at row * ceil(ld / 8) + first / 8.
// GPU-BITS:       flexsn.gpu_kernels = [#flexsn.compiled_kernel<"fire_inference_f32_spikes_bits", {{.*}}options = {spike_storage = "bits"}>, vector_width = 8, vector_entry = "fire_inference_f32_spikes_bits_vec", scalar_entry = "fire_inference_f32_spikes_bits_scalar">
// GPU-BITS-LABEL: gpu.func @fire_inference_f32_spikes_bits_vec(
// GPU-BITS:         %[[LD7:.*]] = arith.addi %arg7, %c7_i64
// GPU-BITS:         %[[ROW:.*]] = arith.divui %[[LD7]], %c8_i64
// GPU-BITS-COUNT-8: arith.extui %{{.*}} : i1 to i8
// GPU-BITS:         llvm.getelementptr %arg2[%{{.*}}] : (!llvm.ptr, i64) -> !llvm.ptr, i8
// GPU-BITS-NEXT:    llvm.store %{{.*}}, %{{.*}} {alignment = 1 : i64} : i8, !llvm.ptr
// GPU-BITS:         llvm.store %{{.*}}, %{{.*}} {alignment = 16 : i64} : vector<8xf32>, !llvm.ptr
// The last, partial group: its first neuron writes the byte, the others
// add their bit to it.
// GPU-BITS:         %[[FIRST:.*]] = arith.cmpi eq, %{{.*}}, %c0_i8 : i8
// GPU-BITS-NEXT:    scf.if %[[FIRST]] {
// GPU-BITS-NEXT:      llvm.store %{{.*}}, %{{.*}} {alignment = 1 : i64} : i8, !llvm.ptr
// GPU-BITS-NEXT:    } else {
// GPU-BITS-NEXT:      %[[OLD:.*]] = llvm.load %{{.*}} {alignment = 1 : i64} : !llvm.ptr -> i8
// GPU-BITS-NEXT:      %[[NEW:.*]] = arith.ori %[[OLD]], %{{.*}} : i8
// GPU-BITS-NEXT:      llvm.store %[[NEW]], %{{.*}} {alignment = 1 : i64} : i8, !llvm.ptr
// The scalar kernel (a neuron per thread): a ballot over the warp's live
// lanes, whose bytes lanes 0-3 store.
// GPU-BITS-LABEL: gpu.func @fire_inference_f32_spikes_bits_scalar(
// GPU-BITS:         %[[BALLOT:.*]] = nvvm.vote.sync  ballot %{{.*}}, %{{.*}} -> i32
// GPU-BITS:         arith.cmpi ult, %{{.*}}, %c4_i64
// GPU-BITS:         %[[SHIFTED:.*]] = arith.shrui %[[BALLOT]], %{{.*}} : i32
// GPU-BITS:         %[[BYTE:.*]] = arith.trunci %[[SHIFTED]] : i32 to i8
// GPU-BITS:         llvm.store %[[BYTE]], %{{.*}} {alignment = 1 : i64} : i8, !llvm.ptr

// On the CPU the neurons of a row come in order: the first of a byte
// writes it, the others add their bit.
// CPU-BITS-LABEL: func.func @fire_inference_f32_spikes_bits(
// CPU-BITS:         memref.extract_strided_metadata %{{.*}} : memref<?x?xi1>
// CPU-BITS:         %[[PTR:.*]] = llvm.inttoptr %{{.*}} : i64 to !llvm.ptr
// CPU-BITS:         %[[FIRST:.*]] = arith.cmpi eq, %{{.*}}, %c0{{.*}} : index
// CPU-BITS-NEXT:    scf.if %[[FIRST]] {
// CPU-BITS-NEXT:      llvm.store %{{.*}}, %[[PTR]] {alignment = 1 : i64} : i8, !llvm.ptr
// CPU-BITS-NEXT:    } else {
// CPU-BITS-NEXT:      %[[OLD:.*]] = llvm.load %[[PTR]] {alignment = 1 : i64} : !llvm.ptr -> i8
// CPU-BITS-NEXT:      arith.ori %[[OLD]], %{{.*}} : i8
