// RUN: flexsn-opt %neurons/lif.mlir --flexsn-autodiff --flexsn-couple-kernels | FileCheck %s
// RUN: flexsn-opt %neurons/lif.mlir --flexsn-generate-kernels --flexsn-autodiff '--flexsn-couple-kernels=neurons=lif' | FileCheck %s --check-prefix=ALL
// RUN: not flexsn-opt %neurons/lif.mlir --flexsn-autodiff '--flexsn-couple-kernels=input=1' 2>&1 | FileCheck %s --check-prefix=NO-INPUT
// RUN: not flexsn-opt %neurons/lif.mlir --flexsn-autodiff '--flexsn-couple-kernels=neurons=plif' 2>&1 | FileCheck %s --check-prefix=NO-NEURON

// Each kernel of the neuron gets a coupled twin: the same buffers, then the
// weights (before the scalar parameters), and the coupling in its
// signature; the scan is the uncoupled kernel's.
// CHECK-LABEL: func.func @lif_forward_f32(
// CHECK-NOT: coupled_input
// CHECK-LABEL: func.func @lif_forward_f32_coupled(
// CHECK-SAME: %{{.*}}: memref<?x?xf32>, %[[W:.*]]: memref<?x?xf32>)
// CHECK-SAME: <"coupling", coupling_weights, f32, matrix, coupling>], workspace_sequences = 1, coupled_input = 0, coupled_output = 0>
// CHECK: flexsn.scan ins(
// CHECK-NOT: %[[W]]
// CHECK: return
// The backward twin couples the gradient of the output from that of the
// input.
// CHECK-LABEL: func.func @lif_backward_f32_coupled(
// CHECK-SAME: <"spike_grad", optional_input_sequence, f32, sequence, grad output 0>
// CHECK-SAME: <"x_grad", output_sequence, f32, sequence, grad input 0>
// CHECK-SAME: coupled_input = 0, coupled_output = 0>

// Inference and final-state kernels too.
// ALL-DAG: func.func @lif_inference_f32_coupled(
// ALL-DAG: func.func @lif_final_state_f32_coupled(
// ALL-DAG: func.func @lif_forward_final_state_f32_coupled(

// NO-INPUT: error: flexsn-couple-kernels: @lif has 1 input(s) and 1 output(s): it cannot couple output 0 into input 1
// NO-NEURON: error: flexsn-couple-kernels: no neuron 'plif'
