// RUN: flexsn-opt %s --flexsn-generate-kernels | FileCheck %s
// RUN: flexsn-opt %s \
// RUN:   --flexsn-generate-kernels=variants=inference \
// RUN: | FileCheck %s --check-prefix=INFER
// RUN: flexsn-opt %s \
// RUN:   --flexsn-generate-kernels=storage-types=f16,bf16 \
// RUN: | FileCheck %s --check-prefix=HALF
// RUN: flexsn-opt %s \
// RUN:   '--flexsn-generate-kernels=neurons=other variants=final-state' \
// RUN: | FileCheck %s --check-prefix=PICK
// RUN: flexsn-opt %s '--flexsn-generate-kernels=neurons=relay' \
// RUN: | FileCheck %s --check-prefix=RELAY
// RUN: flexsn-opt %neurons/cuba_lif.mlir --flexsn-generate-kernels \
// RUN: | FileCheck %s --check-prefix=CUBA
// RUN: not flexsn-opt %s --flexsn-generate-kernels=variants=inference,training 2>&1 \
// RUN: | FileCheck %s --check-prefix=BAD-VARIANT
// RUN: not flexsn-opt %s --flexsn-generate-kernels=storage-types=f32,f64 2>&1 \
// RUN: | FileCheck %s --check-prefix=BAD-TYPE
// RUN: not flexsn-opt %s --flexsn-generate-kernels=neurons=syn,lif 2>&1 \
// RUN: | FileCheck %s --check-prefix=BAD-NEURON

// Bad options are reported (name collisions: generate-kernels-invalid.mlir).
// BAD-VARIANT: for the --variants option: 'training' is not one of inference, final-state, forward or backward
// BAD-TYPE:    for the --storage-types option: 'f64' is not one of f32, f16 or bf16
// BAD-NEURON:  error: no neuron named 'lif'

// Default variants of a neuron with two inputs, one state, two outputs and
// const, runtime and trainable parameters: inputs, inits, outputs, states,
// then the runtime and trainable parameters in declaration order (the const
// `tau` is not an argument).
// CHECK-LABEL: func.func @syn_inference_f32(
// CHECK-SAME:    %[[X:[^:]+]]: memref<?x?xf32>, %[[I:[^:]+]]: memref<?x?xf32>,
// CHECK-SAME:    %[[V0:[^:]+]]: memref<?xf32>,
// CHECK-SAME:    %[[S:[^:]+]]: memref<?x?xf32>, %[[C:[^:]+]]: memref<?x?xf32>,
// CHECK-SAME:    %[[VS:[^:]+]]: memref<?x?xf32>,
// CHECK-SAME:    %[[VTH:[^:]+]]: f32, %[[W:[^:]+]]: f32, %[[HARD:[^:]+]]: i1)
// CHECK-SAME:    attributes {flexsn.kernel = #flexsn.kernel<"syn", inference, f32, buffers = [
// CHECK-SAME:      <"x", input_sequence, f32, sequence, input 0>, <"i_syn", input_sequence, f32, sequence, input 1>,
// CHECK-SAME:      <"v_init", initial_state, f32, per_neuron, state_init 0>,
// CHECK-SAME:      <"spike", output_sequence, f32, sequence, output 0>, <"current", output_sequence, f32, sequence, output 1>,
// CHECK-SAME:      <"v_seq", state_sequence, f32, sequence, state_seq 0>],
// CHECK-SAME:      params = [<"v_th", {{[^>]*}}, runtime>, <"w", {{[^>]*}}, trainable>, <"hard", {{[^>]*}}, runtime>]>}
// CHECK-NEXT:    flexsn.scan @syn ins(%[[X]], %[[I]] : {{.*}}) inits(%[[V0]] : memref<?xf32>)
// CHECK-SAME:      params(%[[VTH]], %[[W]], %[[HARD]] : f32, f32, i1)
// CHECK-SAME:      outs(%[[S]], %[[C]] : {{.*}}) states(%[[VS]] : memref<?x?xf32>){{$}}
// CHECK-NEXT:    return
// The final-state variant has the same arguments but [N] state buffers.
// CHECK-LABEL: func.func @syn_final_state_f32(
// CHECK-SAME:    %[[X:[^:]+]]: memref<?x?xf32>, %[[I:[^:]+]]: memref<?x?xf32>,
// CHECK-SAME:    %[[V0:[^:]+]]: memref<?xf32>,
// CHECK-SAME:    %[[S:[^:]+]]: memref<?x?xf32>, %[[C:[^:]+]]: memref<?x?xf32>,
// CHECK-SAME:    %[[VF:[^:]+]]: memref<?xf32>,
// CHECK-SAME:    %[[VTH:[^:]+]]: f32, %[[W:[^:]+]]: f32, %[[HARD:[^:]+]]: i1)
// CHECK-SAME:    attributes {flexsn.kernel = #flexsn.kernel<"syn", "final-state", f32,
// CHECK-SAME:      <"v_final", final_state, f32, per_neuron, state_final 0>]
// CHECK-NEXT:    flexsn.scan @syn ins(%[[X]], %[[I]] : {{.*}}) inits(%[[V0]] : memref<?xf32>)
// CHECK-SAME:      params(%[[VTH]], %[[W]], %[[HARD]] : f32, f32, i1)
// CHECK-SAME:      outs(%[[S]], %[[C]] : {{.*}}) states(%[[VF]] : memref<?xf32>){{$}}
// CHECK-NEXT:    return

