//===- AllTargets.cpp - Registers every target of the build ---------------===//
//
// Part of the FlexSN project: an MLIR compiler for spiking-neuron dynamics.
//
//===----------------------------------------------------------------------===//

#include "flexsn/Targets/Target.h"

#include <mutex>

namespace mlir::flexsn {
// Each target's folder defines register<Name>Target()
// (FLEXSN_REGISTER_TARGET).
#define FLEXSN_TARGET(Name) void register##Name##Target();
#include "AllTargets.inc"
#undef FLEXSN_TARGET
} // namespace mlir::flexsn

void mlir::flexsn::registerAllTargets() {
  static std::once_flag once;
  std::call_once(once, [] {
#define FLEXSN_TARGET(Name) register##Name##Target();
#include "AllTargets.inc"
#undef FLEXSN_TARGET
  });
}
