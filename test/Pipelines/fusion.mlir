// The pipelines fuse first (fuse=true, the default): a block marked
// flexsn.block (test/Pipelines/Inputs/bn_lif_block.mlir) compiles to one
// kernel; with fuse=false, kernel generation names the op that stayed.
//
// RUN: flexsn-opt %S/Inputs/bn_lif_block.mlir --flexsn-lower-to-cpu=variants=inference \
// RUN: | FileCheck %s
// RUN: not flexsn-opt %S/Inputs/bn_lif_block.mlir \
// RUN:   '--flexsn-lower-to-cpu=variants=inference fuse=false' -o /dev/null 2>&1 \
// RUN: | FileCheck %s --check-prefix=UNFUSED

// CHECK:       flexsn.cpu_kernels = [#flexsn.compiled_kernel<"bn_lif_inference_f32", <"bn_lif", inference, f32, buffers = [<"x", input_sequence, f32, sequence, input 0>, <"v_init", initial_state, f32, per_neuron, state_init 0>, <"y", output_sequence, f32, sequence, output 0>, <"v", final_state, f32, per_neuron, state_final 0>, <"scale", per_channel_param, f32, per_channel, param "scale" per_channel>, <"shift", per_channel_param, f32, per_channel, param "shift" per_channel>]>>
// CHECK:       llvm.func @bn_lif_inference_f32(

// UNFUSED:     error: block @bn_lif: 'linalg.generic' runs outside its scan

// A block is compiled by the inference and training variants only;
// without them, the lowering says so rather than leave the block
// uncompiled.
// RUN: not flexsn-opt %S/Inputs/bn_lif_block.mlir \
// RUN:   '--flexsn-lower-to-cpu=variants=final-state' -o /dev/null 2>&1 \
// RUN: | FileCheck %s --check-prefix=NO-INFERENCE
// NO-INFERENCE: error: block @bn_lif has no kernel: flexsn-generate-block-kernels compiles blocks (the pipelines do, for variants inference, forward or backward)

// For training, the block becomes a forward kernel, which autodiff
// completes with what it saves (one sequence) and a backward kernel: the
// gradients of x and of the initial state, and per-channel gradients of
// the trainable scale and shift. The state stays a final state: the
// backward reads what the forward saved, and takes the final state's
// gradient only.
// RUN: flexsn-opt %S/Inputs/bn_lif_block.mlir --flexsn-lower-to-cpu=variants=forward,backward \
// RUN: | FileCheck %s --check-prefix=TRAIN
// TRAIN:       #flexsn.compiled_kernel<"bn_lif_forward_f32", <"bn_lif", forward, f32, buffers = [<"x", input_sequence, f32, sequence, input 0>, <"v_init", initial_state, f32, per_neuron, state_init 0>, <"y", output_sequence, f32, sequence, output 0>, <"v", final_state, f32, per_neuron, state_final 0>, <"saved0", saved_output, f32, sequence, saved 0>, <"scale", per_channel_param, f32, per_channel, param "scale" per_channel>, <"shift", per_channel_param, f32, per_channel, param "shift" per_channel>], workspace_sequences = 1>>
// TRAIN-SAME:  #flexsn.compiled_kernel<"bn_lif_backward_f32", <"bn_lif", backward, f32, buffers = [<"y_grad", optional_input_sequence, f32, sequence, grad output 0>, <"saved0", saved_input, f32, sequence, saved 0>, <"x", input_sequence, f32, sequence, input 0>, <"v_final_grad", initial_state, f32, per_neuron, grad state_final 0>, <"x_grad", output_sequence, f32, sequence, grad input 0>, <"v_init_grad", final_state, f32, per_neuron, grad state_init 0>, <"scale", per_channel_param, f32, per_channel, param "scale" per_channel>, <"shift", per_channel_param, f32, per_channel, param "shift" per_channel>, <"scale_grad", per_channel_param_gradient, f32, per_channel, grad param "scale" per_channel>, <"shift_grad", per_channel_param_gradient, f32, per_channel, grad param "shift" per_channel>], workspace_sequences = 1>>
// TRAIN-NOT:   @bn_lif(
// TRAIN:       llvm.func @bn_lif_forward_f32(
// TRAIN:       llvm.func @bn_lif_backward_f32(
