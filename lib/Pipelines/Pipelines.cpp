//===- Pipelines.cpp - FlexSN pass pipelines ------------------------------===//
//
// Part of the FlexSN project: an MLIR compiler for spiking-neuron dynamics.
//
//===----------------------------------------------------------------------===//

#include "flexsn/Pipelines/Pipelines.h"
#include "flexsn/Conversion/Passes.h"
#include "flexsn/Dialect/FlexSN/IR/FlexSNAttrs.h"
#include "flexsn/Dialect/FlexSN/Transforms/Passes.h"
#include "flexsn/Pipelines/Passes.h"

#include "mlir/Conversion/AffineToStandard/AffineToStandard.h"
#include "mlir/Conversion/ConvertToLLVM/ToLLVMPass.h"
#include "mlir/Conversion/GPUToNVVM/GPUToNVVMPass.h"
#include "mlir/Conversion/MathToLLVM/MathToLLVM.h"
#include "mlir/Conversion/MathToLibm/MathToLibm.h"
#include "mlir/Conversion/MemRefToLLVM/MemRefToLLVM.h"
#include "mlir/Conversion/OpenMPToLLVM/ConvertOpenMPToLLVM.h"
#include "mlir/Conversion/ReconcileUnrealizedCasts/ReconcileUnrealizedCasts.h"
#include "mlir/Conversion/SCFToControlFlow/SCFToControlFlow.h"
#include "mlir/Dialect/Arith/Transforms/Passes.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/GPU/Transforms/Passes.h"
#include "mlir/Dialect/LLVMIR/Transforms/RequestCWrappers.h"
#include "mlir/Dialect/MemRef/Transforms/Passes.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Transforms/Passes.h"
#include "llvm/Support/JSON.h"

using namespace mlir;
using namespace mlir::flexsn;
namespace json = llvm::json;

/// A list option's items, spelled as requests spell them.
template <typename List, typename Spell>
static json::Value spellList(const List &list, Spell spell) {
  json::Array items;
  for (const auto &item : list)
    items.push_back(spell(item).str());
  return items;
}

/// `name=value` as pass-option text: a list's items joined by commas.
static std::string formatOption(StringRef name, const json::Value &value) {
  std::string text = (name + "=").str();
  llvm::raw_string_ostream os(text);
  if (const json::Array *items = value.getAsArray())
    llvm::interleave(
        *items, os, [&](const json::Value &item) { os << *item.getAsString(); },
        ",");
  else
    os << value;
  return text;
}

#define GEN_PASS_FORWARDING
#include "flexsn/Pipelines/CompileRequest.inc"

/// Training variants come from autodiff, the others from kernel
/// generation.
static bool isTrainingVariant(KernelVariant variant) {
  return variant == KernelVariant::Forward ||
         variant == KernelVariant::Backward;
}

/// Fusion (when `fuse` is set: producers and consumers into scans, then
/// scans into each other), then, with `generate`, kernel generation for
/// the plain variants and autodiff for the training ones, with sequences
/// stored as `storage` (empty: the passes' default).
template <typename Derived>
static void addKernelPasses(OpPassManager &pm,
                            const KernelOptions<Derived> &options,
                            ArrayRef<StorageType> storage, bool generate) {
  // Declared blocks first: fusion works on their functions.
  pm.addPass(createFlexSNExpandBlocks());
  if (options.fuse) {
    pm.addPass(createFlexSNFuseProducers());
    pm.addPass(createFlexSNFuseConsumers());
    pm.addPass(createFlexSNFuseSiblings());
  }
  if (!generate)
    return;
  SmallVector<KernelVariant> plain, training;
  for (KernelVariant variant : options.variants)
    (isTrainingVariant(variant) ? training : plain).push_back(variant);
  // Blocks: inference kernels for inference, forward kernels (which
  // autodiff completes) for training.
  FlexSNGenerateBlockKernelsOptions blocks;
  if (options.variants.empty() ||
      llvm::is_contained(options.variants, KernelVariant::Inference))
    blocks.variants.push_back(KernelVariant::Inference);
  if (!training.empty())
    blocks.variants.push_back(KernelVariant::Forward);
  if (!blocks.variants.empty())
    pm.addPass(createFlexSNGenerateBlockKernels(blocks));
  if (options.variants.empty() || !plain.empty()) {
    FlexSNGenerateKernelsOptions kernels;
    kernels.variants.assign(plain.begin(), plain.end());
    kernels.storageTypes.assign(storage.begin(), storage.end());
    forwardToFlexSNGenerateKernels(options, kernels);
    pm.addPass(createFlexSNGenerateKernels(kernels));
  }
  if (!training.empty()) {
    FlexSNAutodiffOptions autodiff;
    autodiff.storageTypes.assign(storage.begin(), storage.end());
    forwardToFlexSNAutodiff(options, autodiff);
    pm.addPass(createFlexSNAutodiff(autodiff));
  }
  if (options.coupledKernels) {
    FlexSNCoupleKernelsOptions couple;
    forwardToFlexSNCoupleKernels(options, couple);
    pm.addPass(createFlexSNCoupleKernels(couple));
  }
}

