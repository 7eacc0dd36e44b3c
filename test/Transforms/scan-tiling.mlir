// RUN: flexsn-opt %s --transform-interpreter --split-input-file \
// RUN:   --verify-diagnostics | FileCheck %s

// flexsn.scan implements TilingInterface: a tile of the neuron dimensions
// is a scan over the operands' matching slices. Time is sequential, and a
// reduction overwrites its destination with a sum over the dimensions it
// drops, so neither time nor those dimensions are tiled.

// A per-channel weight and a per-channel sum, tiled along the channels:
// every operand is sliced along c through its map, the scalar gain is not.
// CHECK-LABEL: func.func @channels(
// CHECK-SAME:    %[[X:[^:]+]]: tensor<4x8x16xf32>, %[[W:[^:]+]]: tensor<8xf32>, %[[G:[^:]+]]: tensor<f32>,
// CHECK-SAME:    %[[Y:[^:]+]]: tensor<4x8x16xf32>, %[[R:[^:]+]]: tensor<8xf32>)
// CHECK:         %[[LOOP:.+]]:2 = scf.for %[[C:.+]] = %{{.+}} to %{{.+}} step %{{.+}} iter_args(%[[YA:.+]] = %[[Y]], %[[RA:.+]] = %[[R]])
// CHECK-DAG:       %[[XS:.+]] = tensor.extract_slice %[[X]][0, %[[C]], 0] [4, 2, 16] [1, 1, 1]
// CHECK-DAG:       %[[WS:.+]] = tensor.extract_slice %[[W]][%[[C]]] [2] [1]
// CHECK-DAG:       %[[YS:.+]] = tensor.extract_slice %[[YA]][0, %[[C]], 0] [4, 2, 16] [1, 1, 1]
// CHECK-DAG:       %[[RS:.+]] = tensor.extract_slice %[[RA]][%[[C]]] [2] [1]
// CHECK:           %[[T:.+]]:2 = flexsn.scan ins(%[[XS]], %[[WS]], %[[G]] : tensor<4x2x16xf32>, tensor<2xf32>, tensor<f32>) outs(%[[YS]] : tensor<4x2x16xf32>) reductions(%[[RS]] : tensor<2xf32>)
// CHECK:             arith.mulf
// CHECK:           tensor.insert_slice %[[T]]#0 into %[[YA]][0, %[[C]], 0] [4, 2, 16] [1, 1, 1]
// CHECK:           tensor.insert_slice %[[T]]#1 into %[[RA]][%[[C]]] [2] [1]
// CHECK:         return %[[LOOP]]#0, %[[LOOP]]#1
func.func @channels(%x: tensor<4x8x16xf32>, %w: tensor<8xf32>, %g: tensor<f32>,
                    %y: tensor<4x8x16xf32>, %r: tensor<8xf32>)
    -> (tensor<4x8x16xf32>, tensor<8xf32>) {
  %out, %sum = flexsn.scan ins(%x, %w, %g : tensor<4x8x16xf32>, tensor<8xf32>, tensor<f32>)
      outs(%y : tensor<4x8x16xf32>) reductions(%r : tensor<8xf32>)
      indexing_maps = [affine_map<(t, c, n) -> (t, c, n)>, affine_map<(t, c, n) -> (c)>,
                       affine_map<(t, c, n) -> ()>, affine_map<(t, c, n) -> (t, c, n)>,
                       affine_map<(t, c, n) -> (c)>] {
  ^bb0(%xi: f32, %wi: f32, %gi: f32):
    %p = arith.mulf %xi, %wi : f32
    %q = arith.mulf %p, %gi : f32
    flexsn.yield %q, %q : f32, f32
  }
  return %out, %sum : tensor<4x8x16xf32>, tensor<8xf32>
}

module attributes {transform.with_named_sequence} {
  transform.named_sequence @__transform_main(%root: !transform.any_op {transform.readonly}) {
    %scan = transform.structured.match ops{["flexsn.scan"]} in %root
        : (!transform.any_op) -> !transform.any_op
    %tiled, %loop = transform.structured.tile_using_for %scan tile_sizes [0, 2, 0]
        : (!transform.any_op) -> (!transform.any_op, !transform.any_op)
    transform.yield
  }
}

// -----

