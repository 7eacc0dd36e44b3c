// End to end on the CPU: two layers of a leaky neuron, the second reading
// the first's spikes, run as two scans and merged into one by
// flexsn-fuse-siblings. Both runs print the values worked by hand below, and
// the same bits for a larger input whose arithmetic rounds.
//
// RUN: flexsn-opt %s --flexsn-fuse-siblings | FileCheck %s --check-prefix=IR
// RUN: flexsn-opt %s --convert-elementwise-to-linalg \
// RUN:   --one-shot-bufferize=bufferize-function-boundaries --convert-linalg-to-loops \
// RUN:   --flexsn-lower-to-cpu=generate-kernels=false -o %t.unfused.mlir
// RUN: flexsn-opt %s --flexsn-fuse-siblings --convert-elementwise-to-linalg \
// RUN:   --one-shot-bufferize=bufferize-function-boundaries --convert-linalg-to-loops \
// RUN:   --flexsn-lower-to-cpu=generate-kernels=false -o %t.fused.mlir
// RUN: mlir-runner %t.unfused.mlir -e main -entry-point-result=void \
// RUN:   -shared-libs=%mlir_runner_libs | sed -e 's/base@ = 0x[0-9a-f]*//' > %t.unfused.txt
// RUN: mlir-runner %t.fused.mlir -e main -entry-point-result=void \
// RUN:   -shared-libs=%mlir_runner_libs | sed -e 's/base@ = 0x[0-9a-f]*//' > %t.fused.txt
// RUN: FileCheck %s --input-file=%t.fused.txt
// RUN: FileCheck %s --input-file=%t.unfused.txt
// RUN: diff %t.unfused.txt %t.fused.txt
//
// IR-LABEL: func.func @two_layers
// IR:         flexsn.scan ins(
// IR-NOT:     flexsn.scan
// IR:         return
//
// The neuron: h = v/2 + w·x, s = H(h - 1), v' = h - s (soft reset), v0 = 0.
// Layer 1 (w = 1) on x = [[1.5, 0.5], [0.25, 0.75], [1, 0.25]]:
//   h = [1.5, 0.5], [0.5, 1], [1.25, 0.25]; s1 = [1, 0], [0, 1], [1, 0];
//   final v1 = [0.25, 0.25].
// Layer 2 (w = 1.5) on s1:
//   h = [1.5, 0], [0.25, 1.5], [1.625, 0.25]; s2 = [1, 0], [0, 1], [1, 0];
//   final v2 = [0.625, 0.25].
// All exact in f32.
// CHECK:       sizes = [3, 2]
// CHECK-NEXT:  [1, {{ *}}0]
// CHECK-NEXT:  [0, {{ *}}1]
// CHECK-NEXT:  [1, {{ *}}0]
// CHECK:       sizes = [2]
// CHECK-NEXT:  [0.25, {{ *}}0.25]
// CHECK:       sizes = [2]
// CHECK-NEXT:  [0.625, {{ *}}0.25]
// The larger run's bits (compared by diff above).
// CHECK:       sizes = [9, 7]
// CHECK:       sizes = [7]
// CHECK:       sizes = [7]

