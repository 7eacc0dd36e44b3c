// The block of bn_lif_block.mlir, declared: the compiler writes the same
// function (test/Pipelines/declared-block.test).

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

flexsn.block @bn_lif neuron(@lif) pre(channel_affine) connection(add)
    readout(none) storage(f32)
