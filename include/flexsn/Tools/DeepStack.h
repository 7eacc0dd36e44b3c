//===- DeepStack.h - Run a tool's main on a large stack ---------*- C++ -*-===//
//
// Part of the FlexSN project: an MLIR compiler for spiking-neuron dynamics.
//
//===----------------------------------------------------------------------===//
//
// MLIR's parser and verifier recurse once per nesting level, so a deeply
// nested input (a few thousand levels) overflows the default 8 MiB stack and
// kills the tool. Running the tool's main on a thread with a 1 GiB stack
// (address space only; pages are touched as used) moves that limit beyond
// any input a person or a generator writes.
//
//===----------------------------------------------------------------------===//

#ifndef FLEXSN_TOOLS_DEEPSTACK_H
#define FLEXSN_TOOLS_DEEPSTACK_H

#include "llvm/Support/thread.h"

#include <optional>

namespace mlir::flexsn {

inline int runOnDeepStack(int (*mainFn)(int, char **), int argc, char **argv) {
  constexpr unsigned kStackBytes = 1u << 30;
  int result = 1;
  llvm::thread worker(std::optional<unsigned>(kStackBytes),
                      [&] { result = mainFn(argc, argv); });
  worker.join();
  return result;
}

} // namespace mlir::flexsn

#endif // FLEXSN_TOOLS_DEEPSTACK_H
