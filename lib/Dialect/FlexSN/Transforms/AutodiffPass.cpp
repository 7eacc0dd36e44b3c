//===- AutodiffPass.cpp - Forward and backward training kernels -----------===//
//
// Part of the FlexSN project: an MLIR compiler for spiking-neuron dynamics.
//
//===----------------------------------------------------------------------===//

#include "flexsn/Dialect/FlexSN/IR/FlexSNOps.h"
#include "flexsn/Dialect/FlexSN/Transforms/Autodiff.h"
#include "flexsn/Dialect/FlexSN/Transforms/KernelInterface.h"
#include "flexsn/Dialect/FlexSN/Transforms/Passes.h"
#include "flexsn/Dialect/FlexSN/Transforms/StepBuilder.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace mlir::flexsn {
#define GEN_PASS_DEF_FLEXSNAUTODIFF
#include "flexsn/Dialect/FlexSN/Transforms/Passes.h.inc"
} // namespace mlir::flexsn

using namespace mlir;
using namespace mlir::flexsn;

namespace {

/// Folds what specialization made constant (flags, detach of constants...).
LogicalResult canonicalize(Region &region) {
  MLIRContext *ctx = region.getContext();
  RewritePatternSet patterns(ctx);
  for (Dialect *dialect : ctx->getLoadedDialects())
    dialect->getCanonicalizationPatterns(patterns);
  for (RegisteredOperationName op : ctx->getRegisteredOperations())
    op.getCanonicalizationPatterns(patterns, ctx);
  (void)applyPatternsGreedily(region, std::move(patterns));
  return success();
}

struct AutodiffPass : flexsn::impl::FlexSNAutodiffBase<AutodiffPass> {
  using Base::Base;

