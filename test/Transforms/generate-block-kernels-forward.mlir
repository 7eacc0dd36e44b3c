// RUN: flexsn-opt %S/../Pipelines/Inputs/bn_lif_block.mlir --flexsn-fuse-producers \
// RUN:   --flexsn-fuse-consumers --flexsn-generate-block-kernels=variants=inference,forward \
// RUN:   --mlir-print-local-scope | FileCheck %s
// RUN: not flexsn-opt %S/../Pipelines/Inputs/bn_lif_block.mlir \
// RUN:   --flexsn-generate-block-kernels=variants=final-state -o /dev/null 2>&1 \
// RUN: | FileCheck %s --check-prefix=VARIANT

// The forward kernel of a block is its inference kernel under another
// variant, which flexsn-autodiff completes. Both take their buffers in a
// neuron kernel's order (param buffers last), mark the param buffers the
// block marks trainable, and replace the block.

// CHECK-NOT:     func.func @bn_lif(
// CHECK-LABEL:   func.func @bn_lif_inference_f32(
// CHECK-SAME:      %{{.*}}: memref<?xf32> {flexsn.trainable}, %{{.*}}: memref<?xf32> {flexsn.trainable})
// CHECK-SAME:      <"v", final_state, f32, per_neuron, state_final 0>
// CHECK:           indexing_maps = [{{.*}}, affine_map<(d0, d1, d2, d3) -> (d1, d2, d3)>]
// CHECK-LABEL:   func.func @bn_lif_forward_f32(
// CHECK-SAME:      %[[X:[^:]*]]: memref<?x?x?x?xf32>, %[[V0:[^:]*]]: memref<?x?x?xf32>, %[[Y:[^:]*]]: memref<?x?x?x?xf32>, %[[V:[^:]*]]: memref<?x?x?xf32>, %[[A:[^:]*]]: memref<?xf32> {flexsn.trainable}, %[[B:[^:]*]]: memref<?xf32> {flexsn.trainable})
// CHECK-SAME:      #flexsn.kernel<"bn_lif", forward, f32, buffers = [<"x", input_sequence, f32, sequence, input 0>, <"v_init", initial_state, f32, per_neuron, state_init 0>, <"y", output_sequence, f32, sequence, output 0>, <"v", final_state, f32, per_neuron, state_final 0>, <"scale", per_channel_param, f32, per_channel, param "scale" per_channel>, <"shift", per_channel_param, f32, per_channel, param "shift" per_channel>]>
// CHECK:           flexsn.scan ins(%[[X]] : {{.*}}) inits(%[[V0]] : {{.*}}) params(%[[A]], %[[B]] : {{.*}}) outs(%[[Y]] : {{.*}}) states(%[[V]] : memref<?x?x?xf32>)
// CHECK-SAME:      affine_map<(d0, d1, d2, d3) -> (d1, d2, d3)>]
// CHECK:             flexsn.apply @lif

// VARIANT: error: block kernel variant 'final-state' is not made here; expected inference or forward (whose backward flexsn-autodiff generates)
