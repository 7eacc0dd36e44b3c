// RUN: flexsn-opt %s --split-input-file --flexsn-expand-surrogates | FileCheck %s
// RUN: flexsn-opt %s --flexsn-expand-surrogates | FileCheck %s --check-prefix=NONE
// RUN: flexsn-opt %s --flexsn-expand-surrogates --convert-math-to-llvm \
// RUN:   --convert-math-to-libm --convert-scf-to-cf --convert-to-llvm \
// RUN:   --reconcile-unrealized-casts \
// RUN: | mlir-runner -e main -entry-point-result=void \
// RUN:   -shared-libs=/usr/lib/llvm-22/lib/libmlir_c_runner_utils.so,/usr/lib/llvm-22/lib/libmlir_runner_utils.so \
// RUN: | FileCheck %s --check-prefix=VALUES
// RUN: flexsn-opt %s --split-input-file --flexsn-expand-surrogates --canonicalize \
// RUN: | FileCheck %s --check-prefix=FOLD

// The splits below check the shape of the expansion; the last one runs every
// surrogate's g(x) and compares it with values computed from docs/Semantics.md.
// The runner lowers the whole file as one module, so function names are
// unique across splits.

// After the pass, no flexsn op is left anywhere in the file.
// NONE-NOT: flexsn.

