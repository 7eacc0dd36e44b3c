//===- TranslateMain.cpp - The FlexSN translation driver -----------------===//
//
// Part of the FlexSN project: an MLIR compiler for spiking-neuron dynamics.
//
//===----------------------------------------------------------------------===//
//
// mlir-translate with every upstream translation and FlexSN's own
// (--flexsn-to-manifest today; cubin, fatbin and C header with the GPU path).
//
//===----------------------------------------------------------------------===//

#include "flexsn/Target/HostObject.h"
#include "flexsn/Tools/Registration.h"
#include "flexsn/Tools/ToolMains.h"

#include "mlir/Tools/mlir-translate/MlirTranslateMain.h"

int mlir::flexsn::translateMain(int argc, char **argv) {
  mlir::flexsn::configureTool("flexsn-translate",
                              mlir::flexsn::printHostObjectTarget);
  mlir::flexsn::registerAllTranslations();
  return mlir::failed(
      mlir::mlirTranslateMain(argc, argv, "FlexSN translation driver\n"));
}
