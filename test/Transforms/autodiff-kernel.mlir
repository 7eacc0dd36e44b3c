// RUN: flexsn-opt %s --split-input-file --flexsn-autodiff --canonicalize | FileCheck %s
// RUN: flexsn-opt %s --split-input-file --flexsn-autodiff=neurons=other | FileCheck %s --check-prefix=FILTERED
// RUN: flexsn-opt %s --split-input-file --flexsn-autodiff --convert-flexsn-to-gpu | FileCheck %s --check-prefix=GPU

// Autodiff differentiates scans, not neurons: a forward kernel written by
// hand (here a block: an affine pre-op p = x·scale + shift, a leaky
// soft-reset neuron on it, a residual readout y = s + x) gets its saved
// sequences and a backward kernel named after it, with buffers named after
// its own. Its scalar parameters' kinds say which get gradients.

// CHECK-LABEL: func.func @block_forward_f32(
// CHECK-SAME:    %[[X:[^:]*]]: memref<?x?xf32>, %[[V0:[^:]*]]: memref<?xf32>, %[[Y:[^:]*]]: memref<?x?xf32>, %[[V:[^:]*]]: memref<?x?xf32>, %[[SAVED:[^:]*]]: memref<?x?xf32>, %[[A:[^:]*]]: f32, %[[C:[^:]*]]: f32)
// CHECK-SAME:    buffers = [<"x", input_sequence, f32, sequence, input 0>, <"v_init", initial_state, f32, per_neuron, state_init 0>, <"y", output_sequence, f32, sequence, output 0>, <"v_seq", state_sequence, f32, sequence, state_seq 0>, <"saved0", saved_output, f32, sequence, saved 0>], params = [<"scale", 1.000000e+00 : f32, trainable>, <"shift", 0.000000e+00 : f32, runtime>], workspace_sequences = 1, reduction_slots = 1>
// The step saves the state it starts from and recomputes h from it.
// CHECK:         flexsn.scan ins(%[[X]] : memref<?x?xf32>) inits(%[[V0]] : memref<?xf32>) params(%[[A]], %[[C]] : f32, f32) outs(%[[Y]], %[[SAVED]] : memref<?x?xf32>, memref<?x?xf32>) states(%[[V]] : memref<?x?xf32>)
// CHECK-NEXT:    ^bb0(%[[xi:[^:]*]]: f32, %[[vi:[^:]*]]: f32,
// CHECK:           flexsn.yield %{{.*}}, %[[vi]], %{{.*}} : f32, f32, f32

// CHECK-LABEL: func.func @block_backward_f32(
// CHECK-SAME:    %[[GY:[^:]*]]: memref<?x?xf32>, %[[GV:[^:]*]]: memref<?x?xf32>, %[[S:[^:]*]]: memref<?x?xf32>, %[[XR:[^:]*]]: memref<?x?xf32>, %[[GFIN:[^:]*]]: memref<?xf32>, %[[GX:[^:]*]]: memref<?x?xf32>, %[[GV0:[^:]*]]: memref<?xf32>, %[[GA:[^:]*]]: memref<f32>, %[[BA:[^:]*]]: f32, %[[BC:[^:]*]]: f32)
// CHECK-SAME:    #flexsn.kernel<"block", backward, f32, buffers = [<"y_grad", optional_input_sequence, f32, sequence, grad output 0>, <"v_seq_grad", optional_input_sequence, f32, sequence, grad state_seq 0>, <"saved0", saved_input, f32, sequence, saved 0>, <"x", input_sequence, f32, sequence, input 0>, <"v_final_grad", initial_state, f32, per_neuron, grad state_final 0>, <"x_grad", output_sequence, f32, sequence, grad input 0>, <"v_init_grad", final_state, f32, per_neuron, grad state_init 0>, <"scale_grad", param_gradient, f32, scalar, grad param "scale">], params = [<"scale", {{.*}}, trainable>, <"shift", {{.*}}, runtime>], workspace_sequences = 1, reduction_slots = 1>
// CHECK:         flexsn.scan reverse ins(%[[GY]], %[[GV]], %[[S]], %[[XR]] : {{.*}}) inits(%[[GFIN]] : memref<?xf32>) params(%[[BA]], %[[BC]] : f32, f32) outs(%[[GX]] : memref<?x?xf32>) states(%[[GV0]] : memref<?xf32>) reductions(%[[GA]] : memref<f32>)
// CHECK:           flexsn.surrogate_grad %{{.*}} surrogate(#flexsn.piecewise_quadratic)
// CHECK:         } attributes {optional_inputs = array<i64: 0, 1>}

