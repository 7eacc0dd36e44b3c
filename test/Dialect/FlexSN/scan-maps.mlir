// RUN: flexsn-opt %s | FileCheck %s
// RUN: flexsn-opt %s | flexsn-opt | FileCheck %s
// RUN: flexsn-opt %s --mlir-print-op-generic | flexsn-opt | FileCheck %s

// The indexing maps of flexsn.scan, in both forms: printed only where the
// operands' ranks do not imply them.

// The maps of @broadcasts, printed as aliases first.
// CHECK-DAG:   #[[$SEQ:.+]] = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
// CHECK-DAG:   #[[$CHANNEL:.+]] = affine_map<(d0, d1, d2) -> (d1)>
// CHECK-DAG:   #[[$NEURON:.+]] = affine_map<(d0, d1, d2) -> (d1, d2)>
// CHECK-DAG:   #[[$SCALAR:.+]] = affine_map<(d0, d1, d2) -> ()>
// CHECK-DAG:   #[[$STEP:.+]] = affine_map<(d0, d1, d2) -> (d0)>

flexsn.neuron @lif inputs(%x: f32) states(%v: f32) outputs(s) {
  flexsn.yield %x, %v : f32, f32
}

// Default maps: an input and output sequence, a per-neuron initial state, a
// final state. Nothing is printed.
// CHECK-LABEL: func.func @implied
// CHECK:       flexsn.scan @lif ins(%{{.*}} : memref<?x?x?xf32>) inits(%{{.*}} : memref<?x?xf32>) outs(%{{.*}} : memref<?x?x?xf32>) states(%{{.*}} : memref<?x?xf32>){{$}}
func.func @implied(%x: memref<?x?x?xf32>, %v0: memref<?x?xf32>,
                   %s: memref<?x?x?xf32>, %v: memref<?x?xf32>) {
  flexsn.scan @lif ins(%x : memref<?x?x?xf32>) inits(%v0 : memref<?x?xf32>)
      outs(%s : memref<?x?x?xf32>) states(%v : memref<?x?xf32>)
  return
}

// Written out, the implied maps are still not printed.
// CHECK-LABEL: func.func @implied_written
// CHECK:       flexsn.scan @lif ins(%{{.*}} : memref<?x?xf32>) outs(%{{.*}} : memref<?x?xf32>) states(%{{.*}} : memref<?x?xf32>){{$}}
func.func @implied_written(%x: memref<?x?xf32>, %s: memref<?x?xf32>,
                           %v: memref<?x?xf32>) {
  flexsn.scan @lif ins(%x : memref<?x?xf32>) outs(%s : memref<?x?xf32>)
      states(%v : memref<?x?xf32>)
      indexing_maps = [affine_map<(t, n) -> (t, n)>, affine_map<(t, n) -> (t, n)>,
                       affine_map<(t, n) -> (t, n)>]
  return
}

