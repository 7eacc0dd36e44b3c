//===- Registration.cpp - What every FlexSN tool registers ----------------===//
//
// Part of the FlexSN project: an MLIR compiler for spiking-neuron dynamics.
//
//===----------------------------------------------------------------------===//

#include "flexsn/Tools/Registration.h"
#include "flexsn/Conversion/Passes.h"
#include "flexsn/Dialect/FlexSN/IR/FlexSNDialect.h"
#include "flexsn/Dialect/FlexSN/Transforms/AdjointBuilder.h"
#include "flexsn/Dialect/FlexSN/Transforms/Passes.h"
#include "flexsn/Pipelines/Pipelines.h"

#include "mlir/InitAllDialects.h"
#include "mlir/InitAllExtensions.h"
#include "mlir/InitAllPasses.h"
#include "mlir/Target/LLVMIR/Dialect/All.h"

void mlir::flexsn::registerFlexSNDialect(DialectRegistry &registry) {
  registry.insert<FlexSNDialect>();
  registerDerivativeRules(registry);
}

void mlir::flexsn::registerAllDialects(DialectRegistry &registry) {
  mlir::registerAllDialects(registry);
  mlir::registerAllExtensions(registry);
  // gpu-module-to-binary translates device code to LLVM IR in process.
  mlir::registerAllToLLVMIRTranslations(registry);
  registerFlexSNDialect(registry);
}

void mlir::flexsn::registerAllPasses() {
  mlir::registerAllPasses();
  registerFlexSNPasses();
  registerFlexSNConversionPasses();
  registerPipelines();
}