// A neuron's scan in the buffer form, tiled along both neuron dimensions:
// sequences slice (t, n0, n1), initial and final states (n0, n1).
// CHECK-LABEL: func.func @neuron_buffers(
// CHECK:         scf.for %[[I:[^ ]+]] =
// CHECK:           scf.for %[[J:[^ ]+]] =
// CHECK-DAG:         %[[XS:.+]] = memref.subview %{{.+}}[0, %[[I]], %[[J]]] [%{{.+}}, %{{.+}}, %{{.+}}] [1, 1, 1]
// CHECK-DAG:         %[[VS:.+]] = memref.subview %{{.+}}[%[[I]], %[[J]]] [%{{.+}}, %{{.+}}] [1, 1]
// CHECK:             flexsn.scan @lif ins(%[[XS]] : memref<?x?x?xf32, strided<[?, ?, 1], offset: ?>>) inits({{.*}}) outs({{.*}}) states(%{{.+}} : memref<?x?xf32, strided<[?, 1], offset: ?>>){{$}}
flexsn.neuron @lif inputs(%x: f32) states(%v: f32) outputs(s) {
  %h = arith.addf %v, %x : f32
  flexsn.yield %h, %h : f32, f32
}

func.func @neuron_buffers(%x: memref<?x?x?xf32>, %v0: memref<?x?xf32>,
                          %s: memref<?x?x?xf32>, %v: memref<?x?xf32>) {
  flexsn.scan @lif ins(%x : memref<?x?x?xf32>) inits(%v0 : memref<?x?xf32>)
      outs(%s : memref<?x?x?xf32>) states(%v : memref<?x?xf32>)
  return
}

module attributes {transform.with_named_sequence} {
  transform.named_sequence @__transform_main(%root: !transform.any_op {transform.readonly}) {
    %scan = transform.structured.match ops{["flexsn.scan"]} in %root
        : (!transform.any_op) -> !transform.any_op
    %tiled, %l0, %l1 = transform.structured.tile_using_for %scan tile_sizes [0, 4, 32]
        : (!transform.any_op) -> (!transform.any_op, !transform.any_op, !transform.any_op)
    transform.yield
  }
}

// -----

// Time is sequential: it is never tiled.
func.func @time(%x: tensor<4x8xf32>, %y: tensor<4x8xf32>) -> tensor<4x8xf32> {
  // The upstream tiling driver adds its own two errors.
  // expected-error@+3 {{'flexsn.scan' op cannot be tiled along domain dimension d0: time is sequential; only the neuron dimensions every reduction keeps are tiled}}
  // expected-error@+2 {{faild to tile operation}}
  // expected-error@+1 {{failed to generate tiling loops}}
  %out = flexsn.scan ins(%x : tensor<4x8xf32>) outs(%y : tensor<4x8xf32>) {
  ^bb0(%a: f32):
    flexsn.yield %a : f32
  }
  return %out : tensor<4x8xf32>
}

module attributes {transform.with_named_sequence} {
  transform.named_sequence @__transform_main(%root: !transform.any_op {transform.readonly}) {
    %scan = transform.structured.match ops{["flexsn.scan"]} in %root
        : (!transform.any_op) -> !transform.any_op
    %tiled, %loop = transform.structured.tile_using_for %scan tile_sizes [2, 0]
        : (!transform.any_op) -> (!transform.any_op, !transform.any_op)
    transform.yield
  }
}

// -----

// A per-channel sum adds over n: n is not tiled.
func.func @reduced(%x: tensor<4x8x16xf32>, %y: tensor<4x8x16xf32>, %r: tensor<8xf32>)
    -> (tensor<4x8x16xf32>, tensor<8xf32>) {
  // expected-error@+3 {{'flexsn.scan' op cannot be tiled along domain dimension d2: a reduction sums over it; only the neuron dimensions every reduction keeps are tiled}}
  // expected-error@+2 {{faild to tile operation}}
  // expected-error@+1 {{failed to generate tiling loops}}
  %out, %sum = flexsn.scan ins(%x : tensor<4x8x16xf32>) outs(%y : tensor<4x8x16xf32>)
      reductions(%r : tensor<8xf32>)
      indexing_maps = [affine_map<(t, c, n) -> (t, c, n)>, affine_map<(t, c, n) -> (t, c, n)>,
                       affine_map<(t, c, n) -> (c)>] {
  ^bb0(%a: f32):
    flexsn.yield %a, %a : f32, f32
  }
  return %out, %sum : tensor<4x8x16xf32>, tensor<8xf32>
}

module attributes {transform.with_named_sequence} {
  transform.named_sequence @__transform_main(%root: !transform.any_op {transform.readonly}) {
    %scan = transform.structured.match ops{["flexsn.scan"]} in %root
        : (!transform.any_op) -> !transform.any_op
    %tiled, %loop = transform.structured.tile_using_for %scan tile_sizes [0, 0, 4]
        : (!transform.any_op) -> (!transform.any_op, !transform.any_op)
    transform.yield
  }
}
