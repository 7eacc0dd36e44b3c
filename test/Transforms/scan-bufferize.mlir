// RUN: flexsn-opt %s --one-shot-bufferize=bufferize-function-boundaries \
// RUN:   --split-input-file | FileCheck %s

// One-shot bufferization turns the value form of flexsn.scan into the
// buffer form: the same scan, on the operands' buffers, without results.

// Destinations are only written: fresh ones become allocations, never
// copies, and the scan's results are those buffers.
// CHECK-LABEL: func.func @fresh_destinations(
// CHECK-SAME:    %[[X:[^:]+]]: memref<?x?x?xf32, strided<[?, ?, ?], offset: ?>>,
// CHECK-SAME:    %[[W:[^:]+]]: memref<?xf32, strided<[?], offset: ?>>)
// CHECK-NOT:     memref.copy
// CHECK:         %[[Y:.+]] = memref.alloc({{.*}}) {{.*}} : memref<?x?x?xf32>
// CHECK:         %[[G:.+]] = memref.alloc({{.*}}) {{.*}} : memref<?xf32>
// CHECK-NOT:     memref.copy
// CHECK:         flexsn.scan ins(%[[X]], %[[W]] : {{.*}}) outs(%[[Y]] : memref<?x?x?xf32>) reductions(%[[G]] : memref<?xf32>) indexing_maps = [#{{.+}}, #{{.+}}, #{{.+}}, #{{.+}}] {
// CHECK:           arith.mulf
// CHECK:         }
// CHECK-NOT:     memref.copy
// CHECK:         return %[[Y]], %[[G]]
func.func @fresh_destinations(%x: tensor<?x?x?xf32>, %w: tensor<?xf32>)
    -> (tensor<?x?x?xf32>, tensor<?xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %t = tensor.dim %x, %c0 : tensor<?x?x?xf32>
  %c = tensor.dim %x, %c1 : tensor<?x?x?xf32>
  %n = tensor.dim %x, %c2 : tensor<?x?x?xf32>
  %ey = tensor.empty(%t, %c, %n) : tensor<?x?x?xf32>
  %eg = tensor.empty(%c) : tensor<?xf32>
  %y, %g = flexsn.scan ins(%x, %w : tensor<?x?x?xf32>, tensor<?xf32>)
      outs(%ey : tensor<?x?x?xf32>) reductions(%eg : tensor<?xf32>)
      indexing_maps = [affine_map<(t, c, n) -> (t, c, n)>, affine_map<(t, c, n) -> (c)>,
                       affine_map<(t, c, n) -> (t, c, n)>, affine_map<(t, c, n) -> (c)>] {
  ^bb0(%xi: f32, %wi: f32):
    %p = arith.mulf %xi, %wi : f32
    flexsn.yield %p, %p : f32, f32
  }
  return %y, %g : tensor<?x?x?xf32>, tensor<?xf32>
}

// -----

// A writable destination (a function argument) is written in place, and
// the neuron's scan keeps its callee, params and attributes.
// CHECK-LABEL: func.func @in_place(
// CHECK-SAME:    %[[X:[^:]+]]: memref<?x?xf16, strided<[?, ?], offset: ?>>,
// CHECK-SAME:    %[[V0:[^:]+]]: memref<?xf32, strided<[?], offset: ?>>,
// CHECK-SAME:    %[[S:[^:]+]]: memref<?x?xi8, strided<[?, ?], offset: ?>>,
// CHECK-SAME:    %[[V:[^:]+]]: memref<?xf32, strided<[?], offset: ?>>, %[[TAU:[^:]+]]: f32)
// CHECK-NOT:     memref.alloc
// CHECK-NOT:     memref.copy
// CHECK:         flexsn.scan reverse @lif ins(%[[X]] : {{.*}}) inits(%[[V0]] : {{.*}}) params(%[[TAU]] : f32) outs(%[[S]] : {{.*}}) states(%[[V]] : {{.*}}) attributes {tag = 7 : i32}{{$}}
// CHECK-NEXT:    return %[[S]], %[[V]]
flexsn.neuron @lif inputs(%x: f32) states(%v: f32) outputs(s)
    params(%tau: f32 = 2.0 runtime) {
  %h = arith.addf %v, %x : f32
  flexsn.yield %h, %h : f32, f32
}

func.func @in_place(%x: tensor<?x?xf16>, %v0: tensor<?xf32>, %s: tensor<?x?xi8>,
                    %v: tensor<?xf32>, %tau: f32) -> (tensor<?x?xi8>, tensor<?xf32>) {
  %spikes, %final = flexsn.scan reverse @lif ins(%x : tensor<?x?xf16>)
      inits(%v0 : tensor<?xf32>) params(%tau : f32) outs(%s : tensor<?x?xi8>)
      states(%v : tensor<?xf32>) attributes {tag = 7 : i32}
  return %spikes, %final : tensor<?x?xi8>, tensor<?xf32>
}

// -----

// A destination read after the scan keeps its old value: the scan writes a
// new buffer, with no copy of the old contents (it overwrites them all).
// CHECK-LABEL: func.func @destination_read_later(
// CHECK-SAME:    %[[X:[^:]+]]: memref<?x?xf32, strided<[?, ?], offset: ?>>,
// CHECK-SAME:    %[[D:[^:]+]]: memref<?x?xf32, strided<[?, ?], offset: ?>>)
// CHECK:         %[[FRESH:.+]] = memref.alloc
// CHECK-NOT:     memref.copy
// CHECK:         flexsn.scan ins(%[[X]] : {{.*}}) outs(%[[FRESH]] : {{.*}})
// CHECK:         return %[[FRESH]], %[[D]]
func.func @destination_read_later(%x: tensor<?x?xf32>, %d: tensor<?x?xf32>)
    -> (tensor<?x?xf32>, tensor<?x?xf32>) {
  %y = flexsn.scan ins(%x : tensor<?x?xf32>) outs(%d : tensor<?x?xf32>) {
  ^bb0(%a: f32):
    flexsn.yield %a : f32
  }
  return %y, %d : tensor<?x?xf32>, tensor<?x?xf32>
}
