//===- CoupleKernels.cpp - Coupled (recurrent) kernels of each neuron -----===//
//
// Part of the FlexSN project: an MLIR compiler for spiking-neuron dynamics.
//
//===----------------------------------------------------------------------===//
//
// flexsn-couple-kernels: beside each kernel of a neuron, the same kernel
// coupled from one of the neuron's outputs into one of its inputs through
// a matrix of weights (#flexsn.kernel's coupling). The scan and the other
// buffers are the uncoupled kernel's: the lowerings add the coupling.
//
//===----------------------------------------------------------------------===//

#include "flexsn/Dialect/FlexSN/IR/FlexSNOps.h"
#include "flexsn/Dialect/FlexSN/Transforms/Passes.h"
#include "flexsn/Dialect/FlexSN/Utils/KernelFunctions.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/SymbolTable.h"

namespace mlir::flexsn {
#define GEN_PASS_DEF_FLEXSNCOUPLEKERNELS
#include "flexsn/Dialect/FlexSN/Transforms/Passes.h.inc"
} // namespace mlir::flexsn

using namespace mlir;
using namespace mlir::flexsn;

namespace {

struct CoupleKernelsPass
    : flexsn::impl::FlexSNCoupleKernelsBase<CoupleKernelsPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    SymbolTable symbols(module);
    for (const std::string &name : neurons)
      if (!symbols.lookup<NeuronOp>(name)) {
        module.emitError() << "flexsn-couple-kernels: no neuron '" << name
                           << "'";
        return signalPassFailure();
      }
    for (func::FuncOp func : getKernelFunctions(module))
      if (failed(couple(func, symbols)))
        return signalPassFailure();
  }

private:
  /// Adds the coupled copy of `func` when it is a kernel of a selected
  /// neuron that can be coupled.
  LogicalResult couple(func::FuncOp func, SymbolTable &symbols) {
    auto signature = func->getAttrOfType<KernelSignatureAttr>(
        KernelSignatureAttr::getAttrName());
    StringRef neuronName = signature.getNeuron().getValue();
    auto neuron = symbols.lookup<NeuronOp>(neuronName);
    if (!neuron || signature.isCoupled() || signature.getOptions() ||
        signature.hasChannels() ||
        (!neurons.empty() && !llvm::is_contained(neurons, neuronName)))
      return success();
    unsigned in = input, out = output;
    if (in >= neuron.getNumInputs() || out >= neuron.getNumOutputs())
      return neuron.emitError()
             << "flexsn-couple-kernels: @" << neuronName << " has "
             << neuron.getNumInputs() << " input(s) and "
             << neuron.getNumOutputs() << " output(s): it cannot couple "
             << "output " << out << " into input " << in;

    OpBuilder builder(func);
    builder.setInsertionPointAfter(func);
    auto coupled = cast<func::FuncOp>(builder.clone(*func));
    std::string name = (func.getSymName() + "_coupled").str();
    coupled.setSymName(name);
    KernelSignatureAttr withWeights =
        signature.withCoupling(in, out, "coupling");
    // The weights come after the other buffers, before the scalar
    // parameters.
    unsigned position = signature.getBuffers().size();
    if (failed(coupled.insertArgument(
            position,
            getBufferType(withWeights.getBuffers().back(), /*channels=*/false),
            DictionaryAttr(), func.getLoc())))
      return failure();
    coupled->setAttr(KernelSignatureAttr::getAttrName(), withWeights);
    symbols.insert(coupled);
    return success();
  }
};

} // namespace
