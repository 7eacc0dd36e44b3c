// --flexsn-to-torch: each neuron's step as Python over PyTorch tensors (the
// Python layer's test_torch_step.py checks it against the kernels); an op
// without a PyTorch form is an error naming it.
// RUN: flexsn-translate --flexsn-to-torch %s | FileCheck %s
// RUN: not flexsn-translate --flexsn-to-torch %S/Inputs/torch-step-unsupported.mlir 2>&1 | FileCheck %s --check-prefix=NOFORM

// CHECK: def step_0(F, inputs, states, params):
// CHECK-NEXT: """@if_like: ([outputs], [new states]) of one step."""
// CHECK-NEXT: v0 = inputs[0]
// CHECK-NEXT: v1 = states[0]
// CHECK-NEXT: v2 = params.get("v_threshold", 1.5)
// CHECK-NEXT: v3 = params.get("soft", False)
// CHECK-NEXT: v4 = (v1 + v0)
// CHECK-NEXT: v5 = (v4 - v2)
// CHECK-NEXT: v6 = F.spike(v5, "#flexsn.atan<alpha = 3.0>")
// CHECK-NEXT: v7 = 1.0
// CHECK-NEXT: v8 = (v7 - v6)
// CHECK-NEXT: v9 = (v8 * v4)
// CHECK-NEXT: v10 = F.cmpf("olt", v4, v7)
// CHECK-NEXT: v11 = F.select(v3, v9, v4)
// CHECK-NEXT: v12 = F.select(v10, v11, v9)
// CHECK-NEXT: v13 = F.exp(v12)
// CHECK-NEXT: v14 = (-v13)
// CHECK-NEXT: return [v6], [v14]
// CHECK: def step_1(F, inputs, states, params):
// CHECK: return [v0], []
// CHECK: NEURONS = {
// CHECK-NEXT: "if_like": step_0,
// CHECK-NEXT: "relay": step_1,
// CHECK-NEXT: }

flexsn.neuron @if_like inputs(%x: f32) states(%v: f32) outputs(spike)
    params(%v_threshold: f32 = 1.5 runtime, %soft: i1 = false) {
  %h = arith.addf %v, %x : f32
  %d = arith.subf %h, %v_threshold : f32
  %s = flexsn.spike %d surrogate(#flexsn.atan<alpha = 3.0>) : f32
  %one = arith.constant 1.0 : f32
  %keep = arith.subf %one, %s : f32
  %kept = arith.mulf %keep, %h : f32
  %low = arith.cmpf olt, %h, %one : f32
  %a = arith.select %soft, %kept, %h : f32
  %b = arith.select %low, %a, %kept : f32
  %e = math.exp %b : f32
  %n = arith.negf %e : f32
  flexsn.yield %s, %n : f32, f32
}

flexsn.neuron @relay inputs(%x: f32) states() outputs(y) {
  flexsn.yield %x : f32
}

// NOFORM: error: math.cbrt has no PyTorch form in flexsn-to-torch
