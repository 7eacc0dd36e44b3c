//===- AutodiffPass.cpp - Forward and backward training kernels -----------===//
//
// Part of the FlexSN project: an MLIR compiler for spiking-neuron dynamics.
//
//===----------------------------------------------------------------------===//

#include "flexsn/Dialect/FlexSN/IR/FlexSNOps.h"
#include "flexsn/Dialect/FlexSN/Transforms/Autodiff.h"
#include "flexsn/Dialect/FlexSN/Transforms/Passes.h"
#include "flexsn/Dialect/FlexSN/Utils/KernelFunctions.h"
#include "flexsn/Dialect/FlexSN/Utils/StepBuilder.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"
#include "llvm/ADT/Sequence.h"

namespace mlir::flexsn {
#define GEN_PASS_DEF_FLEXSNAUTODIFF
#include "flexsn/Dialect/FlexSN/Transforms/Passes.h.inc"
} // namespace mlir::flexsn

using namespace mlir;
using namespace mlir::flexsn;

std::string mlir::flexsn::getBackwardKernelName(StringRef forwardName) {
  size_t pos = forwardName.rfind("forward");
  if (pos == StringRef::npos)
    return (forwardName + "_backward").str();
  return (forwardName.take_front(pos) + "backward" +
          forwardName.drop_front(pos + StringRef("forward").size()))
      .str();
}

namespace {

/// Differentiates one forward kernel (differentiateKernel): plans what
/// the forward saves, derives both kernels' buffers, builds the backward
/// kernel after it and makes the forward save.
class KernelDifferentiator {
public:
  KernelDifferentiator(func::FuncOp forward, ScanOp scan,
                       KernelSignatureAttr fwdSignature,
                       ArrayRef<bool> trainable, bool storeAll,
                       bool saveInStorageType)
      : forward(forward), scan(scan), fwdSignature(fwdSignature),
        trainable(trainable), storeAll(storeAll),
        saveInStorageType(saveInStorageType), ctx(forward.getContext()),
        loc(forward.getLoc()), f32(Float32Type::get(ctx)),
        dtype(fwdSignature.getStorageType()),
        fwdBuffers(fwdSignature.getBuffers()),
        numInputs(scan.getInputs().size()), numStates(scan.getInits().size()),
        numOutputs(scan.getOutputs().size()) {}

  FailureOr<func::FuncOp> run();

private:
  LogicalResult checkScan();
  LogicalResult collectParams();
  SmallVector<KernelBufferAttr> savedBuffers(KernelVariant variant);
  void collectBackwardBuffers();
  KernelSignatureAttr signature(KernelVariant variant,
                                ArrayRef<KernelBufferAttr> buffers);
  FailureOr<func::FuncOp> buildBackward();
  void makeForwardSave();

  KernelBufferAttr bufferOf(Value operand) {
    return fwdBuffers[cast<BlockArgument>(operand).getArgNumber()];
  }
  /// A state's name: its initial state's buffer without `_init`.
  StringRef stateStem(unsigned s) {
    StringRef name = bufferOf(scan.getInits()[s]).getName().getValue();
    name.consume_back("_init");
    return name;
  }
  /// Adds the gradient buffers of `operands` to the backward's.
  void addGradients(ValueRange operands) {
    for (Value operand : operands)
      bwdBuffers.push_back(
          getGradientBuffer(bufferOf(operand), KernelVariant::Backward, dtype));
  }

