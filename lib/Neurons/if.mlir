// Integrate-and-fire neuron (SpikingJelly's IFNode).
//
//   h = v + x
//   s = spike(h - v_threshold)
//   hard reset:       v' = s_d * v_reset + (1 - s_d) * h
//   soft reset:       v' = h - s_d * v_threshold
//
// s_d is detach(s) when detach_reset, else s. The flags are i1 parameters:
// specialized as constants, the selects they drive fold away.
flexsn.neuron @if inputs(%x: f32) states(%v: f32) outputs(spike)
    params(%v_threshold: f32 = 1.0, %v_reset: f32 = 0.0,
           %soft_reset: i1 = false, %detach_reset: i1 = false) {
  %one = arith.constant 1.0 : f32
  // Charge.
  %h = arith.addf %v, %x : f32
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
  flexsn.yield %s, %v_next : f32, f32
}
