// Current-based leaky integrate-and-fire neuron (CUBA-LIF): a synaptic
// current c that decays and integrates the input, driving a leaky membrane.
//
//   c' = c * c_decay + x
//   h  = v * v_decay + c'
//   s  = spike(h - v_threshold)
//   hard reset:       v' = s_d * v_reset + (1 - s_d) * h
//   soft reset:       v' = h - s_d * v_threshold
//
// s_d is detach(s) when detach_reset, else s. The flags are i1 parameters:
// specialized as constants, the selects they drive fold away.
flexsn.neuron @cuba_lif inputs(%x: f32) states(%c: f32, %v: f32)
    outputs(spike)
    params(%c_decay: f32 = 0.5, %v_decay: f32 = 0.75,
           %v_threshold: f32 = 0.5, %v_reset: f32 = 0.0,
           %soft_reset: i1 = false, %detach_reset: i1 = false) {
  %one = arith.constant 1.0 : f32
  // Charge.
  %c_decayed = arith.mulf %c, %c_decay : f32
  %c_next = arith.addf %c_decayed, %x : f32
  %v_decayed = arith.mulf %v, %v_decay : f32
  %h = arith.addf %v_decayed, %c_next : f32
  // Fire.
  %over = arith.subf %h, %v_threshold : f32
  %s = flexsn.spike %over surrogate(#flexsn.sigmoid<alpha = 4.0>) : f32
  %s_detached = flexsn.detach %s : f32
  %s_reset = arith.select %detach_reset, %s_detached, %s : f32
  // Reset.
  %keep = arith.subf %one, %s_reset : f32
  %h_kept = arith.mulf %keep, %h : f32
  %to_reset = arith.mulf %s_reset, %v_reset : f32
  %v_hard = arith.addf %to_reset, %h_kept : f32
  %drop = arith.mulf %s_reset, %v_threshold : f32
  %v_soft = arith.subf %h, %drop : f32
  %v_next = arith.select %soft_reset, %v_soft, %v_hard : f32
  flexsn.yield %s, %c_next, %v_next : f32, f32, f32
}
