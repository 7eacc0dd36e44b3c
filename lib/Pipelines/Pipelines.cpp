//===- Pipelines.cpp - FlexSN pass pipelines ------------------------------===//
//
// Part of the FlexSN project: an MLIR compiler for spiking-neuron dynamics.
//
//===----------------------------------------------------------------------===//

#include "flexsn/Pipelines/Pipelines.h"
#include "flexsn/Conversion/Passes.h"
#include "flexsn/Dialect/FlexSN/Transforms/Passes.h"

#include "mlir/Conversion/ConvertToLLVM/ToLLVMPass.h"
#include "mlir/Conversion/MathToLLVM/MathToLLVM.h"
#include "mlir/Conversion/MathToLibm/MathToLibm.h"
#include "mlir/Conversion/MemRefToLLVM/MemRefToLLVM.h"
#include "mlir/Conversion/ReconcileUnrealizedCasts/ReconcileUnrealizedCasts.h"
#include "mlir/Conversion/SCFToControlFlow/SCFToControlFlow.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/Transforms/RequestCWrappers.h"
#include "mlir/Dialect/MemRef/Transforms/Passes.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Transforms/Passes.h"

using namespace mlir;
using namespace mlir::flexsn;

void mlir::flexsn::buildLowerToCPUPipeline(OpPassManager &pm,
                                           const LowerToCPUOptions &options) {
  FlexSNGenerateKernelsOptions kernels;
  kernels.variants.assign(options.variants.begin(), options.variants.end());
  kernels.storageTypes.assign(options.storageTypes.begin(),
                              options.storageTypes.end());
  kernels.neurons.assign(options.neurons.begin(), options.neurons.end());
  if (options.generateKernels)
    pm.addPass(createFlexSNGenerateKernels(kernels));
  pm.addPass(createConvertFlexSNToSCF());
  pm.addPass(createFlexSNExpandSurrogates());
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createCSEPass());

  pm.addNestedPass<func::FuncOp>(LLVM::createLLVMRequestCWrappersPass());
  // Math ops LLVM has intrinsics for, then libm calls for the rest (atan,
  // erf), which the JIT resolves in the host process.
  pm.addPass(createConvertMathToLLVMPass());
  pm.addPass(createConvertMathToLibmPass());
  pm.addPass(memref::createExpandStridedMetadataPass());
  pm.addPass(createFinalizeMemRefToLLVMConversionPass());
  pm.addPass(createSCFToControlFlowPass());
  pm.addPass(createConvertToLLVMPass());
  pm.addPass(createReconcileUnrealizedCastsPass());
}

void mlir::flexsn::registerPipelines() {
  PassPipelineRegistration<LowerToCPUOptions>(
      "flexsn-lower-to-cpu",
      "Lower neuron definitions to LLVM-dialect CPU kernels (inference and "
      "final-state variants)",
      buildLowerToCPUPipeline);
}
