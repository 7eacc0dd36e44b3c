// Ops of any dialect but llvm (at the start of a line or after `= `; the
// module keeps its `flexsn.cpu_kernels` list) must be gone.
// DEFINE: %{only_llvm} = --implicit-check-not='{{(^ *|= )(flexsn|scf|arith|math|memref|func|cf|vector|builtin)\.}}'

// RUN: flexsn-opt %neurons/lif.mlir --flexsn-lower-to-cpu \
// RUN: | FileCheck %s %{only_llvm}
// RUN: flexsn-opt %neurons/lif.mlir --flexsn-lower-to-cpu=storage-types=f16 \
// RUN: | FileCheck %s --check-prefix=F16 %{only_llvm}
// RUN: flexsn-opt %neurons/lif.mlir \
// RUN:   '--flexsn-lower-to-cpu=variants=inference storage-types=bf16' \
// RUN: | FileCheck %s --check-prefix=OPTIONS %{only_llvm}

// The default pipeline on LIF: both f32 kernels, each followed by its C
// wrapper; the module lists their signatures.
// CHECK: module attributes {flexsn.cpu_kernels = [#flexsn.compiled_kernel<"lif_inference_f32", <"lif", inference, f32,
// CHECK-SAME: #flexsn.compiled_kernel<"lif_final_state_f32", <"lif", "final-state", f32,
// CHECK: llvm.func @lif_inference_f32({{.*}}) attributes {llvm.emit_c_interface}
// CHECK: llvm.func @_mlir_ciface_lif_inference_f32(
// CHECK: llvm.func @lif_final_state_f32({{.*}}) attributes {llvm.emit_c_interface}
// CHECK: llvm.func @_mlir_ciface_lif_final_state_f32(

// storage-types=f16 gives f16 kernels only, converting to and from f32.
// F16-NOT: _f32(
// F16:     llvm.func @lif_inference_f16(
// F16:     llvm.fpext %{{.*}} : f16 to f32
// F16:     llvm.fptrunc %{{.*}} : f32 to f16
// F16:     llvm.func @_mlir_ciface_lif_inference_f16(
// F16:     llvm.func @lif_final_state_f16(
// F16:     llvm.func @_mlir_ciface_lif_final_state_f16(
// F16-NOT: _f32(

// The pipeline forwards variants and storage types to flexsn-generate-kernels.
// OPTIONS-NOT: llvm.func @{{.*}}_f32(
// OPTIONS:     llvm.func @lif_inference_bf16(
// OPTIONS:     llvm.func @_mlir_ciface_lif_inference_bf16(
// OPTIONS-NOT: final_state

// Every neuron shipped in lib/Neurons lowers in all storage types to LLVM
// dialect only, one RUN line per file (COUNT guards the list).
// RUN: ls %neurons | grep -c '\.mlir$' | FileCheck %s --check-prefix=COUNT
// COUNT: {{^}}7{{$}}
// DEFINE: %{all} = --flexsn-lower-to-cpu=storage-types=f32,f16,bf16
// RUN: flexsn-opt %neurons/if.mlir %{all} | FileCheck %s --check-prefix=ALL %{only_llvm}
// RUN: flexsn-opt %neurons/lif.mlir %{all} | FileCheck %s --check-prefix=ALL %{only_llvm}
// RUN: flexsn-opt %neurons/plif.mlir %{all} | FileCheck %s --check-prefix=ALL %{only_llvm}
// RUN: flexsn-opt %neurons/qif.mlir %{all} | FileCheck %s --check-prefix=ALL %{only_llvm}
// RUN: flexsn-opt %neurons/eif.mlir %{all} | FileCheck %s --check-prefix=ALL %{only_llvm}
// RUN: flexsn-opt %neurons/izhikevich.mlir %{all} | FileCheck %s --check-prefix=ALL %{only_llvm}
// RUN: flexsn-opt %neurons/cuba_lif.mlir %{all} | FileCheck %s --check-prefix=ALL %{only_llvm}
// ALL: llvm.func @[[N:[a-z_]+]]_inference_f32(
// ALL: llvm.func @_mlir_ciface_[[N]]_inference_f32(
// ALL: llvm.func @[[N]]_inference_f16(
// ALL: llvm.func @_mlir_ciface_[[N]]_inference_f16(
// ALL: llvm.func @[[N]]_inference_bf16(
// ALL: llvm.func @_mlir_ciface_[[N]]_inference_bf16(
// ALL: llvm.func @[[N]]_final_state_f32(
// ALL: llvm.func @_mlir_ciface_[[N]]_final_state_f32(
// ALL: llvm.func @[[N]]_final_state_f16(
// ALL: llvm.func @_mlir_ciface_[[N]]_final_state_f16(
// ALL: llvm.func @[[N]]_final_state_bf16(
// ALL: llvm.func @_mlir_ciface_[[N]]_final_state_bf16(
