// RUN: flexsn-opt %s -split-input-file -verify-diagnostics

// flexsn.block declarations that flexsn-expand-blocks could not expand.

func.func @lif(%x: f32) -> f32 {
  return %x : f32
}
// expected-error@+1 {{'flexsn.block' op '@lif' does not reference a flexsn.neuron}}
flexsn.block @b neuron(@lif) pre(none) connection(add) readout(none) storage(f32)

// -----

// expected-error@+1 {{'flexsn.block' op '@missing' does not reference a flexsn.neuron}}
flexsn.block @b neuron(@missing) pre(none) connection(add) readout(none) storage(f32)

// -----

// The connection joins one output with the one input.
flexsn.neuron @two inputs(%x: f32, %y: f32) outputs(s) {
  %s = arith.addf %x, %y : f32
  flexsn.yield %s : f32
}
// expected-error@+1 {{'flexsn.block' op needs a neuron of one input and one output; @two has 2 inputs and 1 outputs}}
flexsn.block @b neuron(@two) pre(none) connection(add) readout(none) storage(f32)

// -----

flexsn.neuron @lif inputs(%x: f32) states(%v: f32) outputs(spike)
    params(%v_threshold: f32 = 1.0 runtime per_neuron) {
  %h = arith.addf %v, %x : f32
  %d = arith.subf %h, %v_threshold : f32
  %s = flexsn.spike %d surrogate(#flexsn.sigmoid) : f32
  flexsn.yield %s, %h : f32, f32
}
// expected-error@+1 {{'flexsn.block' op passes the neuron's parameters as scalars; @lif's 'v_threshold' is per_neuron}}
flexsn.block @b neuron(@lif) pre(affine) connection(none) readout(none) storage(f32)

// -----

flexsn.neuron @if inputs(%x: f32) states(%v: f32) outputs(spike) {
  %s = flexsn.spike %v surrogate(#flexsn.sigmoid) : f32
  %h = arith.addf %v, %x : f32
  flexsn.yield %s, %h : f32, f32
}
// expected-error@+1 {{'flexsn.block' op keeps readout(sum) in f32: it needs storage(f32), not storage(f16)}}
flexsn.block @b neuron(@if) pre(none) connection(none) readout(sum) storage(f16)

// -----

flexsn.neuron @if inputs(%x: f32) states(%v: f32) outputs(spike) {
  %s = flexsn.spike %v surrogate(#flexsn.sigmoid) : f32
  %h = arith.addf %v, %x : f32
  flexsn.yield %s, %h : f32, f32
}
// Its kernels are named after it.
// expected-error@+1 {{'flexsn.block' op name 'b-1' is not a C identifier}}
flexsn.block @"b-1" neuron(@if) pre(none) connection(none) readout(none) storage(f32)

// -----

// The block's function takes its name.
func.func @b() {
  return
}
flexsn.neuron @if inputs(%x: f32) states(%v: f32) outputs(spike) {
  %s = flexsn.spike %v surrogate(#flexsn.sigmoid) : f32
  %h = arith.addf %v, %x : f32
  flexsn.yield %s, %h : f32, f32
}
// expected-error@+2 {{redefinition of symbol named 'b'}}
// expected-note@-9 {{see existing symbol definition here}}
flexsn.block @b neuron(@if) pre(none) connection(none) readout(none) storage(f32)

// -----

// expected-error@+2 {{expected one of [none, affine, channel_affine, add, affine_add, channel_affine_add] for the op a block applies to its input before the neuron, got: batch_norm}}
// expected-error@+1 {{invalid value for property pre}}
flexsn.block @b neuron(@if) pre(batch_norm) connection(none) readout(none) storage(f32)

// -----

// expected-error@+2 {{expected one of [none, add, and, iand] for how a block joins its neuron's output s and its input x, got: or}}
// expected-error@+1 {{invalid value for property connection}}
flexsn.block @b neuron(@if) pre(none) connection(or) readout(none) storage(f32)

// -----

// expected-error@+2 {{expected one of [none, sum] for what a block returns of its output sequence, got: mean}}
// expected-error@+1 {{invalid value for property readout}}
flexsn.block @b neuron(@if) pre(none) connection(none) readout(mean) storage(f32)

// -----

// expected-error@+2 {{expected one of [f32, f16, bf16]}}
// expected-error@+1 {{invalid value for property storage}}
flexsn.block @b neuron(@if) pre(none) connection(none) readout(none) storage(f64)

// -----

flexsn.neuron @if inputs(%x: f32) states(%v: f32) outputs(spike) {
  %s = flexsn.spike %v surrogate(#flexsn.sigmoid) : f32
  %h = arith.addf %v, %x : f32
  flexsn.yield %s, %h : f32, f32
}
// A block is declared at module level, where its function goes.
func.func @f() {
  // expected-error@+1 {{'flexsn.block' op expects parent op 'builtin.module'}}
  flexsn.block @b neuron(@if) pre(none) connection(none) readout(none) storage(f32)
  return
}

// -----

flexsn.neuron @if inputs(%x: f32) states(%v: f32) outputs(spike) {
  %s = flexsn.spike %v surrogate(#flexsn.sigmoid) : f32
  %h = arith.addf %v, %x : f32
  flexsn.yield %s, %h : f32, f32
}
// expected-error@+1 {{'flexsn.block' op has no connection to read its 'skip' input}}
flexsn.block @b neuron(@if) pre(none) connection(none, skip) readout(none) storage(f32)

// -----

flexsn.neuron @if inputs(%x: f32) states(%v: f32) outputs(spike) {
  %s = flexsn.spike %v surrogate(#flexsn.sigmoid) : f32
  %h = arith.addf %v, %x : f32
  flexsn.yield %s, %h : f32, f32
}
// expected-error@+1 {{'flexsn.block' op has one 'skip' input, which pre(channel_affine_add) adds before the neuron: its connection reads x, not skip}}
flexsn.block @b neuron(@if) pre(channel_affine_add) connection(add, skip) readout(none) storage(f32)

// -----

// expected-error@+2 {{expected one of [input, skip]}}
// expected-error@+1 {{invalid value for property connection_operand}}
flexsn.block @b neuron(@if) pre(none) connection(add, identity) readout(none) storage(f32)
