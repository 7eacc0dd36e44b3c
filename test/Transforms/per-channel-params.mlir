// RUN: flexsn-opt %s | flexsn-opt | FileCheck %s --check-prefix=ROUNDTRIP
// RUN: flexsn-opt %s --mlir-print-op-generic | flexsn-opt | FileCheck %s --check-prefix=ROUNDTRIP
// RUN: flexsn-opt %s --flexsn-generate-kernels=variants=inference | FileCheck %s --check-prefix=KERNEL
// RUN: flexsn-opt %s --flexsn-autodiff | FileCheck %s --check-prefix=TRAIN
// RUN: flexsn-opt %s --flexsn-generate-kernels=variants=inference --convert-flexsn-to-scf | FileCheck %s --check-prefix=LOOPS
// RUN: flexsn-opt %s --flexsn-autodiff=storage-types=f16 --convert-flexsn-to-gpu --cse | FileCheck %s --check-prefix=GPU
// RUN: flexsn-opt %neurons/plif.mlir --flexsn-set-params='shapes=w=per_channel' --flexsn-autodiff | FileCheck %s --check-prefix=SET

// A per-channel parameter: one f32 value per channel, a [C] buffer of every
// kernel; the body sees its neuron's channel's value. A neuron with one
// sees its neurons as [B, C, S], so its kernels take [T, B, C, S]
// sequences and index the parameter by c.

