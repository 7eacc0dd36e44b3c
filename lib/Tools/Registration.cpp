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
#include "flexsn/Dialect/FlexSN/Transforms/ScanInterfaceImpls.h"
#include "flexsn/Pipelines/Pipelines.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/InitAllDialects.h"
#include "mlir/InitAllExtensions.h"
#include "mlir/InitAllPasses.h"
#include "mlir/Target/LLVMIR/Dialect/All.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/MemoryBuffer.h"

using namespace mlir;

/// The source text at `loc` (empty if the file cannot be read).
static StringRef textAt(FileLineColLoc loc,
                        std::unique_ptr<llvm::MemoryBuffer> &buffer) {
  auto file = llvm::MemoryBuffer::getFile(loc.getFilename().getValue());
  if (!file)
    return {};
  buffer = std::move(*file);
  StringRef text = buffer->getBuffer();
  for (unsigned line = 1; line < loc.getLine(); ++line) {
    size_t end = text.find('\n');
    if (end == StringRef::npos)
      return {};
    text = text.drop_front(end + 1);
  }
  if (loc.getColumn() == 0 || loc.getColumn() > text.size())
    return {};
  return text.drop_front(loc.getColumn() - 1);
}

/// MLIR's parser says "use of undeclared SSA value name" without the name;
/// this adds it (`'%q'`), read from the source at the error's location.
/// Runs before the tool's own handler and passes the diagnostic on.
static void nameUndeclaredValues(MLIRContext *context) {
  context->getDiagEngine().registerHandler([](Diagnostic &diag) {
    auto loc = dyn_cast<FileLineColLoc>(diag.getLocation());
    if (diag.getSeverity() != DiagnosticSeverity::Error || !loc ||
        diag.str() != "use of undeclared SSA value name")
      return failure();
    std::unique_ptr<llvm::MemoryBuffer> buffer;
    StringRef text = textAt(loc, buffer);
    if (!text.starts_with("%"))
      return failure();
    size_t size = 1;
    while (size < text.size() && (llvm::isAlnum(text[size]) ||
                                  StringRef("$._-#").contains(text[size])))
      ++size;
    diag << " '" << text.take_front(size) << "'";
    return failure();
  });
}

void mlir::flexsn::registerFlexSNDialect(DialectRegistry &registry) {
  registry.insert<FlexSNDialect>();
  registerDerivativeRules(registry);
  registerBufferizableOpInterfaceExternalModels(registry);
  registerTilingInterfaceExternalModels(registry);
}

void mlir::flexsn::registerAllDialects(DialectRegistry &registry) {
  mlir::registerAllDialects(registry);
  mlir::registerAllExtensions(registry);
  // gpu-module-to-binary translates device code to LLVM IR in process.
  mlir::registerAllToLLVMIRTranslations(registry);
  registerFlexSNDialect(registry);
  // Neuron files load the flexsn dialect first thing.
  registry.addExtension(+[](MLIRContext *context, FlexSNDialect *) {
    nameUndeclaredValues(context);
  });
}

void mlir::flexsn::registerAllPasses() {
  mlir::registerAllPasses();
  registerFlexSNPasses();
  registerFlexSNConversionPasses();
  registerPipelines();
}
