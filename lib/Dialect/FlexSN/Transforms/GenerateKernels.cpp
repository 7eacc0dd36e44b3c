//===- GenerateKernels.cpp - Kernel variants of each neuron ---------------===//
//
// Part of the FlexSN project: an MLIR compiler for spiking-neuron dynamics.
//
//===----------------------------------------------------------------------===//

#include "flexsn/Dialect/FlexSN/IR/FlexSNOps.h"
#include "flexsn/Dialect/FlexSN/Transforms/KernelInterface.h"
#include "flexsn/Dialect/FlexSN/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/Sequence.h"
#include "llvm/ADT/StringSet.h"

namespace mlir::flexsn {
#define GEN_PASS_DEF_FLEXSNGENERATEKERNELS
#include "flexsn/Dialect/FlexSN/Transforms/Passes.h.inc"
} // namespace mlir::flexsn

using namespace mlir;
using namespace mlir::flexsn;

namespace {

/// A kernel to build: its variant and how it stores sequences and spikes.
struct KernelRequest {
  KernelVariant variant;
  StorageType storage;
  SpikeStorage spikes;
};

/// Builds `@<neuron>_<variant>_<dtype>[_spikes_<u8|bits>]`: the ABI arguments,
/// then one scan calling the neuron.
func::FuncOp buildKernel(OpBuilder &builder, NeuronOp neuron,
                         const KernelRequest &request) {
  return createNeuronKernel(builder, neuron, request.variant, request.storage,
                            request.spikes, /*callNeuron=*/true);
}

struct GenerateKernelsPass
    : flexsn::impl::FlexSNGenerateKernelsBase<GenerateKernelsPass> {
  using Base::Base;

  LogicalResult initializeOptions(
      StringRef options,
      function_ref<LogicalResult(const Twine &)> errorHandler) override {
    if (failed(Base::initializeOptions(options, errorHandler)))
      return failure();
    return checkListOptionsGiven(getArgument(), errorHandler, variants,
                                 storageTypes, neurons, spikeStorage);
  }

  void runOnOperation() override {
    ModuleOp module = getOperation();
    SmallVector<std::string> variantNames(variants.begin(), variants.end());
    if (variantNames.empty())
      variantNames = {"inference", "final-state"};
    SmallVector<std::string> typeNames(storageTypes.begin(),
                                       storageTypes.end());
    if (typeNames.empty())
      typeNames = {"f32"};
    auto hasDuplicate = [](ArrayRef<std::string> names) {
      llvm::StringSet<> seen;
      return llvm::any_of(names, [&](const std::string &name) {
        return !seen.insert(name).second;
      });
    };
    SmallVector<std::string> spikeNames(spikeStorage.begin(),
                                        spikeStorage.end());
    if (spikeNames.empty())
      spikeNames = {"dense"};
    if (hasDuplicate(variantNames) || hasDuplicate(typeNames) ||
        hasDuplicate(spikeNames)) {
      module.emitError(
          "a kernel variant, storage type or spike storage is listed twice");
      return signalPassFailure();
    }
    SmallVector<SpikeStorage> spikeChoices;
    for (StringRef name : spikeNames) {
      std::optional<SpikeStorage> spikes = symbolizeSpikeStorage(name);
      if (!spikes) {
        module.emitError() << "unknown spike storage '" << name
                           << "'; expected dense, u8 or bits";
        return signalPassFailure();
      }
      spikeChoices.push_back(*spikes);
    }
    SmallVector<KernelRequest> requests;
    for (StringRef variantName : variantNames) {
      std::optional<KernelVariant> variant =
          symbolizeKernelVariant(variantName);
      if (!variant || (*variant != KernelVariant::Inference &&
                       *variant != KernelVariant::FinalState)) {
        module.emitError()
            << "unknown kernel variant '" << variantName
            << "'; expected inference or final-state here (the lowering "
               "pipelines also take forward and backward, which "
               "flexsn-autodiff generates)";
        return signalPassFailure();
      }
      for (StringRef typeName : typeNames) {
        FailureOr<StorageType> storage =
            parseStorageTypeOption(module, typeName);
        if (failed(storage))
          return signalPassFailure();
        for (SpikeStorage spikes : spikeChoices)
          requests.push_back({*variant, *storage, spikes});
      }
    }

    SmallVector<NeuronOp> selected;
    for (NeuronOp neuron : module.getOps<NeuronOp>())
      if (neurons.empty() || llvm::is_contained(neurons, neuron.getSymName()))
        selected.push_back(neuron);
    for (const std::string &name : neurons)
      if (!module.lookupSymbol<NeuronOp>(name)) {
        module.emitError() << "no neuron named '" << name << "'";
        return signalPassFailure();
      }

    SymbolTable symbols(module);
    OpBuilder builder = OpBuilder::atBlockEnd(module.getBody());
    auto insert = [&](func::FuncOp kernel) {
      if (symbols.lookup(kernel.getSymName())) {
        kernel.emitError() << "kernel name '" << kernel.getSymName()
                           << "' is already taken in the module";
        kernel.erase();
        return failure();
      }
      symbols.insert(kernel);
      return success();
    };

    for (NeuronOp neuron : selected) {
      bool hasSpikes =
          llvm::any_of(llvm::seq(neuron.getNumOutputs()),
                       [&](unsigned i) { return neuron.isSpikeOutput(i); });
      for (SpikeStorage spikes : spikeChoices)
        if (!hasSpikes && spikes != SpikeStorage::Dense) {
          neuron.emitError()
              << "spike-storage=" << stringifySpikeStorage(spikes)
              << ": neuron @" << neuron.getSymName()
              << " has no spike output (an output that is a flexsn.spike "
                 "result) to store compactly";
          return signalPassFailure();
        }
      for (const KernelRequest &request : requests)
        if (failed(insert(buildKernel(builder, neuron, request))))
          return signalPassFailure();
    }
  }
};

} // namespace
