//===- flexsn-lsp-server.cpp - Language server for FlexSN .mlir files -----===//
//
// Part of the FlexSN project: an MLIR compiler for spiking-neuron dynamics.
//
//===----------------------------------------------------------------------===//
//
// MLIR's language server with every dialect flexsn-opt knows, the flexsn
// dialect included: an editor gets diagnostics (the dialect's verifiers),
// hover and go-to-definition in neuron files (docs/Editors.md).
//
//===----------------------------------------------------------------------===//

#include "flexsn/Tools/Registration.h"

#include "mlir/IR/DialectRegistry.h"
#include "mlir/Tools/mlir-lsp-server/MlirLspServerMain.h"

using namespace mlir;

int main(int argc, char **argv) {
  flexsn::configureTool("flexsn-lsp-server");
  DialectRegistry registry;
  flexsn::registerAllDialects(registry);
  return failed(MlirLspServerMain(argc, argv, registry));
}
