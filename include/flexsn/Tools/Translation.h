//===- Translation.h - Registering a module translation ---------*- C++ -*-===//
//
// Part of the FlexSN project: an MLIR compiler for spiking-neuron dynamics.
//
//===----------------------------------------------------------------------===//

#ifndef FLEXSN_TOOLS_TRANSLATION_H
#define FLEXSN_TOOLS_TRANSLATION_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Support/LLVM.h"

#include <functional>

namespace mlir::flexsn {

/// Registers a translation of a module (every dialect the tools know) for
/// flexsn-translate, as TranslateFromMLIRRegistration does, except that the
/// input is checked for text that upstream parsers crash on before it is
/// parsed (Tools/ParserHazards.h). The emitters themselves (lib/Target)
/// know nothing of tools: they are functions of a module.
void registerModuleTranslation(
    StringRef name, StringRef description,
    const std::function<LogicalResult(ModuleOp, raw_ostream &)> &translate);

} // namespace mlir::flexsn

#endif // FLEXSN_TOOLS_TRANSLATION_H
