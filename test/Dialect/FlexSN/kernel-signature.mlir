// RUN: flexsn-opt %s --split-input-file | flexsn-opt --split-input-file | FileCheck %s
// RUN: flexsn-opt %s --split-input-file --mlir-print-op-generic | flexsn-opt --split-input-file | FileCheck %s

// The typed kernel signature round-trips, with its optional parts omitted
// when empty or zero, and either spelling of its elements accepted.

// CHECK-LABEL: func.func @plain
// CHECK-SAME:    flexsn.kernel = #flexsn.kernel<"", inference, f16, buffers = [<"x", input_sequence, f16, sequence, input 0>, <"v0", initial_state, f16, per_neuron, state_init 0>, <"y", output_sequence, f16, sequence, output 0>, <"v", final_state, f16, per_neuron, state_final 0>]>
func.func @plain(%x: memref<?x?xf16>, %v0: memref<?xf16>, %y: memref<?x?xf16>, %v: memref<?xf16>)
    attributes {flexsn.kernel = #flexsn.kernel<"", inference, f16, buffers = [#flexsn.buffer<"x", input_sequence, f16, sequence, input 0>, <"v0", initial_state, f16, per_neuron, state_init 0>, <"y", output_sequence, f16, sequence, output 0>, <"v", final_state, f16, per_neuron, state_final 0>], params = [], workspace_sequences = 0>} {
  return
}

// -----

// CHECK-LABEL: func.func @training
// CHECK-SAME:    flexsn.kernel = #flexsn.kernel<"plif", backward, bf16, buffers = [<"y_grad", optional_input_sequence, bf16, sequence, grad output 0>, <"saved0", saved_input, f32, sequence, saved 0>, <"x_grad", output_sequence, bf16, sequence, grad input 0>, <"w_grad", param_gradient, f32, scalar, grad param "w">], params = [<"w", 5.000000e-01 : f32, trainable>], workspace_sequences = 1, reduction_slots = 1>
func.func @training(%g: memref<?x?xbf16>, %s: memref<?x?xf32>, %dx: memref<?x?xbf16>, %dw: memref<f32>, %w: f32)
    attributes {flexsn.kernel = #flexsn.kernel<"plif", backward, bf16, buffers = [<"y_grad", optional_input_sequence, bf16, sequence, grad output 0>, <"saved0", saved_input, f32, sequence, saved 0>, <"x_grad", output_sequence, bf16, sequence, grad input 0>, <"w_grad", param_gradient, f32, scalar, grad param "w">], params = [<"w", 0.5 : f32, trainable>], reduction_slots = 1, workspace_sequences = 1>} {
  return
}

// -----

// Saved values in the storage type (save-in-storage-type).
// CHECK-LABEL: func.func @saved_in_storage_type
// CHECK-SAME:    flexsn.kernel = #flexsn.kernel<"lif", forward, bf16, buffers = [<"x", input_sequence, bf16, sequence, input 0>, <"saved0", saved_output, bf16, sequence, saved 0>], workspace_sequences = 1>
func.func @saved_in_storage_type(%x: memref<?x?xbf16>, %h: memref<?x?xbf16>)
    attributes {flexsn.kernel = #flexsn.kernel<"lif", forward, bf16, buffers = [<"x", input_sequence, bf16, sequence, input 0>, <"saved0", saved_output, bf16, sequence, saved 0>], workspace_sequences = 1>} {
  return
}

// -----

// A variant that is not a keyword is quoted.
// CHECK: flexsn.cpu_kernels = [#flexsn.compiled_kernel<"k", <"k", "final-state", f32, buffers = [<"x", input_sequence, f32, sequence, input 0>]>>]
// CHECK-SAME: flexsn.gpu_kernels = [#flexsn.compiled_kernel<"k_deterministic", <"k", backward, f32, buffers = [<"x_grad", output_sequence, f32, sequence, grad input 0>, <"w_grad", param_gradient, f32, scalar, grad param "w">, <"reduction_scratch", reduction_scratch, f32, scratch, scratch>], params = [<"w", 1.000000e+00 : f32, trainable>], reduction_slots = 1>, vector_width = 4, deterministic = true, vector_entry = "k_deterministic_vec", scalar_entry = "k_deterministic_scalar">]
module attributes {
  flexsn.gpu_kernels = [#flexsn.compiled_kernel<"k_deterministic", <"k", backward, f32, buffers = [<"x_grad", output_sequence, f32, sequence, grad input 0>, <"w_grad", param_gradient, f32, scalar, grad param "w">, <"reduction_scratch", reduction_scratch, f32, scratch, scratch>], params = [<"w", 1.0 : f32, trainable>], reduction_slots = 1>, vector_width = 4, deterministic = true, vector_entry = "k_deterministic_vec", scalar_entry = "k_deterministic_scalar">],
  flexsn.cpu_kernels = [#flexsn.compiled_kernel<"k", #flexsn.kernel<"k", "final-state", f32, buffers = [<"x", input_sequence, f32, sequence, input 0>]>>]} {
}

// -----

// Bindings round-trip: gradients, parameters by name and shape, saved slots
// and the scratch.
// CHECK-LABEL: func.func @bindings
// CHECK-SAME: binds = #flexsn.binds<grad param "tau">
// CHECK-SAME: <"g", optional_input_sequence, f32, sequence, grad state_seq 1>
// CHECK-SAME: <"s", saved_input, f32, sequence, saved 0>
// CHECK-SAME: <"w_grad", per_neuron_param_gradient, f32, per_neuron, grad param "w" per_channel>
// CHECK-SAME: <"c", per_channel_param, f32, per_channel, param "c" per_channel>
func.func @bindings(%g: memref<?x?x?x?xf32>, %s: memref<?x?x?x?xf32>, %w: memref<?x?x?xf32>, %c: memref<?xf32>)
    attributes {flexsn.kernel = #flexsn.kernel<"n", backward, f32, buffers = [<"g", optional_input_sequence, f32, sequence, grad state_seq 1>, <"s", saved_input, f32, sequence, saved 0>, <"w_grad", per_neuron_param_gradient, f32, per_neuron, grad param "w" per_channel>, <"c", per_channel_param, f32, per_channel, param "c" per_channel>], workspace_sequences = 1>, binds = #flexsn.binds<grad param "tau">} {
  return
}
