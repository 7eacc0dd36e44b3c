//===- ToolOptions.cpp - Command-line behaviour shared by the tools -------===//
//
// Part of the FlexSN project: an MLIR compiler for spiking-neuron dynamics.
//
//===----------------------------------------------------------------------===//

#include "flexsn/Tools/Registration.h"

#include "mlir/IR/MLIRContext.h"
#include "llvm/Config/llvm-config.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/raw_ostream.h"

void mlir::flexsn::configureTool(const char *toolName,
                                 void (*versionDetails)(raw_ostream &)) {
  static const char *name = toolName;
  static void (*details)(raw_ostream &) = versionDetails;
  llvm::cl::SetVersionPrinter([](llvm::raw_ostream &os) {
    os << name << " (FlexSN " FLEXSN_VERSION ")\n  built with LLVM and MLIR "
       << LLVM_VERSION_STRING << "\n";
    if (details)
      details(os);
  });
  // MLIR prints the operation a diagnostic is about: for an error on the
  // module, the whole module, after the message that matters.
  mlir::registerMLIRContextCLOptions();
  auto &options = llvm::cl::getRegisteredOptions();
  auto it = options.find("mlir-print-op-on-diagnostic");
  if (it != options.end())
    static_cast<llvm::cl::opt<bool> *>(it->second)->setInitialValue(false);
}
