// End to end on the CPU: a spiking block, batch-norm's apply step
// y = x·scale[c] + shift[c] on an f16 input, a LIF neuron, and a residual
// add of the spikes and the block input, and each neuron's spike count,
// run once as written (linalg ops around the scan) and once fused into one
// scan. Both runs print the
// values worked by hand below, and the same bits for a larger input whose
// arithmetic rounds.
//
// RUN: flexsn-opt %s --flexsn-fuse-producers --flexsn-fuse-consumers \
// RUN:   | FileCheck %s --check-prefix=IR
// RUN: flexsn-opt %s --convert-elementwise-to-linalg \
// RUN:   --one-shot-bufferize=bufferize-function-boundaries --convert-linalg-to-loops \
// RUN:   --flexsn-lower-to-cpu=generate-kernels=false -o %t.unfused.mlir
// RUN: flexsn-opt %s --flexsn-fuse-producers --flexsn-fuse-consumers \
// RUN:   --convert-elementwise-to-linalg \
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
// The fused block is one scan reading x (once), with scale and shift as
// per-channel params, writing the block's output, the final v and the
// spike count; the spikes are never stored.
// IR-LABEL: func.func @bn_lif
// IR-NOT:     linalg.generic
// IR:         flexsn.scan ins(%{{.*}} : tensor<?x?x?xf16>) params(%{{.*}} : tensor<?xf32>, tensor<?xf32>)
// IR-SAME:      outs(%{{.*}} : tensor<?x?x?xf32>) states(%{{.*}} : tensor<?x?xf32>) reductions(%{{.*}} : tensor<?x?xf32>)
// IR:           arith.mulf
// IR:           arith.addf
// IR:           flexsn.apply @lif
// IR:           arith.addf
// IR-NOT:     linalg.generic
// IR:         return
//
// LIF: h = v + (y - v)/2, spike s = H(h - 1), v' = (1 - s)·h, v0 = 0.
// T = 2, C = 2, N = 2, scale = [2, 0.5], shift = [0.5, 0.25]:
//   x[0] = [[1, 0.5], [2, -1]]       y[0] = [[2.5, 1.5], [1.25, -0.25]]
//   x[1] = [[0.25, 1.5], [0.5, 3]]   y[1] = [[1, 3.5], [0.5, 1.75]]
//   t = 0: h = [[1.25, 0.75], [0.625, -0.125]], s = [[1, 0], [0, 0]],
//          v = [[0, 0.75], [0.625, -0.125]]
//   t = 1: h = [[0.5, 2.125], [0.5625, 0.8125]], s = [[0, 1], [0, 0]],
//          v = [[0.5, 0], [0.5625, 0.8125]]
//   out = s + x: [[[2, 0.5], [2, -1]], [[0.25, 2.5], [0.5, 3]]]
//   count = s[0] + s[1] = [[1, 1], [0, 0]]
// All exact in f16 and f32.
// CHECK:       sizes = [2, 2, 2]
// CHECK-NEXT:  {{\[\[\[}}2, {{ *}}0.5],
// CHECK-NEXT:  [2, {{ *}}-1]],
// CHECK:       {{\[\[}}0.25, {{ *}}2.5],
// CHECK-NEXT:  [0.5, {{ *}}3]]]
// CHECK:       sizes = [2, 2]
// CHECK-NEXT:  [0.5, {{ *}}0]
// CHECK-NEXT:  [0.5625, {{ *}}0.8125]
// CHECK:       sizes = [2, 2]
// CHECK-NEXT:  [1, {{ *}}1]
// CHECK-NEXT:  [0, {{ *}}0]
// The larger run's bits (compared by diff above).
// CHECK:       sizes = [8, 3, 5]
// CHECK:       sizes = [3, 5]
// CHECK:       sizes = [3, 5]

