//===- flexsn-translate.cpp - The FlexSN translation driver ---------------===//
//
// Part of the FlexSN project: an MLIR compiler for spiking-neuron dynamics.
//
//===----------------------------------------------------------------------===//
//
// mlir-translate with every upstream translation; FlexSN's own translations
// (cubin, fatbin, C header, manifest) register here as they land.
//
//===----------------------------------------------------------------------===//

#include "mlir/InitAllTranslations.h"
#include "mlir/Tools/mlir-translate/MlirTranslateMain.h"
#include "mlir/Tools/mlir-translate/Translation.h"

int main(int argc, char **argv) {
  mlir::registerAllTranslations();
  return mlir::failed(
      mlir::mlirTranslateMain(argc, argv, "FlexSN translation driver\n"));
}