  func::FuncOp forward;
  ScanOp scan;
  KernelSignatureAttr fwdSignature;
  ArrayRef<bool> trainable;
  bool storeAll, saveInStorageType;
  MLIRContext *ctx;
  Location loc;
  Type f32, dtype;
  ArrayRef<KernelBufferAttr> fwdBuffers;
  unsigned numInputs, numStates, numOutputs;
  /// Per state: kept only at its end, so it has no per-step incoming
  /// gradient. The backward reads no state buffer (it reads what the
  /// forward saves), so that is the only difference.
  SmallVector<bool> finalOnly;
  /// The parameters, in the scan's order: a buffer each for the shaped
  /// ones (the backward takes the forward's), a scalar argument for the
  /// others; the gradients of the trainable ones.
  SmallVector<KernelBufferAttr> paramBuffers, paramGradients;
  unsigned numScalarTrainable = 0;
  SavePlan plan;
  Type savedType;
  SmallVector<KernelBufferAttr> bwdBuffers;
  unsigned numStateGrads = 0;
  /// The forward's buffers with the saved ones, from `savedPos` on.
  SmallVector<KernelBufferAttr> withSaved;
  unsigned savedPos = 0;
  KernelSignatureAttr bwdSignature, newSignature;
};

FailureOr<func::FuncOp> KernelDifferentiator::run() {
  if (failed(checkScan()) || failed(collectParams()))
    return failure();
  Block *body = &scan.getBody().front();
  FailureOr<SavePlan> planned =
      planSaves(*body, numInputs, numStates, numOutputs, trainable, storeAll);
  if (failed(planned))
    return failure();
  plan = std::move(*planned);
  savedType = saveInStorageType ? dtype : f32;
  collectBackwardBuffers();

  // Backward: a reverse scan over the gradients, right after the forward.
  bwdSignature = signature(KernelVariant::Backward, bwdBuffers);
  // The forward takes the saved buffers after its last output or state
  // sequence.
  for (ValueRange group : {scan.getOutputs(), scan.getStates()})
    for (Value operand : group)
      savedPos =
          std::max(savedPos, cast<BlockArgument>(operand).getArgNumber() + 1);
  withSaved.assign(fwdBuffers.begin(), fwdBuffers.end());
  SmallVector<KernelBufferAttr> savedOutputs =
      savedBuffers(KernelVariant::Forward);
  withSaved.insert(withSaved.begin() + savedPos, savedOutputs.begin(),
                   savedOutputs.end());
  newSignature = signature(KernelVariant::Forward, withSaved);
  if (!bwdSignature || !newSignature)
    return failure();
  FailureOr<func::FuncOp> backward = buildBackward();
  if (failed(backward))
    return failure();
  makeForwardSave();
  return backward;
}

LogicalResult KernelDifferentiator::checkScan() {
  if (fwdSignature.getVariant() != KernelVariant::Forward ||
      fwdSignature.getWorkspaceSequences() != 0)
    return forward.emitError("autodiff takes a forward kernel that saves "
                             "nothing yet");
  if (scan.getCallee())
    return scan.emitError("autodiff differentiates an inline body: the "
                          "scan must not call a neuron");
  if (scan.getReverse() || !scan.getReductions().empty() ||
      scan.getOptionalInputs())
    return scan.emitError("autodiff differentiates a forward-time scan "
                          "without reductions or optional inputs");
  finalOnly = llvm::map_to_vector(
      llvm::seq(numStates), [&](unsigned s) { return scan.isFinalState(s); });
  if (trainable.size() != scan.getParams().size())
    return scan.emitError()
           << "autodiff was told about " << trainable.size()
           << " parameter(s), the scan takes " << scan.getParams().size();
  return success();
}

LogicalResult KernelDifferentiator::collectParams() {
  unsigned nextScalar = 0;
  for (auto [param, isTrainable] : llvm::zip(scan.getParams(), trainable)) {
    if (isa<MemRefType>(param.getType())) {
      KernelBufferAttr buffer = bufferOf(param);
      paramBuffers.push_back(buffer);
      if (isTrainable)
        paramGradients.push_back(
            getGradientBuffer(buffer, KernelVariant::Backward, f32));
      continue;
    }
    ParamAttr attr = fwdSignature.getParams()[nextScalar++];
    if (!isTrainable)
      continue;
    if (!isa<Float32Type>(attr.getType()))
      return scan.emitError() << "parameter '" << attr.getName().getValue()
                              << "' is trainable but not f32";
    ++numScalarTrainable;
    paramGradients.push_back(
        getKernelBuffer(BindingAttr::getParam(attr).getGradientBinding(),
                        KernelVariant::Backward, f32, ""));
  }
  return success();
}

/// The saved values' buffers, as `variant` names them.
SmallVector<KernelBufferAttr>
KernelDifferentiator::savedBuffers(KernelVariant variant) {
  SmallVector<KernelBufferAttr> buffers;
  for (unsigned i = 0, e = plan.saved.size(); i < e; ++i)
    buffers.push_back(getKernelBuffer(
        BindingAttr::get(ctx, BoundValue::Saved, i), variant, savedType, ""));
  return buffers;
}

/// The backward's buffers are the gradients of the forward's, named after
/// them.
void KernelDifferentiator::collectBackwardBuffers() {
  addGradients(scan.getOutputs());
  for (unsigned s = 0; s < numStates; ++s)
    if (!finalOnly[s])
      addGradients(scan.getStates()[s]);
  numStateGrads = llvm::count(finalOnly, false);
  llvm::append_range(bwdBuffers, savedBuffers(KernelVariant::Backward));
  for (unsigned i : plan.rereadInputs)
    bwdBuffers.push_back(bufferOf(scan.getInputs()[i]));
  for (unsigned s = 0; s < numStates; ++s)
    bwdBuffers.push_back(getKernelBuffer(
        BindingAttr::get(ctx, BoundValue::StateFinal, s).getGradientBinding(),
        KernelVariant::Backward, dtype, stateStem(s)));
  addGradients(scan.getInputs());
  addGradients(scan.getInits());
  llvm::append_range(bwdBuffers, paramBuffers);
  llvm::append_range(bwdBuffers, paramGradients);
}

/// Checked: derived names may collide with a hand-written kernel's.
KernelSignatureAttr
KernelDifferentiator::signature(KernelVariant variant,
                                ArrayRef<KernelBufferAttr> buffers) {
  return KernelSignatureAttr::getChecked(
      [&] {
        return forward.emitError()
               << "cannot name the " << stringifyKernelVariant(variant)
               << " kernel's buffers: ";
      },
      ctx, fwdSignature.getNeuron(), variant, fwdSignature.getStorage(),
      buffers, fwdSignature.getParams(), int64_t(plan.saved.size()),
      int64_t(numScalarTrainable));
}

/// The backward kernel: a reverse scan whose step is the forward step's
/// adjoint.
FailureOr<func::FuncOp> KernelDifferentiator::buildBackward() {
  unsigned numSaved = plan.saved.size();
  unsigned numReread = plan.rereadInputs.size();
  OpBuilder builder(forward->getContext());
  builder.setInsertionPointAfter(forward);
  auto backward = createKernelFunction(
      builder, loc, getBackwardKernelName(forward.getSymName()), bwdSignature);
  Block *bentry = &backward.getBody().front();
  OpBuilder bb = OpBuilder::atBlockBegin(bentry);
  ValueRange b = bentry->getArguments();
  // The scan's parameters: each buffer by its position, scalars in order.
  SmallVector<Value> bwdParams;
  unsigned nextBuffer =
      bwdBuffers.size() - paramGradients.size() - paramBuffers.size();
  unsigned nextScalar = bwdBuffers.size();
  for (Value param : scan.getParams())
    bwdParams.push_back(isa<MemRefType>(param.getType()) ? b[nextBuffer++]
                                                         : b[nextScalar++]);
  unsigned numIns = numOutputs + numStateGrads + numSaved + numReread;
  auto bscan = createKernelScan(
      bb, loc, bwdSignature, FlatSymbolRefAttr(), b.take_front(numIns),
      b.slice(numIns, numStates), bwdParams,
      b.slice(numIns + numStates, numInputs),
      b.slice(numIns + numStates + numInputs, numStates),
      b.slice(bwdBuffers.size() - paramGradients.size(), paramGradients.size()),
      /*reverse=*/true);
  // Incoming gradients may be absent (zeros); saved values and inputs not.
  SmallVector<int64_t> optional;
  for (unsigned i = 0; i < numOutputs + numStateGrads; ++i)
    optional.push_back(i);
  bscan.setOptionalInputsAttr(builder.getDenseI64ArrayAttr(optional));
  func::ReturnOp::create(bb, loc);
  Block *body = &scan.getBody().front();
  Block *bbody = new Block();
  bscan.getBody().push_back(bbody);
  unsigned numStepArgs = numOutputs + numStates + numSaved + numReread;
  for (unsigned i = 0; i < numStepArgs + numStates; ++i)
    bbody->addArgument(f32, loc);
  for (Value arg : body->getArguments().drop_front(numInputs + numStates))
    bbody->addArgument(arg.getType(), loc);
  if (failed(emitBackwardStep(*body, plan, numInputs, numStates, numOutputs,
                              trainable, *bbody))) {
    backward.erase();
    return failure();
  }
  // The per-step gradient of a state kept only at its end is zero: -0.0,
  // which adds exactly (x + -0.0 == x), so the addition folds away.
  for (unsigned s = numStates; s-- > 0;) {
    if (!finalOnly[s])
      continue;
    BlockArgument grad = bbody->getArgument(numOutputs + s);
    OpBuilder zb = OpBuilder::atBlockBegin(bbody);
    grad.replaceAllUsesWith(
        arith::ConstantOp::create(zb, loc, zb.getF32FloatAttr(-0.0)));
    bbody->eraseArgument(numOutputs + s);
  }
  return backward;
}

/// Forward: the step also yields the saved values, after the outputs;
/// rounded so that the backward's decisions stay the forward's.
void KernelDifferentiator::makeForwardSave() {
  Block *body = &scan.getBody().front();
  SmallVector<Value> savedValues(plan.saved);
  if (auto narrow = dyn_cast<FloatType>(savedType); narrow && narrow != f32)
    savedValues =
        roundSavesKeepingDecisions(*body, plan, numInputs, numStates, narrow);
  auto yield = cast<YieldOp>(body->getTerminator());
  SmallVector<Value> yielded(yield.getValues().take_front(numOutputs));
  llvm::append_range(yielded, savedValues);
  llvm::append_range(yielded, yield.getValues().drop_front(numOutputs));
  OpBuilder yieldBuilder(yield);
  YieldOp::create(yieldBuilder, loc, yielded);
  yield.erase();
  bool channels = newSignature.hasChannels();
  SmallVector<Value> outs(scan.getOutputs());
  for (unsigned i = 0, e = plan.saved.size(); i < e; ++i) {
    (void)forward.insertArgument(
        savedPos + i, getBufferType(withSaved[savedPos + i], channels), {},
        loc);
    outs.push_back(forward.getArgument(savedPos + i));
  }
  forward->setAttr(KernelSignatureAttr::getAttrName(), newSignature);
  OpBuilder fb(scan);
  auto fullScan = createKernelScan(
      fb, loc, newSignature, FlatSymbolRefAttr(), scan.getInputs(),
      scan.getInits(), scan.getParams(), outs, scan.getStates(), ValueRange(),
      /*reverse=*/false);
  fullScan.getBody().takeBody(scan.getBody());
  scan.erase();
}

} // namespace

