//===- Pipelines.h - FlexSN pass pipelines ----------------------*- C++ -*-===//
//
// Part of the FlexSN project: an MLIR compiler for spiking-neuron dynamics.
//
//===----------------------------------------------------------------------===//

#ifndef FLEXSN_PIPELINES_PIPELINES_H
#define FLEXSN_PIPELINES_PIPELINES_H

#include "flexsn/Dialect/FlexSN/IR/EnumOptions.h"

#include "mlir/Pass/PassOptions.h"

namespace mlir {
class OpPassManager;

namespace flexsn {

// The options' members are declared with the compile request's fields, in
// CompileRequest.td: each option's pass-option name, type, default and
// description once, for the pipelines and for requests alike.

/// The options both pipelines take for fusion, kernel generation and
/// autodiff.
template <typename Derived>
struct KernelOptions : public PassPipelineOptions<Derived> {
#define GEN_KERNEL_OPTIONS
#include "flexsn/Pipelines/CompileRequest.inc"
};

/// Options of `flexsn-lower-to-cpu`.
struct LowerToCPUOptions : public KernelOptions<LowerToCPUOptions> {
#define GEN_CPU_OPTIONS
#include "flexsn/Pipelines/CompileRequest.inc"
};

/// Options of `flexsn-lower-to-nvvm`.
struct LowerToNVVMOptions : public KernelOptions<LowerToNVVMOptions> {
#define GEN_CUDA_OPTIONS
#include "flexsn/Pipelines/CompileRequest.inc"
};

/// Neuron definitions to a module whose `gpu.binary` holds the kernels (two
/// per variant and storage type: vectorized and scalar), with the kernels'
/// signatures in the `flexsn.gpu_kernels` attribute.
void buildLowerToNVVMPipeline(OpPassManager &pm,
                              const LowerToNVVMOptions &options);

/// Neuron definitions to the LLVM dialect, runnable by mlir-runner and
/// ExecutionEngine: kernel generation, scan to loops, surrogate expansion,
/// then the standard lowering to LLVM with C-interface wrappers.
void buildLowerToCPUPipeline(OpPassManager &pm,
                             const LowerToCPUOptions &options);

/// The checks each pipeline makes of its options when it is parsed (an
/// empty or repeated list, an option that only a pass the variants do not
/// run reads), reported through `errorHandler`: the same checks for
/// options that are not parsed from text (a compile request).
LogicalResult checkLowerToNVVMOptions(
    const LowerToNVVMOptions &options,
    function_ref<LogicalResult(const Twine &)> errorHandler);
LogicalResult
checkLowerToCPUOptions(const LowerToCPUOptions &options,
                       function_ref<LogicalResult(const Twine &)> errorHandler);

/// Registers every FlexSN pipeline, and the passes only they run
/// (`flexsn-check-gpu-options`), with the pass registry.
void registerPipelines();

} // namespace flexsn
} // namespace mlir

#endif // FLEXSN_PIPELINES_PIPELINES_H
