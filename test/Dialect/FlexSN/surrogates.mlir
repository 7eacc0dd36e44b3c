// RUN: flexsn-opt %s | FileCheck %s
// RUN: flexsn-opt %s | flexsn-opt | FileCheck %s
// RUN: flexsn-opt %s --mlir-print-op-generic | flexsn-opt | FileCheck %s

// Round-trip of every surrogate attribute. Parameters equal to their default
// are elided (so is an empty `<>` on a surrogate that has parameters), others
// print shortest with a '.', and integer literals are accepted for real-valued
// parameters.

// CHECK-LABEL: func.func @sigmoid
// CHECK: surrogate(#flexsn.sigmoid) : f32
// CHECK: surrogate(#flexsn.sigmoid) : f32
// CHECK: surrogate(#flexsn.sigmoid) : f32
// CHECK: surrogate(#flexsn.sigmoid<alpha = 0.5>) : f32
// CHECK: surrogate(#flexsn.sigmoid<alpha = 3.0>) : f32
// CHECK: surrogate(#flexsn.sigmoid<alpha = 1.0e-05>) : f32
// CHECK: surrogate(#flexsn.sigmoid<alpha = 1.0e+20>) : f32
// CHECK: surrogate(#flexsn.sigmoid) : f32
func.func @sigmoid(%x: f32) {
  %0 = flexsn.spike %x surrogate(#flexsn.sigmoid) : f32
  %1 = flexsn.spike %x surrogate(#flexsn.sigmoid<alpha = 4.0>) : f32
  %2 = flexsn.spike %x surrogate(#flexsn.sigmoid<alpha = 4>) : f32
  %3 = flexsn.spike %x surrogate(#flexsn.sigmoid<alpha = 0.5>) : f32
  %4 = flexsn.spike %x surrogate(#flexsn.sigmoid<alpha = 3>) : f32
  %5 = flexsn.spike %x surrogate(#flexsn.sigmoid<alpha = 1.0e-5>) : f32
  %6 = flexsn.surrogate_grad %x surrogate(#flexsn.sigmoid<alpha = 1.0e20>) : f32
  %7 = flexsn.spike %x surrogate(#flexsn.sigmoid<>) : f32
  return
}

// CHECK-LABEL: func.func @atan
// CHECK: surrogate(#flexsn.atan) : f32
// CHECK: surrogate(#flexsn.atan) : f32
// CHECK: surrogate(#flexsn.atan<alpha = 3.0>) : f32
// CHECK: surrogate(#flexsn.atan<alpha = 0.25>) : f32
func.func @atan(%x: f32) {
  %0 = flexsn.spike %x surrogate(#flexsn.atan) : f32
  %1 = flexsn.spike %x surrogate(#flexsn.atan<alpha = 2.0>) : f32
  %2 = flexsn.spike %x surrogate(#flexsn.atan<alpha = 3>) : f32
  %3 = flexsn.surrogate_grad %x surrogate(#flexsn.atan<alpha = 0.25>) : f32
  return
}

// CHECK-LABEL: func.func @piecewise_quadratic
// CHECK: surrogate(#flexsn.piecewise_quadratic) : f32
// CHECK: surrogate(#flexsn.piecewise_quadratic) : f32
// CHECK: surrogate(#flexsn.piecewise_quadratic<alpha = 2.0>) : f32
func.func @piecewise_quadratic(%x: f32) {
  %0 = flexsn.spike %x surrogate(#flexsn.piecewise_quadratic) : f32
  %1 = flexsn.spike %x surrogate(#flexsn.piecewise_quadratic<alpha = 1>) : f32
  %2 = flexsn.spike %x surrogate(#flexsn.piecewise_quadratic<alpha = 2>) : f32
  return
}

// CHECK-LABEL: func.func @piecewise_exp
// CHECK: surrogate(#flexsn.piecewise_exp) : f32
// CHECK: surrogate(#flexsn.piecewise_exp) : f32
// CHECK: surrogate(#flexsn.piecewise_exp<alpha = 1.5>) : f32
func.func @piecewise_exp(%x: f32) {
  %0 = flexsn.spike %x surrogate(#flexsn.piecewise_exp) : f32
  %1 = flexsn.spike %x surrogate(#flexsn.piecewise_exp<alpha = 1.0>) : f32
  %2 = flexsn.spike %x surrogate(#flexsn.piecewise_exp<alpha = 1.5>) : f32
  return
}

// CHECK-LABEL: func.func @soft_sign
// CHECK: surrogate(#flexsn.soft_sign) : f32
// CHECK: surrogate(#flexsn.soft_sign) : f32
// CHECK: surrogate(#flexsn.soft_sign<alpha = 10.0>) : f32
func.func @soft_sign(%x: f32) {
  %0 = flexsn.spike %x surrogate(#flexsn.soft_sign) : f32
  %1 = flexsn.spike %x surrogate(#flexsn.soft_sign<alpha = 2>) : f32
  %2 = flexsn.spike %x surrogate(#flexsn.soft_sign<alpha = 10>) : f32
  return
}

// CHECK-LABEL: func.func @super_spike
// CHECK: surrogate(#flexsn.super_spike) : f32
// CHECK: surrogate(#flexsn.super_spike) : f32
// CHECK: surrogate(#flexsn.super_spike<alpha = 100.0>) : f32
func.func @super_spike(%x: f32) {
  %0 = flexsn.spike %x surrogate(#flexsn.super_spike) : f32
  %1 = flexsn.spike %x surrogate(#flexsn.super_spike<alpha = 1.0>) : f32
  %2 = flexsn.spike %x surrogate(#flexsn.super_spike<alpha = 100>) : f32
  return
}

// CHECK-LABEL: func.func @erf
// CHECK: surrogate(#flexsn.erf) : f32
// CHECK: surrogate(#flexsn.erf) : f32
// CHECK: surrogate(#flexsn.erf<alpha = 0.75>) : f32
func.func @erf(%x: f32) {
  %0 = flexsn.spike %x surrogate(#flexsn.erf) : f32
  %1 = flexsn.spike %x surrogate(#flexsn.erf<alpha = 2>) : f32
  %2 = flexsn.spike %x surrogate(#flexsn.erf<alpha = 0.75>) : f32
  return
}

// CHECK-LABEL: func.func @nonzero_sign_log_abs
// CHECK: surrogate(#flexsn.nonzero_sign_log_abs) : f32
// CHECK: surrogate(#flexsn.nonzero_sign_log_abs) : f32
// CHECK: surrogate(#flexsn.nonzero_sign_log_abs<alpha = 5.0>) : f32
func.func @nonzero_sign_log_abs(%x: f32) {
  %0 = flexsn.spike %x surrogate(#flexsn.nonzero_sign_log_abs) : f32
  %1 = flexsn.spike %x surrogate(#flexsn.nonzero_sign_log_abs<alpha = 1>) : f32
  %2 = flexsn.spike %x surrogate(#flexsn.nonzero_sign_log_abs<alpha = 5>) : f32
  return
}

// Two parameters: each is elided on its own; `c` may be negative.
// CHECK-LABEL: func.func @piecewise_leaky_relu
// CHECK: surrogate(#flexsn.piecewise_leaky_relu) : f32
// CHECK: surrogate(#flexsn.piecewise_leaky_relu) : f32
// CHECK: surrogate(#flexsn.piecewise_leaky_relu<w = 0.5>) : f32
// CHECK: surrogate(#flexsn.piecewise_leaky_relu<c = 0.1>) : f32
// CHECK: surrogate(#flexsn.piecewise_leaky_relu<w = 2.0, c = -0.05>) : f32
// CHECK: surrogate(#flexsn.piecewise_leaky_relu<c = 0.0>) : f32
func.func @piecewise_leaky_relu(%x: f32) {
  %0 = flexsn.spike %x surrogate(#flexsn.piecewise_leaky_relu) : f32
  %1 = flexsn.spike %x surrogate(#flexsn.piecewise_leaky_relu<w = 1, c = 1.0e-2>) : f32
  %2 = flexsn.spike %x surrogate(#flexsn.piecewise_leaky_relu<w = 0.5>) : f32
  %3 = flexsn.spike %x surrogate(#flexsn.piecewise_leaky_relu<c = 0.1>) : f32
  %4 = flexsn.spike %x surrogate(#flexsn.piecewise_leaky_relu<c = -0.05, w = 2>) : f32
  %5 = flexsn.spike %x surrogate(#flexsn.piecewise_leaky_relu<c = 0>) : f32
  return
}

// `n` is an integer; `T_period` a real. Both bounds of n are accepted.
// CHECK-LABEL: func.func @squarewave_fourier_series
// CHECK: surrogate(#flexsn.squarewave_fourier_series) : f32
// CHECK: surrogate(#flexsn.squarewave_fourier_series) : f32
// CHECK: surrogate(#flexsn.squarewave_fourier_series<n = 1>) : f32
// CHECK: surrogate(#flexsn.squarewave_fourier_series<n = 64, T_period = 6.5>) : f32
// CHECK: surrogate(#flexsn.squarewave_fourier_series<T_period = 4.0>) : f32
func.func @squarewave_fourier_series(%x: f32) {
  %0 = flexsn.spike %x surrogate(#flexsn.squarewave_fourier_series) : f32
  %1 = flexsn.spike %x surrogate(#flexsn.squarewave_fourier_series<n = 2, T_period = 8>) : f32
  %2 = flexsn.spike %x surrogate(#flexsn.squarewave_fourier_series<n = 1>) : f32
  %3 = flexsn.spike %x surrogate(#flexsn.squarewave_fourier_series<T_period = 6.5, n = 64>) : f32
  %4 = flexsn.spike %x surrogate(#flexsn.squarewave_fourier_series<T_period = 4>) : f32
  return
}

// CHECK-LABEL: func.func @s2nn
// CHECK: surrogate(#flexsn.s2nn) : f32
// CHECK: surrogate(#flexsn.s2nn) : f32
// CHECK: surrogate(#flexsn.s2nn<alpha = 2.0>) : f32
// CHECK: surrogate(#flexsn.s2nn<beta = 0.5>) : f32
// CHECK: surrogate(#flexsn.s2nn<alpha = 8.0, beta = 3.0>) : f32
func.func @s2nn(%x: f32) {
  %0 = flexsn.spike %x surrogate(#flexsn.s2nn) : f32
  %1 = flexsn.spike %x surrogate(#flexsn.s2nn<alpha = 4, beta = 1>) : f32
  %2 = flexsn.spike %x surrogate(#flexsn.s2nn<alpha = 2>) : f32
  %3 = flexsn.spike %x surrogate(#flexsn.s2nn<beta = 0.5>) : f32
  %4 = flexsn.spike %x surrogate(#flexsn.s2nn<beta = 3, alpha = 8.0>) : f32
  return
}

// CHECK-LABEL: func.func @q_pseudo_spike
// CHECK: surrogate(#flexsn.q_pseudo_spike) : f32
// CHECK: surrogate(#flexsn.q_pseudo_spike) : f32
// CHECK: surrogate(#flexsn.q_pseudo_spike<alpha = 1.5>) : f32
// CHECK: surrogate(#flexsn.q_pseudo_spike<alpha = 3.0>) : f32
func.func @q_pseudo_spike(%x: f32) {
  %0 = flexsn.spike %x surrogate(#flexsn.q_pseudo_spike) : f32
  %1 = flexsn.spike %x surrogate(#flexsn.q_pseudo_spike<alpha = 2.0>) : f32
  %2 = flexsn.spike %x surrogate(#flexsn.q_pseudo_spike<alpha = 1.5>) : f32
  %3 = flexsn.spike %x surrogate(#flexsn.q_pseudo_spike<alpha = 3>) : f32
  return
}

// Both slopes may be zero or negative; -0.0 differs from the default 0.0.
// CHECK-LABEL: func.func @leaky_k_relu
// CHECK: surrogate(#flexsn.leaky_k_relu) : f32
// CHECK: surrogate(#flexsn.leaky_k_relu) : f32
// CHECK: surrogate(#flexsn.leaky_k_relu<leak = 0.1>) : f32
// CHECK: surrogate(#flexsn.leaky_k_relu<leak = -0.5, k = -2.0>) : f32
// CHECK: surrogate(#flexsn.leaky_k_relu<k = 0.0>) : f32
// CHECK: surrogate(#flexsn.leaky_k_relu<leak = -0.0>) : f32
func.func @leaky_k_relu(%x: f32) {
  %0 = flexsn.spike %x surrogate(#flexsn.leaky_k_relu) : f32
  %1 = flexsn.spike %x surrogate(#flexsn.leaky_k_relu<leak = 0, k = 1>) : f32
  %2 = flexsn.spike %x surrogate(#flexsn.leaky_k_relu<leak = 0.1>) : f32
  %3 = flexsn.spike %x surrogate(#flexsn.leaky_k_relu<k = -2, leak = -0.5>) : f32
  %4 = flexsn.spike %x surrogate(#flexsn.leaky_k_relu<k = 0.0>) : f32
  %5 = flexsn.spike %x surrogate(#flexsn.leaky_k_relu<leak = -0.0>) : f32
  return
}

// CHECK-LABEL: func.func @fake_numerical_gradient
// CHECK: surrogate(#flexsn.fake_numerical_gradient) : f32
// CHECK: surrogate(#flexsn.fake_numerical_gradient) : f32
// CHECK: surrogate(#flexsn.fake_numerical_gradient<alpha = 1.0>) : f32
func.func @fake_numerical_gradient(%x: f32) {
  %0 = flexsn.spike %x surrogate(#flexsn.fake_numerical_gradient) : f32
  %1 = flexsn.spike %x surrogate(#flexsn.fake_numerical_gradient<alpha = 0.3>) : f32
  %2 = flexsn.spike %x surrogate(#flexsn.fake_numerical_gradient<alpha = 1>) : f32
  return
}

// alpha may be zero (the default) or negative.
// CHECK-LABEL: func.func @log_tailed_relu
// CHECK: surrogate(#flexsn.log_tailed_relu) : f32
// CHECK: surrogate(#flexsn.log_tailed_relu) : f32
// CHECK: surrogate(#flexsn.log_tailed_relu<alpha = 0.01>) : f32
// CHECK: surrogate(#flexsn.log_tailed_relu<alpha = -0.25>) : f32
// CHECK: surrogate(#flexsn.log_tailed_relu<alpha = -3.0>) : f32
func.func @log_tailed_relu(%x: f32) {
  %0 = flexsn.spike %x surrogate(#flexsn.log_tailed_relu) : f32
  %1 = flexsn.spike %x surrogate(#flexsn.log_tailed_relu<alpha = 0>) : f32
  %2 = flexsn.spike %x surrogate(#flexsn.log_tailed_relu<alpha = 0.01>) : f32
  %3 = flexsn.spike %x surrogate(#flexsn.log_tailed_relu<alpha = -0.25>) : f32
  %4 = flexsn.spike %x surrogate(#flexsn.log_tailed_relu<alpha = -3>) : f32
  return
}

// CHECK-LABEL: func.func @rect
// CHECK: surrogate(#flexsn.rect) : f32
// CHECK: surrogate(#flexsn.rect) : f32
// CHECK: surrogate(#flexsn.rect<alpha = 0.5>) : f32
func.func @rect(%x: f32) {
  %0 = flexsn.spike %x surrogate(#flexsn.rect) : f32
  %1 = flexsn.spike %x surrogate(#flexsn.rect<alpha = 1>) : f32
  %2 = flexsn.spike %x surrogate(#flexsn.rect<alpha = 0.5>) : f32
  return
}

// Defaults spelled out print as omitted; h may be zero or negative.
// CHECK-LABEL: func.func @multi_gaussian
// CHECK: surrogate(#flexsn.multi_gaussian) : f32
// CHECK: surrogate(#flexsn.multi_gaussian) : f32
// CHECK: surrogate(#flexsn.multi_gaussian<sigma = 1.0, h = -0.25>) : f32
// CHECK: surrogate(#flexsn.multi_gaussian<h = 0.0, s = 2.0>) : f32
func.func @multi_gaussian(%x: f32) {
  %0 = flexsn.spike %x surrogate(#flexsn.multi_gaussian) : f32
  %1 = flexsn.spike %x surrogate(#flexsn.multi_gaussian<sigma = 0.5, h = 0.15, s = 6>) : f32
  %2 = flexsn.spike %x surrogate(#flexsn.multi_gaussian<sigma = 1, h = -0.25>) : f32
  %3 = flexsn.spike %x surrogate(#flexsn.multi_gaussian<h = 0, s = 2>) : f32
  return
}

// No parameters: the mnemonic alone (any `<...>`, even `<>`, is rejected:
// see invalid.mlir).
// CHECK-LABEL: func.func @straight_through
// CHECK: flexsn.spike %{{.*}} surrogate(#flexsn.straight_through) : f32
// CHECK: flexsn.surrogate_grad %{{.*}} surrogate(#flexsn.straight_through) : f32
func.func @straight_through(%x: f32) {
  %0 = flexsn.spike %x surrogate(#flexsn.straight_through) : f32
  %1 = flexsn.surrogate_grad %x surrogate(#flexsn.straight_through) : f32
  return
}

// A surrogate on a spike inside a neuron body.
// CHECK-LABEL: flexsn.neuron @in_neuron
// CHECK: flexsn.spike %{{.*}} surrogate(#flexsn.q_pseudo_spike<alpha = 4.0>) : f32
flexsn.neuron @in_neuron inputs(%x: f32) outputs(s) {
  %s = flexsn.spike %x surrogate(#flexsn.q_pseudo_spike<alpha = 4>) : f32
  flexsn.yield %s : f32
}