// Only the inference variant is generated when asked for.
// INFER:     func.func @syn_inference_f32(
// INFER-NOT: func.func @syn_final_state

// Each storage type gets its own kernels; scalar parameters keep their types.
// HALF-DAG: func.func @syn_inference_f16(%{{[^:]+}}: memref<?x?xf16>, %{{[^:]+}}: memref<?x?xf16>, %{{[^:]+}}: memref<?xf16>, %{{[^:]+}}: memref<?x?xf16>, %{{[^:]+}}: memref<?x?xf16>, %{{[^:]+}}: memref<?x?xf16>, %{{[^:]+}}: f32, %{{[^:]+}}: f32, %{{[^:]+}}: i1)
// HALF-DAG: func.func @syn_inference_bf16(%{{[^:]+}}: memref<?x?xbf16>, %{{[^:]+}}: memref<?x?xbf16>, %{{[^:]+}}: memref<?xbf16>, %{{[^:]+}}: memref<?x?xbf16>, %{{[^:]+}}: memref<?x?xbf16>, %{{[^:]+}}: memref<?x?xbf16>, %{{[^:]+}}: f32, %{{[^:]+}}: f32, %{{[^:]+}}: i1)
// HALF-DAG: func.func @syn_final_state_f16(%{{[^:]+}}: memref<?x?xf16>, %{{[^:]+}}: memref<?x?xf16>, %{{[^:]+}}: memref<?xf16>, %{{[^:]+}}: memref<?x?xf16>, %{{[^:]+}}: memref<?x?xf16>, %{{[^:]+}}: memref<?xf16>, %{{[^:]+}}: f32, %{{[^:]+}}: f32, %{{[^:]+}}: i1)
// HALF-DAG: func.func @syn_final_state_bf16(%{{[^:]+}}: memref<?x?xbf16>, %{{[^:]+}}: memref<?x?xbf16>, %{{[^:]+}}: memref<?xbf16>, %{{[^:]+}}: memref<?x?xbf16>, %{{[^:]+}}: memref<?x?xbf16>, %{{[^:]+}}: memref<?xbf16>, %{{[^:]+}}: f32, %{{[^:]+}}: f32, %{{[^:]+}}: i1)
// HALF-NOT: func.func @syn_{{.*}}_f32

// `neurons` restricts generation to the named neurons (this run reads the
// whole file as one module).
// PICK-NOT: func.func @{{.*}}_f32(
// PICK:     func.func @other_final_state_f32(
// PICK-NOT: func.func @{{.*}}_f32(

