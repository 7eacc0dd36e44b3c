// RUN: flexsn-opt %s | flexsn-opt | FileCheck %s --check-prefix=ROUNDTRIP
// RUN: flexsn-opt %s --mlir-print-op-generic | flexsn-opt | FileCheck %s --check-prefix=ROUNDTRIP
// RUN: flexsn-opt %s --flexsn-generate-kernels=variants=inference | FileCheck %s --check-prefix=KERNEL
// RUN: flexsn-opt %s --flexsn-autodiff | FileCheck %s --check-prefix=TRAIN
// RUN: flexsn-opt %s --flexsn-generate-kernels=variants=inference --convert-flexsn-to-scf | FileCheck %s --check-prefix=LOOPS
// RUN: flexsn-opt %s --flexsn-autodiff=storage-types=f16 --convert-flexsn-to-gpu --cse | FileCheck %s --check-prefix=GPU
// RUN: flexsn-opt %neurons/lif.mlir --flexsn-set-params='kinds=v_threshold=trainable shapes=v_threshold=per_neuron' --flexsn-generate-kernels=variants=final-state | FileCheck %s --check-prefix=SET

// A per-neuron parameter: one f32 value per neuron, an [N] buffer of every
// kernel; the body sees its neuron's value.

// ROUNDTRIP-LABEL: flexsn.neuron @threshold
// ROUNDTRIP:         params(%tau: f32 = 2.0 trainable, %v_threshold: f32 = 1.0 trainable per_neuron)
// ROUNDTRIP-LABEL: flexsn.neuron @gain
// ROUNDTRIP:         params(%gain: f32 = 0.5 runtime per_neuron)
flexsn.neuron @threshold inputs(%x: f32) states(%v: f32) outputs(spike)
    params(%tau: f32 = 2.0 trainable, %v_threshold: f32 = 1.0 trainable per_neuron) {
  %one = arith.constant 1.0 : f32
  %in = arith.subf %x, %v : f32
  %d = arith.divf %in, %tau : f32
  %h = arith.addf %v, %d : f32
  %over = arith.subf %h, %v_threshold : f32
  %s = flexsn.spike %over surrogate(#flexsn.sigmoid<alpha = 4.0>) : f32
  %keep = arith.subf %one, %s : f32
  %v1 = arith.mulf %keep, %h : f32
  flexsn.yield %s, %v1 : f32, f32
}

flexsn.neuron @gain inputs(%x: f32) outputs(y)
    params(%gain: f32 = 0.5 runtime per_neuron) {
  %y = arith.mulf %x, %gain : f32
  flexsn.yield %y : f32
}

// The per-neuron parameter's buffer follows the step's buffers; the scalar
// runtime parameters stay scalar arguments. The scan takes both, in the
// neuron's order, and the per-neuron one through its implied map.
// KERNEL-LABEL: func.func @threshold_inference_f32(
// KERNEL-SAME:      %[[X:.*]]: memref<?x?xf32>, %[[V0:.*]]: memref<?xf32>, %[[S:.*]]: memref<?x?xf32>, %[[V:.*]]: memref<?x?xf32>, %[[TH:.*]]: memref<?xf32>, %[[TAU:.*]]: f32)
// KERNEL-SAME:      <"v_seq", state_sequence, f32, sequence, state_seq 0>, <"v_threshold", per_neuron_param, f32, per_neuron, param "v_threshold" per_neuron>], params = [<"tau", 2.000000e+00 : f32, trainable>]>
// KERNEL:         flexsn.scan @threshold ins(%[[X]] : memref<?x?xf32>) inits(%[[V0]] : memref<?xf32>) params(%[[TAU]], %[[TH]] : f32, memref<?xf32>) outs(%[[S]] : memref<?x?xf32>) states(%[[V]] : memref<?x?xf32>)
// KERNEL-NOT:       indexing_maps
// KERNEL-LABEL: func.func @gain_inference_f32(
// KERNEL-SAME:      %{{.*}}: memref<?x?xf32>, %{{.*}}: memref<?x?xf32>, %{{.*}}: memref<?xf32>)
// KERNEL-SAME:      buffers = [<"x", input_sequence, f32, sequence, input 0>, <"y", output_sequence, f32, sequence, output 0>, <"gain", per_neuron_param, f32, per_neuron, param "gain" per_neuron>]>

// Training: the forward takes the values after its saved sequence; the
// backward after the initial-state gradients, then writes one gradient per
// trainable parameter: the scalar one summed over T and N (a reduction
// slot), the per-neuron one summed over T only.
// TRAIN-LABEL: func.func @threshold_forward_f32(
// TRAIN-SAME:      <"saved0", saved_output, f32, sequence, saved 0>, <"v_threshold", per_neuron_param, f32, per_neuron, param "v_threshold" per_neuron>], params = [<"tau", 2.000000e+00 : f32, trainable>], workspace_sequences = 1, reduction_slots = 1>
// TRAIN-LABEL: func.func @threshold_backward_f32(
// TRAIN-SAME:      %[[TH:arg[0-9]+]]: memref<?xf32>, %[[TAU_GRAD:arg[0-9]+]]: memref<f32>, %[[TH_GRAD:arg[0-9]+]]: memref<?xf32>, %[[TAU:arg[0-9]+]]: f32)
// TRAIN-SAME:      <"v_init_grad", final_state, f32, per_neuron, grad state_init 0>, <"v_threshold", per_neuron_param, f32, per_neuron, param "v_threshold" per_neuron>, <"tau_grad", param_gradient, f32, scalar, grad param "tau">, <"v_threshold_grad", per_neuron_param_gradient, f32, per_neuron, grad param "v_threshold" per_neuron>], params = [<"tau", 2.000000e+00 : f32, trainable>], workspace_sequences = 1, reduction_slots = 1>
// TRAIN:         flexsn.scan reverse
// TRAIN-SAME:      params(%[[TAU]], %[[TH]] : f32, memref<?xf32>)
// TRAIN-SAME:      reductions(%[[TAU_GRAD]], %[[TH_GRAD]] : memref<f32>, memref<?xf32>)
// TRAIN-NOT:       indexing_maps
// TRAIN-LABEL: func.func @gain_backward_f32(
// TRAIN-SAME:      <"gain", per_neuron_param, f32, per_neuron, param "gain" per_neuron>]>

// On the CPU, a per-neuron value is read once per neuron, before the loop
// over time.
// LOOPS-LABEL: func.func @gain_inference_f32(
// LOOPS-SAME:      %[[X:.*]]: memref<?x?xf32>, %[[Y:.*]]: memref<?x?xf32>, %[[G:.*]]: memref<?xf32>)
// LOOPS:         scf.for %[[N:.*]] =
// LOOPS:           %[[GN:.*]] = memref.load %[[G]][%[[N]]] : memref<?xf32>
// LOOPS:           scf.for %[[T:.*]] =
// LOOPS:             %[[XN:.*]] = memref.load %[[X]][%[[T]], %[[N]]]
// LOOPS:             arith.mulf %[[XN]], %[[GN]] : f32

// On the GPU each thread loads its neurons' values once, as one vector,
// and stores their gradients once, as one vector: no atomics and no
// deterministic variant when no gradient is summed over neurons. The
// scalar tau's gradient is still summed over the block, then added with
// one atomic.
// GPU-LABEL: module attributes {flexsn.gpu_kernels = [
// GPU-SAME:    #flexsn.compiled_kernel<"threshold_backward_f16", {{[^#]*}}vector_width = 8, vector_entry = "threshold_backward_f16_vec", scalar_entry = "threshold_backward_f16_scalar">
// GPU-SAME:    #flexsn.compiled_kernel<"threshold_backward_f16_deterministic"
// GPU-NOT:     #flexsn.compiled_kernel<"gain_backward_f16_deterministic"
// GPU-LABEL: gpu.func @threshold_backward_f16_vec(
// GPU-SAME:      %[[TH:arg[0-9]+]]: !llvm.ptr, %[[TAU_GRAD:arg[0-9]+]]: !llvm.ptr, %[[TH_GRAD:arg[0-9]+]]: !llvm.ptr, %{{[a-z0-9]+}}: i64, %{{[a-z0-9]+}}: i64, %{{[a-z0-9]+}}: i64, %{{[a-z0-9]+}}: f32)
// GPU:         %[[AT:.*]] = llvm.getelementptr %[[TH]][%[[FIRST:.*]]{{\]}} : (!llvm.ptr, i64) -> !llvm.ptr, f32
// GPU-NEXT:    llvm.load %[[AT]] {alignment = 16 : i64} : !llvm.ptr -> vector<8xf32>
// GPU:         scf.for
// GPU:         %[[OUT:.*]] = llvm.getelementptr %[[TH_GRAD]][%[[FIRST]]{{\]}} : (!llvm.ptr, i64) -> !llvm.ptr, f32
// GPU:         llvm.store %{{.*}}, %[[OUT]] {alignment = 16 : i64} : vector<8xf32>, !llvm.ptr
// GPU-NOT:     llvm.atomicrmw fadd %[[TH_GRAD]]
// GPU:         llvm.atomicrmw fadd %[[TAU_GRAD]]
// GPU-LABEL: gpu.func @gain_backward_f16_vec(
// GPU-NOT:     llvm.atomicrmw
// GPU-NOT:     gpu.shuffle
// GPU:         gpu.return

// flexsn-set-params turns a shipped neuron's scalar into a per-neuron one.
// SET-LABEL: func.func @lif_final_state_f32(
// SET-SAME:      <"v_threshold", per_neuron_param, f32, per_neuron, param "v_threshold" per_neuron>]>
// SET:         flexsn.scan @lif {{.*}} params(%{{.*}} : memref<?xf32>)
