// Autodiff never saves a spike: a spike that carries a gradient needs its
// surrogate's argument in the backward step, and is recomputed from it for
// free. Checked on every shipped neuron (in f32 and f16) and on a neuron
// whose spike is only used detached, where saving the spike would cost as
// much as saving its argument.
//
// RUN: for n in cuba_lif eif if izhikevich lif plif qif; do \
// RUN:   flexsn-opt %neurons/$n.mlir --flexsn-autodiff=storage-types=f32,f16 -o %t.$n.mlir && \
// RUN:   %python %S/saved_values.py %t.$n.mlir; done | FileCheck %s --check-prefix=SHIPPED
// RUN: flexsn-opt %s --flexsn-autodiff -o %t.gate.mlir
// RUN: %python %S/saved_values.py %t.gate.mlir | FileCheck %s

// Each neuron's two forwards (state sequences, final states) save the same.
// SHIPPED-COUNT-28: _forward_{{(final_state_)?(f32|f16)}}: saved {{[12]}} value(s), 0 spike(s)
// SHIPPED-NOT:     spike(s)

// CHECK: gate_forward_f32: saved 1 value(s), 0 spike(s)
flexsn.neuron @gate inputs(%x: f32) states(%v: f32) outputs(y) {
  %one = arith.constant 1.0 : f32
  %h = arith.addf %v, %x : f32
  %u = arith.subf %h, %one : f32
  %s = flexsn.spike %u surrogate(#flexsn.sigmoid) : f32
  // Only detached: the backward step reads s (through 1 - s), not u.
  %sd = flexsn.detach %s : f32
  %keep = arith.subf %one, %sd : f32
  %vn = arith.mulf %h, %keep : f32
  flexsn.yield %vn, %vn : f32, f32
}
