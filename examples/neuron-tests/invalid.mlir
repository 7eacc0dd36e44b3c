// RUN: flexsn-opt %s -split-input-file -verify-diagnostics

// A step yields its outputs, then its new states: here one is missing.
flexsn.neuron @missing_state inputs(%x: f32) states(%v: f32) outputs(spike) {
  %s = flexsn.spike %x surrogate(#flexsn.sigmoid<alpha = 4.0>) : f32
  // expected-error@+1 {{yields 1 values, but the neuron declares 2}}
  flexsn.yield %s : f32
}

// -----

// Surrogate parameters are checked: the sigmoid's alpha must be positive.
flexsn.neuron @bad_alpha inputs(%x: f32) outputs(spike) {
  // expected-error@+1 {{surrogate 'sigmoid' needs alpha > 0}}
  %s = flexsn.spike %x surrogate(#flexsn.sigmoid<alpha = -1.0>) : f32
  flexsn.yield %s : f32
}