// The GPU lowering takes both kernels like a neuron's, with a
// deterministic backward for the trainable scale.
// GPU: gpu.func @block_forward_f32_vec(
// GPU: gpu.func @block_backward_f32_vec(
// GPU: gpu.func @block_backward_f32_deterministic_vec(

// A kernel listed by another neuron's name is left alone.
// FILTERED-NOT:  @block_backward_f32
// FILTERED-LABEL: func.func @block_forward_f32(
// FILTERED-SAME:    %{{[^:]*}}: memref<?x?xf32>, %{{[^:]*}}: f32, %{{[^:]*}}: f32)
// FILTERED-NOT:  @block_backward_f32
func.func @block_forward_f32(%x: memref<?x?xf32>, %v0: memref<?xf32>,
                             %y: memref<?x?xf32>, %v: memref<?x?xf32>,
                             %scale: f32, %shift: f32)
    attributes {flexsn.kernel = #flexsn.kernel<"block", forward, f32,
      buffers = [<"x", input_sequence, f32, sequence, input 0>,
                 <"v_init", initial_state, f32, per_neuron, state_init 0>,
                 <"y", output_sequence, f32, sequence, output 0>,
                 <"v_seq", state_sequence, f32, sequence, state_seq 0>],
      params = [<"scale", 1.0 : f32, trainable>, <"shift", 0.0 : f32, runtime>]>} {
  flexsn.scan ins(%x : memref<?x?xf32>) inits(%v0 : memref<?xf32>)
      params(%scale, %shift : f32, f32) outs(%y : memref<?x?xf32>)
      states(%v : memref<?x?xf32>) {
  ^bb0(%xi: f32, %vi: f32, %a: f32, %c: f32):
    %half = arith.constant 0.5 : f32
    %one = arith.constant 1.0 : f32
    %ax = arith.mulf %xi, %a : f32
    %p = arith.addf %ax, %c : f32
    %leak = arith.mulf %vi, %half : f32
    %h = arith.addf %leak, %p : f32
    %over = arith.subf %h, %one : f32
    %s = flexsn.spike %over surrogate(#flexsn.piecewise_quadratic) : f32
    %vn = arith.subf %h, %s : f32
    %yi = arith.addf %s, %xi : f32
    flexsn.yield %yi, %vn : f32, f32
  }
  return
}

// -----

// A running product in bf16 whose name has no "forward": the backward's
// name appends "_backward". Its buffers list the state sequence before the
// output, so the saved sequence (the state each step starts from) goes after
// the output, in bf16 (saved values have the storage type). Nothing is
// trainable: no reductions.
// CHECK-LABEL: func.func @product(
// CHECK-SAME:    buffers = [<"u", input_sequence, bf16, sequence, input 0>, <"acc_init", initial_state, bf16, per_neuron, state_init 0>, <"acc_seq", state_sequence, bf16, sequence, state_seq 0>, <"y", output_sequence, bf16, sequence, output 0>, <"saved0", saved_output, bf16, sequence, saved 0>], params = [<"k", {{.*}}, runtime>], workspace_sequences = 1>
// CHECK:         flexsn.scan ins(%arg0 : {{.*}}) inits(%arg1 : {{.*}}) params(%arg5 : f32) outs(%arg3, %arg4 : memref<?x?xbf16>, memref<?x?xbf16>) states(%arg2 : memref<?x?xbf16>)
// CHECK-LABEL: func.func @product_backward(
// CHECK-SAME:    buffers = [<"y_grad", optional_input_sequence, bf16, sequence, grad output 0>, <"acc_seq_grad", optional_input_sequence, bf16, sequence, grad state_seq 0>, <"saved0", saved_input, bf16, sequence, saved 0>, <"u", input_sequence, bf16, sequence, input 0>, <"acc_final_grad", initial_state, bf16, per_neuron, grad state_final 0>, <"u_grad", output_sequence, bf16, sequence, grad input 0>, <"acc_init_grad", final_state, bf16, per_neuron, grad state_init 0>], params = [<"k", {{.*}}, runtime>], workspace_sequences = 1>
// CHECK-NOT:     reductions
// CHECK:         return
func.func @product(%u: memref<?x?xbf16>, %acc0: memref<?xbf16>,
                   %acc: memref<?x?xbf16>, %y: memref<?x?xbf16>, %k: f32)
    attributes {flexsn.kernel = #flexsn.kernel<"", forward, bf16,
      buffers = [<"u", input_sequence, bf16, sequence, input 0>,
                 <"acc_init", initial_state, bf16, per_neuron, state_init 0>,
                 <"acc_seq", state_sequence, bf16, sequence, state_seq 0>,
                 <"y", output_sequence, bf16, sequence, output 0>],
      params = [<"k", 2.0 : f32, runtime>]>} {
  flexsn.scan ins(%u : memref<?x?xbf16>) inits(%acc0 : memref<?xbf16>)
      params(%k : f32) outs(%y : memref<?x?xbf16>)
      states(%acc : memref<?x?xbf16>) {
  ^bb0(%ui: f32, %ai: f32, %ki: f32):
    %m = arith.mulf %ai, %ui : f32
    %r = arith.mulf %m, %ki : f32
    flexsn.yield %r, %m : f32, f32
  }
  return
}

// -----

// A forward kernel whose backward exists is not differentiated again.
// CHECK-LABEL: func.func @done_forward_f32(
// CHECK-SAME:    buffers = [<"x", input_sequence, f32, sequence, input 0>, <"y", output_sequence, f32, sequence, output 0>]>
// CHECK-LABEL: func.func @done_backward_f32(
// CHECK-NEXT:    return
func.func @done_forward_f32(%x: memref<?x?xf32>, %y: memref<?x?xf32>)
    attributes {flexsn.kernel = #flexsn.kernel<"done", forward, f32,
      buffers = [<"x", input_sequence, f32, sequence, input 0>,
                 <"y", output_sequence, f32, sequence, output 0>]>} {
  flexsn.scan ins(%x : memref<?x?xf32>) outs(%y : memref<?x?xf32>) {
  ^bb0(%xi: f32):
    %r = arith.mulf %xi, %xi : f32
    flexsn.yield %r : f32
  }
  return
}
func.func @done_backward_f32() {
  return
}

// -----

// Parameter buffers get a gradient when their argument is marked
// flexsn.trainable (w), and none otherwise (b): the backward takes both and
// writes w_grad only.
// CHECK-LABEL: func.func @shaped_forward_f32(
// CHECK-LABEL: func.func @shaped_backward_f32(
// CHECK-SAME:    <"w", per_neuron_param, f32, per_neuron, param "w" per_neuron>, <"b", per_neuron_param, f32, per_neuron, param "b" per_neuron>, <"w_grad", per_neuron_param_gradient, f32, per_neuron, grad param "w" per_neuron>]
// CHECK-NOT:     b_grad
// CHECK:         flexsn.scan
func.func @shaped_forward_f32(%x: memref<?x?xf32>,
                              %w: memref<?xf32> {flexsn.trainable},
                              %b: memref<?xf32>, %y: memref<?x?xf32>)
    attributes {flexsn.kernel = #flexsn.kernel<"shaped", forward, f32,
      buffers = [<"x", input_sequence, f32, sequence, input 0>,
                 <"w", per_neuron_param, f32, per_neuron, param "w" per_neuron>,
                 <"b", per_neuron_param, f32, per_neuron, param "b" per_neuron>,
                 <"y", output_sequence, f32, sequence, output 0>]>} {
  flexsn.scan ins(%x : memref<?x?xf32>) params(%w, %b : memref<?xf32>, memref<?xf32>)
      outs(%y : memref<?x?xf32>) {
  ^bb0(%xi: f32, %wi: f32, %bi: f32):
    %m = arith.mulf %xi, %wi : f32
    %r = arith.addf %m, %bi : f32
    flexsn.yield %r : f32
  }
  return
}

// -----

// A state kept only at its end (a block's final state): the forward keeps
// writing just the final state, and the backward takes no per-step
// gradient for it, only the final state's (v_final_grad), so the reverse
// scan reads the saved charge and x alone.
// CHECK-LABEL: func.func @final_forward_f32(
// CHECK-SAME:    buffers = [<"x", input_sequence, f32, sequence, input 0>, <"v_init", initial_state, f32, per_neuron, state_init 0>, <"v", final_state, f32, per_neuron, state_final 0>, <"saved0", saved_output, f32, sequence, saved 0>], workspace_sequences = 1>
// CHECK-LABEL: func.func @final_backward_f32(
// CHECK-SAME:    %[[SAVED:[^:]*]]: memref<?x?xf32>, %[[X:[^:]*]]: memref<?x?xf32>, %[[GFIN:[^:]*]]: memref<?xf32>, %[[GXS:[^:]*]]: memref<?x?xf32>, %[[GV0:[^:]*]]: memref<?xf32>)
// CHECK-SAME:    buffers = [<"saved0", saved_input, f32, sequence, saved 0>, <"x", input_sequence, f32, sequence, input 0>, <"v_final_grad", initial_state, f32, per_neuron, grad state_final 0>, <"x_grad", output_sequence, f32, sequence, grad input 0>, <"v_init_grad", final_state, f32, per_neuron, grad state_init 0>], workspace_sequences = 1>
// CHECK:         flexsn.scan reverse ins(%[[SAVED]], %[[X]] : {{.*}}) inits(%[[GFIN]] : {{.*}}) outs(%[[GXS]] : {{.*}}) states(%[[GV0]] : {{.*}}) {
// CHECK-NEXT:    ^bb0(%[[V:.*]]: f32, %[[XI:.*]]: f32, %[[G:.*]]: f32):
// CHECK-NEXT:      %[[GV:.*]] = arith.mulf %[[G]], %[[XI]] : f32
// CHECK-NEXT:      %[[GX:.*]] = arith.mulf %[[G]], %[[V]] : f32
// CHECK-NEXT:      flexsn.yield %[[GX]], %[[GV]] : f32, f32
func.func @final_forward_f32(%x: memref<?x?xf32>, %v0: memref<?xf32>,
                             %v: memref<?xf32>)
    attributes {flexsn.kernel = #flexsn.kernel<"final", forward, f32,
      buffers = [<"x", input_sequence, f32, sequence, input 0>,
                 <"v_init", initial_state, f32, per_neuron, state_init 0>,
                 <"v", final_state, f32, per_neuron, state_final 0>]>} {
  flexsn.scan ins(%x : memref<?x?xf32>) inits(%v0 : memref<?xf32>)
      states(%v : memref<?xf32>) {
  ^bb0(%xi: f32, %vi: f32):
    %h = arith.mulf %vi, %xi : f32
    flexsn.yield %h : f32
  }
  return
}
