// Parametric leaky integrate-and-fire neuron (SpikingJelly's
// ParametricLIFNode): a LIF whose leak 1/tau = sigmoid(w) is learned.
//
//   k = sigmoid(w) = 1 / (1 + exp(-w))
//   decay_input:      h = v + (x - (v - V_r)) * k
//   otherwise:        h = v - (v - V_r) * k + x
//   s = spike(h - v_threshold)
//   hard reset:       v' = s_d * v_reset + (1 - s_d) * h
//   soft reset:       v' = h - s_d * v_threshold
//
// w is trainable and starts at w0 = -ln(init_tau - 1); SpikingJelly's default
// init_tau = 2 gives w0 = -ln(1) = 0.0, hence the default below (1/tau = 0.5).
// V_r is v_reset for a hard reset and 0 for a soft one; s_d is detach(s) when
// detach_reset, else s. The flags are i1 parameters: specialized as
// constants, the selects they drive fold away.
flexsn.neuron @plif inputs(%x: f32) states(%v: f32) outputs(spike)
    params(%w: f32 = 0.0 trainable, %v_threshold: f32 = 1.0,
           %v_reset: f32 = 0.0, %soft_reset: i1 = false,
           %detach_reset: i1 = false, %decay_input: i1 = true) {
  %zero = arith.constant 0.0 : f32
  %one = arith.constant 1.0 : f32
  // Leak: k = sigmoid(w).
  %neg_w = arith.negf %w : f32
  %exp_neg_w = math.exp %neg_w : f32
  %denom = arith.addf %one, %exp_neg_w : f32
  %k = arith.divf %one, %denom : f32
  // Charge.
  %v_rest = arith.select %soft_reset, %zero, %v_reset : f32
  %dv = arith.subf %v, %v_rest : f32
  %in = arith.subf %x, %dv : f32
  %in_k = arith.mulf %in, %k : f32
  %h_decay_input = arith.addf %v, %in_k : f32
  %dv_k = arith.mulf %dv, %k : f32
  %leaked = arith.subf %v, %dv_k : f32
  %h_plain = arith.addf %leaked, %x : f32
  %h = arith.select %decay_input, %h_decay_input, %h_plain : f32
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
