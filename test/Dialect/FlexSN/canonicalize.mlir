// RUN: flexsn-opt %s -canonicalize | FileCheck %s

// Folding of flexsn.spike and flexsn.surrogate_grad on constants. Expected
// values are computed by hand from the formulas of docs/Semantics.md, at points
// where the result is exact in f32.

// H(x) = 1 if x >= 0 else 0, so H(0) = H(-0.0) = 1.
// CHECK-LABEL: func.func @spike
// CHECK-DAG:   %[[ZERO:.+]] = arith.constant 0.000000e+00 : f32
// CHECK-DAG:   %[[ONE:.+]] = arith.constant 1.000000e+00 : f32
// CHECK-NOT:   flexsn.spike
// CHECK:       return %[[ZERO]], %[[ONE]], %[[ONE]], %[[ONE]], %[[ZERO]]
func.func @spike() -> (f32, f32, f32, f32, f32) {
  %m1 = arith.constant -1.0 : f32
  %mz = arith.constant -0.0 : f32
  %z = arith.constant 0.0 : f32
  %p = arith.constant 2.5 : f32
  %tiny = arith.constant -1.0e-45 : f32
  %0 = flexsn.spike %m1 surrogate(#flexsn.sigmoid) : f32
  %1 = flexsn.spike %mz surrogate(#flexsn.sigmoid) : f32
  %2 = flexsn.spike %z surrogate(#flexsn.atan) : f32
  %3 = flexsn.spike %p surrogate(#flexsn.rect) : f32
  %4 = flexsn.spike %tiny surrogate(#flexsn.straight_through) : f32
  return %0, %1, %2, %3, %4 : f32, f32, f32, f32, f32
}

// A NaN input has no Heaviside value: the spike is left alone.
// CHECK-LABEL: func.func @spike_nan
// CHECK:       flexsn.spike
func.func @spike_nan() -> f32 {
  %nan = arith.constant 0x7FC00000 : f32
  %0 = flexsn.spike %nan surrogate(#flexsn.sigmoid) : f32
  return %0 : f32
}

// A spike of a non-constant is not folded.
// CHECK-LABEL: func.func @spike_variable
// CHECK:       flexsn.spike %{{.*}} surrogate(#flexsn.sigmoid)
func.func @spike_variable(%x: f32) -> f32 {
  %0 = flexsn.spike %x surrogate(#flexsn.sigmoid) : f32
  return %0 : f32
}

// sigmoid: a·σ(ax)·(1−σ(ax)); at 0 it is a/4.
// CHECK-LABEL: func.func @sigmoid
// CHECK-DAG:   %[[ONE:.+]] = arith.constant 1.000000e+00 : f32
// CHECK-DAG:   %[[HALF:.+]] = arith.constant 5.000000e-01 : f32
// CHECK-NOT:   flexsn.surrogate_grad
// CHECK:       return %[[ONE]], %[[ONE]], %[[HALF]]
func.func @sigmoid() -> (f32, f32, f32) {
  %z = arith.constant 0.0 : f32
  %0 = flexsn.surrogate_grad %z surrogate(#flexsn.sigmoid) : f32
  %1 = flexsn.surrogate_grad %z surrogate(#flexsn.sigmoid<alpha = 4.0>) : f32
  %2 = flexsn.surrogate_grad %z surrogate(#flexsn.sigmoid<alpha = 2.0>) : f32
  return %0, %1, %2 : f32, f32, f32
}

// atan: (a/2) / (1 + (π/2·a·x)²); at 0 it is a/2.
// CHECK-LABEL: func.func @atan
// CHECK-DAG:   %[[ONE:.+]] = arith.constant 1.000000e+00 : f32
// CHECK-DAG:   %[[THREE:.+]] = arith.constant 3.000000e+00 : f32
// CHECK:       return %[[ONE]], %[[THREE]]
func.func @atan() -> (f32, f32) {
  %z = arith.constant 0.0 : f32
  %0 = flexsn.surrogate_grad %z surrogate(#flexsn.atan<alpha = 2.0>) : f32
  %1 = flexsn.surrogate_grad %z surrogate(#flexsn.atan<alpha = 6.0>) : f32
  return %0, %1 : f32, f32
}

// piecewise_quadratic: max(0, a − a²·|x|).
// CHECK-LABEL: func.func @piecewise_quadratic
// CHECK-DAG:   %[[ZERO:.+]] = arith.constant 0.000000e+00 : f32
// CHECK-DAG:   %[[HALF:.+]] = arith.constant 5.000000e-01 : f32
// CHECK-DAG:   %[[ONE:.+]] = arith.constant 1.000000e+00 : f32
// CHECK:       return %[[HALF]], %[[HALF]], %[[ZERO]], %[[ONE]]
func.func @piecewise_quadratic() -> (f32, f32, f32, f32) {
  %p = arith.constant 0.5 : f32
  %m = arith.constant -0.5 : f32
  %far = arith.constant 2.0 : f32
  %q = arith.constant 0.25 : f32
  %0 = flexsn.surrogate_grad %p surrogate(#flexsn.piecewise_quadratic) : f32
  %1 = flexsn.surrogate_grad %m surrogate(#flexsn.piecewise_quadratic) : f32
  %2 = flexsn.surrogate_grad %far surrogate(#flexsn.piecewise_quadratic) : f32
  %3 = flexsn.surrogate_grad %q surrogate(#flexsn.piecewise_quadratic<alpha = 2.0>) : f32
  return %0, %1, %2, %3 : f32, f32, f32, f32
}

// piecewise_exp: (a/2)·exp(−a·|x|); at 0 it is a/2.
// CHECK-LABEL: func.func @piecewise_exp
// CHECK-DAG:   %[[HALF:.+]] = arith.constant 5.000000e-01 : f32
// CHECK-DAG:   %[[TWO:.+]] = arith.constant 2.000000e+00 : f32
// CHECK:       return %[[HALF]], %[[TWO]]
func.func @piecewise_exp() -> (f32, f32) {
  %z = arith.constant 0.0 : f32
  %0 = flexsn.surrogate_grad %z surrogate(#flexsn.piecewise_exp) : f32
  %1 = flexsn.surrogate_grad %z surrogate(#flexsn.piecewise_exp<alpha = 4.0>) : f32
  return %0, %1 : f32, f32
}

// soft_sign: 1 / (2a·(1/a + |x|)²); a = 2 gives 1 at 0 and 1/4 at ±0.5.
// CHECK-LABEL: func.func @soft_sign
// CHECK-DAG:   %[[ONE:.+]] = arith.constant 1.000000e+00 : f32
// CHECK-DAG:   %[[QUARTER:.+]] = arith.constant 2.500000e-01 : f32
// CHECK:       return %[[ONE]], %[[QUARTER]], %[[QUARTER]]
func.func @soft_sign() -> (f32, f32, f32) {
  %z = arith.constant 0.0 : f32
  %p = arith.constant 0.5 : f32
  %m = arith.constant -0.5 : f32
  %0 = flexsn.surrogate_grad %z surrogate(#flexsn.soft_sign) : f32
  %1 = flexsn.surrogate_grad %p surrogate(#flexsn.soft_sign) : f32
  %2 = flexsn.surrogate_grad %m surrogate(#flexsn.soft_sign) : f32
  return %0, %1, %2 : f32, f32, f32
}

// super_spike: a / (|x| + 1)².
// CHECK-LABEL: func.func @super_spike
// CHECK-DAG:   %[[ONE:.+]] = arith.constant 1.000000e+00 : f32
// CHECK-DAG:   %[[QUARTER:.+]] = arith.constant 2.500000e-01 : f32
// CHECK-DAG:   %[[THREE:.+]] = arith.constant 3.000000e+00 : f32
// CHECK:       return %[[ONE]], %[[QUARTER]], %[[QUARTER]], %[[THREE]]
func.func @super_spike() -> (f32, f32, f32, f32) {
  %z = arith.constant 0.0 : f32
  %p = arith.constant 1.0 : f32
  %m = arith.constant -1.0 : f32
  %0 = flexsn.surrogate_grad %z surrogate(#flexsn.super_spike) : f32
  %1 = flexsn.surrogate_grad %p surrogate(#flexsn.super_spike) : f32
  %2 = flexsn.surrogate_grad %m surrogate(#flexsn.super_spike) : f32
  %3 = flexsn.surrogate_grad %z surrogate(#flexsn.super_spike<alpha = 3.0>) : f32
  return %0, %1, %2, %3 : f32, f32, f32, f32
}

// erf: (a/√π)·exp(−(ax)²); at 0 it is a/√π = 2/√π ≈ 1.1283792 for a = 2.
// CHECK-LABEL: func.func @erf
// CHECK:       %[[V:.+]] = arith.constant 1.128379{{[0-9]*}} : f32
// CHECK:       return %[[V]]
func.func @erf() -> f32 {
  %z = arith.constant 0.0 : f32
  %0 = flexsn.surrogate_grad %z surrogate(#flexsn.erf) : f32
  return %0 : f32
}

// nonzero_sign_log_abs: 1 / (1/a + |x|).
// CHECK-LABEL: func.func @nonzero_sign_log_abs
// CHECK-DAG:   %[[ONE:.+]] = arith.constant 1.000000e+00 : f32
// CHECK-DAG:   %[[HALF:.+]] = arith.constant 5.000000e-01 : f32
// CHECK-DAG:   %[[FOUR:.+]] = arith.constant 4.000000e+00 : f32
// CHECK:       return %[[ONE]], %[[HALF]], %[[HALF]], %[[FOUR]]
func.func @nonzero_sign_log_abs() -> (f32, f32, f32, f32) {
  %z = arith.constant 0.0 : f32
  %p = arith.constant 1.0 : f32
  %m = arith.constant -1.0 : f32
  %0 = flexsn.surrogate_grad %z surrogate(#flexsn.nonzero_sign_log_abs) : f32
  %1 = flexsn.surrogate_grad %p surrogate(#flexsn.nonzero_sign_log_abs) : f32
  %2 = flexsn.surrogate_grad %m surrogate(#flexsn.nonzero_sign_log_abs) : f32
  %3 = flexsn.surrogate_grad %z surrogate(#flexsn.nonzero_sign_log_abs<alpha = 4.0>) : f32
  return %0, %1, %2, %3 : f32, f32, f32, f32
}

// piecewise_leaky_relu: 1/(2w) if |x| < w else c (SpikingJelly's CuPy kernel
// is 2x this; we follow the definition). |x| = w is outside.
// CHECK-LABEL: func.func @piecewise_leaky_relu
// CHECK-DAG:   %[[HALF:.+]] = arith.constant 5.000000e-01 : f32
// CHECK-DAG:   %[[ONE:.+]] = arith.constant 1.000000e+00 : f32
// CHECK-DAG:   %[[C:.+]] = arith.constant -2.500000e-01 : f32
// CHECK:       return %[[HALF]], %[[HALF]], %[[ONE]], %[[C]], %[[C]]
func.func @piecewise_leaky_relu() -> (f32, f32, f32, f32, f32) {
  %z = arith.constant 0.0 : f32
  %p = arith.constant 0.5 : f32
  %q = arith.constant 0.25 : f32
  %w = arith.constant -0.5 : f32
  %far = arith.constant 3.0 : f32
  %0 = flexsn.surrogate_grad %z surrogate(#flexsn.piecewise_leaky_relu) : f32
  %1 = flexsn.surrogate_grad %p surrogate(#flexsn.piecewise_leaky_relu) : f32
  %2 = flexsn.surrogate_grad %q surrogate(#flexsn.piecewise_leaky_relu<w = 0.5, c = -0.25>) : f32
  %3 = flexsn.surrogate_grad %w surrogate(#flexsn.piecewise_leaky_relu<w = 0.5, c = -0.25>) : f32
  %4 = flexsn.surrogate_grad %far surrogate(#flexsn.piecewise_leaky_relu<w = 0.5, c = -0.25>) : f32
  return %0, %1, %2, %3, %4 : f32, f32, f32, f32, f32
}

// piecewise_leaky_relu outside the window gives c (default 0.01).
// CHECK-LABEL: func.func @piecewise_leaky_relu_tail
// CHECK:       %[[C:.+]] = arith.constant 0.00999999977 : f32
// CHECK:       return %[[C]], %[[C]]
func.func @piecewise_leaky_relu_tail() -> (f32, f32) {
  %p = arith.constant 1.0 : f32
  %m = arith.constant -2.0 : f32
  %0 = flexsn.surrogate_grad %p surrogate(#flexsn.piecewise_leaky_relu) : f32
  %1 = flexsn.surrogate_grad %m surrogate(#flexsn.piecewise_leaky_relu) : f32
  return %0, %1 : f32, f32
}

// squarewave_fourier_series: (4/T)·Σ_{i=1}^{n−1} cos((2i−1)·(2π/T)·x);
// at 0 it is 4(n−1)/T, and with n = 2, T = 8 at x = 4 it is cos(π)/2.
// CHECK-LABEL: func.func @squarewave_fourier_series
// CHECK-DAG:   %[[HALF:.+]] = arith.constant 5.000000e-01 : f32
// CHECK-DAG:   %[[ONE:.+]] = arith.constant 1.000000e+00 : f32
// CHECK-DAG:   %[[MHALF:.+]] = arith.constant -5.000000e-01 : f32
// CHECK-DAG:   %[[ZERO:.+]] = arith.constant 0.000000e+00 : f32
// CHECK:       return %[[HALF]], %[[ONE]], %[[MHALF]], %[[ZERO]]
func.func @squarewave_fourier_series() -> (f32, f32, f32, f32) {
  %z = arith.constant 0.0 : f32
  %four = arith.constant 4.0 : f32
  %0 = flexsn.surrogate_grad %z surrogate(#flexsn.squarewave_fourier_series) : f32
  %1 = flexsn.surrogate_grad %z surrogate(#flexsn.squarewave_fourier_series<n = 3>) : f32
  %2 = flexsn.surrogate_grad %four surrogate(#flexsn.squarewave_fourier_series) : f32
  %3 = flexsn.surrogate_grad %four surrogate(#flexsn.squarewave_fourier_series<n = 1>) : f32
  return %0, %1, %2, %3 : f32, f32, f32, f32
}

// s2nn: a·σ(ax)(1−σ(ax)) if x < 0 else β/(x+1); x = 0 takes the β branch.
// CHECK-LABEL: func.func @s2nn
// CHECK-DAG:   %[[ONE:.+]] = arith.constant 1.000000e+00 : f32
// CHECK-DAG:   %[[HALF:.+]] = arith.constant 5.000000e-01 : f32
// CHECK-DAG:   %[[TWO:.+]] = arith.constant 2.000000e+00 : f32
// CHECK:       return %[[ONE]], %[[ONE]], %[[HALF]], %[[HALF]], %[[TWO]]
func.func @s2nn() -> (f32, f32, f32, f32, f32) {
  %z = arith.constant 0.0 : f32
  %mz = arith.constant -0.0 : f32
  %p = arith.constant 1.0 : f32
  %three = arith.constant 3.0 : f32
  %0 = flexsn.surrogate_grad %z surrogate(#flexsn.s2nn) : f32
  %1 = flexsn.surrogate_grad %mz surrogate(#flexsn.s2nn) : f32
  %2 = flexsn.surrogate_grad %p surrogate(#flexsn.s2nn) : f32
  %3 = flexsn.surrogate_grad %three surrogate(#flexsn.s2nn<beta = 2.0>) : f32
  %4 = flexsn.surrogate_grad %z surrogate(#flexsn.s2nn<beta = 2.0>) : f32
  return %0, %1, %2, %3, %4 : f32, f32, f32, f32, f32
}

// s2nn below 0 is the sigmoid surrogate: not a NaN from the β/(x+1) branch at x = -1.
// CHECK-LABEL: func.func @s2nn_negative
// CHECK:       %[[V:.+]] = arith.constant 0.070650{{[0-9]*}} : f32
// CHECK:       return %[[V]]
func.func @s2nn_negative() -> f32 {
  %m = arith.constant -1.0 : f32
  %0 = flexsn.surrogate_grad %m surrogate(#flexsn.s2nn) : f32
  return %0 : f32
}

// q_pseudo_spike: (1 + 2·|x|/(a−1))^(−a).
// CHECK-LABEL: func.func @q_pseudo_spike
// CHECK-DAG:   %[[ONE:.+]] = arith.constant 1.000000e+00 : f32
// CHECK-DAG:   %[[QUARTER:.+]] = arith.constant 2.500000e-01 : f32
// CHECK-DAG:   %[[EIGHTH:.+]] = arith.constant 1.250000e-01 : f32
// CHECK:       return %[[ONE]], %[[QUARTER]], %[[QUARTER]], %[[EIGHTH]]
func.func @q_pseudo_spike() -> (f32, f32, f32, f32) {
  %z = arith.constant 0.0 : f32
  %p = arith.constant 0.5 : f32
  %m = arith.constant -0.5 : f32
  %one = arith.constant 1.0 : f32
  %0 = flexsn.surrogate_grad %z surrogate(#flexsn.q_pseudo_spike) : f32
  %1 = flexsn.surrogate_grad %p surrogate(#flexsn.q_pseudo_spike) : f32
  %2 = flexsn.surrogate_grad %m surrogate(#flexsn.q_pseudo_spike) : f32
  %3 = flexsn.surrogate_grad %one surrogate(#flexsn.q_pseudo_spike<alpha = 3.0>) : f32
  return %0, %1, %2, %3 : f32, f32, f32, f32
}

// leaky_k_relu: k if x >= 0 else leak (so x = -0.0 and x = 0 give k).
// CHECK-LABEL: func.func @leaky_k_relu
// CHECK-DAG:   %[[ONE:.+]] = arith.constant 1.000000e+00 : f32
// CHECK-DAG:   %[[ZERO:.+]] = arith.constant 0.000000e+00 : f32
// CHECK-DAG:   %[[LEAK:.+]] = arith.constant -5.000000e-01 : f32
// CHECK-DAG:   %[[K:.+]] = arith.constant 2.000000e+00 : f32
// CHECK:       return %[[ONE]], %[[ZERO]], %[[LEAK]], %[[K]], %[[K]]
func.func @leaky_k_relu() -> (f32, f32, f32, f32, f32) {
  %z = arith.constant 0.0 : f32
  %mz = arith.constant -0.0 : f32
  %m = arith.constant -3.0 : f32
  %0 = flexsn.surrogate_grad %z surrogate(#flexsn.leaky_k_relu) : f32
  %1 = flexsn.surrogate_grad %m surrogate(#flexsn.leaky_k_relu) : f32
  %2 = flexsn.surrogate_grad %m surrogate(#flexsn.leaky_k_relu<leak = -0.5, k = 2.0>) : f32
  %3 = flexsn.surrogate_grad %z surrogate(#flexsn.leaky_k_relu<leak = -0.5, k = 2.0>) : f32
  %4 = flexsn.surrogate_grad %mz surrogate(#flexsn.leaky_k_relu<leak = -0.5, k = 2.0>) : f32
  return %0, %1, %2, %3, %4 : f32, f32, f32, f32, f32
}

// fake_numerical_gradient: min((2H(x)−1)/x, a), and a at x = 0.
// CHECK-LABEL: func.func @fake_numerical_gradient
// CHECK-DAG:   %[[ONE:.+]] = arith.constant 1.000000e+00 : f32
// CHECK-DAG:   %[[QUARTER:.+]] = arith.constant 2.500000e-01 : f32
// CHECK:       return %[[ONE]], %[[QUARTER]], %[[QUARTER]], %[[ONE]]
func.func @fake_numerical_gradient() -> (f32, f32, f32, f32) {
  %z = arith.constant 0.0 : f32
  %p = arith.constant 4.0 : f32
  %m = arith.constant -4.0 : f32
  %near = arith.constant 0.5 : f32
  %0 = flexsn.surrogate_grad %z surrogate(#flexsn.fake_numerical_gradient<alpha = 1.0>) : f32
  %1 = flexsn.surrogate_grad %p surrogate(#flexsn.fake_numerical_gradient<alpha = 1.0>) : f32
  %2 = flexsn.surrogate_grad %m surrogate(#flexsn.fake_numerical_gradient<alpha = 1.0>) : f32
  %3 = flexsn.surrogate_grad %near surrogate(#flexsn.fake_numerical_gradient<alpha = 1.0>) : f32
  return %0, %1, %2, %3 : f32, f32, f32, f32
}

// fake_numerical_gradient with the default alpha = 0.3 at 0.
// CHECK-LABEL: func.func @fake_numerical_gradient_default
// CHECK:       %[[A:.+]] = arith.constant 3.000000e-01 : f32
// CHECK:       return %[[A]]
func.func @fake_numerical_gradient_default() -> f32 {
  %z = arith.constant 0.0 : f32
  %0 = flexsn.surrogate_grad %z surrogate(#flexsn.fake_numerical_gradient) : f32
  return %0 : f32
}

// log_tailed_relu: a if x <= 0; 1 if 0 < x <= 1; 1/x if x > 1.
// CHECK-LABEL: func.func @log_tailed_relu
// CHECK-DAG:   %[[ZERO:.+]] = arith.constant 0.000000e+00 : f32
// CHECK-DAG:   %[[ONE:.+]] = arith.constant 1.000000e+00 : f32
// CHECK-DAG:   %[[QUARTER:.+]] = arith.constant 2.500000e-01 : f32
// CHECK-DAG:   %[[A:.+]] = arith.constant -5.000000e-01 : f32
// CHECK:       return %[[ZERO]], %[[ZERO]], %[[ONE]], %[[ONE]], %[[QUARTER]], %[[A]]
func.func @log_tailed_relu() -> (f32, f32, f32, f32, f32, f32) {
  %m = arith.constant -1.0 : f32
  %z = arith.constant 0.0 : f32
  %half = arith.constant 0.5 : f32
  %one = arith.constant 1.0 : f32
  %four = arith.constant 4.0 : f32
  %0 = flexsn.surrogate_grad %m surrogate(#flexsn.log_tailed_relu) : f32
  %1 = flexsn.surrogate_grad %z surrogate(#flexsn.log_tailed_relu) : f32
  %2 = flexsn.surrogate_grad %half surrogate(#flexsn.log_tailed_relu) : f32
  %3 = flexsn.surrogate_grad %one surrogate(#flexsn.log_tailed_relu) : f32
  %4 = flexsn.surrogate_grad %four surrogate(#flexsn.log_tailed_relu) : f32
  %5 = flexsn.surrogate_grad %z surrogate(#flexsn.log_tailed_relu<alpha = -0.5>) : f32
  return %0, %1, %2, %3, %4, %5 : f32, f32, f32, f32, f32, f32
}

// rect: a if |x| < 0.5/a else 0; the window edge is outside.
// CHECK-LABEL: func.func @rect
// CHECK-DAG:   %[[ONE:.+]] = arith.constant 1.000000e+00 : f32
// CHECK-DAG:   %[[ZERO:.+]] = arith.constant 0.000000e+00 : f32
// CHECK-DAG:   %[[TWO:.+]] = arith.constant 2.000000e+00 : f32
// CHECK:       return %[[ONE]], %[[ONE]], %[[ZERO]], %[[ZERO]], %[[TWO]], %[[ZERO]]
func.func @rect() -> (f32, f32, f32, f32, f32, f32) {
  %z = arith.constant 0.0 : f32
  %q = arith.constant -0.25 : f32
  %edge = arith.constant 0.5 : f32
  %medge = arith.constant -0.5 : f32
  %in = arith.constant 0.125 : f32
  %out = arith.constant 0.25 : f32
  %0 = flexsn.surrogate_grad %z surrogate(#flexsn.rect) : f32
  %1 = flexsn.surrogate_grad %q surrogate(#flexsn.rect) : f32
  %2 = flexsn.surrogate_grad %edge surrogate(#flexsn.rect) : f32
  %3 = flexsn.surrogate_grad %medge surrogate(#flexsn.rect) : f32
  %4 = flexsn.surrogate_grad %in surrogate(#flexsn.rect<alpha = 2.0>) : f32
  %5 = flexsn.surrogate_grad %out surrogate(#flexsn.rect<alpha = 2.0>) : f32
  return %0, %1, %2, %3, %4, %5 : f32, f32, f32, f32, f32, f32
}

// straight_through: 1 everywhere.
// CHECK-LABEL: func.func @straight_through
// CHECK:       %[[ONE:.+]] = arith.constant 1.000000e+00 : f32
// CHECK-NOT:   flexsn.surrogate_grad
// CHECK:       return %[[ONE]], %[[ONE]], %[[ONE]]
func.func @straight_through() -> (f32, f32, f32) {
  %z = arith.constant 0.0 : f32
  %m = arith.constant -7.0 : f32
  %p = arith.constant 1.0e30 : f32
  %0 = flexsn.surrogate_grad %z surrogate(#flexsn.straight_through) : f32
  %1 = flexsn.surrogate_grad %m surrogate(#flexsn.straight_through) : f32
  %2 = flexsn.surrogate_grad %p surrogate(#flexsn.straight_through) : f32
  return %0, %1, %2 : f32, f32, f32
}

// Folding also applies inside a neuron body; the spike of the folded charge
// becomes a constant.
// CHECK-LABEL: flexsn.neuron @fold_in_body
// CHECK:         %[[ONE:.+]] = arith.constant 1.000000e+00 : f32
// CHECK-NOT:     flexsn.spike
// CHECK:         flexsn.yield %[[ONE]], %x : f32, f32
flexsn.neuron @fold_in_body inputs(%x: f32) outputs(s, x_out) {
  %c = arith.constant 0.0 : f32
  %s = flexsn.spike %c surrogate(#flexsn.sigmoid) : f32
  flexsn.yield %s, %x : f32, f32
}
