// RUN: flexsn-opt %s --flexsn-autodiff -verify-diagnostics

// An op without a derivative rule is named in the diagnostic.
flexsn.neuron @rounding inputs(%x: f32) states(%v: f32) outputs(y) {
  %h = arith.addf %v, %x : f32
  // expected-error@+1 {{'math.round' op has no derivative rule}}
  %r = math.round %h : f32
  flexsn.yield %r, %h : f32, f32
}
