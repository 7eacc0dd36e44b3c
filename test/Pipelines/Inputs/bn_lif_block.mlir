// A spiking block on tensors, as a user writes it: batch-norm's apply step
// (per-channel scale and shift) on [T, B, C, S], a LIF neuron, a residual
// add of the spikes and the input; scale and shift are trainable. Fusion
// makes it one scan; block kernel generation one kernel per variant. Used
// by test/Pipelines/fusion.mlir, test/Target/GPU/block-ptx.mlir,
// test/Integration/CPU/block-kernel.mlir and python/tests.

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

#seq = affine_map<(t, b, c, s) -> (t, b, c, s)>
#chan = affine_map<(t, b, c, s) -> (c)>
func.func @bn_lif(%x: tensor<?x?x?x?xf32> {flexsn.name = "x"},
                  %scale: tensor<?xf32> {flexsn.name = "scale", flexsn.trainable},
                  %shift: tensor<?xf32> {flexsn.name = "shift", flexsn.trainable})
    -> (tensor<?x?x?x?xf32> {flexsn.name = "y"},
        tensor<?x?x?xf32> {flexsn.name = "v"})
    attributes {flexsn.block} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c3 = arith.constant 3 : index
  %T = tensor.dim %x, %c0 : tensor<?x?x?x?xf32>
  %B = tensor.dim %x, %c1 : tensor<?x?x?x?xf32>
  %C = tensor.dim %x, %c2 : tensor<?x?x?x?xf32>
  %S = tensor.dim %x, %c3 : tensor<?x?x?x?xf32>
  %e = tensor.empty(%T, %B, %C, %S) : tensor<?x?x?x?xf32>
  %p = linalg.generic {indexing_maps = [#seq, #chan, #chan, #seq],
                       iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%x, %scale, %shift : tensor<?x?x?x?xf32>, tensor<?xf32>, tensor<?xf32>)
      outs(%e : tensor<?x?x?x?xf32>) {
  ^bb0(%xi: f32, %a: f32, %b: f32, %out: f32):
    %m = arith.mulf %xi, %a : f32
    %r = arith.addf %m, %b : f32
    linalg.yield %r : f32
  } -> tensor<?x?x?x?xf32>
  %es = tensor.empty(%T, %B, %C, %S) : tensor<?x?x?x?xf32>
  %ev = tensor.empty(%B, %C, %S) : tensor<?x?x?xf32>
  %s, %v = flexsn.scan @lif ins(%p : tensor<?x?x?x?xf32>)
      outs(%es : tensor<?x?x?x?xf32>) states(%ev : tensor<?x?x?xf32>)
  %eo = tensor.empty(%T, %B, %C, %S) : tensor<?x?x?x?xf32>
  %y = linalg.generic {indexing_maps = [#seq, #seq, #seq],
                       iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%s, %x : tensor<?x?x?x?xf32>, tensor<?x?x?x?xf32>)
      outs(%eo : tensor<?x?x?x?xf32>) {
  ^bb0(%si: f32, %xi: f32, %o: f32):
    %r = arith.addf %si, %xi : f32
    linalg.yield %r : f32
  } -> tensor<?x?x?x?xf32>
  return %y, %v : tensor<?x?x?x?xf32>, tensor<?x?x?xf32>
}
