//===- Translation.cpp - Registering a module translation -----------------===//
//
// Part of the FlexSN project: an MLIR compiler for spiking-neuron dynamics.
//
//===----------------------------------------------------------------------===//

#include "flexsn/Tools/Translation.h"

#include "flexsn/Tools/ParserHazards.h"
#include "flexsn/Tools/Registration.h"

#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Tools/mlir-translate/Translation.h"

using namespace mlir;

void mlir::flexsn::registerModuleTranslation(
    StringRef name, StringRef description,
    const std::function<LogicalResult(ModuleOp, raw_ostream &)> &translate) {
  TranslateRegistration registration(
      name, description,
      [translate](const std::shared_ptr<llvm::SourceMgr> &sourceMgr,
                  raw_ostream &os, MLIRContext *context) -> LogicalResult {
        DialectRegistry registry;
        registerAllDialects(registry);
        context->appendDialectRegistry(registry);
        if (failed(checkParserHazards(*sourceMgr, context)))
          return failure();
        // A file of operations without a module gets one, as upstream's
        // translations do.
        OwningOpRef<ModuleOp> module =
            parseSourceFile<ModuleOp>(sourceMgr, context);
        if (!module || failed(verify(*module)))
          return failure();
        return translate(*module, os);
      });
}