void mlir::flexsn::buildLowerToCPUPipeline(OpPassManager &pm,
                                           const LowerToCPUOptions &options) {
  addKernelPasses(pm, options,
                  SmallVector<StorageType>(options.storageTypes.begin(),
                                           options.storageTypes.end()),
                  options.generateKernels);
  ConvertFlexSNToSCFOptions toLoops;
  toLoops.parallel = options.parallel;
  toLoops.vectorWidth = options.vectorWidth;
  pm.addPass(createConvertFlexSNToSCF(toLoops));
  pm.addPass(createFlexSNExpandSurrogates());
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createCSEPass());

  // bf16 conversions as integer ops: LLVM would call __truncsfbf2, which
  // older C runtimes (libgcc before GCC 13) lack, so an ahead-of-time
  // compiled library could not be loaded.
  arith::ArithExpandOpsPassOptions expand;
  expand.includeBf16 = true;
  pm.addPass(arith::createArithExpandOpsPass(expand));
  pm.addNestedPass<func::FuncOp>(LLVM::createLLVMRequestCWrappersPass());
  // Math ops LLVM has intrinsics for, then libm calls for the rest (atan,
  // erf), which the JIT resolves in the host process.
  pm.addPass(createConvertMathToLLVMPass());
  pm.addPass(createConvertMathToLibmPass());
  pm.addPass(memref::createExpandStridedMetadataPass());
  // Tiled scans (and views of views) compute offsets and sizes as affine
  // maps.
  pm.addPass(createLowerAffinePass());
  pm.addPass(createFinalizeMemRefToLLVMConversionPass());
  pm.addPass(createSCFToControlFlowPass());
  pm.addPass(createConvertOpenMPToLLVMPass());
  pm.addPass(createConvertToLLVMPass());
  pm.addPass(createReconcileUnrealizedCastsPass());
}

void mlir::flexsn::buildLowerToNVVMPipeline(OpPassManager &pm,
                                            const LowerToNVVMOptions &options) {
  FlexSNCheckGPUOptionsOptions check;
  check.toolkit = options.toolkit;
  check.format = options.format;
  check.chips.assign(options.chips.begin(), options.chips.end());
  check.features = options.features;
  pm.addPass(createFlexSNCheckGPUOptions(check));

  SmallVector<StorageType> storage(options.storageTypes.begin(),
                                   options.storageTypes.end());
  if (storage.empty())
    storage = {StorageType::F32, StorageType::F16, StorageType::BF16};
  addKernelPasses(pm, options, storage, /*generate=*/true);
  pm.addPass(createConvertFlexSNToGPU());
  FlexSNExpandSurrogatesOptions surrogates;
  surrogates.approximateFunctions = options.approximateSurrogates;
  pm.addPass(createFlexSNExpandSurrogates(surrogates));
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createCSEPass());

  SmallVector<std::string> chips(options.chips.begin(), options.chips.end());
  if (chips.empty())
    chips = {"sm_90"};
  for (const std::string &chip : chips) {
    GpuNVVMAttachTargetOptions target;
    target.chip = chip;
    target.features = options.features;
    target.optLevel = options.optLevel;
    pm.addPass(createGpuNVVMAttachTarget(target));
  }
  OpPassManager &device = pm.nest<gpu::GPUModuleOp>();
  device.addPass(createSCFToControlFlowPass());
  ConvertGpuOpsToNVVMOpsOptions nvvm;
  nvvm.indexBitwidth = 64;
  device.addPass(createConvertGpuOpsToNVVMOps(nvvm));
  device.addPass(createCanonicalizerPass());
  device.addPass(createCSEPass());
  device.addPass(createReconcileUnrealizedCastsPass());

  GpuModuleToBinaryPassOptions binary;
  binary.toolkitPath = options.toolkit;
  binary.compilationTarget = options.format;
  // ptxas optimizes the module's kernels on every core: the same machine
  // code, in about half the time on two cores (docs/Rationale.md).
  binary.cmdOptions = "--split-compile 0";
  pm.addPass(createGpuModuleToBinaryPass(binary));
}

