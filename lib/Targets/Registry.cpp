//===- Registry.cpp - The targets flexsn-compile knows --------------------===//
//
// Part of the FlexSN project: an MLIR compiler for spiking-neuron dynamics.
//
//===----------------------------------------------------------------------===//

#include "flexsn/Targets/Target.h"

#include "llvm/Support/ErrorHandling.h"

#include <mutex>
#include <vector>

using namespace mlir;
using namespace mlir::flexsn;

namespace {
struct Registry {
  std::mutex mutex;
  std::vector<std::unique_ptr<Target>> targets;
};

Registry &getRegistry() {
  static Registry registry;
  return registry;
}
} // namespace

void mlir::flexsn::registerTarget(std::unique_ptr<Target> target) {
  Registry &registry = getRegistry();
  std::lock_guard<std::mutex> lock(registry.mutex);
  for (const std::unique_ptr<Target> &known : registry.targets)
    if (known->getName() == target->getName())
      llvm::report_fatal_error("the target '" + target->getName() +
                               "' is registered twice");
  registry.targets.push_back(std::move(target));
}

SmallVector<Target *> mlir::flexsn::getTargets() {
  Registry &registry = getRegistry();
  std::lock_guard<std::mutex> lock(registry.mutex);
  SmallVector<Target *> targets;
  for (const std::unique_ptr<Target> &target : registry.targets)
    targets.push_back(target.get());
  return targets;
}

Target *mlir::flexsn::lookupTarget(StringRef name) {
  for (Target *target : getTargets())
    if (target->getName() == name)
      return target;
  return nullptr;
}