// spike(x) becomes select(x >= 0, 1.0, 0.0): `oge`, so that H(0) = 1.
// CHECK-LABEL: func.func @spike
// CHECK-SAME:    (%[[X:.*]]: f32)
// CHECK-DAG:     %[[ZERO:.*]] = arith.constant 0.000000e+00 : f32
// CHECK-DAG:     %[[ONE:.*]] = arith.constant 1.000000e+00 : f32
// CHECK:         %[[FIRES:.*]] = arith.cmpf oge, %[[X]], %[[ZERO]] : f32
// CHECK:         %[[S:.*]] = arith.select %[[FIRES]], %[[ONE]], %[[ZERO]] : f32
// CHECK:         return %[[S]] : f32
func.func @spike(%x: f32) -> f32 {
  %s = flexsn.spike %x surrogate(#flexsn.atan) : f32
  return %s : f32
}

// -----

// detach is the identity in the forward pass: its uses take its operand.
// CHECK-LABEL: func.func @detach
// CHECK-SAME:    (%[[X:.*]]: f32)
// CHECK-NEXT:    return %[[X]], %[[X]] : f32, f32
func.func @detach(%x: f32) -> (f32, f32) {
  %d = flexsn.detach %x : f32
  %e = flexsn.detach %d : f32
  return %d, %e : f32, f32
}

// -----

// Spikes nested in regions (here a loop body) are expanded too.
// CHECK-LABEL: func.func @nested
// CHECK:         scf.for
// CHECK:           arith.cmpf oge
// CHECK:           arith.select
// CHECK:           scf.yield
func.func @nested(%x: f32, %n: index) -> f32 {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %r = scf.for %i = %c0 to %n step %c1 iter_args(%acc = %x) -> f32 {
    %s = flexsn.spike %acc surrogate(#flexsn.sigmoid) : f32
    %next = arith.addf %acc, %s : f32
    scf.yield %next : f32
  }
  return %r : f32
}

// -----

// sigmoid: a·σ(ax)·(1−σ(ax)), with σ built from math.exp.
// CHECK-LABEL: func.func @grad_sigmoid
// CHECK-SAME:    (%[[X:.*]]: f32)
// CHECK:         %[[A:.*]] = arith.constant 4.000000e+00 : f32
// CHECK:         arith.mulf %[[X]], %[[A]] : f32
// CHECK:         math.exp
// CHECK:         %[[SIG:.*]] = arith.divf
// CHECK:         %[[REST:.*]] = arith.subf %{{.*}}, %[[SIG]] : f32
// CHECK:         %[[P:.*]] = arith.mulf %[[SIG]], %[[REST]] : f32
// CHECK:         %[[G:.*]] = arith.mulf %[[P]], %{{.*}} : f32
// CHECK:         return %[[G]] : f32
func.func @grad_sigmoid(%x: f32) -> f32 {
  %g = flexsn.surrogate_grad %x surrogate(#flexsn.sigmoid) : f32
  return %g : f32
}

// -----

// atan's g is rational: arith ops only, no math.atan (that is the primitive).
// CHECK-LABEL: func.func @grad_atan
// CHECK-NOT:     math.
// CHECK:         arith.divf
// CHECK-NOT:     math.
// CHECK:         return
func.func @grad_atan(%x: f32) -> f32 {
  %g = flexsn.surrogate_grad %x surrogate(#flexsn.atan) : f32
  return %g : f32
}

// -----

// erf's g is a Gaussian: math.exp, not math.erf.
// CHECK-LABEL: func.func @grad_erf
// CHECK-NOT:     math.erf
// CHECK:         math.exp
// CHECK-NOT:     math.erf
// CHECK:         return
func.func @grad_erf(%x: f32) -> f32 {
  %g = flexsn.surrogate_grad %x surrogate(#flexsn.erf) : f32
  return %g : f32
}

// -----

// squarewave_fourier_series with n = 3 sums n − 1 = 2 cosines.
// CHECK-LABEL: func.func @grad_squarewave
// CHECK-COUNT-2: math.cos
// CHECK-NOT:     math.cos
// CHECK:         return
func.func @grad_squarewave(%x: f32) -> f32 {
  %g = flexsn.surrogate_grad %x surrogate(#flexsn.squarewave_fourier_series<n = 3>) : f32
  return %g : f32
}

// -----

// s2nn picks its branch with a select on x < 0; the sigmoid branch uses math.exp.
// CHECK-LABEL: func.func @grad_s2nn
// CHECK-SAME:    (%[[X:.*]]: f32)
// CHECK-DAG:     math.exp
// CHECK-DAG:     %[[NEG:.*]] = arith.cmpf olt, %[[X]], %{{.*}} : f32
// CHECK:         %[[G:.*]] = arith.select %[[NEG]], %{{.*}}, %{{.*}} : f32
// CHECK:         return %[[G]] : f32
func.func @grad_s2nn(%x: f32) -> f32 {
  %g = flexsn.surrogate_grad %x surrogate(#flexsn.s2nn) : f32
  return %g : f32
}

// -----

// q_pseudo_spike raises to the power −a with math.powf.
// CHECK-LABEL: func.func @grad_q_pseudo_spike
// CHECK:         math.absf
// CHECK:         %[[G:.*]] = math.powf %{{.*}}, %{{.*}} : f32
// CHECK:         return %[[G]] : f32
func.func @grad_q_pseudo_spike(%x: f32) -> f32 {
  %g = flexsn.surrogate_grad %x surrogate(#flexsn.q_pseudo_spike) : f32
  return %g : f32
}

// -----

// Piecewise-constant surrogates are a compare and a select of two constants.
// CHECK-LABEL: func.func @grad_piecewise_constant
// CHECK-SAME:    (%[[X:.*]]: f32)
// CHECK:         %[[ABS:.*]] = math.absf %[[X]] : f32
// CHECK:         %[[IN:.*]] = arith.cmpf olt, %[[ABS]], %{{.*}} : f32
// CHECK:         %[[RECT:.*]] = arith.select %[[IN]], %{{.*}}, %{{.*}} : f32
// CHECK:         %[[POS:.*]] = arith.cmpf oge, %[[X]], %{{.*}} : f32
// CHECK:         %[[LEAKY:.*]] = arith.select %[[POS]], %{{.*}}, %{{.*}} : f32
// CHECK:         return %[[RECT]], %[[LEAKY]] : f32, f32
func.func @grad_piecewise_constant(%x: f32) -> (f32, f32) {
  %r = flexsn.surrogate_grad %x surrogate(#flexsn.rect) : f32
  %l = flexsn.surrogate_grad %x surrogate(#flexsn.leaky_k_relu) : f32
  return %r, %l : f32, f32
}

// -----

// fake_numerical_gradient bounds 1/|x| with minimumf, which gives a at x = 0.
// CHECK-LABEL: func.func @grad_fake_numerical_gradient
// CHECK:         %[[ABS:.*]] = math.absf
// CHECK:         %[[INV:.*]] = arith.divf %{{.*}}, %[[ABS]] : f32
// CHECK:         %[[G:.*]] = arith.minimumf %[[INV]], %{{.*}} : f32
// CHECK:         return %[[G]] : f32
func.func @grad_fake_numerical_gradient(%x: f32) -> f32 {
  %g = flexsn.surrogate_grad %x surrogate(#flexsn.fake_numerical_gradient) : f32
  return %g : f32
}

// -----

// straight_through's g is the constant 1.
// CHECK-LABEL: func.func @grad_straight_through
// CHECK:         %[[ONE:.*]] = arith.constant 1.000000e+00 : f32
// CHECK:         return %[[ONE]] : f32
func.func @grad_straight_through(%x: f32) -> f32 {
  %g = flexsn.surrogate_grad %x surrogate(#flexsn.straight_through) : f32
  return %g : f32
}

// -----

// On constant operands the expansion folds to g's value (and H's) at that point.
// FOLD-LABEL: func.func @folded
// FOLD-NOT:     math.
// FOLD-DAG:     %[[SIG:.*]] = arith.constant 0.41997{{[0-9]*}} : f32
// FOLD-DAG:     %[[SUPER:.*]] = arith.constant 0.44444{{[0-9]*}} : f32
// FOLD-DAG:     %[[ONE:.*]] = arith.constant 1.000000e+00 : f32
// FOLD-NOT:     math.
// FOLD:         return %[[SIG]], %[[SUPER]], %[[ONE]] : f32, f32, f32
func.func @folded() -> (f32, f32, f32) {
  %x = arith.constant 0.5 : f32
  %a = flexsn.surrogate_grad %x surrogate(#flexsn.sigmoid) : f32
  %b = flexsn.surrogate_grad %x surrogate(#flexsn.super_spike) : f32
  %s = flexsn.spike %x surrogate(#flexsn.atan) : f32
  return %a, %b, %s : f32, f32, f32
}

// -----

// Running the expansion of the 17 SpikingJelly surrogates gives the docs/Semantics.md values.
// CHECK-LABEL: func.func @main
//
// g(x) at x = -1, -0.3, 0, 0.5, 1, 1.5 for every surrogate (defaults, and a
// second parameter set for most), printed through mlir-runner. The expected
// values come from the docs/Semantics.md formulas evaluated in double precision in Python,
// not from SurrogateFormulas.h. Each is matched to 4-6 significant digits,
// fewer where f32 rounding can move the last printed digit (sigmoid's
// 1 - σ(ax) cancels as σ nears 1). Points on branch boundaries check the
// comparisons: rect(1) at |x| = 0.5 is 0, piecewise_leaky_relu(w=1) at
// |x| = 1 is c, log_tailed_relu at 0 is a and at 1 is 1, leaky_k_relu and
// s2nn at 0 take the x >= 0 branch, fake_numerical_gradient at 0 is a.

memref.global "private" constant @xs : memref<6xf32> = dense<[-1.0, -0.3, 0.0, 0.5, 1.0, 1.5]>

func.func private @printF32(f32)
func.func private @printComma()
func.func private @printNewline()

// Prints g(x) for each x in @xs on one line, each followed by ", ".
func.func @print_row(%g: (f32) -> f32) {
  %xs = memref.get_global @xs : memref<6xf32>
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c6 = arith.constant 6 : index
  scf.for %i = %c0 to %c6 step %c1 {
    %x = memref.load %xs[%i] : memref<6xf32>
    %y = func.call_indirect %g(%x) : (f32) -> f32
    func.call @printF32(%y) : (f32) -> ()
    func.call @printComma() : () -> ()
  }
  func.call @printNewline() : () -> ()
  return
}

func.func @main() {
  vector.print str "sigmoid: "
  %sigmoid = func.constant @g_sigmoid : (f32) -> f32
  func.call @print_row(%sigmoid) : ((f32) -> f32) -> ()
  vector.print str "sigmoid_a2: "
  %sigmoid_a2 = func.constant @g_sigmoid_a2 : (f32) -> f32
  func.call @print_row(%sigmoid_a2) : ((f32) -> f32) -> ()
  vector.print str "atan: "
  %atan = func.constant @g_atan : (f32) -> f32
  func.call @print_row(%atan) : ((f32) -> f32) -> ()
  vector.print str "piecewise_quadratic: "
  %piecewise_quadratic = func.constant @g_piecewise_quadratic : (f32) -> f32
  func.call @print_row(%piecewise_quadratic) : ((f32) -> f32) -> ()
  vector.print str "piecewise_quadratic_a2: "
  %piecewise_quadratic_a2 = func.constant @g_piecewise_quadratic_a2 : (f32) -> f32
  func.call @print_row(%piecewise_quadratic_a2) : ((f32) -> f32) -> ()
  vector.print str "piecewise_exp: "
  %piecewise_exp = func.constant @g_piecewise_exp : (f32) -> f32
  func.call @print_row(%piecewise_exp) : ((f32) -> f32) -> ()
  vector.print str "soft_sign: "
  %soft_sign = func.constant @g_soft_sign : (f32) -> f32
  func.call @print_row(%soft_sign) : ((f32) -> f32) -> ()
  vector.print str "super_spike: "
  %super_spike = func.constant @g_super_spike : (f32) -> f32
  func.call @print_row(%super_spike) : ((f32) -> f32) -> ()
  vector.print str "erf: "
  %erf = func.constant @g_erf : (f32) -> f32
  func.call @print_row(%erf) : ((f32) -> f32) -> ()
  vector.print str "nonzero_sign_log_abs: "
  %nonzero_sign_log_abs = func.constant @g_nonzero_sign_log_abs : (f32) -> f32
  func.call @print_row(%nonzero_sign_log_abs) : ((f32) -> f32) -> ()
  vector.print str "piecewise_leaky_relu: "
  %piecewise_leaky_relu = func.constant @g_piecewise_leaky_relu : (f32) -> f32
  func.call @print_row(%piecewise_leaky_relu) : ((f32) -> f32) -> ()
  vector.print str "piecewise_leaky_relu_w05: "
  %piecewise_leaky_relu_w05 = func.constant @g_piecewise_leaky_relu_w05 : (f32) -> f32
  func.call @print_row(%piecewise_leaky_relu_w05) : ((f32) -> f32) -> ()
  vector.print str "squarewave_fourier_series: "
  %squarewave_fourier_series = func.constant @g_squarewave_fourier_series : (f32) -> f32
  func.call @print_row(%squarewave_fourier_series) : ((f32) -> f32) -> ()
  vector.print str "squarewave_fourier_series_n3: "
  %squarewave_fourier_series_n3 = func.constant @g_squarewave_fourier_series_n3 : (f32) -> f32
  func.call @print_row(%squarewave_fourier_series_n3) : ((f32) -> f32) -> ()
  vector.print str "squarewave_fourier_series_n4: "
  %squarewave_fourier_series_n4 = func.constant @g_squarewave_fourier_series_n4 : (f32) -> f32
  func.call @print_row(%squarewave_fourier_series_n4) : ((f32) -> f32) -> ()
  vector.print str "s2nn: "
  %s2nn = func.constant @g_s2nn : (f32) -> f32
  func.call @print_row(%s2nn) : ((f32) -> f32) -> ()
  vector.print str "s2nn_a2_b05: "
  %s2nn_a2_b05 = func.constant @g_s2nn_a2_b05 : (f32) -> f32
  func.call @print_row(%s2nn_a2_b05) : ((f32) -> f32) -> ()
  vector.print str "q_pseudo_spike: "
  %q_pseudo_spike = func.constant @g_q_pseudo_spike : (f32) -> f32
  func.call @print_row(%q_pseudo_spike) : ((f32) -> f32) -> ()
  vector.print str "q_pseudo_spike_a3: "
  %q_pseudo_spike_a3 = func.constant @g_q_pseudo_spike_a3 : (f32) -> f32
  func.call @print_row(%q_pseudo_spike_a3) : ((f32) -> f32) -> ()
  vector.print str "leaky_k_relu: "
  %leaky_k_relu = func.constant @g_leaky_k_relu : (f32) -> f32
  func.call @print_row(%leaky_k_relu) : ((f32) -> f32) -> ()
  vector.print str "leaky_k_relu_01_2: "
  %leaky_k_relu_01_2 = func.constant @g_leaky_k_relu_01_2 : (f32) -> f32
  func.call @print_row(%leaky_k_relu_01_2) : ((f32) -> f32) -> ()
  vector.print str "fake_numerical_gradient: "
  %fake_numerical_gradient = func.constant @g_fake_numerical_gradient : (f32) -> f32
  func.call @print_row(%fake_numerical_gradient) : ((f32) -> f32) -> ()
  vector.print str "fake_numerical_gradient_a2: "
  %fake_numerical_gradient_a2 = func.constant @g_fake_numerical_gradient_a2 : (f32) -> f32
  func.call @print_row(%fake_numerical_gradient_a2) : ((f32) -> f32) -> ()
  vector.print str "log_tailed_relu: "
  %log_tailed_relu = func.constant @g_log_tailed_relu : (f32) -> f32
  func.call @print_row(%log_tailed_relu) : ((f32) -> f32) -> ()
  vector.print str "log_tailed_relu_a02: "
  %log_tailed_relu_a02 = func.constant @g_log_tailed_relu_a02 : (f32) -> f32
  func.call @print_row(%log_tailed_relu_a02) : ((f32) -> f32) -> ()
  vector.print str "rect: "
  %rect = func.constant @g_rect : (f32) -> f32
  func.call @print_row(%rect) : ((f32) -> f32) -> ()
  vector.print str "rect_a2: "
  %rect_a2 = func.constant @g_rect_a2 : (f32) -> f32
  func.call @print_row(%rect_a2) : ((f32) -> f32) -> ()
  vector.print str "straight_through: "
  %straight_through = func.constant @g_straight_through : (f32) -> f32
  func.call @print_row(%straight_through) : ((f32) -> f32) -> ()
  return
}

// VALUES: {{^}}sigmoid: 0.07065{{[0-9]*}}, 0.71157{{[0-9]*}}, 1, 0.41997{{[0-9]*}}, 0.07065{{[0-9]*}}, 0.00986{{[0-9]*}},
// VALUES: {{^}}sigmoid_a2: 0.20998{{[0-9]*}}, 0.45756{{[0-9]*}}, 0.5, 0.39322{{[0-9]*}}, 0.20998{{[0-9]*}}, 0.09035{{[0-9]*}},
// VALUES: {{^}}atan: 0.091999{{[0-9]*}}, 0.52958{{[0-9]*}}, 1, 0.2884, 0.091999{{[0-9]*}}, 0.043091{{[0-9]*}},
// VALUES: {{^}}piecewise_quadratic: 0, 0.7, 1, 0.5, 0, 0,
// VALUES: {{^}}piecewise_quadratic_a2: 0, 0.8, 2, 0, 0, 0,
// VALUES: {{^}}piecewise_exp: 0.1839{{[0-9]*}}, 0.3704{{[0-9]*}}, 0.5, 0.30326{{[0-9]*}}, 0.1839{{[0-9]*}}, 0.111565,
// VALUES: {{^}}soft_sign: 0.111111, 0.39062{{[0-9]*}}, 1, 0.25, 0.111111, 0.0625,
// VALUES: {{^}}super_spike: 0.25, 0.59171{{[0-9]*}}, 1, 0.44444{{[0-9]*}}, 0.25, 0.16,
// VALUES: {{^}}erf: 0.02066{{[0-9]*}}, 0.78724{{[0-9]*}}, 1.12838, 0.41510{{[0-9]*}}, 0.02066{{[0-9]*}}, 0.000139253,
// VALUES: {{^}}nonzero_sign_log_abs: 0.5, 0.7692{{[0-9]*}}, 1, 0.66666{{[0-9]*}}, 0.5, 0.4,
// VALUES: {{^}}piecewise_leaky_relu: 0.01, 0.5, 0.5, 0.5, 0.01, 0.01,
// VALUES: {{^}}piecewise_leaky_relu_w05: 0.1, 1, 1, 0.1, 0.1, 0.1,
// VALUES: {{^}}squarewave_fourier_series: 0.35355{{[0-9]*}}, 0.48618{{[0-9]*}}, 0.5, 0.4619{{[0-9]*}}, 0.35355{{[0-9]*}}, 0.19134{{[0-9]*}},
// VALUES: {{^}}squarewave_fourier_series_n3: -0.4, 1.0844{{[0-9]*}}, 1.6, 0.4, -0.4, 0.4,
// VALUES: {{^}}squarewave_fourier_series_n4: -0.35355{{[0-9]*}}, 1.05773, 1.5, 0.4619{{[0-9]*}}, -0.35355{{[0-9]*}}, 0.19134{{[0-9]*}},
// VALUES: {{^}}s2nn: 0.07065{{[0-9]*}}, 0.71157{{[0-9]*}}, 1, 0.66666{{[0-9]*}}, 0.5, 0.4,
// VALUES: {{^}}s2nn_a2_b05: 0.20998{{[0-9]*}}, 0.45756{{[0-9]*}}, 0.5, 0.33333{{[0-9]*}}, 0.25, 0.2,
// VALUES: {{^}}q_pseudo_spike: 0.111111, 0.39062{{[0-9]*}}, 1, 0.25, 0.111111, 0.0625,
// VALUES: {{^}}q_pseudo_spike_a3: 0.125, 0.45516{{[0-9]*}}, 1, 0.29629{{[0-9]*}}, 0.125, 0.064,
// VALUES: {{^}}leaky_k_relu: 0, 0, 1, 1, 1, 1,
// VALUES: {{^}}leaky_k_relu_01_2: 0.1, 0.1, 2, 2, 2, 2,
// VALUES: {{^}}fake_numerical_gradient: 0.3, 0.3, 0.3, 0.3, 0.3, 0.3,
// VALUES: {{^}}fake_numerical_gradient_a2: 1, 2, 2, 2, 1, 0.66666{{[0-9]*}},
// VALUES: {{^}}log_tailed_relu: 0, 0, 0, 1, 1, 0.66666{{[0-9]*}},
// VALUES: {{^}}log_tailed_relu_a02: 0.2, 0.2, 0.2, 1, 1, 0.66666{{[0-9]*}},
// VALUES: {{^}}rect: 0, 1, 1, 0, 0, 0,
// VALUES: {{^}}rect_a2: 0, 0, 2, 0, 0, 0,
// VALUES: {{^}}straight_through: 1, 1, 1, 1, 1, 1,

func.func @g_sigmoid(%x: f32) -> f32 {
  %g = flexsn.surrogate_grad %x surrogate(#flexsn.sigmoid) : f32
  return %g : f32
}

func.func @g_sigmoid_a2(%x: f32) -> f32 {
  %g = flexsn.surrogate_grad %x surrogate(#flexsn.sigmoid<alpha = 2.0>) : f32
  return %g : f32
}

func.func @g_atan(%x: f32) -> f32 {
  %g = flexsn.surrogate_grad %x surrogate(#flexsn.atan) : f32
  return %g : f32
}

func.func @g_piecewise_quadratic(%x: f32) -> f32 {
  %g = flexsn.surrogate_grad %x surrogate(#flexsn.piecewise_quadratic) : f32
  return %g : f32
}

func.func @g_piecewise_quadratic_a2(%x: f32) -> f32 {
  %g = flexsn.surrogate_grad %x surrogate(#flexsn.piecewise_quadratic<alpha = 2.0>) : f32
  return %g : f32
}

func.func @g_piecewise_exp(%x: f32) -> f32 {
  %g = flexsn.surrogate_grad %x surrogate(#flexsn.piecewise_exp) : f32
  return %g : f32
}

func.func @g_soft_sign(%x: f32) -> f32 {
  %g = flexsn.surrogate_grad %x surrogate(#flexsn.soft_sign) : f32
  return %g : f32
}

func.func @g_super_spike(%x: f32) -> f32 {
  %g = flexsn.surrogate_grad %x surrogate(#flexsn.super_spike) : f32
  return %g : f32
}

func.func @g_erf(%x: f32) -> f32 {
  %g = flexsn.surrogate_grad %x surrogate(#flexsn.erf) : f32
  return %g : f32
}

func.func @g_nonzero_sign_log_abs(%x: f32) -> f32 {
  %g = flexsn.surrogate_grad %x surrogate(#flexsn.nonzero_sign_log_abs) : f32
  return %g : f32
}

func.func @g_piecewise_leaky_relu(%x: f32) -> f32 {
  %g = flexsn.surrogate_grad %x surrogate(#flexsn.piecewise_leaky_relu) : f32
  return %g : f32
}

func.func @g_piecewise_leaky_relu_w05(%x: f32) -> f32 {
  %g = flexsn.surrogate_grad %x surrogate(#flexsn.piecewise_leaky_relu<w = 0.5, c = 0.1>) : f32
  return %g : f32
}

func.func @g_squarewave_fourier_series(%x: f32) -> f32 {
  %g = flexsn.surrogate_grad %x surrogate(#flexsn.squarewave_fourier_series) : f32
  return %g : f32
}

func.func @g_squarewave_fourier_series_n3(%x: f32) -> f32 {
  %g = flexsn.surrogate_grad %x surrogate(#flexsn.squarewave_fourier_series<n = 3, T_period = 5.0>) : f32
  return %g : f32
}

func.func @g_squarewave_fourier_series_n4(%x: f32) -> f32 {
  %g = flexsn.surrogate_grad %x surrogate(#flexsn.squarewave_fourier_series<n = 4>) : f32
  return %g : f32
}

func.func @g_s2nn(%x: f32) -> f32 {
  %g = flexsn.surrogate_grad %x surrogate(#flexsn.s2nn) : f32
  return %g : f32
}

func.func @g_s2nn_a2_b05(%x: f32) -> f32 {
  %g = flexsn.surrogate_grad %x surrogate(#flexsn.s2nn<alpha = 2.0, beta = 0.5>) : f32
  return %g : f32
}

func.func @g_q_pseudo_spike(%x: f32) -> f32 {
  %g = flexsn.surrogate_grad %x surrogate(#flexsn.q_pseudo_spike) : f32
  return %g : f32
}

func.func @g_q_pseudo_spike_a3(%x: f32) -> f32 {
  %g = flexsn.surrogate_grad %x surrogate(#flexsn.q_pseudo_spike<alpha = 3.0>) : f32
  return %g : f32
}

func.func @g_leaky_k_relu(%x: f32) -> f32 {
  %g = flexsn.surrogate_grad %x surrogate(#flexsn.leaky_k_relu) : f32
  return %g : f32
}

func.func @g_leaky_k_relu_01_2(%x: f32) -> f32 {
  %g = flexsn.surrogate_grad %x surrogate(#flexsn.leaky_k_relu<leak = 0.1, k = 2.0>) : f32
  return %g : f32
}

func.func @g_fake_numerical_gradient(%x: f32) -> f32 {
  %g = flexsn.surrogate_grad %x surrogate(#flexsn.fake_numerical_gradient) : f32
  return %g : f32
}

func.func @g_fake_numerical_gradient_a2(%x: f32) -> f32 {
  %g = flexsn.surrogate_grad %x surrogate(#flexsn.fake_numerical_gradient<alpha = 2.0>) : f32
  return %g : f32
}

func.func @g_log_tailed_relu(%x: f32) -> f32 {
  %g = flexsn.surrogate_grad %x surrogate(#flexsn.log_tailed_relu) : f32
  return %g : f32
}

func.func @g_log_tailed_relu_a02(%x: f32) -> f32 {
  %g = flexsn.surrogate_grad %x surrogate(#flexsn.log_tailed_relu<alpha = 0.2>) : f32
  return %g : f32
}

func.func @g_rect(%x: f32) -> f32 {
  %g = flexsn.surrogate_grad %x surrogate(#flexsn.rect) : f32
  return %g : f32
}

func.func @g_rect_a2(%x: f32) -> f32 {
  %g = flexsn.surrogate_grad %x surrogate(#flexsn.rect<alpha = 2.0>) : f32
  return %g : f32
}

func.func @g_straight_through(%x: f32) -> f32 {
  %g = flexsn.surrogate_grad %x surrogate(#flexsn.straight_through) : f32
  return %g : f32
}
