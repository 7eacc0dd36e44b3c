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

/// The options both pipelines take for fusion, kernel generation and
/// autodiff.
template <typename Derived>
struct KernelOptions : public PassPipelineOptions<Derived> {
  using Options = ::mlir::detail::PassOptions;
  Options::ListOption<KernelVariant> variants{
      *this, "variants",
      llvm::cl::desc("Kernel variants: inference, final-state (default "
                     "both), forward, backward (training, by autodiff)")};
  Options::ListOption<StorageType> storageTypes{
      *this, "storage-types",
      llvm::cl::desc("Sequence storage types: f32, f16, bf16 (default: f32 "
                     "on the CPU, all three on the GPU)")};
  Options::Option<bool> storeAll{
      *this, "store-all",
      llvm::cl::desc("Training: save every value the backward step reads"),
      llvm::cl::init(false)};
  Options::Option<bool> saveInStorageType{
      *this, "save-in-storage-type",
      llvm::cl::desc("Training: save values in the storage type (f16/bf16: "
                     "half the bytes of f32, a backward at rounded values); "
                     "false: in f32"),
      llvm::cl::init(true)};
  Options::ListOption<std::string> neurons{
      *this, "neurons", llvm::cl::desc("Neurons to compile (default: all)")};
  Options::ListOption<SpikeStorage> spikeStorage{
      *this, "spike-storage",
      llvm::cl::desc("Inference and final-state kernels: how spike outputs "
                     "are stored: dense (default), u8 and/or bits")};
  Options::Option<bool> coupledKernels{
      *this, "coupled-kernels",
      llvm::cl::desc("Also build each neuron kernel coupled from the "
                     "neuron's first output into its first input "
                     "(flexsn-couple-kernels): a recurrent layer's kernels"),
      llvm::cl::init(false)};
  Options::Option<bool> fuse{
      *this, "fuse",
      llvm::cl::desc("Fuse first: elementwise linalg ops into the scans "
                     "they feed or read, scans over one domain into one "
                     "(flexsn-fuse-producers, -consumers, -siblings), so "
                     "that a block marked flexsn.block becomes one kernel"),
      llvm::cl::init(true)};
};

/// Options of `flexsn-lower-to-cpu`.
struct LowerToCPUOptions : public KernelOptions<LowerToCPUOptions> {
  Option<bool> generateKernels{
      *this, "generate-kernels",
      llvm::cl::desc("Generate kernel functions from the neurons first; "
                     "false lowers the scans already in the module"),
      llvm::cl::init(true)};
  Option<bool> parallel{
      *this, "parallel",
      llvm::cl::desc("Run chunks of neurons across threads with OpenMP "
                     "(the code then needs libomp; kernel functions take a "
                     "trailing thread count); false gives serial loops"),
      llvm::cl::init(true)};
  Option<unsigned> vectorWidth{
      *this, "vector-width",
      llvm::cl::desc("With parallel: neurons per SIMD vector (8: one AVX2 "
                     "register of f32; 0: one neuron at a time)"),
      llvm::cl::init(8)};
};

/// Options of `flexsn-lower-to-nvvm`.
struct LowerToNVVMOptions : public KernelOptions<LowerToNVVMOptions> {
  ListOption<std::string> chips{
      *this, "chip",
      llvm::cl::desc("Target architectures, e.g. sm_90 (default) or "
                     "sm_80,sm_90: one object per chip")};
  Option<std::string> features{*this, "features",
                               llvm::cl::desc("PTX features (default +ptx80)"),
                               llvm::cl::init("+ptx80")};
  Option<std::string> toolkit{
      *this, "toolkit",
      llvm::cl::desc("CUDA toolkit: ptxas and libdevice are found there"),
      llvm::cl::init("/usr/local/cuda")};
  Option<unsigned> optLevel{*this, "opt-level",
                            llvm::cl::desc("Optimization level (0-3)"),
                            llvm::cl::init(3)};
  Option<std::string> format{
      *this, "format",
      llvm::cl::desc("Object format: bin (cubin), fatbin or isa (PTX)"),
      llvm::cl::init("bin")};
  Option<bool> approximateSurrogates{
      *this, "approximate-surrogates",
      llvm::cl::desc("Evaluate surrogate gradients with the GPU's "
                     "approximate exp, division... (a few ulp): backward "
                     "kernels issue fewer instructions"),
      llvm::cl::init(false)};
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
/// empty or repeated list, compact spike storage with no kernel to store
/// spikes compactly), reported through `errorHandler`: the same checks for
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
