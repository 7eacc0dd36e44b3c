// RUN: flexsn-opt %s --split-input-file | flexsn-opt --split-input-file | FileCheck %s
// RUN: flexsn-opt %s --split-input-file --mlir-print-op-generic | flexsn-opt --split-input-file | FileCheck %s

// The typed kernel interface round-trips, with its optional parts omitted
// when empty or zero, and either spelling of its elements accepted.

// CHECK-LABEL: func.func @plain
// CHECK-SAME:    flexsn.kernel = #flexsn.kernel<"", inference, f16, buffers = [<"x", input_sequence, f16, sequence>, <"v0", initial_state, f16, per_neuron>, <"y", output_sequence, f16, sequence>, <"v", final_state, f16, per_neuron>]>
func.func @plain(%x: memref<?x?xf16>, %v0: memref<?xf16>, %y: memref<?x?xf16>, %v: memref<?xf16>)
    attributes {flexsn.kernel = #flexsn.kernel<"", inference, f16, buffers = [#flexsn.buffer<"x", input_sequence, f16, sequence>, <"v0", initial_state, f16, per_neuron>, <"y", output_sequence, f16, sequence>, <"v", final_state, f16, per_neuron>], params = [], workspace_sequences = 0>} {
  return
}

// -----

// CHECK-LABEL: func.func @training
// CHECK-SAME:    flexsn.kernel = #flexsn.kernel<"plif", backward, bf16, buffers = [<"y_grad", optional_input_sequence, bf16, sequence>, <"saved0", saved_input, f32, sequence>, <"x_grad", output_sequence, bf16, sequence>, <"w_grad", param_gradient, f32, scalar>], params = [<"w", 5.000000e-01 : f32, trainable>], workspace_sequences = 1, reduction_slots = 1>
func.func @training(%g: memref<?x?xbf16>, %s: memref<?x?xf32>, %dx: memref<?x?xbf16>, %dw: memref<f32>, %w: f32)
    attributes {flexsn.kernel = #flexsn.kernel<"plif", backward, bf16, buffers = [<"y_grad", optional_input_sequence, bf16, sequence>, <"saved0", saved_input, f32, sequence>, <"x_grad", output_sequence, bf16, sequence>, <"w_grad", param_gradient, f32, scalar>], params = [<"w", 0.5 : f32, trainable>], reduction_slots = 1, workspace_sequences = 1>} {
  return
}

// -----

// Saved values in the storage type (save-in-storage-type).
// CHECK-LABEL: func.func @saved_in_storage_type
// CHECK-SAME:    flexsn.kernel = #flexsn.kernel<"lif", forward, bf16, buffers = [<"x", input_sequence, bf16, sequence>, <"saved0", saved_output, bf16, sequence>], workspace_sequences = 1>
func.func @saved_in_storage_type(%x: memref<?x?xbf16>, %h: memref<?x?xbf16>)
    attributes {flexsn.kernel = #flexsn.kernel<"lif", forward, bf16, buffers = [<"x", input_sequence, bf16, sequence>, <"saved0", saved_output, bf16, sequence>], workspace_sequences = 1>} {
  return
}

// -----

// A variant that is not a keyword is quoted.
// CHECK: flexsn.cpu_kernels = [#flexsn.compiled_kernel<"k", <"k", "final-state", f32, buffers = [<"x", input_sequence, f32, sequence>]>>]
// CHECK-SAME: flexsn.gpu_kernels = [#flexsn.compiled_kernel<"k_deterministic", <"k", backward, f32, buffers = [<"x_grad", output_sequence, f32, sequence>, <"w_grad", param_gradient, f32, scalar>, <"reduction_scratch", reduction_scratch, f32, scratch>], params = [<"w", 1.000000e+00 : f32, trainable>], reduction_slots = 1>, vector_width = 4, deterministic = true>]
module attributes {
  flexsn.gpu_kernels = [#flexsn.compiled_kernel<"k_deterministic", <"k", backward, f32, buffers = [<"x_grad", output_sequence, f32, sequence>, <"w_grad", param_gradient, f32, scalar>, <"reduction_scratch", reduction_scratch, f32, scratch>], params = [<"w", 1.0 : f32, trainable>], reduction_slots = 1>, vector_width = 4, deterministic = true>],
  flexsn.cpu_kernels = [#flexsn.compiled_kernel<"k", #flexsn.kernel<"k", "final-state", f32, buffers = [<"x", input_sequence, f32, sequence>]>>]} {
}
