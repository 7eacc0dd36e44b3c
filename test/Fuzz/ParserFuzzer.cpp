//===- ParserFuzzer.cpp - Fuzz target: parsing and verifying a neuron file ===//
//
// Part of the FlexSN project: an MLIR compiler for spiking-neuron dynamics.
//
//===----------------------------------------------------------------------===//
//
// Parses arbitrary text as flexsn-opt does (every dialect the tools
// register), which also runs every verifier. Properties:
//   - a rejected input gets at least one error diagnostic;
//   - an accepted module prints, in the custom form, text that parses and
//     verifies again and prints identically (the printers and parsers agree);
//   - its generic form parses back to the same module.
//
//===----------------------------------------------------------------------===//

#include "FuzzerSupport.h"

#include "flexsn/Tools/Registration.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/OperationSupport.h"
#include "mlir/IR/OwningOpRef.h"
#include "mlir/Parser/Parser.h"

#include "llvm/Support/raw_ostream.h"

#include <string>

using namespace mlir;

namespace {

const DialectRegistry &getRegistry() {
  static DialectRegistry *registry = [] {
    auto *r = new DialectRegistry();
    flexsn::registerAllDialects(*r);
    return r;
  }();
  return *registry;
}

std::string print(ModuleOp module, bool generic) {
  std::string text;
  llvm::raw_string_ostream os(text);
  OpPrintingFlags flags;
  if (generic)
    flags.printGenericOpForm();
  module->print(os, flags);
  return text;
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  MLIRContext context(getRegistry(), MLIRContext::Threading::DISABLED);
  bool emittedError = false;
  ScopedDiagnosticHandler handler(&context, [&](Diagnostic &diag) {
    emittedError |= diag.getSeverity() == DiagnosticSeverity::Error;
    return success();
  });

  std::string text(reinterpret_cast<const char *>(data), size);
  OwningOpRef<ModuleOp> module = parseSourceString<ModuleOp>(text, &context);
  if (!module) {
    FLEXSN_FUZZ_CHECK(emittedError, "the parser failed without an error");
    return 0;
  }
  FLEXSN_FUZZ_CHECK(!emittedError, "the parser succeeded after an error");

  std::string custom = print(*module, /*generic=*/false);
  OwningOpRef<ModuleOp> reparsed =
      parseSourceString<ModuleOp>(custom, &context);
  FLEXSN_FUZZ_CHECK(reparsed, "the printed module does not parse");
  FLEXSN_FUZZ_CHECK(print(*reparsed, false) == custom,
                    "printing the reparsed module gives other text");

  std::string generic = print(*module, /*generic=*/true);
  OwningOpRef<ModuleOp> fromGeneric =
      parseSourceString<ModuleOp>(generic, &context);
  FLEXSN_FUZZ_CHECK(fromGeneric, "the generic form does not parse");
  FLEXSN_FUZZ_CHECK(print(*fromGeneric, false) == custom,
                    "the generic form parses to another module");
  return 0;
}