flexsn.neuron @lif inputs(%x: f32) states(%v: f32) outputs(spike)
    params(%tau: f32 = 2.0, %v_threshold: f32 = 1.0) {
  %d = arith.subf %x, %v : f32
  %q = arith.divf %d, %tau : f32
  %h = arith.addf %v, %q : f32
  %o = arith.subf %h, %v_threshold : f32
  %s = flexsn.spike %o surrogate(#flexsn.sigmoid<alpha = 4.0>) : f32
  %one = arith.constant 1.0 : f32
  %k = arith.subf %one, %s : f32
  %v1 = arith.mulf %k, %h : f32
  flexsn.yield %s, %v1 : f32, f32
}

#seq = affine_map<(t, c, n) -> (t, c, n)>
#chan = affine_map<(t, c, n) -> (c)>

func.func @bn_lif(%x: tensor<?x?x?xf16>, %scale: tensor<?xf32>,
                  %shift: tensor<?xf32>)
    -> (tensor<?x?x?xf32>, tensor<?x?xf32>, tensor<?x?xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %T = tensor.dim %x, %c0 : tensor<?x?x?xf16>
  %C = tensor.dim %x, %c1 : tensor<?x?x?xf16>
  %N = tensor.dim %x, %c2 : tensor<?x?x?xf16>
  %e = tensor.empty(%T, %C, %N) : tensor<?x?x?xf32>
  %y = linalg.generic {indexing_maps = [#seq, #chan, #chan, #seq],
                       iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%x, %scale, %shift : tensor<?x?x?xf16>, tensor<?xf32>, tensor<?xf32>)
      outs(%e : tensor<?x?x?xf32>) {
  ^bb0(%xi: f16, %a: f32, %b: f32, %out: f32):
    %xf = arith.extf %xi : f16 to f32
    %m = arith.mulf %xf, %a : f32
    %r = arith.addf %m, %b : f32
    linalg.yield %r : f32
  } -> tensor<?x?x?xf32>
  %es = tensor.empty(%T, %C, %N) : tensor<?x?x?xf32>
  %ev = tensor.empty(%C, %N) : tensor<?x?xf32>
  %s, %v = flexsn.scan @lif ins(%y : tensor<?x?x?xf32>)
      outs(%es : tensor<?x?x?xf32>) states(%ev : tensor<?x?xf32>)
  %eo = tensor.empty(%T, %C, %N) : tensor<?x?x?xf32>
  %out = linalg.generic {indexing_maps = [#seq, #seq, #seq],
                         iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%s, %x : tensor<?x?x?xf32>, tensor<?x?x?xf16>)
      outs(%eo : tensor<?x?x?xf32>) {
  ^bb0(%si: f32, %xi: f16, %o: f32):
    %xf = arith.extf %xi : f16 to f32
    %r = arith.addf %si, %xf : f32
    linalg.yield %r : f32
  } -> tensor<?x?x?xf32>
  %zero = arith.constant 0.0 : f32
  %ec = tensor.empty(%C, %N) : tensor<?x?xf32>
  %zeros = linalg.fill ins(%zero : f32) outs(%ec : tensor<?x?xf32>) -> tensor<?x?xf32>
  %count = linalg.reduce { arith.addf } ins(%s : tensor<?x?x?xf32>)
      outs(%zeros : tensor<?x?xf32>) dimensions = [0]
  return %out, %v, %count : tensor<?x?x?xf32>, tensor<?x?xf32>, tensor<?x?xf32>
}

func.func private @printMemrefF32(tensor<*xf32>)
func.func private @printMemrefI32(tensor<*xi32>)

func.func @run(%x: tensor<?x?x?xf16>, %scale: tensor<?xf32>,
               %shift: tensor<?xf32>, %bits: i1) {
  %s, %v, %c = call @bn_lif(%x, %scale, %shift)
      : (tensor<?x?x?xf16>, tensor<?xf32>, tensor<?xf32>)
      -> (tensor<?x?x?xf32>, tensor<?x?xf32>, tensor<?x?xf32>)
  scf.if %bits {
    %sb = arith.bitcast %s : tensor<?x?x?xf32> to tensor<?x?x?xi32>
    %vb = arith.bitcast %v : tensor<?x?xf32> to tensor<?x?xi32>
    %cb = arith.bitcast %c : tensor<?x?xf32> to tensor<?x?xi32>
    %s_u = tensor.cast %sb : tensor<?x?x?xi32> to tensor<*xi32>
    %v_u = tensor.cast %vb : tensor<?x?xi32> to tensor<*xi32>
    %c_u = tensor.cast %cb : tensor<?x?xi32> to tensor<*xi32>
    func.call @printMemrefI32(%s_u) : (tensor<*xi32>) -> ()
    func.call @printMemrefI32(%v_u) : (tensor<*xi32>) -> ()
    func.call @printMemrefI32(%c_u) : (tensor<*xi32>) -> ()
  } else {
    %s_u = tensor.cast %s : tensor<?x?x?xf32> to tensor<*xf32>
    %v_u = tensor.cast %v : tensor<?x?xf32> to tensor<*xf32>
    %c_u = tensor.cast %c : tensor<?x?xf32> to tensor<*xf32>
    func.call @printMemrefF32(%s_u) : (tensor<*xf32>) -> ()
    func.call @printMemrefF32(%v_u) : (tensor<*xf32>) -> ()
    func.call @printMemrefF32(%c_u) : (tensor<*xf32>) -> ()
  }
  return
}

func.func @main() {
  %x = arith.constant dense<[[[1.0, 0.5], [2.0, -1.0]],
                             [[0.25, 1.5], [0.5, 3.0]]]> : tensor<2x2x2xf16>
  %scale = arith.constant dense<[2.0, 0.5]> : tensor<2xf32>
  %shift = arith.constant dense<[0.5, 0.25]> : tensor<2xf32>
  %xd = tensor.cast %x : tensor<2x2x2xf16> to tensor<?x?x?xf16>
  %scaled = tensor.cast %scale : tensor<2xf32> to tensor<?xf32>
  %shiftd = tensor.cast %shift : tensor<2xf32> to tensor<?xf32>
  %false = arith.constant false
  call @run(%xd, %scaled, %shiftd, %false)
      : (tensor<?x?x?xf16>, tensor<?xf32>, tensor<?xf32>, i1) -> ()

  // x[t, c, n] = 0.173·((7t + 3c + n) mod 11) - 0.4 in f16, scale and
  // shift that round: every step of the block rounds somewhere, and the
  // neurons fire at some steps only.
  %e = tensor.empty() : tensor<8x3x5xf16>
  %xg = linalg.generic {indexing_maps = [#seq],
                        iterator_types = ["parallel", "parallel", "parallel"]}
      outs(%e : tensor<8x3x5xf16>) {
  ^bb0(%out: f16):
    %t = linalg.index 0 : index
    %c = linalg.index 1 : index
    %n = linalg.index 2 : index
    %c7 = arith.constant 7 : index
    %c3 = arith.constant 3 : index
    %t7 = arith.muli %t, %c7 : index
    %c3c = arith.muli %c, %c3 : index
    %k0 = arith.addi %t7, %c3c : index
    %k1 = arith.addi %k0, %n : index
    %c11 = arith.constant 11 : index
    %k = arith.remui %k1, %c11 : index
    %ki = arith.index_cast %k : index to i32
    %kf = arith.sitofp %ki : i32 to f32
    %step = arith.constant 0.173 : f32
    %off = arith.constant 0.4 : f32
    %p = arith.mulf %kf, %step : f32
    %q = arith.subf %p, %off : f32
    %h = arith.truncf %q : f32 to f16
    linalg.yield %h : f16
  } -> tensor<8x3x5xf16>
  %scale3 = arith.constant dense<[0.7, 1.3, 0.9]> : tensor<3xf32>
  %shift3 = arith.constant dense<[0.1, -0.3, 0.45]> : tensor<3xf32>
  %xgd = tensor.cast %xg : tensor<8x3x5xf16> to tensor<?x?x?xf16>
  %scale3d = tensor.cast %scale3 : tensor<3xf32> to tensor<?xf32>
  %shift3d = tensor.cast %shift3 : tensor<3xf32> to tensor<?xf32>
  %true = arith.constant true
  call @run(%xgd, %scale3d, %shift3d, %true)
      : (tensor<?x?x?xf16>, tensor<?xf32>, tensor<?xf32>, i1) -> ()
  return
}
