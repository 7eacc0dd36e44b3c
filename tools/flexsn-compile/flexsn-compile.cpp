//===- flexsn-compile.cpp - A neuron to kernels in one run ----------------===//
//
// Part of the FlexSN project: an MLIR compiler for spiking-neuron dynamics.
//
//===----------------------------------------------------------------------===//

#include "flexsn/Tools/DeepStack.h"
#include "flexsn/Tools/ToolMains.h"

int main(int argc, char **argv) {
  return mlir::flexsn::runOnDeepStack(mlir::flexsn::compileMain, argc, argv);
}