FailureOr<func::FuncOp>
mlir::flexsn::differentiateKernel(func::FuncOp forward,
                                  ArrayRef<bool> trainable, bool storeAll,
                                  bool saveInStorageType) {
  FailureOr<KernelFunction> kernel = analyzeKernelFunction(forward);
  if (failed(kernel))
    return failure();
  return KernelDifferentiator(forward, kernel->scan, kernel->signature,
                              trainable, storeAll, saveInStorageType)
      .run();
}

namespace {

/// Folds what specialization made constant (flags, detach of constants...).
void canonicalize(Region &region) {
  MLIRContext *ctx = region.getContext();
  RewritePatternSet patterns(ctx);
  for (Dialect *dialect : ctx->getLoadedDialects())
    dialect->getCanonicalizationPatterns(patterns);
  for (RegisteredOperationName op : ctx->getRegisteredOperations())
    op.getCanonicalizationPatterns(patterns, ctx);
  (void)applyPatternsGreedily(region, std::move(patterns));
}

/// The forward kernel of `neuron` before autodiff: its specialized step
/// (const parameters folded, canonicalized) in an inline-body scan over
/// state sequences, saving nothing yet.
func::FuncOp createStepKernel(ModuleOp module, NeuronOp neuron,
                              StorageType storage) {
  OpBuilder builder = OpBuilder::atBlockEnd(module.getBody());
  func::FuncOp forward =
      createNeuronKernel(builder, neuron, KernelVariant::Forward, storage,
                         /*callNeuron=*/false);
  ScanOp scan = *forward.getOps<ScanOp>().begin();
  Location loc = neuron.getLoc();
  unsigned numInputsAndStates = neuron.getNumInputs() + neuron.getNumStates();
  Block *body = new Block();
  scan.getBody().push_back(body);
  for (unsigned i = 0; i < numInputsAndStates; ++i)
    body->addArgument(builder.getF32Type(), loc);
  for (ParamAttr p : neuron.getRuntimeParamAttrs())
    body->addArgument(p.getType(), loc);
  OpBuilder bb = OpBuilder::atBlockBegin(body);
  // All runtime params come in; const ones become constants.
  SmallVector<Value> results = emitNeuronStep(
      bb, loc, neuron, body->getArguments().take_front(numInputsAndStates),
      body->getArguments().drop_front(numInputsAndStates));
  YieldOp::create(bb, loc, results);
  canonicalize(scan.getBody());
  return forward;
}

/// The training forward of `neuron` that keeps each state only at its end:
/// `forward` (its sequence forward, completed by differentiateKernel) with
/// every state sequence buffer a final-state one, named
/// `<neuron>_forward_final_state_<dtype>`. The step and the saves are
/// `forward`'s, so its backward serves both: a state kept only at its end
/// has no per-step gradient, and the backward reads no state buffer.
/// Rationale: a caller that does not keep the state sequences (a model's
/// neuron between two layers) then writes N values per state, not T N.
void createFinalStateForward(func::FuncOp forward, NeuronOp neuron) {
  MLIRContext *ctx = forward.getContext();
  Location loc = forward.getLoc();
  auto signature = forward->getAttrOfType<KernelSignatureAttr>(
      KernelSignatureAttr::getAttrName());
  ArrayAttr stateNames = neuron.getStateNames();
  SmallVector<KernelBufferAttr> buffers;
  for (KernelBufferAttr buffer : signature.getBuffers()) {
    BindingAttr binds = buffer.getBinds();
    if (binds.getValue() == BoundValue::StateSeq && !binds.getGradient())
      buffer = getKernelBuffer(
          BindingAttr::get(ctx, BoundValue::StateFinal, binds.getIndex()),
          KernelVariant::Forward, buffer.getElementType(),
          cast<StringAttr>(stateNames[binds.getIndex()]).getValue());
    buffers.push_back(buffer);
  }
  auto finalSignature = KernelSignatureAttr::get(
      ctx, signature.getNeuron(), KernelVariant::Forward,
      signature.getStorage(), buffers, signature.getParams(),
      signature.getWorkspaceSequences(), signature.getReductionSlots(),
      signature.getOptions());
  std::string name = (neuron.getSymName() + "_forward_final_state_" +
                      stringifyStorageType(signature.getStorage()))
                         .str();
  // A copy of `forward` (the step may use values of the function body, as
  // hoisted constants), its state sequence arguments retyped.
  func::FuncOp final = forward.clone();
  final.setSymName(name);
  final->setAttr(KernelSignatureAttr::getAttrName(), finalSignature);
  bool channels = finalSignature.hasChannels();
  for (auto [arg, buffer] :
       llvm::zip(final.getArguments(), finalSignature.getBuffers()))
    arg.setType(getBufferType(buffer, channels));
  final.setType(
      FunctionType::get(ctx, final.getBody().front().getArgumentTypes(), {}));
  OpBuilder::atBlockEnd(cast<ModuleOp>(forward->getParentOp()).getBody())
      .insert(final);
  // The state buffers' ranks make the scan's states final ones.
  ScanOp scan = *final.getOps<ScanOp>().begin();
  OpBuilder builder(scan);
  ScanOp finalScan = createKernelScan(
      builder, loc, finalSignature, FlatSymbolRefAttr(), scan.getInputs(),
      scan.getInits(), scan.getParams(), scan.getOutputs(), scan.getStates(),
      scan.getReductions(), /*reverse=*/false);
  finalScan.getBody().takeBody(scan.getBody());
  scan.erase();
}

struct AutodiffPass : flexsn::impl::FlexSNAutodiffBase<AutodiffPass> {
  using Base::Base;

