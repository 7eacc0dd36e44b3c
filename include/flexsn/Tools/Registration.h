//===- Registration.h - What every FlexSN tool registers --------*- C++ -*-===//
//
// Part of the FlexSN project: an MLIR compiler for spiking-neuron dynamics.
//
//===----------------------------------------------------------------------===//
//
// One registration entry point shared by flexsn-opt, flexsn-translate and the
// tests, so the tools always agree on what they understand.
//
//===----------------------------------------------------------------------===//

#ifndef FLEXSN_TOOLS_REGISTRATION_H
#define FLEXSN_TOOLS_REGISTRATION_H

#include "mlir/Support/LLVM.h"

namespace mlir {
class DialectRegistry;
} // namespace mlir

namespace mlir::flexsn {

/// Adds the flexsn dialect only.
void registerFlexSNDialect(DialectRegistry &registry);

/// Adds every upstream dialect and extension, and the flexsn dialect.
void registerAllDialects(DialectRegistry &registry);

/// Registers every upstream pass and pipeline, and every FlexSN one.
void registerAllPasses();

/// Registers every upstream translation, and every FlexSN one
/// (library FlexSNTranslations).
void registerAllTranslations();

/// What every tool does before parsing its command line: `--version` prints
/// FlexSN's version and the LLVM it was built against, and a diagnostic no
/// longer prints the operation it is about (for a module-level error, the
/// whole module; `--mlir-print-op-on-diagnostic` brings it back).
/// `versionDetails`, if given, prints more lines of `--version` (the tools
/// that compile CPU kernels name the CPU they compile for).
void configureTool(const char *toolName,
                   void (*versionDetails)(raw_ostream &) = nullptr);

} // namespace mlir::flexsn

#endif // FLEXSN_TOOLS_REGISTRATION_H