  LogicalResult differentiate(ModuleOp module, NeuronOp neuron,
                              StorageType storage) {
    Location loc = neuron.getLoc();
    MLIRContext *ctx = &getContext();
    OpBuilder builder = OpBuilder::atBlockEnd(module.getBody());
    Type dtype = getStorageElementType(ctx, storage);
    unsigned numInputs = neuron.getNumInputs();
    unsigned numStates = neuron.getNumStates();
    unsigned numOutputs = neuron.getNumOutputs();
    // Every runtime parameter is a body argument; the shaped ones are
    // buffers of the kernels, the others scalar arguments.
    SmallVector<ParamAttr> params = neuron.getRuntimeParamAttrs();
    SmallVector<ParamAttr> scalarParams = getScalarRuntimeParams(neuron);
    SmallVector<KernelBufferAttr> paramBuffers = getShapedParamBuffers(neuron);
    SmallVector<bool> trainable = llvm::map_to_vector(params, [](ParamAttr p) {
      return p.getKind() == ParamKind::Trainable;
    });
    SmallVector<Type> paramTypes =
        llvm::map_to_vector(params, [](ParamAttr p) { return p.getType(); });
    unsigned numTrainable = llvm::count(trainable, true);
    // Scalar gradients are summed across threads: the reduction scratch
    // holds one slot each.
    unsigned numScalarTrainable = llvm::count_if(params, [](ParamAttr p) {
      return p.getKind() == ParamKind::Trainable && !p.isShaped();
    });
    Type f32 = builder.getF32Type();

    // Forward: the specialized step in an inline-body scan. What it saves
    // is planned on that body (canonicalization hoists its constants into
    // the function), then added to its buffers and results.
    SmallVector<KernelBufferAttr> fwdBuffers =
        getStepBuffers(neuron, dtype, /*finalStates=*/false);
    unsigned savedPos = fwdBuffers.size();
    llvm::append_range(fwdBuffers, paramBuffers);
    auto interface = [&](KernelVariant variant,
                         ArrayRef<KernelBufferAttr> buffers,
                         unsigned numSaved) {
      return KernelInterfaceAttr::get(ctx, neuron.getSymNameAttr(), variant,
                                      storage, buffers, scalarParams, numSaved,
                                      numScalarTrainable, SpikeStorage::Dense);
    };
    KernelInterfaceAttr fwdInterface =
        interface(KernelVariant::Forward, fwdBuffers, 0);
    bool channels = fwdInterface.hasChannels();
    auto forward = createKernelFunction(
        builder, loc,
        getKernelName(neuron.getSymName(), KernelVariant::Forward, storage),
        fwdInterface);
    Block *entry = &forward.getBody().front();
    OpBuilder fb = OpBuilder::atBlockBegin(entry);
    ValueRange a = entry->getArguments();
    auto scan = createKernelScan(
        fb, loc, fwdInterface, FlatSymbolRefAttr(), a.take_front(numInputs),
        a.slice(numInputs, numStates), getScanParams(forward, neuron),
        a.slice(numInputs + numStates, numOutputs),
        a.slice(numInputs + numStates + numOutputs, numStates), ValueRange(),
        /*reverse=*/false);
    func::ReturnOp::create(fb, loc);
    SmallVector<Type> bodyTypes(numInputs + numStates, f32);
    llvm::append_range(bodyTypes, paramTypes);
    Block *body = new Block();
    scan.getBody().push_back(body);
    for (Type t : bodyTypes)
      body->addArgument(t, loc);
    {
      OpBuilder bb = OpBuilder::atBlockBegin(body);
      // All runtime params come in; const ones become constants.
      SmallVector<Value> results = emitNeuronStep(
          bb, loc, neuron,
          body->getArguments().take_front(numInputs + numStates),
          body->getArguments().drop_front(numInputs + numStates));
      YieldOp::create(bb, loc, results);
    }
    (void)canonicalize(scan.getBody());

    FailureOr<SavePlan> plan =
        planSaves(*body, numInputs, numStates, numOutputs, trainable, storeAll);
    if (failed(plan))
      return failure();
    unsigned numSaved = plan->saved.size();
    unsigned numReread = plan->rereadInputs.size();

    // The forward writes the saved sequences after its step's buffers; the
    // backward's buffers are named after the neuron's values.
    auto saved = [&](BufferRole role) {
      SmallVector<KernelBufferAttr> buffers;
      for (unsigned i = 0; i < numSaved; ++i)
        buffers.push_back(
            KernelBufferAttr::get(ctx, "saved" + Twine(i), role, f32));
      return buffers;
    };
    SmallVector<KernelBufferAttr> savedOutputs =
        saved(BufferRole::SavedOutput);
    fwdBuffers.insert(fwdBuffers.begin() + savedPos, savedOutputs.begin(),
                      savedOutputs.end());

    auto names = [](ArrayAttr attr) {
      return llvm::to_vector(attr.getAsValueRange<StringAttr>());
    };
    SmallVector<StringRef> inputNames = names(neuron.getInputNames()),
                           stateNames = names(neuron.getStateNames()),
                           outputNames = names(neuron.getOutputNames());
    SmallVector<KernelBufferAttr> bwdBuffers;
    auto add = [&](ArrayRef<StringRef> stems, StringRef suffix,
                   BufferRole role, Type type) {
      for (StringRef stem : stems)
        bwdBuffers.push_back(
            KernelBufferAttr::get(ctx, stem + suffix, role, type));
    };
    add(outputNames, "_grad", BufferRole::OptionalInputSequence, dtype);
    add(stateNames, "_seq_grad", BufferRole::OptionalInputSequence, dtype);
    llvm::append_range(bwdBuffers, saved(BufferRole::SavedInput));
    for (unsigned i : plan->rereadInputs)
      add(inputNames[i], "", BufferRole::InputSequence, dtype);
    add(stateNames, "_final_grad", BufferRole::InitialState, dtype);
    add(inputNames, "_grad", BufferRole::OutputSequence, dtype);
    add(stateNames, "_init_grad", BufferRole::FinalState, dtype);
    llvm::append_range(bwdBuffers, paramBuffers);
    for (ParamAttr p : params)
      if (p.getKind() == ParamKind::Trainable)
        add(p.getName().getValue(), "_grad",
            p.isPerNeuron()    ? BufferRole::PerNeuronParamGradient
            : p.isPerChannel() ? BufferRole::PerChannelParamGradient
                               : BufferRole::ParamGradient,
            f32);

    // Backward: a reverse scan over the gradients.
    KernelInterfaceAttr bwdInterface =
        interface(KernelVariant::Backward, bwdBuffers, numSaved);
    auto backward = createKernelFunction(
        builder, loc,
        getKernelName(neuron.getSymName(), KernelVariant::Backward, storage),
        bwdInterface);
    Block *bentry = &backward.getBody().front();
    OpBuilder bb = OpBuilder::atBlockBegin(bentry);
    ValueRange b = bentry->getArguments();
    unsigned numIns = numOutputs + numStates + numSaved + numReread;
    unsigned gradPos =
        numIns + 2 * numStates + numInputs + paramBuffers.size();
    auto bscan = createKernelScan(
        bb, loc, bwdInterface, FlatSymbolRefAttr(), b.take_front(numIns),
        b.slice(numIns, numStates), getScanParams(backward, neuron),
        b.slice(numIns + numStates, numInputs),
        b.slice(numIns + numStates + numInputs, numStates),
        b.slice(gradPos, numTrainable), /*reverse=*/true);
    // Incoming gradients may be absent (zeros); saved values and inputs not.
    SmallVector<int64_t> optional;
    for (unsigned i = 0; i < numOutputs + numStates; ++i)
      optional.push_back(i);
    bscan.setOptionalInputsAttr(builder.getDenseI64ArrayAttr(optional));
    func::ReturnOp::create(bb, loc);
    Block *bbody = new Block();
    bscan.getBody().push_back(bbody);
    for (unsigned i = 0; i < numIns + numStates; ++i)
      bbody->addArgument(f32, loc);
    for (Type t : paramTypes)
      bbody->addArgument(t, loc);
    if (failed(emitBackwardStep(*body, *plan, numInputs, numStates, numOutputs,
                                trainable, *bbody)))
      return failure();

    // Forward: the step also yields the saved values, after the outputs,
    // which the function takes after its state sequences.
    auto yield = cast<YieldOp>(body->getTerminator());
    SmallVector<Value> yielded(yield.getValues().take_front(numOutputs));
    llvm::append_range(yielded, plan->saved);
    llvm::append_range(yielded, yield.getValues().drop_front(numOutputs));
    OpBuilder yieldBuilder(yield);
    YieldOp::create(yieldBuilder, loc, yielded);
    yield.erase();
    for (unsigned i = 0; i < numSaved; ++i)
      (void)forward.insertArgument(
          savedPos + i, getBufferType(fwdBuffers[savedPos + i], channels), {},
          loc);
    fwdInterface = interface(KernelVariant::Forward, fwdBuffers, numSaved);
    forward->setAttr(KernelInterfaceAttr::getAttrName(), fwdInterface);
    a = entry->getArguments();
    SmallVector<Value> outs(a.slice(numInputs + numStates, numOutputs));
    llvm::append_range(outs, a.slice(savedPos, numSaved));
    fb.setInsertionPoint(scan);
    auto fullScan = createKernelScan(
        fb, loc, fwdInterface, FlatSymbolRefAttr(), a.take_front(numInputs),
        a.slice(numInputs, numStates), getScanParams(forward, neuron), outs,
        a.slice(numInputs + numStates + numOutputs, numStates), ValueRange(),
        /*reverse=*/false);
    fullScan.getBody().takeBody(scan.getBody());
    scan.erase();
    return success();
  }

  void runOnOperation() override {
    ModuleOp module = getOperation();
    // Steps are emitted from flat bodies.
    if (failed(inlineApplications(module)))
      return signalPassFailure();
    SmallVector<std::string> types(storageTypes.begin(), storageTypes.end());
    if (types.empty())
      types = {"f32"};
    for (NeuronOp neuron : llvm::to_vector(module.getOps<NeuronOp>())) {
      if (!neurons.empty() && !llvm::is_contained(neurons, neuron.getSymName()))
        continue;
      for (StringRef name : types) {
        FailureOr<StorageType> storage = parseStorageTypeOption(module, name);
        if (failed(storage) || failed(differentiate(module, neuron, *storage)))
          return signalPassFailure();
      }
    }
  }
};

} // namespace
