// End to end on the CPU: a scan in the value form (on tensors) whose
// operands use every kind of indexing map, bufferized by one-shot
// bufferization, lowered to loops and run by mlir-runner; once as written,
// once tiled over its channel dimension first. Both runs print the values
// worked by hand below.
//
// RUN: rm -rf %t && split-file %s %t
// RUN: flexsn-opt %t/block.mlir --one-shot-bufferize=bufferize-function-boundaries \
// RUN:   --flexsn-lower-to-cpu=generate-kernels=false -o %t/lowered.mlir
// RUN: mlir-runner %t/lowered.mlir -e main -entry-point-result=void \
// RUN:   -shared-libs=%mlir_runner_libs | FileCheck %s
// RUN: flexsn-opt %t/block.mlir --transform-preload-library=transform-library-paths=%t/tile.mlir \
// RUN:   --transform-interpreter --canonicalize \
// RUN:   | FileCheck %s --check-prefix=TILED
// RUN: flexsn-opt %t/block.mlir --transform-preload-library=transform-library-paths=%t/tile.mlir \
// RUN:   --transform-interpreter --one-shot-bufferize=bufferize-function-boundaries \
// RUN:   --flexsn-lower-to-cpu=generate-kernels=false -o %t/tiled.mlir
// RUN: mlir-runner %t/tiled.mlir -e main -entry-point-result=void \
// RUN:   -shared-libs=%mlir_runner_libs | FileCheck %s
//
// The domain is (t, c, n) with T = 2, C = 2, N = 2. The body scales the
// input by a per-channel weight, p = x·w[c], and carries two states: v
// accumulates p (initial values per neuron; only the final v is kept) and
// k accumulates x (one initial value for every neuron; its whole sequence
// is kept). It outputs h = v + p, and sums p per channel (over t and n) and
// per step and channel (over n).
//
//   x[0] = [[1, 2], [3, 4]]   x[1] = [[0.5, 1], [2, -1]]   w = [2, -1]
//   v0 = [[0, 1], [0.5, 0]]   k0 = 10
//   p[0] = [[2, 4], [-3, -4]] p[1] = [[1, 2], [-2, 1]]
//   h[0] = [[2, 5], [-2.5, -4]]  h[1] = [[3, 7], [-4.5, -3]] = final v
//   k[0] = [[11, 12], [13, 14]]  k[1] = [[11.5, 13], [15, 13]]
//   per channel: 2 + 4 + 1 + 2 = 9, -3 - 4 - 2 + 1 = -8
//   per step and channel: [[2 + 4, -3 - 4], [1 + 2, -2 + 1]] = [[6, -7], [3, -1]]
//
// All are exact in f32.

// CHECK:       sizes = [2, 2, 2]
// CHECK-NEXT:  {{\[\[\[}}2, {{ *}}5],
// CHECK-NEXT:  [-2.5, {{ *}}-4]],
// CHECK:       {{\[\[}}3, {{ *}}7],
// CHECK-NEXT:  [-4.5, {{ *}}-3]]]
// CHECK:       sizes = [2, 2]
// CHECK-NEXT:  [3, {{ *}}7]
// CHECK-NEXT:  [-4.5, {{ *}}-3]
// CHECK:       sizes = [2, 2, 2]
// CHECK-NEXT:  {{\[\[\[}}11, {{ *}}12],
// CHECK-NEXT:  [13, {{ *}}14]],
// CHECK:       {{\[\[}}11.5, {{ *}}13],
// CHECK-NEXT:  [15, {{ *}}13]]]
// CHECK:       sizes = [2]
// CHECK-NEXT:  [9, {{ *}}-8]
// CHECK:       sizes = [2, 2]
// CHECK-NEXT:  [6, {{ *}}-7]
// CHECK-NEXT:  [3, {{ *}}-1]

// Tiling splits the channels into a loop of scans over slices; the weights
// and per-channel sums are sliced along c, the scalar k0 is not.
// TILED:       scf.for
// TILED:         tensor.extract_slice %{{.*}}[%{{.*}}] [1] [1] : tensor<2xf32> to tensor<1xf32>
// TILED:         flexsn.scan ins(%{{.*}}, %{{.*}} : tensor<2x1x2xf32>, tensor<1xf32>) inits(%{{.*}}, %{{.*}} : tensor<1x2xf32>, tensor<f32>)

