flexsn.neuron @lif inputs(%x: f32) states(%v: f32) outputs(spike)
    params(%v_threshold: f32 = 1.0 runtime) {
  %h = arith.addf %v, %x : f32
  %d = arith.subf %h, %v_threshold : f32
  %s = flexsn.spike %d surrogate(#flexsn.sigmoid<alpha = 4.0>) : f32
  %one = arith.constant 1.0 : f32
  %keep = arith.subf %one, %s : f32
  %v1 = arith.mulf %keep, %h : f32
  flexsn.yield %s, %v1 : f32, f32
}
flexsn.block @lif_block neuron(@lif) pre(channel_affine) connection(add) readout(none) storage(f16)
flexsn.block @lif_count neuron(@lif) pre(affine) connection(iand) readout(sum) storage(f32)
