// Izhikevich neuron (SpikingJelly's IzhikevichNode): a QIF membrane with an
// adaptation current w.
//
//   h  = v + (x + a0 * (v - v_rest) * (v - v_c) - w) / tau
//   s  = spike(h - v_threshold)
//   hard reset:       v' = s_d * v_reset + (1 - s_d) * h
//   soft reset:       v' = h - s_d * v_threshold
//   w' = w + (a * (h - v_rest) - w) / tau_w + b * s
//
// s_d is detach(s) when detach_reset, else s; the adaptation jump b * s uses
// the spike itself. The flags are i1 parameters: specialized as constants,
// the selects they drive fold away.
flexsn.neuron @izhikevich inputs(%x: f32) states(%v: f32, %w: f32)
    outputs(spike)
    params(%tau: f32 = 2.0, %v_c: f32 = 0.8, %a0: f32 = 1.0,
           %v_rest: f32 = -0.1, %tau_w: f32 = 2.0, %a: f32 = 0.0,
           %b: f32 = 0.0, %v_threshold: f32 = 1.0, %v_reset: f32 = 0.0,
           %soft_reset: i1 = false, %detach_reset: i1 = false) {
  %one = arith.constant 1.0 : f32
  // Charge.
  %dv_rest = arith.subf %v, %v_rest : f32
  %dv_c = arith.subf %v, %v_c : f32
  %scaled = arith.mulf %a0, %dv_rest : f32
  %quad = arith.mulf %scaled, %dv_c : f32
  %x_quad = arith.addf %x, %quad : f32
  %in = arith.subf %x_quad, %w : f32
  %in_tau = arith.divf %in, %tau : f32
  %h = arith.addf %v, %in_tau : f32
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
  // Adaptation.
  %dh_rest = arith.subf %h, %v_rest : f32
  %drive = arith.mulf %a, %dh_rest : f32
  %dw = arith.subf %drive, %w : f32
  %dw_tau = arith.divf %dw, %tau_w : f32
  %w_decayed = arith.addf %w, %dw_tau : f32
  %jump = arith.mulf %b, %s : f32
  %w_next = arith.addf %w_decayed, %jump : f32
  flexsn.yield %s, %v_next, %w_next : f32, f32, f32
}
