// The pipelines fuse first (fuse=true, the default): a block marked
// flexsn.block (test/Pipelines/Inputs/bn_lif_block.mlir) compiles to one
// kernel; with fuse=false, kernel generation names the op that stayed.
//
// RUN: flexsn-opt %S/Inputs/bn_lif_block.mlir --flexsn-lower-to-cpu=variants=inference \
// RUN: | FileCheck %s
// RUN: not flexsn-opt %S/Inputs/bn_lif_block.mlir \
// RUN:   '--flexsn-lower-to-cpu=variants=inference fuse=false' -o /dev/null 2>&1 \
// RUN: | FileCheck %s --check-prefix=UNFUSED

// CHECK:       flexsn.cpu_kernels = [#flexsn.compiled_kernel<"bn_lif_inference_f32", <"bn_lif", inference, f32, buffers = [<"x", input_sequence, f32, sequence>, <"v_init", initial_state, f32, per_neuron>, <"scale", per_channel_param, f32, per_channel>, <"shift", per_channel_param, f32, per_channel>, <"y", output_sequence, f32, sequence>, <"v", final_state, f32, per_neuron>]>>
// CHECK:       llvm.func @bn_lif_inference_f32(

// UNFUSED:     error: block @bn_lif: 'linalg.generic' runs outside its scan

// A block is compiled by the inference variant only; without it, the
// lowering says so rather than leave the block uncompiled.
// RUN: not flexsn-opt %S/Inputs/bn_lif_block.mlir \
// RUN:   '--flexsn-lower-to-cpu=variants=final-state' -o /dev/null 2>&1 \
// RUN: | FileCheck %s --check-prefix=NO-INFERENCE
// NO-INFERENCE: error: block @bn_lif has no kernel: blocks compile to inference kernels (flexsn-generate-kernels with variants including inference)
