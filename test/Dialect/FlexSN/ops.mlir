// RUN: flexsn-opt %s | FileCheck %s
// RUN: flexsn-opt %s | flexsn-opt | FileCheck %s
// RUN: flexsn-opt %s --mlir-print-op-generic | flexsn-opt | FileCheck %s

// Round-trip of the FlexSN ops in their custom syntax: neuron definitions,
// the per-step ops, and scans over neurons and inline bodies.

// A neuron with inputs, states and parameters of every kind and type; body
// arguments print under their declared names, and defaults print shortest.
// CHECK-LABEL: flexsn.neuron @all_params
// CHECK-SAME:    inputs(%x: f32) states(%v: f32) outputs(spike)
// CHECK:         params(
// CHECK-NEXT:      %tau: f32 = 2.0,
// CHECK-NEXT:      %v_threshold: f32 = 1.0 runtime,
// CHECK-NEXT:      %w: f32 = -0.0015 trainable,
// CHECK-NEXT:      %soft_reset: i1 = false,
// CHECK-NEXT:      %detach_reset: i1 = true runtime,
// CHECK-NEXT:      %steps: i32 = 7,
// CHECK-NEXT:      %offset: i32 = -3 runtime) {
// CHECK:         arith.divf %v, %tau : f32
// CHECK:         arith.select %soft_reset,
// CHECK:         arith.sitofp %steps : i32 to f32
// CHECK:         flexsn.yield %{{.*}}, %{{.*}} : f32, f32
flexsn.neuron @all_params inputs(%x: f32) states(%v: f32) outputs(spike)
    params(%tau: f32 = 2.0 const, %v_threshold: f32 = 1.0 runtime,
           %w: f32 = -1.5e-3 trainable, %soft_reset: i1 = false,
           %detach_reset: i1 = true runtime, %steps: i32 = 7,
           %offset: i32 = -3 runtime) {
  %decay = arith.divf %v, %tau : f32
  %h0 = arith.subf %v, %decay : f32
  %h1 = arith.addf %h0, %x : f32
  %h = arith.mulf %h1, %w : f32
  %over = arith.subf %h, %v_threshold : f32
  %s = flexsn.spike %over surrogate(#flexsn.sigmoid) : f32
  %sd = flexsn.detach %s : f32
  %sr = arith.select %detach_reset, %sd, %s : f32
  %zero = arith.constant 0.0 : f32
  %reset = arith.select %soft_reset, %zero, %sr : f32
  %n = arith.addi %steps, %offset : i32
  %nf = arith.sitofp %steps : i32 to f32
  %keep = arith.subf %nf, %reset : f32
  %v1 = arith.mulf %keep, %h : f32
  flexsn.yield %s, %v1 : f32, f32
}

// Two parameters or fewer print on one line.
// CHECK-LABEL: flexsn.neuron @short_params
// CHECK-SAME:    inputs(%x: f32) outputs(y)
// CHECK-NEXT:    params(%a: f32 = 0.5, %flag: i1 = true) {
flexsn.neuron @short_params inputs(%x: f32) outputs(y)
    params(%a: f32 = 0.5, %flag: i1 = 1) {
  %y = arith.mulf %x, %a : f32
  flexsn.yield %y : f32
}

// Several inputs, states and outputs; an output name written as a string
// prints bare.
// CHECK-LABEL: flexsn.neuron @multi
// CHECK-SAME:    inputs(%x: f32, %i_syn: f32) states(%c: f32, %v: f32, %w: f32)
// CHECK-SAME:    outputs(spike, current)
// CHECK:         flexsn.spike %{{.*}} surrogate(#flexsn.atan) : f32
// CHECK:         flexsn.yield %{{.*}}, %c, %{{.*}}, %{{.*}}, %w : f32, f32, f32, f32, f32
flexsn.neuron @multi inputs(%x: f32, %i_syn: f32) states(%c: f32, %v: f32, %w: f32)
    outputs(spike, "current") {
  %c1 = arith.addf %c, %x : f32
  %c2 = arith.addf %c1, %i_syn : f32
  %h = arith.addf %v, %c2 : f32
  %s = flexsn.spike %h surrogate(#flexsn.atan<alpha = 2.0>) : f32
  %e = math.exp %h : f32
  flexsn.yield %s, %c, %c2, %e, %w : f32, f32, f32, f32, f32
}

// A neuron with no parameters prints no params group; all per-step ops.
// CHECK-LABEL: flexsn.neuron @no_params
// CHECK-SAME:    inputs(%x: f32) states(%v: f32) outputs(spike) {
// CHECK:         %[[S:.+]] = flexsn.spike %{{.*}} surrogate(#flexsn.rect<alpha = 2.0>) : f32
// CHECK:         %[[D:.+]] = flexsn.detach %[[S]] : f32
// CHECK:         %[[G:.+]] = flexsn.surrogate_grad %{{.*}} surrogate(#flexsn.piecewise_leaky_relu<w = 0.5>) : f32
// CHECK:         flexsn.yield %[[D]], %[[G]] : f32, f32
flexsn.neuron @no_params inputs(%x: f32) states(%v: f32) outputs(spike) {
  %h = arith.addf %v, %x : f32
  %s = flexsn.spike %h surrogate(#flexsn.rect<alpha = 2>) : f32
  %sd = flexsn.detach %s : f32
  %g = flexsn.surrogate_grad %h surrogate(#flexsn.piecewise_leaky_relu<w = 0.5, c = 0.01>) : f32
  flexsn.yield %sd, %g : f32, f32
}

// A neuron with only states and no outputs.
// CHECK-LABEL: flexsn.neuron @state_only
// CHECK-SAME:    inputs(%x: f32) states(%v: f32) outputs() {
flexsn.neuron @state_only inputs(%x: f32) states(%v: f32) outputs() {
  %v1 = arith.addf %v, %x : f32
  flexsn.yield %v1 : f32
}

// Output names live apart from state names: an output may be called like a
// state, whose buffers are `v_init`, `v_seq` and `v_final` (an output named
// like an input would share its buffer name: see names-invalid.mlir).
// CHECK-LABEL: flexsn.neuron @passthrough
// CHECK-SAME:    inputs(%x: f32) states(%v: f32) outputs(v) {
flexsn.neuron @passthrough inputs(%x: f32) states(%v: f32) outputs(v) {
  flexsn.yield %x, %v : f32, f32
}

// flexsn.apply runs one step of another neuron, with params passed as operands.
// CHECK-LABEL: flexsn.neuron @two_compartment
// CHECK:         %{{.*}}:2 = flexsn.apply @all_params(%x, %v, %tau, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}) : (f32, f32, f32, f32, f32, i1, i1, i32, i32) -> (f32, f32)
// CHECK:         flexsn.apply @state_only(%{{.*}}, %d) : (f32, f32) -> f32
flexsn.neuron @two_compartment inputs(%x: f32) states(%v: f32, %d: f32)
    outputs(spike) params(%tau: f32 = 2.0 trainable) {
  %one = arith.constant 1.0 : f32
  %false = arith.constant false
  %i = arith.constant 0 : i32
  %s, %v1 = flexsn.apply @all_params(%x, %v, %tau, %one, %one, %false, %false, %i, %i)
      : (f32, f32, f32, f32, f32, i1, i1, i32, i32) -> (f32, f32)
  %d1 = flexsn.apply @state_only(%s, %d) : (f32, f32) -> f32
  flexsn.yield %s, %v1, %d1 : f32, f32, f32
}

// A neuron's symbol name only prefixes its host stubs' names, so it may be a
// C, C++ or Python keyword (argument and output names may not: invalid.mlir).
// CHECK-LABEL: flexsn.neuron @if inputs(%x: f32) outputs(s) {
// CHECK:       flexsn.neuron @uses_if
// CHECK:         flexsn.apply @if(%x) : (f32) -> f32
flexsn.neuron @if inputs(%x: f32) outputs(s) {
  flexsn.yield %x : f32
}

flexsn.neuron @uses_if inputs(%x: f32) outputs(s) {
  %s = flexsn.apply @if(%x) : (f32) -> f32
  flexsn.yield %s : f32
}

// A neuron with two runtime params, for the scans below.
flexsn.neuron @lif inputs(%x: f32) states(%v: f32) outputs(spike)
    params(%tau: f32 = 2.0 trainable, %v_threshold: f32 = 1.0,
           %hard: i1 = true runtime) {
  %dv = arith.divf %v, %tau : f32
  %h = arith.addf %dv, %x : f32
  %over = arith.subf %h, %v_threshold : f32
  %s = flexsn.spike %over surrogate(#flexsn.sigmoid) : f32
  %zero = arith.constant 0.0 : f32
  %v1 = arith.select %hard, %zero, %h : f32
  flexsn.yield %s, %v1 : f32, f32
}

// Scans of a neuron: state sequences, final states, optional groups.
// CHECK-LABEL: func.func @scan_callee
// CHECK-SAME:    (%[[X:[^:]+]]: memref<?x?xf32>, %[[V0:[^:]+]]: memref<?xf32>, %[[S:[^:]+]]: memref<?x?xf32>, %[[VS:[^:]+]]: memref<?x?xf32>, %[[VF:[^:]+]]: memref<?xf32>, %[[TAU:[^:]+]]: f32, %[[HARD:[^:]+]]: i1)
func.func @scan_callee(%x: memref<?x?xf32>, %v0: memref<?xf32>,
                       %s: memref<?x?xf32>, %vs: memref<?x?xf32>,
                       %vf: memref<?xf32>, %tau: f32, %hard: i1) {
  // State-sequence form with initial states.
  // CHECK: flexsn.scan @lif ins(%[[X]] : memref<?x?xf32>) inits(%[[V0]] : memref<?xf32>) params(%[[TAU]], %[[HARD]] : f32, i1) outs(%[[S]] : memref<?x?xf32>) states(%[[VS]] : memref<?x?xf32>){{$}}
  flexsn.scan @lif ins(%x : memref<?x?xf32>) inits(%v0 : memref<?xf32>)
      params(%tau, %hard : f32, i1) outs(%s : memref<?x?xf32>)
      states(%vs : memref<?x?xf32>)
  // Final-state form.
  // CHECK: flexsn.scan @lif ins(%[[X]] : memref<?x?xf32>) inits(%[[V0]] : memref<?xf32>) params(%[[TAU]], %[[HARD]] : f32, i1) outs(%[[S]] : memref<?x?xf32>) states(%[[VF]] : memref<?xf32>)
  flexsn.scan @lif ins(%x : memref<?x?xf32>) inits(%v0 : memref<?xf32>)
      params(%tau, %hard : f32, i1) outs(%s : memref<?x?xf32>)
      states(%vf : memref<?xf32>)
  // No inits (states start at zero), no states (not stored).
  // CHECK: flexsn.scan @lif ins(%[[X]] : memref<?x?xf32>) params(%[[TAU]], %[[HARD]] : f32, i1) outs(%[[S]] : memref<?x?xf32>){{$}}
  flexsn.scan @lif ins(%x : memref<?x?xf32>) params(%tau, %hard : f32, i1)
      outs(%s : memref<?x?xf32>)
  // Final states without inits.
  // CHECK: flexsn.scan @lif ins(%[[X]] : memref<?x?xf32>) params(%[[TAU]], %[[HARD]] : f32, i1) outs(%[[S]] : memref<?x?xf32>) states(%[[VF]] : memref<?xf32>)
  flexsn.scan @lif ins(%x : memref<?x?xf32>) params(%tau, %hard : f32, i1)
      outs(%s : memref<?x?xf32>) states(%vf : memref<?xf32>)
  // A neuron without runtime params takes no params group.
  // CHECK: flexsn.scan @no_params ins(%[[X]] : memref<?x?xf32>) inits(%[[V0]] : memref<?xf32>) outs(%[[S]] : memref<?x?xf32>) states(%[[VS]] : memref<?x?xf32>){{$}}
  flexsn.scan @no_params ins(%x : memref<?x?xf32>) inits(%v0 : memref<?xf32>)
      outs(%s : memref<?x?xf32>) states(%vs : memref<?x?xf32>)
  return
}

// A scan of a neuron with no outputs has no `outs` group.
// CHECK-LABEL: func.func @scan_no_outputs
// CHECK-SAME:    (%[[X:[^:]+]]: memref<?x?xf32>, %[[VF:[^:]+]]: memref<?xf32>, %[[VS:[^:]+]]: memref<?x?xf32>)
// CHECK: flexsn.scan @state_only ins(%[[X]] : memref<?x?xf32>) states(%[[VF]] : memref<?xf32>){{$}}
// CHECK: flexsn.scan @state_only ins(%[[X]] : memref<?x?xf32>) states(%[[VS]] : memref<?x?xf32>){{$}}
// CHECK: flexsn.scan ins(%[[X]] : memref<?x?xf32>) states(%[[VF]] : memref<?xf32>) {
// CHECK-NEXT: ^bb0(%{{.+}}: f32, %[[V:.+]]: f32):
// CHECK-NEXT:   flexsn.yield %[[V]] : f32
// CHECK-NEXT: }{{$}}
func.func @scan_no_outputs(%x: memref<?x?xf32>, %vf: memref<?xf32>,
                           %vs: memref<?x?xf32>) {
  flexsn.scan @state_only ins(%x : memref<?x?xf32>) states(%vf : memref<?xf32>)
  flexsn.scan @state_only ins(%x : memref<?x?xf32>) states(%vs : memref<?x?xf32>)
  flexsn.scan ins(%x : memref<?x?xf32>) states(%vf : memref<?xf32>) {
  ^bb0(%a: f32, %v: f32):
    flexsn.yield %v : f32
  }
  return
}

// Discardable attributes on a scan print last, after `attributes`, so they
// cannot be mistaken for an inline body (the first scan is written in the
// generic form).
// CHECK-LABEL: func.func @scan_attributes
// CHECK: flexsn.scan @lif ins(%{{.*}} : memref<?x?xf32>) params(%{{.*}}, %{{.*}} : f32, i1) outs(%{{.*}} : memref<?x?xf32>) attributes {tag = 1 : i32}{{$}}
// CHECK: flexsn.scan @lif ins(%{{.*}} : memref<?x?xf32>) params(%{{.*}}, %{{.*}} : f32, i1) outs(%{{.*}} : memref<?x?xf32>) attributes {note = "fast", tag = 2 : i32}{{$}}
// CHECK: flexsn.scan @state_only ins(%{{.*}} : memref<?x?xf32>) states(%{{.*}} : memref<?xf32>) attributes {tag = 3 : i32}{{$}}
// CHECK: flexsn.scan ins(%{{.*}} : memref<?x?xf32>) outs(%{{.*}} : memref<?x?xf32>) {
// CHECK-NEXT: ^bb0(%[[A:.+]]: f32):
// CHECK-NEXT:   flexsn.yield %[[A]] : f32
// CHECK-NEXT: } attributes {tag = 4 : i32}{{$}}
func.func @scan_attributes(%x: memref<?x?xf32>, %s: memref<?x?xf32>,
                           %vf: memref<?xf32>, %tau: f32, %hard: i1) {
  "flexsn.scan"(%x, %tau, %hard, %s) <{callee = @lif,
      indexing_maps = [affine_map<(t, n) -> (t, n)>, affine_map<(t, n) -> ()>,
                       affine_map<(t, n) -> ()>, affine_map<(t, n) -> (t, n)>],
      operandSegmentSizes = array<i32: 1, 0, 2, 1, 0, 0>}>
      ({}) {tag = 1 : i32} : (memref<?x?xf32>, f32, i1, memref<?x?xf32>) -> ()
  flexsn.scan @lif ins(%x : memref<?x?xf32>) params(%tau, %hard : f32, i1)
      outs(%s : memref<?x?xf32>) attributes {tag = 2 : i32, note = "fast"}
  flexsn.scan @state_only ins(%x : memref<?x?xf32>) states(%vf : memref<?xf32>)
      attributes {tag = 3 : i32}
  flexsn.scan ins(%x : memref<?x?xf32>) outs(%s : memref<?x?xf32>) {
  ^bb0(%a: f32):
    flexsn.yield %a : f32
  } attributes {tag = 4 : i32}
  return
}

// Sequences stored as f16, bf16 and i8, with f32 or reduced-precision states.
// CHECK-LABEL: func.func @scan_storage
// CHECK: flexsn.scan @lif ins(%{{.*}} : memref<?x?xf16>) inits(%{{.*}} : memref<?xf16>) params(%{{.*}}, %{{.*}} : f32, i1) outs(%{{.*}} : memref<?x?xi8>) states(%{{.*}} : memref<?x?xf16>)
// CHECK: flexsn.scan @lif ins(%{{.*}} : memref<?x?xbf16>) inits(%{{.*}} : memref<?xbf16>) params(%{{.*}}, %{{.*}} : f32, i1) outs(%{{.*}} : memref<?x?xbf16>) states(%{{.*}} : memref<?xbf16>)
// CHECK: flexsn.scan @multi ins(%{{.*}}, %{{.*}} : memref<?x?xf16>, memref<?x?xbf16>) inits(%{{.*}}, %{{.*}}, %{{.*}} : memref<?xf32>, memref<?xf16>, memref<?xbf16>) outs(%{{.*}}, %{{.*}} : memref<?x?xi8>, memref<?x?xf32>) states(%{{.*}}, %{{.*}}, %{{.*}} : memref<?xf32>, memref<?xf16>, memref<?xbf16>)
func.func @scan_storage(%x16: memref<?x?xf16>, %xb16: memref<?x?xbf16>,
                        %v16: memref<?xf16>, %vb16: memref<?xbf16>,
                        %v32: memref<?xf32>, %s8: memref<?x?xi8>,
                        %s32: memref<?x?xf32>, %sb16: memref<?x?xbf16>,
                        %vs16: memref<?x?xf16>, %tau: f32, %hard: i1) {
  flexsn.scan @lif ins(%x16 : memref<?x?xf16>) inits(%v16 : memref<?xf16>)
      params(%tau, %hard : f32, i1) outs(%s8 : memref<?x?xi8>)
      states(%vs16 : memref<?x?xf16>)
  flexsn.scan @lif ins(%xb16 : memref<?x?xbf16>) inits(%vb16 : memref<?xbf16>)
      params(%tau, %hard : f32, i1) outs(%sb16 : memref<?x?xbf16>)
      states(%vb16 : memref<?xbf16>)
  flexsn.scan @multi ins(%x16, %xb16 : memref<?x?xf16>, memref<?x?xbf16>)
      inits(%v32, %v16, %vb16 : memref<?xf32>, memref<?xf16>, memref<?xbf16>)
      outs(%s8, %s32 : memref<?x?xi8>, memref<?x?xf32>)
      states(%v32, %v16, %vb16 : memref<?xf32>, memref<?xf16>, memref<?xbf16>)
  return
}

// A strided time dimension (a leading-dimension stride) needs no copy.
// CHECK-LABEL: func.func @scan_strided
// CHECK: flexsn.scan @no_params ins(%{{.*}} : memref<?x?xf32, strided<[?, 1], offset: ?>>) outs(%{{.*}} : memref<?x?xf32, strided<[?, 1], offset: ?>>) states(%{{.*}} : memref<?xf32, strided<[1], offset: ?>>)
func.func @scan_strided(%x: memref<?x?xf32, strided<[?, 1], offset: ?>>,
                        %s: memref<?x?xf32, strided<[?, 1], offset: ?>>,
                        %v: memref<?xf32, strided<[1], offset: ?>>) {
  flexsn.scan @no_params ins(%x : memref<?x?xf32, strided<[?, 1], offset: ?>>)
      outs(%s : memref<?x?xf32, strided<[?, 1], offset: ?>>)
      states(%v : memref<?xf32, strided<[1], offset: ?>>)
  return
}

// Sequences [T, N1, N2] with states [N1, N2], and static dims that agree.
// CHECK-LABEL: func.func @scan_3d
// CHECK: flexsn.scan @no_params ins(%{{.*}} : memref<?x?x?xf32>) inits(%{{.*}} : memref<?x?xf32>) outs(%{{.*}} : memref<?x?x?xf32>) states(%{{.*}} : memref<?x?x?xf32>){{$}}
// CHECK: flexsn.scan @no_params ins(%{{.*}} : memref<?x4x8xf32>) inits(%{{.*}} : memref<?x8xf32>) outs(%{{.*}} : memref<16x?x8xf32>) states(%{{.*}} : memref<4x8xf32>)
func.func @scan_3d(%x: memref<?x?x?xf32>, %v0: memref<?x?xf32>,
                   %s: memref<?x?x?xf32>, %vs: memref<?x?x?xf32>,
                   %xs: memref<?x4x8xf32>, %v0s: memref<?x8xf32>,
                   %ss: memref<16x?x8xf32>, %vf: memref<4x8xf32>) {
  flexsn.scan @no_params ins(%x : memref<?x?x?xf32>) inits(%v0 : memref<?x?xf32>)
      outs(%s : memref<?x?x?xf32>) states(%vs : memref<?x?x?xf32>)
  flexsn.scan @no_params ins(%xs : memref<?x4x8xf32>) inits(%v0s : memref<?x8xf32>)
      outs(%ss : memref<16x?x8xf32>) states(%vf : memref<4x8xf32>)
  return
}

// An inline body, run in reverse, with a runtime param and reductions summed
// over every step and neuron (a backward pass accumulating a param gradient).
// CHECK-LABEL: func.func @scan_inline_reverse
// CHECK: flexsn.scan reverse ins(%{{.*}}, %{{.*}} : memref<?x?xf32>, memref<?x?xf16>) inits(%{{.*}} : memref<?xf32>) params(%{{.*}}, %{{.*}} : f32, i1) outs(%{{.*}} : memref<?x?xf32>) states(%{{.*}} : memref<?xf32>) reductions(%{{.*}}, %{{.*}} : memref<f32>, memref<f32>) {
// CHECK-NEXT: ^bb0(%[[GS:.+]]: f32, %[[H:.+]]: f32, %[[G:.+]]: f32, %[[TAU:.+]]: f32, %[[DETACH:.+]]: i1):
// CHECK:        %[[PSI:.+]] = flexsn.surrogate_grad %[[H]] surrogate(#flexsn.sigmoid) : f32
// CHECK:        flexsn.yield %{{.*}}, %{{.*}}, %{{.*}}, %[[PSI]] : f32, f32, f32, f32
// CHECK-NEXT: }
func.func @scan_inline_reverse(%grad_s: memref<?x?xf32>, %h: memref<?x?xf16>,
                               %g0: memref<?xf32>, %grad_x: memref<?x?xf32>,
                               %g_final: memref<?xf32>, %grad_tau: memref<f32>,
                               %sum_psi: memref<f32>, %tau: f32, %detach: i1) {
  flexsn.scan reverse ins(%grad_s, %h : memref<?x?xf32>, memref<?x?xf16>)
      inits(%g0 : memref<?xf32>) params(%tau, %detach : f32, i1)
      outs(%grad_x : memref<?x?xf32>) states(%g_final : memref<?xf32>)
      reductions(%grad_tau, %sum_psi : memref<f32>, memref<f32>) {
  ^bb0(%gs: f32, %hv: f32, %g: f32, %t: f32, %d: i1):
    %psi = flexsn.surrogate_grad %hv surrogate(#flexsn.sigmoid<alpha = 4.0>) : f32
    %a = arith.mulf %gs, %psi : f32
    %one = arith.constant 1.0 : f32
    %keep = arith.select %d, %one, %psi : f32
    %b = arith.mulf %g, %keep : f32
    %gh = arith.addf %a, %b : f32
    %gx = arith.divf %gh, %t : f32
    %gt = arith.mulf %gx, %hv : f32
    flexsn.yield %gx, %gh, %gt, %psi : f32, f32, f32, f32
  }
  return
}

// An inline body with no states and no params.
// CHECK-LABEL: func.func @scan_inline_minimal
// CHECK: flexsn.scan ins(%{{.*}} : memref<?x?xbf16>) outs(%{{.*}} : memref<?x?xi8>) {
// CHECK:   flexsn.spike
func.func @scan_inline_minimal(%x: memref<?x?xbf16>, %s: memref<?x?xi8>) {
  flexsn.scan ins(%x : memref<?x?xbf16>) outs(%s : memref<?x?xi8>) {
  ^bb0(%a: f32):
    %s0 = flexsn.spike %a surrogate(#flexsn.straight_through) : f32
    flexsn.yield %s0 : f32
  }
  return
}

// The per-step ops are usable outside a neuron body too (e.g. in tests).
// CHECK-LABEL: func.func @step_ops
// CHECK: flexsn.spike %{{.*}} surrogate(#flexsn.erf<alpha = 1.5>) : f32
// CHECK: flexsn.surrogate_grad %{{.*}} surrogate(#flexsn.q_pseudo_spike) : f32
// CHECK: flexsn.detach %{{.*}} : f32
func.func @step_ops(%x: f32) -> (f32, f32, f32) {
  %s = flexsn.spike %x surrogate(#flexsn.erf<alpha = 1.5>) : f32
  %g = flexsn.surrogate_grad %x surrogate(#flexsn.q_pseudo_spike<alpha = 2>) : f32
  %d = flexsn.detach %s : f32
  return %s, %g, %d : f32, f32, f32
}

// Block declarations: every pre-op, connection, operand, readout and storage
// type; the default operand (the block's input) is not printed.
// CHECK: flexsn.block @block_plain neuron(@lif) pre(none) connection(none) readout(none) storage(f32)
// CHECK: flexsn.block @block_bn neuron(@lif) pre(channel_affine) connection(add) readout(none) storage(f16)
// CHECK: flexsn.block @block_and neuron(@lif) pre(affine) connection(and) readout(none) storage(bf16)
// CHECK: flexsn.block @block_count neuron(@lif) pre(affine) connection(iand) readout(sum) storage(f32)
// CHECK: flexsn.block @block_sew neuron(@lif) pre(channel_affine) connection(iand, skip) readout(none) storage(f32)
// CHECK: flexsn.block @block_input neuron(@lif) pre(none) connection(add) readout(none) storage(f32)
flexsn.block @block_plain neuron(@lif) pre(none) connection(none) readout(none) storage(f32)
flexsn.block @block_bn neuron(@lif) pre(channel_affine) connection(add) readout(none) storage(f16)
flexsn.block @block_and neuron(@lif) pre(affine) connection(and) readout(none) storage(bf16)
flexsn.block @block_count neuron(@lif) pre(affine) connection(iand) readout(sum) storage(f32)
flexsn.block @block_sew neuron(@lif) pre(channel_affine) connection(iand, skip) readout(none) storage(f32)
flexsn.block @block_input neuron(@lif) pre(none) connection(add, input) readout(none) storage(f32)