flexsn.neuron @syn inputs(%x: f32, %i_syn: f32) states(%v: f32)
    outputs(spike, current)
    params(%tau: f32 = 2.0, %v_th: f32 = 1.0 runtime, %w: f32 = 0.5 trainable,
           %hard: i1 = true runtime) {
  %c = arith.addf %x, %i_syn : f32
  %cw = arith.mulf %c, %w : f32
  %dv = arith.divf %v, %tau : f32
  %h = arith.addf %dv, %cw : f32
  %over = arith.subf %h, %v_th : f32
  %s = flexsn.spike %over surrogate(#flexsn.sigmoid) : f32
  %zero = arith.constant 0.0 : f32
  %v1 = arith.select %hard, %zero, %h : f32
  flexsn.yield %s, %cw, %v1 : f32, f32, f32
}

flexsn.neuron @other inputs(%x: f32) states(%v: f32) outputs(y) {
  %h = arith.addf %v, %x : f32
  flexsn.yield %h, %h : f32, f32
}

// A stateless neuron: both kernels take only its sequences, and the
// final-state scan has nothing to write beyond its outputs.
// RELAY-LABEL: func.func @relay_inference_f32(
// RELAY-SAME:    %{{[^:]+}}: memref<?x?xf32>, %{{[^:]+}}: memref<?x?xf32>)
// RELAY-LABEL: func.func @relay_final_state_f32(
// RELAY-SAME:    %{{[^:]+}}: memref<?x?xf32>, %{{[^:]+}}: memref<?x?xf32>)
// RELAY:         flexsn.scan @relay
// RELAY-NOT:     final_states
// RELAY:         return
flexsn.neuron @relay inputs(%x: f32) outputs(y) {
  flexsn.yield %x : f32
}

// Two states (CUBA-LIF, all parameters const): two inits and two state buffers,
// in state order, and no scalar arguments.
// CUBA-LABEL: func.func @cuba_lif_inference_f32(
// CUBA-SAME:    %[[X:[^:]+]]: memref<?x?xf32>,
// CUBA-SAME:    %[[C0:[^:]+]]: memref<?xf32>, %[[V0:[^:]+]]: memref<?xf32>,
// CUBA-SAME:    %[[S:[^:]+]]: memref<?x?xf32>,
// CUBA-SAME:    %[[CS:[^:]+]]: memref<?x?xf32>, %[[VS:[^:]+]]: memref<?x?xf32>)
// CUBA-SAME:    attributes {flexsn.kernel = #flexsn.kernel<"cuba_lif", inference, f32,
// CUBA-SAME:      <"c_init", initial_state, f32, per_neuron, state_init 0>, <"v_init", initial_state, f32, per_neuron, state_init 1>,
// CUBA-SAME:      <"c_seq", state_sequence, f32, sequence, state_seq 0>, <"v_seq", state_sequence, f32, sequence, state_seq 1>]>}
// CUBA-NEXT:    flexsn.scan @cuba_lif ins(%[[X]] : memref<?x?xf32>)
// CUBA-SAME:      inits(%[[C0]], %[[V0]] : memref<?xf32>, memref<?xf32>)
// CUBA-SAME:      outs(%[[S]] : memref<?x?xf32>)
// CUBA-SAME:      states(%[[CS]], %[[VS]] : memref<?x?xf32>, memref<?x?xf32>){{$}}
// CUBA-LABEL: func.func @cuba_lif_final_state_f32(
// CUBA-SAME:    %[[X:[^:]+]]: memref<?x?xf32>,
// CUBA-SAME:    %[[C0:[^:]+]]: memref<?xf32>, %[[V0:[^:]+]]: memref<?xf32>,
// CUBA-SAME:    %[[S:[^:]+]]: memref<?x?xf32>,
// CUBA-SAME:    %[[CF:[^:]+]]: memref<?xf32>, %[[VF:[^:]+]]: memref<?xf32>)
// CUBA-SAME:    attributes {flexsn.kernel = #flexsn.kernel<"cuba_lif", "final-state", f32,
// CUBA-SAME:      <"c_final", final_state, f32, per_neuron, state_final 0>, <"v_final", final_state, f32, per_neuron, state_final 1>]>}
// CUBA-NEXT:    flexsn.scan @cuba_lif ins(%[[X]] : memref<?x?xf32>)
// CUBA-SAME:      inits(%[[C0]], %[[V0]] : memref<?xf32>, memref<?xf32>)
// CUBA-SAME:      outs(%[[S]] : memref<?x?xf32>)
// CUBA-SAME:      states(%[[CF]], %[[VF]] : memref<?xf32>, memref<?xf32>){{$}}