  LogicalResult initializeOptions(
      StringRef options,
      function_ref<LogicalResult(const Twine &)> errorHandler) override {
    if (failed(Base::initializeOptions(options, errorHandler)))
      return failure();
    return checkListOptions(getArgument(), errorHandler, storageTypes, neurons);
  }

  bool selected(StringRef neuron) {
    return neurons.empty() || llvm::is_contained(neurons, neuron);
  }

  /// Forward kernels written by hand (or produced by another pass) that
  /// save nothing and have no backward kernel yet.
  SmallVector<func::FuncOp> findUndifferentiated(ModuleOp module) {
    SymbolTable symbols(module);
    SmallVector<func::FuncOp> forwards;
    for (func::FuncOp func : getKernelFunctions(module)) {
      auto signature = func->getAttrOfType<KernelSignatureAttr>(
          KernelSignatureAttr::getAttrName());
      if (signature.getVariant() == KernelVariant::Forward &&
          signature.getWorkspaceSequences() == 0 &&
          selected(signature.getNeuron()) &&
          !symbols.lookup(getBackwardKernelName(func.getSymName())))
        forwards.push_back(func);
    }
    return forwards;
  }

  /// Per scan parameter, whether it gets a gradient: a scalar one by its
  /// kind, a parameter buffer by its argument's `flexsn.trainable` mark.
  SmallVector<bool> getTrainable(func::FuncOp forward) {
    auto signature = forward->getAttrOfType<KernelSignatureAttr>(
        KernelSignatureAttr::getAttrName());
    SmallVector<bool> trainable;
    auto scans = forward.getOps<ScanOp>();
    if (scans.empty())
      return trainable; // differentiateKernel says what is missing
    ScanOp scan = *scans.begin();
    unsigned nextScalar = 0;
    for (Value param : scan.getParams()) {
      if (auto arg = dyn_cast<BlockArgument>(param);
          arg && isa<MemRefType>(param.getType()))
        trainable.push_back(
            bool(forward.getArgAttr(arg.getArgNumber(), "flexsn.trainable")));
      else
        trainable.push_back(nextScalar < signature.getParams().size() &&
                            signature.getParams()[nextScalar++].getKind() ==
                                ParamKind::Trainable);
    }
    return trainable;
  }

  void runOnOperation() override {
    ModuleOp module = getOperation();
    // Steps are emitted from flat bodies.
    if (failed(inlineApplications(module)))
      return signalPassFailure();
    for (func::FuncOp forward : findUndifferentiated(module)) {
      if (failed(differentiateKernel(forward, getTrainable(forward), storeAll,
                                     saveInStorageType)))
        return signalPassFailure();
    }
    SmallVector<StorageType> types(storageTypes.begin(), storageTypes.end());
    if (types.empty())
      types = {StorageType::F32};
    for (NeuronOp neuron : llvm::to_vector(module.getOps<NeuronOp>())) {
      if (!selected(neuron.getSymName()))
        continue;
      SmallVector<bool> trainable =
          llvm::map_to_vector(neuron.getRuntimeParamAttrs(), [](ParamAttr p) {
            return p.getKind() == ParamKind::Trainable;
          });
      for (StorageType storage : types) {
        func::FuncOp forward = createStepKernel(module, neuron, storage);
        if (failed(differentiateKernel(forward, trainable, storeAll,
                                       saveInStorageType)))
          return signalPassFailure();
        if (neuron.getNumStates())
          createFinalStateForward(forward, neuron);
      }
    }
  }
};

} // namespace
