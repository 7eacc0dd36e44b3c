// RUN: flexsn-opt %s --inline | FileCheck %s
// RUN: flexsn-opt %s --convert-flexsn-to-scf | FileCheck %s --check-prefix=SCF

// flexsn.apply is a call and a neuron is callable: MLIR's inliner replaces
// each application by the applied neuron's body, through chains of
// applications, with the yielded values as the results. The applied neurons
// stay (public symbols).
// CHECK-LABEL: flexsn.neuron @leak
// CHECK:         arith.mulf
// CHECK-LABEL: flexsn.neuron @pair
// CHECK-SAME:    states(%[[V:[^:]+]]: f32, %[[W:[^:]+]]: f32)
// CHECK-NOT:     flexsn.apply
// CHECK:         %[[Q:.*]] = arith.constant 2.500000e-01 : f32
// CHECK:         %[[KV:.*]] = arith.mulf %[[V]], %[[Q]] : f32
// CHECK:         %[[V1:.*]] = arith.addf %[[KV]], %{{.*}} : f32
// CHECK:         %[[KW:.*]] = arith.mulf %[[W]], %[[Q]] : f32
// CHECK:         %[[W1:.*]] = arith.addf %[[KW]], %[[V1]] : f32
// CHECK:         flexsn.yield %[[W1]], %[[V1]], %[[W1]] : f32, f32, f32
// CHECK-LABEL: flexsn.neuron @outer
// CHECK-NOT:     flexsn.apply
// CHECK-COUNT-2: arith.mulf
// CHECK:         %[[S:.*]] = flexsn.spike
// CHECK:         flexsn.yield %[[S]]
flexsn.neuron @leak inputs(%x: f32) states(%v: f32) outputs(y) params(%k: f32 = 0.5) {
  %kv = arith.mulf %v, %k : f32
  %v1 = arith.addf %kv, %x : f32
  flexsn.yield %v1, %v1 : f32, f32
}

flexsn.neuron @pair inputs(%x: f32) states(%v: f32, %w: f32) outputs(y) {
  %k = arith.constant 0.25 : f32
  %y, %v1 = flexsn.apply @leak(%x, %v, %k) : (f32, f32, f32) -> (f32, f32)
  %z, %w1 = flexsn.apply @leak(%y, %w, %k) : (f32, f32, f32) -> (f32, f32)
  flexsn.yield %z, %v1, %w1 : f32, f32, f32
}

flexsn.neuron @outer inputs(%x: f32) states(%a: f32, %b: f32) outputs(y) {
  %y, %a1, %b1 = flexsn.apply @pair(%x, %a, %b) : (f32, f32, f32) -> (f32, f32, f32)
  %s = flexsn.spike %y surrogate(#flexsn.atan) : f32
  flexsn.yield %s, %a1, %b1 : f32, f32, f32
}

// The lowering inlines the chain of applications before emitting the step.
// SCF-LABEL: func.func @scan_outer
// SCF-NOT:     flexsn.apply
// SCF-COUNT-2: arith.mulf
// SCF:         flexsn.spike
func.func @scan_outer(%x: memref<?x?xf32>, %y: memref<?x?xf32>) {
  flexsn.scan @outer ins(%x : memref<?x?xf32>) outs(%y : memref<?x?xf32>)
  return
}

// A scan's inline body may apply a neuron too (producer fusion builds such
// bodies): the inliner and the lowering inline it, through the chain.
// CHECK-LABEL: func.func @inline_body
// CHECK:         flexsn.scan ins(
// CHECK-NOT:       flexsn.apply
// CHECK-COUNT-2:   arith.mulf
// CHECK:           flexsn.spike
// SCF-LABEL: func.func @inline_body
// SCF-NOT:     flexsn.apply
// SCF:         arith.addf %{{.*}}, %{{.*}} : f32
// SCF-COUNT-2: arith.mulf
// SCF:         flexsn.spike
func.func @inline_body(%x: memref<?x?xf32>, %b: memref<?xf32>,
                       %y: memref<?x?xf32>) {
  flexsn.scan ins(%x, %b : memref<?x?xf32>, memref<?xf32>)
      outs(%y : memref<?x?xf32>)
      indexing_maps = [affine_map<(t, n) -> (t, n)>, affine_map<(t, n) -> (n)>,
                       affine_map<(t, n) -> (t, n)>] {
  ^bb0(%xi: f32, %bi: f32, %a: f32, %c: f32):
    %in = arith.addf %xi, %bi : f32
    %s, %a1, %c1 = flexsn.apply @outer(%in, %a, %c) : (f32, f32, f32) -> (f32, f32, f32)
    flexsn.yield %s, %a1, %c1 : f32, f32, f32
  }
  return
}
