// RUN: flexsn-opt %s --split-input-file --flexsn-autodiff -verify-diagnostics

// A forward kernel that autodiff cannot differentiate gets a diagnostic.

flexsn.neuron @double inputs(%x: f32) states() outputs(y) {
  %y = arith.addf %x, %x : f32
  flexsn.yield %y : f32
}

// The scan must carry its body, not call a neuron.
func.func @call_forward_f32(%x: memref<?x?xf32>, %y: memref<?x?xf32>)
    attributes {flexsn.kernel = #flexsn.kernel<"call", forward, f32,
      buffers = [<"x", input_sequence, f32, sequence, input 0>,
                 <"y", output_sequence, f32, sequence, output 0>]>} {
  // expected-error@+1 {{autodiff differentiates an inline body: the scan must not call a neuron}}
  flexsn.scan @double ins(%x : memref<?x?xf32>) outs(%y : memref<?x?xf32>)
  return
}

// -----

// A kernel function is checked against its signature first.
func.func @two_forward_f32(%x: memref<?x?xf32>, %y: memref<?x?xf32>,
                           %z: memref<?x?xf32>)
    attributes {flexsn.kernel = #flexsn.kernel<"two", forward, f32,
      buffers = [<"x", input_sequence, f32, sequence, input 0>,
                 <"y", output_sequence, f32, sequence, output 0>,
                 <"z", output_sequence, f32, sequence, output 1>]>} {
  // expected-error@+1 {{the scan does not use buffer 'z'}}
  flexsn.scan ins(%x : memref<?x?xf32>) outs(%y : memref<?x?xf32>) {
  ^bb0(%xi: f32):
    flexsn.yield %xi : f32
  }
  return
}

// -----

// A scan that already runs backward in time is not a forward kernel's.
func.func @rev_forward_f32(%x: memref<?x?xf32>, %y: memref<?x?xf32>)
    attributes {flexsn.kernel = #flexsn.kernel<"rev", forward, f32,
      buffers = [<"x", input_sequence, f32, sequence, input 0>,
                 <"y", output_sequence, f32, sequence, output 0>]>} {
  // expected-error@+1 {{autodiff differentiates a forward-time scan without reductions or optional inputs}}
  flexsn.scan reverse ins(%x : memref<?x?xf32>) outs(%y : memref<?x?xf32>) {
  ^bb0(%xi: f32):
    flexsn.yield %xi : f32
  }
  return
}

// -----

// The backward's buffer names come from the forward's: here the output
// `v_final` and the state `v` would both give `v_final_grad`.
// expected-error@+1 {{cannot name the backward kernel's buffers: two buffers are named 'v_final_grad'}}
func.func @clash_forward_f32(%x: memref<?x?xf32>, %v0: memref<?xf32>,
                             %y: memref<?x?xf32>, %v: memref<?x?xf32>)
    attributes {flexsn.kernel = #flexsn.kernel<"clash", forward, f32,
      buffers = [<"x", input_sequence, f32, sequence, input 0>,
                 <"v_init", initial_state, f32, per_neuron, state_init 0>,
                 <"v_final", output_sequence, f32, sequence, output 0>,
                 <"v_seq", state_sequence, f32, sequence, state_seq 0>]>} {
  flexsn.scan ins(%x : memref<?x?xf32>) inits(%v0 : memref<?xf32>)
      outs(%y : memref<?x?xf32>) states(%v : memref<?x?xf32>) {
  ^bb0(%xi: f32, %vi: f32):
    %r = arith.mulf %xi, %vi : f32
    flexsn.yield %r, %r : f32, f32
  }
  return
}
