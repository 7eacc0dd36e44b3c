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

#include "MlirFuzzing.h"

#include "mlir/IR/OperationSupport.h"

#include "llvm/Support/raw_ostream.h"

using namespace mlir;
using namespace mlir::flexsn::fuzzing;

namespace {

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
  FuzzContext fuzz;
  OwningOpRef<ModuleOp> module = fuzz.parse(toText(data, size));
  if (!module) {
    FLEXSN_FUZZ_CHECK(fuzz.emittedError, "the parser failed without an error");
    return 0;
  }
  FLEXSN_FUZZ_CHECK(!fuzz.emittedError, "the parser succeeded after an error");

  std::string custom = print(*module, /*generic=*/false);
  OwningOpRef<ModuleOp> reparsed = fuzz.parse(custom);
  FLEXSN_FUZZ_CHECK(reparsed, "the printed module does not parse");
  FLEXSN_FUZZ_CHECK(print(*reparsed, false) == custom,
                    "printing the reparsed module gives other text");

  std::string generic = print(*module, /*generic=*/true);
  OwningOpRef<ModuleOp> fromGeneric = fuzz.parse(generic);
  FLEXSN_FUZZ_CHECK(fromGeneric, "the generic form does not parse");
  FLEXSN_FUZZ_CHECK(print(*fromGeneric, false) == custom,
                    "the generic form parses to another module");
  return 0;
}