//--- tile.mlir
module attributes {transform.with_named_sequence} {
  transform.named_sequence @__transform_main(%root: !transform.any_op {transform.readonly}) {
    %scan = transform.structured.match ops{["flexsn.scan"]} in %root
        : (!transform.any_op) -> !transform.any_op
    %tiled, %loop = transform.structured.tile_using_for %scan tile_sizes [0, 1, 0]
        : (!transform.any_op) -> (!transform.any_op, !transform.any_op)
    transform.yield
  }
}

//--- block.mlir
func.func @block(%x: tensor<2x2x2xf32>, %w: tensor<2xf32>, %v0: tensor<2x2xf32>,
                 %k0: tensor<f32>)
    -> (tensor<2x2x2xf32>, tensor<2x2xf32>, tensor<2x2x2xf32>, tensor<2xf32>,
        tensor<2x2xf32>) {
  %e_seq = tensor.empty() : tensor<2x2x2xf32>
  %e_neuron = tensor.empty() : tensor<2x2xf32>
  %e_vec = tensor.empty() : tensor<2xf32>
  %h, %v, %k, %per_channel, %per_step = flexsn.scan
      ins(%x, %w : tensor<2x2x2xf32>, tensor<2xf32>)
      inits(%v0, %k0 : tensor<2x2xf32>, tensor<f32>)
      outs(%e_seq : tensor<2x2x2xf32>)
      states(%e_neuron, %e_seq : tensor<2x2xf32>, tensor<2x2x2xf32>)
      reductions(%e_vec, %e_neuron : tensor<2xf32>, tensor<2x2xf32>)
      indexing_maps = [affine_map<(t, c, n) -> (t, c, n)>,  // x
                       affine_map<(t, c, n) -> (c)>,        // w
                       affine_map<(t, c, n) -> (c, n)>,     // v0
                       affine_map<(t, c, n) -> ()>,         // k0
                       affine_map<(t, c, n) -> (t, c, n)>,  // h
                       affine_map<(t, c, n) -> (c, n)>,     // final v
                       affine_map<(t, c, n) -> (t, c, n)>,  // k sequence
                       affine_map<(t, c, n) -> (c)>,        // per channel
                       affine_map<(t, c, n) -> (t, c)>] {   // per step and channel
  ^bb0(%xi: f32, %wi: f32, %vi: f32, %ki: f32):
    %p = arith.mulf %xi, %wi : f32
    %v1 = arith.addf %vi, %p : f32
    %k1 = arith.addf %ki, %xi : f32
    flexsn.yield %v1, %v1, %k1, %p, %p : f32, f32, f32, f32, f32
  }
  return %h, %v, %k, %per_channel, %per_step
      : tensor<2x2x2xf32>, tensor<2x2xf32>, tensor<2x2x2xf32>, tensor<2xf32>,
        tensor<2x2xf32>
}

func.func private @printMemrefF32(tensor<*xf32>)

func.func @main() {
  %x = arith.constant dense<[[[1.0, 2.0], [3.0, 4.0]],
                             [[0.5, 1.0], [2.0, -1.0]]]> : tensor<2x2x2xf32>
  %w = arith.constant dense<[2.0, -1.0]> : tensor<2xf32>
  %v0 = arith.constant dense<[[0.0, 1.0], [0.5, 0.0]]> : tensor<2x2xf32>
  %k0 = arith.constant dense<10.0> : tensor<f32>
  %h, %v, %k, %per_channel, %per_step = call @block(%x, %w, %v0, %k0)
      : (tensor<2x2x2xf32>, tensor<2xf32>, tensor<2x2xf32>, tensor<f32>)
      -> (tensor<2x2x2xf32>, tensor<2x2xf32>, tensor<2x2x2xf32>, tensor<2xf32>,
          tensor<2x2xf32>)
  %h_u = tensor.cast %h : tensor<2x2x2xf32> to tensor<*xf32>
  %v_u = tensor.cast %v : tensor<2x2xf32> to tensor<*xf32>
  %k_u = tensor.cast %k : tensor<2x2x2xf32> to tensor<*xf32>
  %c_u = tensor.cast %per_channel : tensor<2xf32> to tensor<*xf32>
  %s_u = tensor.cast %per_step : tensor<2x2xf32> to tensor<*xf32>
  call @printMemrefF32(%h_u) : (tensor<*xf32>) -> ()
  call @printMemrefF32(%v_u) : (tensor<*xf32>) -> ()
  call @printMemrefF32(%k_u) : (tensor<*xf32>) -> ()
  call @printMemrefF32(%c_u) : (tensor<*xf32>) -> ()
  call @printMemrefF32(%s_u) : (tensor<*xf32>) -> ()
  return
}