flexsn.neuron @leaky inputs(%x: f32) states(%v: f32) outputs(spike)
    params(%w: f32 = 1.0 runtime) {
  %half = arith.constant 0.5 : f32
  %one = arith.constant 1.0 : f32
  %leak = arith.mulf %v, %half : f32
  %in = arith.mulf %w, %x : f32
  %h = arith.addf %leak, %in : f32
  %over = arith.subf %h, %one : f32
  %s = flexsn.spike %over surrogate(#flexsn.atan) : f32
  %v1 = arith.subf %h, %s : f32
  flexsn.yield %s, %v1 : f32, f32
}

func.func @two_layers(%x: tensor<?x?xf32>, %w1: f32, %w2: f32)
    -> (tensor<?x?xf32>, tensor<?xf32>, tensor<?xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %T = tensor.dim %x, %c0 : tensor<?x?xf32>
  %N = tensor.dim %x, %c1 : tensor<?x?xf32>
  %e1 = tensor.empty(%T, %N) : tensor<?x?xf32>
  %f1 = tensor.empty(%N) : tensor<?xf32>
  %e2 = tensor.empty(%T, %N) : tensor<?x?xf32>
  %f2 = tensor.empty(%N) : tensor<?xf32>
  %s1, %v1 = flexsn.scan @leaky ins(%x : tensor<?x?xf32>) params(%w1 : f32)
      outs(%e1 : tensor<?x?xf32>) states(%f1 : tensor<?xf32>)
  %s2, %v2 = flexsn.scan @leaky ins(%s1 : tensor<?x?xf32>) params(%w2 : f32)
      outs(%e2 : tensor<?x?xf32>) states(%f2 : tensor<?xf32>)
  return %s2, %v1, %v2 : tensor<?x?xf32>, tensor<?xf32>, tensor<?xf32>
}

func.func private @printMemrefF32(tensor<*xf32>)
func.func private @printMemrefI32(tensor<*xi32>)

func.func @run(%x: tensor<?x?xf32>, %w1: f32, %w2: f32, %bits: i1) {
  %s, %v1, %v2 = call @two_layers(%x, %w1, %w2)
      : (tensor<?x?xf32>, f32, f32) -> (tensor<?x?xf32>, tensor<?xf32>, tensor<?xf32>)
  scf.if %bits {
    %sb = arith.bitcast %s : tensor<?x?xf32> to tensor<?x?xi32>
    %ab = arith.bitcast %v1 : tensor<?xf32> to tensor<?xi32>
    %bb = arith.bitcast %v2 : tensor<?xf32> to tensor<?xi32>
    %s_u = tensor.cast %sb : tensor<?x?xi32> to tensor<*xi32>
    %a_u = tensor.cast %ab : tensor<?xi32> to tensor<*xi32>
    %b_u = tensor.cast %bb : tensor<?xi32> to tensor<*xi32>
    func.call @printMemrefI32(%s_u) : (tensor<*xi32>) -> ()
    func.call @printMemrefI32(%a_u) : (tensor<*xi32>) -> ()
    func.call @printMemrefI32(%b_u) : (tensor<*xi32>) -> ()
  } else {
    %s_u = tensor.cast %s : tensor<?x?xf32> to tensor<*xf32>
    %a_u = tensor.cast %v1 : tensor<?xf32> to tensor<*xf32>
    %b_u = tensor.cast %v2 : tensor<?xf32> to tensor<*xf32>
    func.call @printMemrefF32(%s_u) : (tensor<*xf32>) -> ()
    func.call @printMemrefF32(%a_u) : (tensor<*xf32>) -> ()
    func.call @printMemrefF32(%b_u) : (tensor<*xf32>) -> ()
  }
  return
}

func.func @main() {
  %x = arith.constant dense<[[1.5, 0.5], [0.25, 0.75], [1.0, 0.25]]> : tensor<3x2xf32>
  %xd = tensor.cast %x : tensor<3x2xf32> to tensor<?x?xf32>
  %one = arith.constant 1.0 : f32
  %w2 = arith.constant 1.5 : f32
  %false = arith.constant false
  call @run(%xd, %one, %w2, %false) : (tensor<?x?xf32>, f32, f32, i1) -> ()

  // x[t, n] = 0.173·((5t + 3n) mod 11) - 0.3, weights that round.
  %e = tensor.empty() : tensor<9x7xf32>
  %xg = linalg.generic {indexing_maps = [affine_map<(t, n) -> (t, n)>],
                        iterator_types = ["parallel", "parallel"]}
      outs(%e : tensor<9x7xf32>) {
  ^bb0(%out: f32):
    %t = linalg.index 0 : index
    %n = linalg.index 1 : index
    %c5 = arith.constant 5 : index
    %c3 = arith.constant 3 : index
    %c11 = arith.constant 11 : index
    %t5 = arith.muli %t, %c5 : index
    %n3 = arith.muli %n, %c3 : index
    %k0 = arith.addi %t5, %n3 : index
    %k = arith.remui %k0, %c11 : index
    %ki = arith.index_cast %k : index to i32
    %kf = arith.sitofp %ki : i32 to f32
    %step = arith.constant 0.173 : f32
    %off = arith.constant 0.3 : f32
    %p = arith.mulf %kf, %step : f32
    %q = arith.subf %p, %off : f32
    linalg.yield %q : f32
  } -> tensor<9x7xf32>
  %xgd = tensor.cast %xg : tensor<9x7xf32> to tensor<?x?xf32>
  %wa = arith.constant 0.7 : f32
  %wb = arith.constant 1.3 : f32
  %true = arith.constant true
  call @run(%xgd, %wa, %wb, %true) : (tensor<?x?xf32>, f32, f32, i1) -> ()
  return
}
