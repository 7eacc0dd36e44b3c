// RUN: flexsn-opt %s --split-input-file --flexsn-generate-kernels -verify-diagnostics

// A kernel name already taken by a function is an error, not a silent rename.
// expected-error @+1 {{kernel name 'taken_final_state_f32' is already taken in the module}}
flexsn.neuron @taken inputs(%x: f32) states(%v: f32) outputs(y) {
  %h = arith.addf %v, %x : f32
  flexsn.yield %h, %h : f32, f32
}

func.func @taken_final_state_f32() {
  return
}

// -----

// Any symbol counts as taken, here another neuron named like a kernel.
// expected-error @+1 {{kernel name 'n_inference_f32' is already taken in the module}}
flexsn.neuron @n inputs(%x: f32) states(%v: f32) outputs(y) {
  %h = arith.addf %v, %x : f32
  flexsn.yield %h, %h : f32, f32
}

flexsn.neuron @n_inference_f32 inputs(%x: f32) states(%v: f32) outputs(y) {
  flexsn.yield %x, %v : f32, f32
}