using ErrorHandler = function_ref<LogicalResult(const Twine &)>;

/// The checks both pipelines make of their kernel options before building:
/// no list given empty, and no option set away from its default that only
/// a pass the variants do not run reads (training variants alone run no
/// flexsn-generate-kernels, the others no flexsn-autodiff).
template <typename Derived, typename... Lists>
static LogicalResult
checkKernelOptions(StringRef pipeline, const KernelOptions<Derived> &options,
                   ErrorHandler errorHandler, const Lists &...lists) {
  if (failed(applyToKernelLists(options, [&](const auto &...kernelLists) {
        return checkListOptions(pipeline, errorHandler, kernelLists...,
                                lists...);
      })))
    return failure();
  if (options.variants.empty())
    return success();
  std::optional<std::string> unused;
  StringRef kernels;
  if (llvm::all_of(options.variants, isTrainingVariant)) {
    unused = getOptionUnusedWithoutFlexSNGenerateKernels(options);
    kernels = "inference and final-state kernels (flexsn-generate-kernels)";
  } else if (llvm::none_of(options.variants, isTrainingVariant)) {
    unused = getOptionUnusedWithoutFlexSNAutodiff(options);
    kernels = "training kernels (flexsn-autodiff)";
  }
  if (!unused)
    return success();
  return errorHandler(
      pipeline + ": " + *unused + " applies to " + kernels + ", but variants=" +
      llvm::join(llvm::map_range(options.variants, stringifyKernelVariant),
                 ",") +
      " builds none");
}

/// Registers a pipeline whose options `check` validates when the pipeline
/// is parsed: a bad combination is an error, not a silent default.
template <typename Options>
static void registerCheckedPipeline(
    StringRef name, StringRef description,
    const std::function<void(OpPassManager &, const Options &)> &build,
    const std::function<LogicalResult(const Options &, ErrorHandler)> &check) {
  registerPassPipeline(
      name, description,
      [=](OpPassManager &pm, StringRef text, ErrorHandler errorHandler) {
        Options options;
        if (failed(options.parseFromString(text)) ||
            failed(check(options, errorHandler)))
          return failure();
        build(pm, options);
        return success();
      },
      [](function_ref<void(const mlir::detail::PassOptions &)> optHandler) {
        optHandler(Options());
      });
}

LogicalResult
mlir::flexsn::checkLowerToNVVMOptions(const LowerToNVVMOptions &options,
                                      ErrorHandler errorHandler) {
  return checkKernelOptions("flexsn-lower-to-nvvm", options, errorHandler,
                            options.chips);
}

LogicalResult
mlir::flexsn::checkLowerToCPUOptions(const LowerToCPUOptions &options,
                                     ErrorHandler errorHandler) {
  return checkKernelOptions("flexsn-lower-to-cpu", options, errorHandler);
}

void mlir::flexsn::registerPipelines() {
  registerFlexSNPipelinePasses();
  registerCheckedPipeline<LowerToNVVMOptions>(
      "flexsn-lower-to-nvvm",
      "Lower neuron definitions to GPU kernels in a gpu.binary (cubin, "
      "fatbin or PTX) for NVIDIA GPUs",
      buildLowerToNVVMPipeline, checkLowerToNVVMOptions);
  registerCheckedPipeline<LowerToCPUOptions>(
      "flexsn-lower-to-cpu",
      "Lower neuron definitions to LLVM-dialect CPU kernels (inference and "
      "final-state variants)",
      buildLowerToCPUPipeline, checkLowerToCPUOptions);
}