// Broadcasts: a per-channel weight, a per-neuron bias, a scalar gain, a
// scalar initial state; a per-channel and a per-step reduction. Per-state
// choice: the first state is final, the second a sequence.
// CHECK-LABEL: func.func @broadcasts
// CHECK:       flexsn.scan ins(%{{.*}} : memref<?x?x?xf16>, memref<?xf32>, memref<?x?xf32>, memref<f32>) inits(%{{.*}} : memref<f32>, memref<?x?xf32>)
// CHECK-SAME:    outs(%{{.*}} : memref<?x?x?xi8>) states(%{{.*}} : memref<?x?xf32>, memref<?x?x?xf32>) reductions(%{{.*}} : memref<?xf32>, memref<?xf32>)
// CHECK-SAME:    indexing_maps = [#[[$SEQ]], #[[$CHANNEL]], #[[$NEURON]], #[[$SCALAR]], #[[$SCALAR]], #[[$NEURON]], #[[$SEQ]], #[[$NEURON]], #[[$SEQ]], #[[$CHANNEL]], #[[$STEP]]] {
func.func @broadcasts(%x: memref<?x?x?xf16>, %w: memref<?xf32>,
                      %b: memref<?x?xf32>, %g: memref<f32>, %u0: memref<f32>,
                      %v0: memref<?x?xf32>, %s: memref<?x?x?xi8>,
                      %u: memref<?x?xf32>, %v: memref<?x?x?xf32>,
                      %per_channel: memref<?xf32>, %per_step: memref<?xf32>) {
  flexsn.scan ins(%x, %w, %b, %g : memref<?x?x?xf16>, memref<?xf32>, memref<?x?xf32>, memref<f32>)
      inits(%u0, %v0 : memref<f32>, memref<?x?xf32>)
      outs(%s : memref<?x?x?xi8>)
      states(%u, %v : memref<?x?xf32>, memref<?x?x?xf32>)
      reductions(%per_channel, %per_step : memref<?xf32>, memref<?xf32>)
      indexing_maps = [affine_map<(t, c, n) -> (t, c, n)>,
                       affine_map<(t, c, n) -> (c)>,
                       affine_map<(t, c, n) -> (c, n)>,
                       affine_map<(t, c, n) -> ()>,
                       affine_map<(t, c, n) -> ()>,
                       affine_map<(t, c, n) -> (c, n)>,
                       affine_map<(t, c, n) -> (t, c, n)>,
                       affine_map<(t, c, n) -> (c, n)>,
                       affine_map<(t, c, n) -> (t, c, n)>,
                       affine_map<(t, c, n) -> (c)>,
                       affine_map<(t, c, n) -> (t)>] {
  ^bb0(%xi: f32, %wi: f32, %bi: f32, %gi: f32, %ui: f32, %vi: f32):
    %p = arith.mulf %xi, %wi : f32
    %q = arith.addf %p, %bi : f32
    %r = arith.mulf %q, %gi : f32
    %u1 = arith.addf %ui, %r : f32
    %v1 = arith.addf %vi, %u1 : f32
    flexsn.yield %r, %u1, %v1, %r, %r : f32, f32, f32, f32, f32
  }
  return
}

// The value form: one result per destination, typed like it.
// CHECK-LABEL: func.func @values
// CHECK:       %{{.*}}:2 = flexsn.scan @lif ins(%{{.*}} : tensor<?x?xf32>) inits(%{{.*}} : tensor<?xf32>) outs(%{{.*}} : tensor<?x?xi8>) states(%{{.*}} : tensor<?xf32>)
// CHECK-SAME:    attributes {tag}{{$}}
// CHECK:       flexsn.scan reverse ins(%{{.*}} : tensor<4x?xbf16>, tensor<?xf32>) params(%{{.*}} : f32) outs(%{{.*}} : tensor<4x?xf32>) reductions(%{{.*}} : tensor<f32>)
// CHECK-SAME:    indexing_maps = [#{{.+}}, #{{.+}}, #{{.+}}, #{{.+}}, #{{.+}}] {
func.func @values(%x: tensor<?x?xf32>, %v0: tensor<?xf32>, %s: tensor<?x?xi8>,
                  %v: tensor<?xf32>, %y: tensor<4x?xbf16>, %w: tensor<?xf32>,
                  %p: f32, %o: tensor<4x?xf32>, %r: tensor<f32>)
    -> (tensor<?x?xi8>, tensor<?xf32>, tensor<4x?xf32>, tensor<f32>) {
  %spikes, %final = flexsn.scan @lif ins(%x : tensor<?x?xf32>)
      inits(%v0 : tensor<?xf32>) outs(%s : tensor<?x?xi8>)
      states(%v : tensor<?xf32>) attributes {tag}
  %out, %sum = flexsn.scan reverse ins(%y, %w : tensor<4x?xbf16>, tensor<?xf32>)
      params(%p : f32) outs(%o : tensor<4x?xf32>) reductions(%r : tensor<f32>)
      indexing_maps = [affine_map<(t, n) -> (t, n)>, affine_map<(t, n) -> (n)>,
                       affine_map<(t, n) -> ()>, affine_map<(t, n) -> (t, n)>,
                       affine_map<(t, n) -> ()>] {
  ^bb0(%yi: f32, %wi: f32, %pi: f32):
    %m = arith.mulf %yi, %wi : f32
    %n = arith.mulf %m, %pi : f32
    flexsn.yield %n, %m : f32, f32
  }
  return %spikes, %final, %out, %sum
      : tensor<?x?xi8>, tensor<?xf32>, tensor<4x?xf32>, tensor<f32>
}
