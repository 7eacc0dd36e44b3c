// RUN: flexsn-opt %s | flexsn-opt | FileCheck %s --check-prefix=ROUNDTRIP
// RUN: flexsn-opt %s --flexsn-lower-to-cpu | FileCheck %s --check-prefix=CPU
// RUN: %if cuda-toolkit %{ flexsn-opt %s --flexsn-lower-to-nvvm=toolkit=%cuda_toolkit | flexsn-translate --flexsn-to-manifest | FileCheck %s --check-prefix=GPU %}

// Your neuron: LIF whose threshold rises by beta after each spike and
// decays back to v_th with tau_a (two states, v and a).
flexsn.neuron @adaptive_lif inputs(%x: f32) states(%v: f32, %a: f32)
    outputs(spike)
    params(%tau: f32 = 2.0, %v_th: f32 = 1.0, %beta: f32 = 0.2,
           %tau_a: f32 = 10.0) {
  %one = arith.constant 1.0 : f32
  %dv = arith.subf %x, %v : f32
  %dv_tau = arith.divf %dv, %tau : f32
  %h = arith.addf %v, %dv_tau : f32
  %threshold = arith.addf %v_th, %a : f32
  %over = arith.subf %h, %threshold : f32
  %s = flexsn.spike %over surrogate(#flexsn.atan<alpha = 2.0>) : f32
  %keep = arith.subf %one, %s : f32
  %v_next = arith.mulf %keep, %h : f32
  %a_tau = arith.divf %a, %tau_a : f32
  %a_decayed = arith.subf %a, %a_tau : f32
  %a_up = arith.mulf %s, %beta : f32
  %a_next = arith.addf %a_decayed, %a_up : f32
  flexsn.yield %s, %v_next, %a_next : f32, f32, f32
}

// ROUNDTRIP: flexsn.neuron @adaptive_lif inputs(%{{.*}}: f32) states(%{{.*}}: f32, %{{.*}}: f32)
// ROUNDTRIP: flexsn.spike {{.*}} surrogate(#flexsn.atan)

// The CPU kernels, as C functions of the object file.
// CPU-DAG: llvm.func @_mlir_ciface_adaptive_lif_inference_f32(
// CPU-DAG: llvm.func @_mlir_ciface_adaptive_lif_final_state_f32(

// GPU: "name": "adaptive_lif_inference_f32"
