// RUN: flexsn-opt %neurons/lif.mlir --flexsn-autodiff --canonicalize --cse | FileCheck %s
// RUN: flexsn-opt %neurons/lif.mlir --flexsn-autodiff=store-all --canonicalize --cse | FileCheck %s --check-prefix=ALL
// RUN: flexsn-opt %neurons/izhikevich.mlir --flexsn-autodiff | FileCheck %s --check-prefix=IZH
// RUN: flexsn-opt %neurons/plif.mlir --flexsn-autodiff | FileCheck %s --check-prefix=PLIF

// LIF (hard reset to 0, tau = 2) saves its charge h alone, and its backward
// step recomputes the spike from h, then runs SPEC 7's BPTT recurrence:
//   dv/dh = 1 - s + (V_r - h)·psi,  G = gS·psi + (gV + carry)·dv/dh,
//   gX = G / tau,  carry' = G·(1 - 1/tau).

// CHECK-LABEL: func.func @lif_forward_f32(
// CHECK-SAME:    %[[X:[^:]*]]: memref<?x?xf32>, %[[V0:[^:]*]]: memref<?xf32>, %[[S:[^:]*]]: memref<?x?xf32>, %[[VSEQ:[^:]*]]: memref<?x?xf32>, %[[H:[^:]*]]: memref<?x?xf32>)
// CHECK-SAME:    flexsn.kernel = #flexsn.kernel<"lif", forward, f32, buffers = [<"x", input_sequence, f32, sequence, input 0>, <"v_init", initial_state, f32, per_neuron, state_init 0>, <"spike", output_sequence, f32, sequence, output 0>, <"v_seq", state_sequence, f32, sequence, state_seq 0>, <"saved0", saved_output, f32, sequence, saved 0>], workspace_sequences = 1>
// CHECK:         flexsn.scan ins(%[[X]] : {{.*}}) inits(%[[V0]] : {{.*}}) outs(%[[S]], %[[H]] : {{.*}}) states(%[[VSEQ]] : {{.*}})
// CHECK:           %[[HV:.*]] = arith.addf
// CHECK:           %[[SPIKE:.*]] = flexsn.spike
// CHECK:           flexsn.yield %[[SPIKE]], %[[HV]], %{{.*}} : f32, f32, f32

// CHECK-LABEL: func.func @lif_backward_f32(
// CHECK-SAME:    %[[GS:[^:]*]]: memref<?x?xf32>, %[[GV:[^:]*]]: memref<?x?xf32>, %[[SAVED:[^:]*]]: memref<?x?xf32>, %[[GFIN:[^:]*]]: memref<?xf32>, %[[GX:[^:]*]]: memref<?x?xf32>, %[[GV0:[^:]*]]: memref<?xf32>)
// CHECK-SAME:    flexsn.kernel = #flexsn.kernel<"lif", backward, f32, buffers = [<"spike_grad", optional_input_sequence, f32, sequence, grad output 0>, <"v_seq_grad", optional_input_sequence, f32, sequence, grad state_seq 0>, <"saved0", saved_input, f32, sequence, saved 0>, <"v_final_grad", initial_state, f32, per_neuron, grad state_final 0>, <"x_grad", output_sequence, f32, sequence, grad input 0>, <"v_init_grad", final_state, f32, per_neuron, grad state_init 0>], workspace_sequences = 1>
// CHECK:         flexsn.scan reverse ins(%[[GS]], %[[GV]], %[[SAVED]] : {{.*}}) inits(%[[GFIN]] : {{.*}}) outs(%[[GX]] : {{.*}}) states(%[[GV0]] : {{.*}}) {
// CHECK-NEXT:    ^bb0(%[[gs:.*]]: f32, %[[gv:.*]]: f32, %[[h:.*]]: f32, %[[carry:.*]]: f32):
// CHECK-DAG:       %[[over:.*]] = arith.subf %[[h]], %{{.*}} : f32
// CHECK-DAG:       %[[s:.*]] = flexsn.spike %[[over]]
// CHECK-DAG:       %[[total:.*]] = arith.addf %[[gv]], %[[carry]] : f32
// CHECK-DAG:       %[[psi:.*]] = flexsn.surrogate_grad %[[over]] surrogate(#flexsn.sigmoid) : f32
// CHECK:           %[[G:.*]] = arith.addf
// CHECK:           %[[gx:.*]] = arith.divf %[[G]], %{{.*}} : f32
// CHECK:           %[[next:.*]] = arith.addf %[[G]], %{{.*}} : f32
// CHECK:           flexsn.yield %[[gx]], %[[next]] : f32, f32
// CHECK:         } attributes {optional_inputs = array<i64: 0, 1>}

// The forward that keeps v only at its end: the same step and saves (the
// backward above serves it), v_final in place of v_seq, and no backward of
// its own.
// CHECK-LABEL: func.func @lif_forward_final_state_f32(
// CHECK-SAME:    %[[X:[^:]*]]: memref<?x?xf32>, %[[V0:[^:]*]]: memref<?xf32>, %[[S:[^:]*]]: memref<?x?xf32>, %[[VFIN:[^:]*]]: memref<?xf32>, %[[H:[^:]*]]: memref<?x?xf32>)
// CHECK-SAME:    <"v_final", final_state, f32, per_neuron, state_final 0>, <"saved0", saved_output, f32, sequence, saved 0>], workspace_sequences = 1>
// CHECK:         flexsn.scan ins(%[[X]] : {{.*}}) inits(%[[V0]] : {{.*}}) outs(%[[S]], %[[H]] : {{.*}}) states(%[[VFIN]] : memref<?xf32>)
// CHECK:           flexsn.yield %{{.*}}, %{{.*}}, %{{.*}} : f32, f32, f32
// CHECK-NOT:     func.func @lif_backward_final_state

// store-all saves every value the rules read (h, h - v_th and 1 - s).
// ALL-LABEL: func.func @lif_forward_f32(
// ALL-SAME:    workspace_sequences = 3>

// Izhikevich's quadratic term needs v itself: two saved sequences.
// IZH-LABEL: func.func @izhikevich_backward_f32(
// IZH-SAME:    workspace_sequences = 2>
// Both states kept only at their end.
// IZH-LABEL: func.func @izhikevich_forward_final_state_f32(
// IZH-SAME:    <"v_final", final_state, f32, per_neuron, state_final 0>, <"w_final", final_state, f32, per_neuron, state_final 1>

// PLIF's trainable w gets a reduction; x is re-read rather than saved.
// PLIF-LABEL: func.func @plif_backward_f32(
// PLIF-SAME:    %{{[^:]*}}: memref<f32>, %{{[^:]*}}: f32)
// PLIF-SAME:    <"saved0", saved_input, f32, sequence, saved 0>, <"x", input_sequence, f32, sequence, input 0>,
// PLIF-SAME:    <"w_grad", param_gradient, f32, scalar, grad param "w">], params = [<"w", {{[^>]*}}, trainable>], workspace_sequences = 1, reduction_slots = 1>
// PLIF:         flexsn.scan reverse {{.*}} reductions(%{{.*}} : memref<f32>)
