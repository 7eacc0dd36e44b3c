// RUN: flexsn-opt %s --split-input-file --convert-flexsn-to-gpu -verify-diagnostics

// A kernel function holds exactly one scan.
flexsn.neuron @n inputs(%x: f32) outputs(y) {
  flexsn.yield %x : f32
}
// expected-error@+1 {{a kernel function must hold exactly one scan}}
func.func @two(%x: memref<?x?xf32>, %y: memref<?x?xf32>) attributes {flexsn.kernel = #flexsn.kernel<"n", inference, f32, buffers = [<"x", input_sequence, f32, sequence, input 0>, <"y", output_sequence, f32, sequence, output 0>]>} {
  flexsn.scan @n ins(%x : memref<?x?xf32>) outs(%y : memref<?x?xf32>)
  flexsn.scan @n ins(%x : memref<?x?xf32>) outs(%y : memref<?x?xf32>)
  return
}

// -----

// The signature's roles agree with how the scan uses each buffer.
flexsn.neuron @n inputs(%x: f32) outputs(y) {
  flexsn.yield %x : f32
}
func.func @swapped(%x: memref<?x?xf32>, %y: memref<?x?xf32>) attributes {flexsn.kernel = #flexsn.kernel<"n", inference, f32, buffers = [<"x", output_sequence, f32, sequence, output 0>, <"y", input_sequence, f32, sequence, input 0>]>} {
  // expected-error@+1 {{buffer 'x' is a output_sequence but the scan uses it as a input_sequence}}
  flexsn.scan @n ins(%x : memref<?x?xf32>) outs(%y : memref<?x?xf32>)
  return
}

// -----

// A per-neuron param's buffer has the per_neuron_param role.
flexsn.neuron @g inputs(%x: f32) outputs(y) params(%a: f32 = 1.0 runtime per_neuron) {
  %y = arith.mulf %x, %a : f32
  flexsn.yield %y : f32
}
func.func @param_role(%x: memref<?x?xf32>, %y: memref<?x?xf32>, %a: memref<?xf32>) attributes {flexsn.kernel = #flexsn.kernel<"g", inference, f32, buffers = [<"x", input_sequence, f32, sequence, input 0>, <"y", output_sequence, f32, sequence, output 0>, <"a", initial_state, f32, per_neuron, state_init 0>]>} {
  // expected-error@+1 {{buffer 'a' is a initial_state but the scan uses it as a per_neuron_param}}
  flexsn.scan @g ins(%x : memref<?x?xf32>) params(%a : memref<?xf32>) outs(%y : memref<?x?xf32>)
  return
}

// -----

// Every buffer of the signature is one the scan reads or writes.
flexsn.neuron @n inputs(%x: f32) outputs(y) {
  flexsn.yield %x : f32
}
func.func @unused(%x: memref<?x?xf32>, %y: memref<?x?xf32>, %z: memref<?x?xf32>) attributes {flexsn.kernel = #flexsn.kernel<"n", inference, f32, buffers = [<"x", input_sequence, f32, sequence, input 0>, <"y", output_sequence, f32, sequence, output 0>, <"z", output_sequence, f32, sequence, output 1>]>} {
  // expected-error@+1 {{the scan does not use buffer 'z'}}
  flexsn.scan @n ins(%x : memref<?x?xf32>) outs(%y : memref<?x?xf32>)
  return
}

// -----

// A buffer is one argument: the scan cannot read and write it at once.
flexsn.neuron @n inputs(%x: f32) outputs(y) {
  flexsn.yield %x : f32
}
func.func @aliased(%x: memref<?x?xf32>) attributes {flexsn.kernel = #flexsn.kernel<"n", inference, f32, buffers = [<"x", input_sequence, f32, sequence, input 0>]>} {
  // expected-error@+1 {{buffer 'x' is passed to the scan twice}}
  flexsn.scan @n ins(%x : memref<?x?xf32>) outs(%x : memref<?x?xf32>)
  return
}

// -----

// The scan's operands are the kernel function's arguments, not values
// made inside it.
flexsn.neuron @n inputs(%x: f32) outputs(y) {
  flexsn.yield %x : f32
}
func.func @local(%x: memref<?x?xf32>) attributes {flexsn.kernel = #flexsn.kernel<"n", inference, f32, buffers = [<"x", input_sequence, f32, sequence, input 0>]>} {
  %c4 = arith.constant 4 : index
  %y = memref.alloc(%c4, %c4) : memref<?x?xf32>
  // expected-error@+1 {{operand #1 of a kernel's scan must be one of the kernel function's buffer arguments}}
  flexsn.scan @n ins(%x : memref<?x?xf32>) outs(%y : memref<?x?xf32>)
  return
}

// -----

// Runtime parameters reach the scan as the function's parameter arguments.
flexsn.neuron @p inputs(%x: f32) outputs(y) params(%a: f32 = 1.0 runtime) {
  %y = arith.mulf %x, %a : f32
  flexsn.yield %y : f32
}
func.func @constant_param(%x: memref<?x?xf32>, %y: memref<?x?xf32>, %a: f32) attributes {flexsn.kernel = #flexsn.kernel<"p", inference, f32, buffers = [<"x", input_sequence, f32, sequence, input 0>, <"y", output_sequence, f32, sequence, output 0>], params = [<"a", 1.0 : f32, runtime>]>} {
  %c = arith.constant 2.0 : f32
  // expected-error@+1 {{a kernel's scan takes the kernel function's parameter arguments, in order}}
  flexsn.scan @p ins(%x : memref<?x?xf32>) params(%c : f32) outs(%y : memref<?x?xf32>)
  return
}
