//===- FuzzerMain.cpp - Replaying inputs without libFuzzer ----------------===//
//
// Part of the FlexSN project: an MLIR compiler for spiking-neuron dynamics.
//
//===----------------------------------------------------------------------===//
//
// main() of a fuzz target built without libFuzzer: runs the target once on
// every file named on the command line (LLVM's runFuzzerOnInputs), so the
// regular test suite replays the seed corpora and every past finding.
//
//===----------------------------------------------------------------------===//

#include "llvm/FuzzMutate/FuzzerCLI.h"

#include <cstddef>
#include <cstdint>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int main(int argc, char **argv) {
  return llvm::runFuzzerOnInputs(argc, argv, LLVMFuzzerTestOneInput);
}