// ROUNDTRIP-LABEL: flexsn.neuron @scaled
// ROUNDTRIP:         %tau: f32 = 2.0 trainable,
// ROUNDTRIP-NEXT:    %w: f32 = 1.0 trainable per_channel,
// ROUNDTRIP-NEXT:    %th: f32 = 1.0 runtime per_neuron) {
// ROUNDTRIP-LABEL: flexsn.neuron @gain
// ROUNDTRIP:         params(%gain: f32 = 0.5 runtime per_channel)
flexsn.neuron @scaled inputs(%x: f32) states(%v: f32) outputs(spike)
    params(%tau: f32 = 2.0 trainable, %w: f32 = 1.0 trainable per_channel,
           %th: f32 = 1.0 runtime per_neuron) {
  %one = arith.constant 1.0 : f32
  %xw = arith.mulf %x, %w : f32
  %in = arith.subf %xw, %v : f32
  %d = arith.divf %in, %tau : f32
  %h = arith.addf %v, %d : f32
  %over = arith.subf %h, %th : f32
  %s = flexsn.spike %over surrogate(#flexsn.sigmoid<alpha = 4.0>) : f32
  %keep = arith.subf %one, %s : f32
  %v1 = arith.mulf %keep, %h : f32
  flexsn.yield %s, %v1 : f32, f32
}

flexsn.neuron @gain inputs(%x: f32) outputs(y)
    params(%gain: f32 = 0.5 runtime per_channel) {
  %y = arith.mulf %x, %gain : f32
  flexsn.yield %y : f32
}

// The kernel views sequences as [T, B, C, S], states and per-neuron values
// as [B, C, S]; the scan's maps are those of the buffers' shape classes,
// the per-channel one (t, b, c, s) -> (c).
// KERNEL-DAG:   #[[$SEQ:.*]] = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>
// KERNEL-DAG:   #[[$NEURON:.*]] = affine_map<(d0, d1, d2, d3) -> (d1, d2, d3)>
// KERNEL-DAG:   #[[$SCALAR:.*]] = affine_map<(d0, d1, d2, d3) -> ()>
// KERNEL-DAG:   #[[$CHANNEL:.*]] = affine_map<(d0, d1, d2, d3) -> (d2)>
// KERNEL-LABEL: func.func @scaled_inference_f32(
// KERNEL-SAME:      %[[X:.*]]: memref<?x?x?x?xf32>, %[[V0:.*]]: memref<?x?x?xf32>, %[[S:.*]]: memref<?x?x?x?xf32>, %[[V:.*]]: memref<?x?x?x?xf32>, %[[W:.*]]: memref<?xf32>, %[[TH:.*]]: memref<?x?x?xf32>, %[[TAU:.*]]: f32)
// KERNEL-SAME:      <"w", per_channel_param, f32, per_channel, param "w" per_channel>, <"th", per_neuron_param, f32, per_neuron, param "th" per_neuron>], params = [<"tau", 2.000000e+00 : f32, trainable>]>
// KERNEL:         flexsn.scan @scaled ins(%[[X]] : memref<?x?x?x?xf32>) inits(%[[V0]] : memref<?x?x?xf32>) params(%[[TAU]], %[[W]], %[[TH]] : f32, memref<?xf32>, memref<?x?x?xf32>) outs(%[[S]] : memref<?x?x?x?xf32>) states(%[[V]] : memref<?x?x?x?xf32>)
// KERNEL-SAME:      indexing_maps = [#[[$SEQ]], #[[$NEURON]], #[[$SCALAR]], #[[$CHANNEL]], #[[$NEURON]], #[[$SEQ]], #[[$SEQ]]]
// KERNEL-LABEL: func.func @gain_inference_f32(
// KERNEL-SAME:      %{{.*}}: memref<?x?x?x?xf32>, %{{.*}}: memref<?x?x?x?xf32>, %{{.*}}: memref<?xf32>)

// Training: the per-channel gradient is a reduction that keeps only c
// (summed over t, b and s), after the scalar tau's; only tau takes a
// reduction slot.
// TRAIN-DAG:    #[[$CHANNEL:.*]] = affine_map<(d0, d1, d2, d3) -> (d2)>
// TRAIN-LABEL: func.func @scaled_backward_f32(
// TRAIN-SAME:      %[[W:arg[0-9]+]]: memref<?xf32>, %[[TH:arg[0-9]+]]: memref<?x?x?xf32>, %[[TAU_GRAD:arg[0-9]+]]: memref<f32>, %[[W_GRAD:arg[0-9]+]]: memref<?xf32>, %[[TAU:arg[0-9]+]]: f32)
// TRAIN-SAME:      <"tau_grad", param_gradient, f32, scalar, grad param "tau">, <"w_grad", per_channel_param_gradient, f32, per_channel, grad param "w" per_channel>], params = [<"tau", 2.000000e+00 : f32, trainable>], workspace_sequences = 1, reduction_slots = 1>
// TRAIN:         flexsn.scan reverse
// TRAIN-SAME:      params(%[[TAU]], %[[W]], %[[TH]] : f32, memref<?xf32>, memref<?x?x?xf32>)
// TRAIN-SAME:      reductions(%[[TAU_GRAD]], %[[W_GRAD]] : memref<f32>, memref<?xf32>)
// TRAIN-SAME:      #[[$CHANNEL]]]

// On the CPU, the loops run over b, c and s; a per-channel value is read
// once per neuron, at its channel, before the loop over time.
// LOOPS-LABEL: func.func @gain_inference_f32(
// LOOPS-SAME:      %[[X:.*]]: memref<?x?x?x?xf32>, %[[Y:.*]]: memref<?x?x?x?xf32>, %[[G:.*]]: memref<?xf32>)
// LOOPS:         scf.for %[[B:.*]] =
// LOOPS:           scf.for %[[C:.*]] =
// LOOPS:             scf.for %[[S:.*]] =
// LOOPS:               %[[GC:.*]] = memref.load %[[G]][%[[C]]] : memref<?xf32>
// LOOPS:               scf.for %[[T:.*]] =
// LOOPS:                 %[[XN:.*]] = memref.load %[[X]][%[[T]], %[[B]], %[[C]], %[[S]]]
// LOOPS:                 arith.mulf %[[XN]], %[[GC]] : f32

// On the GPU the kernels take C and S after T, N and ld. Each thread
// divides once for its first neuron's channel, (n / S) mod C, and steps
// the rest; it reads each lane's value at its channel. The per-channel
// gradient is summed per lane over time, then into the block's slots in
// workgroup memory (one per channel the block can touch, zeroed first;
// by the warp when it holds one channel, else by each thread, or lane),
// and each nonzero slot is added to its channel's gradient with one global
// atomic. The deterministic variant stores the per-channel gradient per
// neuron instead ([N]: each neuron's sum over time, which the caller sums
// over each channel's neurons) and sums the scalar one (tau) through the
// reduction scratch.
// GPU-LABEL: module attributes {flexsn.gpu_kernels = [
// GPU-SAME:    #flexsn.compiled_kernel<"scaled_backward_f16", {{[^#]*}}vector_width = 8, vector_entry = "scaled_backward_f16_vec", scalar_entry = "scaled_backward_f16_scalar">
// GPU-SAME:    #flexsn.compiled_kernel<"scaled_backward_f16_deterministic", {{.*}}<"tau_grad", param_gradient, f32, scalar, grad param "tau">, <"w_grad", per_neuron_param_gradient, f32, per_neuron, grad param "w" per_channel>, <"reduction_scratch", reduction_scratch, f32, scratch, scratch>]{{.*}}deterministic = true, vector_entry = "scaled_backward_f16_deterministic_vec", scalar_entry = "scaled_backward_f16_deterministic_scalar">
// GPU-LABEL: gpu.func @scaled_backward_f16_vec(
// GPU-SAME:      %[[W:arg7]]: !llvm.ptr, %{{[a-z0-9]+}}: !llvm.ptr, %[[TAU_GRAD:arg9]]: !llvm.ptr, %[[W_GRAD:arg10]]: !llvm.ptr, %{{[a-z0-9]+}}: i64, %{{[a-z0-9]+}}: i64, %{{[a-z0-9]+}}: i64, %[[C:arg14]]: i64, %[[S:arg15]]: i64, %{{[a-z0-9]+}}: f32)
// 256 threads x 8 lanes + 2 slots.
// GPU-SAME:      workgroup(%{{.*}} : memref<8xf32, #gpu.address_space<workgroup>>, %[[SLOTS:.*]] : memref<2050xf32, #gpu.address_space<workgroup>>)
// GPU:           %[[BLOCK_START:.*]] = arith.muli %{{.*}}, %c2048_i64 : i64
// GPU-NEXT:      %[[BQ:.*]] = arith.divui %[[BLOCK_START]], %[[S]] : i64
// GPU-NEXT:      %[[BLOCK_C:.*]] = arith.remui %[[BQ]], %[[C]] : i64
// GPU:           scf.for %{{.*}} = %thread_id_x to %c2050 step %c256 {
// GPU-NEXT:        arith.constant 0.0
// GPU-NEXT:        memref.store %{{.*}}, %[[SLOTS]]
// GPU:           gpu.barrier
// GPU:           %[[Q:.*]] = arith.divui %[[FIRST:.*]], %[[S]] : i64
// GPU-NEXT:      %[[C0:.*]] = arith.remui %[[Q]], %[[C]] : i64
// GPU:           %[[AT:.*]] = llvm.getelementptr %[[W]][%[[C0]]{{\]}} : (!llvm.ptr, i64) -> !llvm.ptr, f32
// GPU-NEXT:      llvm.load %[[AT]] {alignment = 4 : i64} : !llvm.ptr -> f32
// GPU:           scf.for
// GPU:           %[[DIFF:.*]] = arith.subi %{{.*}}, %[[BLOCK_C]] : i64
// GPU-NEXT:      %[[NEG:.*]] = arith.cmpi slt, %[[DIFF]], %{{.*}} : i64
// GPU-NEXT:      %[[WRAPPED:.*]] = arith.addi %[[DIFF]], %[[C]] : i64
// GPU-NEXT:      arith.select %[[NEG]], %[[WRAPPED]], %[[DIFF]] : i64
// GPU:           memref.atomic_rmw addf %{{.*}}, %[[SLOTS]]
// GPU:           llvm.atomicrmw fadd %[[TAU_GRAD]]
// GPU:           gpu.shuffle  idx
// GPU:           gpu.shuffle  xor
// GPU:           memref.atomic_rmw addf %{{.*}}, %[[SLOTS]]
// GPU:           gpu.barrier
// GPU-NEXT:      scf.for %[[SLOT:.*]] = %thread_id_x to %c2050 step %c256 {
// GPU-NEXT:        %[[SUM:.*]] = memref.load %[[SLOTS]][%[[SLOT]]]
// GPU-NEXT:        %[[NONZERO:.*]] = arith.cmpf une, %[[SUM]], %{{.*}} : f32
// GPU-NEXT:        scf.if %[[NONZERO]] {
// GPU:               %[[OFFSET:.*]] = arith.index_castui %{{.*}} : index to i64
// GPU-NEXT:          %[[SUMC:.*]] = arith.addi %[[BLOCK_C]], %[[OFFSET]] : i64
// GPU-NEXT:          %[[CH:.*]] = arith.remui %[[SUMC]], %[[C]] : i64
// GPU-NEXT:          %[[LEAD:.*]] = llvm.getelementptr %[[W_GRAD]][%[[CH]]] : (!llvm.ptr, i64) -> !llvm.ptr, f32
// GPU-NEXT:          llvm.atomicrmw fadd %[[LEAD]], %[[SUM]] monotonic
// GPU:           gpu.return
// GPU-LABEL: gpu.func @scaled_backward_f16_deterministic_vec(
// GPU-SAME:      %[[W_GRAD:arg10]]: !llvm.ptr, %[[SCRATCH:arg11]]: !llvm.ptr,
// GPU-SAME:      workgroup(%{{.*}} : memref<8xf32, #gpu.address_space<workgroup>>, %{{.*}} : memref<1xi32, #gpu.address_space<workgroup>>)
// GPU-NOT:       memref.atomic_rmw
// GPU-NOT:       llvm.atomicrmw fadd
// GPU:           %[[AT:.*]] = llvm.getelementptr %[[W_GRAD]][%{{.*}}] : (!llvm.ptr, i64) -> !llvm.ptr, f32
// GPU:           llvm.store %{{.*}}, %[[AT]] {alignment = 16 : i64} : vector<8xf32>, !llvm.ptr
// GPU-NOT:       memref.atomic_rmw
// GPU-NOT:       llvm.atomicrmw fadd
// GPU:           llvm.atomicrmw add %[[SCRATCH]], %{{.*}} monotonic : !llvm.ptr, i32
// GPU-NOT:       llvm.atomicrmw fadd
// GPU:           gpu.return
// GPU-LABEL: gpu.func @gain_backward_f16_vec(
// GPU-NOT:       llvm.atomicrmw
// GPU:           gpu.return

// flexsn-set-params turns the shipped PLIF's w into a per-channel one.
// SET-LABEL: func.func @plif_backward_f32(
// SET-SAME:      <"w", per_channel_param, f32, per_channel, param "w" per_channel>, <"w_grad", per_channel_param_gradient, f32, per_channel, grad param "w" per_channel>]
// SET-SAME:      workspace_sequences = 1>}

