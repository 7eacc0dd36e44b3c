//===- Pipelines.h - FlexSN pass pipelines ----------------------*- C++ -*-===//
//
// Part of the FlexSN project: an MLIR compiler for spiking-neuron dynamics.
//
//===----------------------------------------------------------------------===//

#ifndef FLEXSN_PIPELINES_PIPELINES_H
#define FLEXSN_PIPELINES_PIPELINES_H

#include "mlir/Pass/PassOptions.h"

namespace mlir {
class OpPassManager;

namespace flexsn {

/// Options of `flexsn-lower-to-cpu`.
struct LowerToCPUOptions : public PassPipelineOptions<LowerToCPUOptions> {
  ListOption<std::string> variants{
      *this, "variants",
      llvm::cl::desc("Kernel variants: inference, final-state (default both)")};
  ListOption<std::string> storageTypes{
      *this, "storage-types",
      llvm::cl::desc("Sequence storage types: f32, f16, bf16 (default f32)")};
  ListOption<std::string> neurons{
      *this, "neurons", llvm::cl::desc("Neurons to compile (default: all)")};
  Option<bool> generateKernels{
      *this, "generate-kernels",
      llvm::cl::desc("Generate kernel functions from the neurons first; "
                     "false lowers the scans already in the module"),
      llvm::cl::init(true)};
};

/// Neuron definitions to the LLVM dialect, runnable by mlir-runner and
/// ExecutionEngine: kernel generation, scan to loops, surrogate expansion,
/// then the standard lowering to LLVM with C-interface wrappers.
void buildLowerToCPUPipeline(OpPassManager &pm,
                             const LowerToCPUOptions &options);

/// Registers every FlexSN pipeline with the pass registry.
void registerPipelines();

} // namespace flexsn
} // namespace mlir

#endif // FLEXSN_PIPELINES_PIPELINES_H
