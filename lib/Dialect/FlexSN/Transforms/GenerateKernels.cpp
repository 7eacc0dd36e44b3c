//===- GenerateKernels.cpp - Kernel variants of each neuron ---------------===//
//
// Part of the FlexSN project: an MLIR compiler for spiking-neuron dynamics.
//
//===----------------------------------------------------------------------===//

#include "flexsn/Dialect/FlexSN/IR/FlexSNOps.h"
#include "flexsn/Dialect/FlexSN/Transforms/Passes.h"
#include "flexsn/Dialect/FlexSN/Utils/KernelFunctions.h"

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

/// A kernel to build: its variant, how it stores sequences and spikes.
struct KernelRequest {
  KernelVariant variant;
  StorageType storage;
  SpikeStorage spikes;
};

/// How a kernel storing spikes as `spikes` differs from the dense one: its
/// spike outputs' element type (bytes: i8, bits: i1), its signature's
/// option `spike_storage` (the request's name, by which callers select it)
/// and its name's `_spikes_<u8|bits>`.
KernelChoice getSpikeChoice(MLIRContext *ctx, SpikeStorage spikes) {
  if (spikes == SpikeStorage::Dense)
    return {};
  StringRef name = stringifySpikeStorage(spikes);
  Builder builder(ctx);
  return {builder.getIntegerType(spikes == SpikeStorage::U8 ? 8 : 1),
          builder.getDictionaryAttr(builder.getNamedAttr(
              "spike_storage", builder.getStringAttr(name))),
          ("_spikes_" + name).str()};
}

/// Builds `@<neuron>_<variant>_<dtype>[_spikes_<u8|bits>]`: the ABI arguments,
/// then one scan calling the neuron.
func::FuncOp buildKernel(OpBuilder &builder, NeuronOp neuron,
                         const KernelRequest &request) {
  return createNeuronKernel(
      builder, neuron, request.variant, request.storage, /*callNeuron=*/true,
      getSpikeChoice(builder.getContext(), request.spikes));
}

struct GenerateKernelsPass
    : flexsn::impl::FlexSNGenerateKernelsBase<GenerateKernelsPass> {
  using Base::Base;

  LogicalResult initializeOptions(
      StringRef options,
      function_ref<LogicalResult(const Twine &)> errorHandler) override {
    if (failed(Base::initializeOptions(options, errorHandler)))
      return failure();
    return checkListOptions(getArgument(), errorHandler, variants, storageTypes,
                            neurons, spikeStorage);
  }

  void runOnOperation() override {
    ModuleOp module = getOperation();
    // An empty source would lower to no kernels at all: an empty library,
    // a translation that finds no binary. Say so here, once, for every
    // tool and pipeline.
    if (module.getOps<NeuronOp>().empty() &&
        module.getOps<func::FuncOp>().empty()) {
      module.emitError() << "nothing to compile: the module defines no "
                            "flexsn.neuron (and no kernel function)";
      return signalPassFailure();
    }
    SmallVector<KernelVariant> variantChoices(variants.begin(), variants.end());
    if (variantChoices.empty())
      variantChoices = {KernelVariant::Inference, KernelVariant::FinalState};
    SmallVector<StorageType> storageChoices(storageTypes.begin(),
                                            storageTypes.end());
    if (storageChoices.empty())
      storageChoices = {StorageType::F32};
    SmallVector<SpikeStorage> spikeChoices(spikeStorage.begin(),
                                           spikeStorage.end());
    if (spikeChoices.empty())
      spikeChoices = {SpikeStorage::Dense};
    SmallVector<KernelRequest> requests;
    for (KernelVariant variant : variantChoices) {
      if (variant != KernelVariant::Inference &&
          variant != KernelVariant::FinalState) {
        module.emitError()
            << "kernel variant '" << stringifyKernelVariant(variant)
            << "' is not made here; expected inference or final-state (the "
               "lowering pipelines also take forward and backward, which "
               "flexsn-autodiff generates)";
        return signalPassFailure();
      }
      for (StorageType storage : storageChoices)
        for (SpikeStorage spikes : spikeChoices)
          requests.push_back({variant, storage, spikes});
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
