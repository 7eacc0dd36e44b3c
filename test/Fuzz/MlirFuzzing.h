//===- MlirFuzzing.h - Parsing fuzz inputs as the tools do --------*- C++
//-*-===//
//
// Part of the FlexSN project: an MLIR compiler for spiking-neuron dynamics.
//
//===----------------------------------------------------------------------===//
//
// The parser and pipeline fuzz targets parse their input in a context like
// the tools' (every dialect they register) and watch its error diagnostics.
//
//===----------------------------------------------------------------------===//

#ifndef FLEXSN_TEST_FUZZ_MLIRFUZZING_H
#define FLEXSN_TEST_FUZZ_MLIRFUZZING_H

#include "flexsn/Tools/ParserHazards.h"
#include "flexsn/Tools/Registration.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/OwningOpRef.h"
#include "mlir/Parser/Parser.h"

#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/SourceMgr.h"

#include <cstdint>
#include <string>

namespace mlir::flexsn::fuzzing {

/// A single-threaded context with the tools' dialects that records whether
/// an error was reported (and prints nothing).
class FuzzContext {
public:
  FuzzContext()
      : context(getRegistry(), MLIRContext::Threading::DISABLED),
        handler(&context, [this](Diagnostic &diag) {
          emittedError |= diag.getSeverity() == DiagnosticSeverity::Error;
          return success();
        }) {}

  /// Parses `text` into a module (verified); null if it does not parse.
  /// Like the tools, it first checks the text for what upstream parsers
  /// crash on.
  OwningOpRef<ModuleOp> parse(const std::string &text) {
    llvm::SourceMgr sourceMgr;
    sourceMgr.AddNewSourceBuffer(
        llvm::MemoryBuffer::getMemBuffer(text, "fuzz-input"), llvm::SMLoc());
    if (failed(checkParserHazards(sourceMgr, &context)))
      return nullptr;
    return parseSourceFile<ModuleOp>(sourceMgr, &context);
  }

  MLIRContext context;
  bool emittedError = false;

private:
  static const DialectRegistry &getRegistry() {
    static DialectRegistry *registry = [] {
      auto *r = new DialectRegistry();
      registerAllDialects(*r);
      return r;
    }();
    return *registry;
  }

  ScopedDiagnosticHandler handler;
};

inline std::string toText(const uint8_t *data, size_t size) {
  return std::string(reinterpret_cast<const char *>(data), size);
}

} // namespace mlir::flexsn::fuzzing

#endif // FLEXSN_TEST_FUZZ_MLIRFUZZING_H
