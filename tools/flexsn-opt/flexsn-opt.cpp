//===- flexsn-opt.cpp - The FlexSN optimizer driver -----------------------===//
//
// Part of the FlexSN project: an MLIR compiler for spiking-neuron dynamics.
//
//===----------------------------------------------------------------------===//
//
// mlir-opt with the flexsn dialect and every FlexSN pass and pipeline.
//
//===----------------------------------------------------------------------===//

#include "flexsn/Tools/DeepStack.h"
#include "flexsn/Tools/Registration.h"

#include "mlir/IR/DialectRegistry.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"

static int optMain(int argc, char **argv) {
  mlir::flexsn::configureTool("flexsn-opt");
  mlir::DialectRegistry registry;
  mlir::flexsn::registerAllDialects(registry);
  mlir::flexsn::registerAllPasses();
  return mlir::asMainReturnCode(
      mlir::MlirOptMain(argc, argv, "FlexSN optimizer driver\n", registry));
}

int main(int argc, char **argv) {
  return mlir::flexsn::runOnDeepStack(optMain, argc, argv);
}
