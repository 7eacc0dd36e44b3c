//===- FuseProducers.cpp - Elementwise producers into flexsn.scan ---------===//
//
// Part of the FlexSN project: an MLIR compiler for spiking-neuron dynamics.
//
//===----------------------------------------------------------------------===//
//
// Moves an elementwise linalg op that produces a scan input into the scan's
// body: batch-norm's `x * scale[c] + shift[c]`, a bias, a mask, a cast to
// f32. Its operands become scan operands read through composed indexing
// maps, so the [T, N...] tensor it produced is never written.
//
//===----------------------------------------------------------------------===//

#include "flexsn/Dialect/FlexSN/Transforms/Fusion.h"
#include "flexsn/Dialect/FlexSN/Transforms/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

#include "llvm/Support/Debug.h"
#include "llvm/Support/raw_ostream.h"

#define DEBUG_TYPE "flexsn-fuse-producers"

namespace mlir::flexsn {
#define GEN_PASS_DEF_FLEXSNFUSEPRODUCERS
#include "flexsn/Dialect/FlexSN/Transforms/Passes.h.inc"
} // namespace mlir::flexsn

using namespace mlir;
using namespace mlir::flexsn;

namespace {
/// How a legal producer's operands reach the fused scan.
struct ProducerPlan {
  linalg::LinalgOp producer;
  OpResult result;     // the value the scan reads
  unsigned inputIndex; // its position among the scan's inputs
  // Per DPS input of the producer: the map from the scan's domain to the
  // operand's indices (tensors; null for scalars).
  SmallVector<AffineMap> operandMaps;
};
} // namespace

/// Whether `map` keeps domain dimensions, each once and in order: the maps
/// a scan operand may have.
static bool keepsDimensionsInOrder(AffineMap map) {
  int64_t last = -1;
  for (AffineExpr expr : map.getResults()) {
    auto dim = dyn_cast<AffineDimExpr>(expr);
    if (!dim || static_cast<int64_t>(dim.getPosition()) <= last)
      return false;
    last = dim.getPosition();
  }
  return true;
}

static bool isHalf(Type type) { return type.isF16() || type.isBF16(); }

/// `value` as printed, for reasons.
template <typename T>
static std::string printed(const T &value) {
  std::string text;
  llvm::raw_string_ostream(text) << value;
  return text;
}

/// An extension to f32 of a half-precision payload argument: the scan
/// already reads its input as f32, so fusion drops it.
static bool isExtensionOfArgument(Operation &op, Block &payload) {
  auto ext = dyn_cast<arith::ExtFOp>(op);
  return ext && ext.getType().isF32() && isa<BlockArgument>(ext.getIn()) &&
         cast<BlockArgument>(ext.getIn()).getOwner() == &payload;
}

static FailureOr<ProducerPlan> planProducerFusion(OpOperand &input,
                                                  std::string *reason) {
  auto fail = [&](const Twine &why) -> FailureOr<ProducerPlan> {
    if (reason)
      *reason = why.str();
    return failure();
  };
  auto scan = dyn_cast<ScanOp>(input.getOwner());
  if (!scan)
    return fail("not an operand of a flexsn.scan");
  auto [first, count] = scan.getODSOperandIndexAndLength(0);
  unsigned number = input.getOperandNumber();
  if (number < first || number >= first + count)
    return fail("only a scan's inputs ('ins') take producers");
  unsigned inputIndex = number - first;
  std::string what = "input #" + std::to_string(inputIndex);
  if (!scan.hasTensorSemantics())
    return fail("the scan works on buffers: fusion runs on tensors, before "
                "bufferization");
  if (llvm::is_contained(scan.getOptionalInputs().value_or(ArrayRef<int64_t>()),
                         int64_t(inputIndex)))
    return fail(what + " is optional (it reads as zeros when absent)");

  auto result = dyn_cast<OpResult>(input.get());
  auto producer =
      result ? dyn_cast<linalg::LinalgOp>(result.getOwner()) : nullptr;
  if (!producer)
    return fail(what + " is not produced by a linalg op");
  std::string op =
      "its producer '" + producer->getName().getStringRef().str() + "'";
  if (!producer.hasPureTensorSemantics())
    return fail(op + " works on buffers");
  if (producer.getNumLoops() != producer.getNumParallelLoops())
    return fail(op + " has reduction loops: only elementwise ops fuse");
  if (producer.hasIndexSemantics())
    return fail(op + " reads its loop indices (linalg.index)");
  if (!result.hasOneUse())
    return fail(op + " has other uses of its result: it would run twice");
  OpOperand *init = producer.getDpsInitOperand(result.getResultNumber());
  if (producer.payloadUsesValueFromOperand(init))
    return fail(op + " reads its destination");
  AffineMap resultMap = producer.getMatchingIndexingMap(init);
  if (!resultMap.isPermutation())
    return fail(op + " writes its result through " +
                std::to_string(resultMap.getNumResults()) +
                " indices that are not a permutation of its loops");

  // domain -> the producer's loops -> each operand's indices.
  AffineMap toLoops = inversePermutation(resultMap).compose(
      scan.getMatchingIndexingMap(&input));
  ProducerPlan plan{producer, result, inputIndex, {}};
  Block &payload = *producer.getBlock();
  for (OpOperand *operand : producer.getDpsInputOperands()) {
    std::string which =
        op + " operand #" + std::to_string(operand->getOperandNumber());
    Type type = operand->get().getType();
    auto shaped = dyn_cast<RankedTensorType>(type);
    if (!shaped) {
      if (!(type.isF32() || type.isInteger(1) || type.isInteger(32)))
        return fail(which + " is a " + printed(type) +
                    " scalar: scan params are f32, i1 or i32");
      plan.operandMaps.push_back(AffineMap());
      continue;
    }
    Type element = shaped.getElementType();
    if (!element.isF32() && !isHalf(element))
      return fail(which + " holds " + printed(element) +
                  ": scan inputs hold f32, f16 or bf16");
    if (isHalf(element))
      for (Operation *user :
           producer.getMatchingBlockArgument(operand).getUsers())
        if (!isExtensionOfArgument(*user, payload))
          return fail(which + " is " + printed(element) +
                      " and used other than extended to f32: a scan body "
                      "computes in f32");
    AffineMap map = producer.getMatchingIndexingMap(operand).compose(toLoops);
    if (!keepsDimensionsInOrder(map))
      return fail(which + " would be read through " + printed(map) +
                  ": a scan operand keeps domain dimensions once each, in "
                  "order");
    plan.operandMaps.push_back(map);
  }
  if (!getElementTypeOrSelf(result.getType()).isF32())
    return fail(op + " yields " +
                printed(getElementTypeOrSelf(result.getType())) +
                ": its rounding cannot move into a scan body, which "
                "computes in f32");
  auto isConstantFromAbove = [&](Value value) {
    Operation *def = value.getDefiningOp();
    return def && def->getBlock() != &payload &&
           def->hasTrait<OpTrait::ConstantLike>();
  };
  Value yielded = payload.getTerminator()->getOperand(result.getResultNumber());
  if (yielded.getParentBlock() != &payload && !isConstantFromAbove(yielded))
    return fail(op + " yields a value defined outside it that is not a "
                     "constant");
  for (Operation &payloadOp : payload.without_terminator()) {
    if (isExtensionOfArgument(payloadOp, payload))
      continue;
    std::string name = "'" + payloadOp.getName().getStringRef().str() + "'";
    if (payloadOp.getNumRegions() != 0 || !isMemoryEffectFree(&payloadOp))
      return fail(op + " computes with " + name +
                  ", which has regions or memory effects");
    for (Type type : llvm::concat<Type>(payloadOp.getOperandTypes(),
                                        payloadOp.getResultTypes()))
      if (!isStepScalarType(type))
        return fail(op + " computes with " + name + " in " + printed(type) +
                    ": a scan body computes in f32");
    for (Value value : payloadOp.getOperands())
      if (value.getParentBlock() != &payload && !isConstantFromAbove(value))
        return fail(op + " uses a value defined outside it that is not a "
                         "constant");
  }
  return plan;
}

LogicalResult mlir::flexsn::checkProducerFusion(OpOperand &input,
                                                std::string *reason) {
  return success(succeeded(planProducerFusion(input, reason)));
}

FailureOr<ScanOp> mlir::flexsn::materializeInlineBody(RewriterBase &rewriter,
                                                      ScanOp scan) {
  if (!scan.getCallee())
    return scan;
  auto neuron = SymbolTable::lookupNearestSymbolFrom<NeuronOp>(
      scan, scan.getCalleeAttr());
  if (!neuron)
    return failure();
  Location loc = scan.getLoc();
  OpBuilder::InsertionGuard guard(rewriter);
  rewriter.setInsertionPoint(scan);
  auto inlined = ScanOp::create(
      rewriter, loc, scan.getResultTypes(), FlatSymbolRefAttr(),
      scan.getInputs(), scan.getInits(), scan.getParams(), scan.getOutputs(),
      scan.getStates(), scan.getReductions(), scan.getIndexingMaps(),
      scan.getReverseAttr(), scan.getOptionalInputsAttr());
  inlined->setDiscardableAttrs(scan->getDiscardableAttrDictionary());

  // The body's arguments: inputs and states as f32, params as the scan
  // passes them (shaped ones per element, as f32).
  Type f32 = rewriter.getF32Type();
  SmallVector<Type> argTypes(scan.getInputs().size() + neuron.getNumStates(),
                             f32);
  for (Value param : scan.getParams())
    argTypes.push_back(isa<ShapedType>(param.getType()) ? f32
                                                        : param.getType());
  Block *body =
      rewriter.createBlock(&inlined.getBody(), {}, argTypes,
                           SmallVector<Location>(argTypes.size(), loc));
  unsigned numInputsAndStates = scan.getInputs().size() + neuron.getNumStates();
  SmallVector<Value> operands(
      body->getArguments().take_front(numInputsAndStates));
  auto runtime = body->getArguments().drop_front(numInputsAndStates).begin();
  for (ParamAttr param : neuron.getParamAttrs())
    operands.push_back(
        param.isRuntime()
            ? *runtime++
            : arith::ConstantOp::create(rewriter, loc, param.getDefaultValue())
                  .getResult());
  auto apply = ApplyOp::create(
      rewriter, loc,
      SmallVector<Type>(neuron.getNumOutputs() + neuron.getNumStates(), f32),
      scan.getCalleeAttr(), operands, ArrayAttr(), ArrayAttr());
  YieldOp::create(rewriter, loc, apply.getResults());
  rewriter.replaceOp(scan, inlined.getResults());
  return inlined;
}

FailureOr<ScanOp> mlir::flexsn::fuseProducer(RewriterBase &rewriter,
                                             OpOperand &input) {
  FailureOr<ProducerPlan> plan = planProducerFusion(input, nullptr);
  if (failed(plan))
    return failure();
  FailureOr<ScanOp> inlined =
      materializeInlineBody(rewriter, cast<ScanOp>(input.getOwner()));
  if (failed(inlined))
    return failure();
  ScanOp scan = *inlined;
  linalg::LinalgOp producer = plan->producer;
  unsigned inputIndex = plan->inputIndex;
  unsigned numInputs = scan.getInputs().size();
  unsigned domainRank = scan.getDomainRank();
  MLIRContext *ctx = rewriter.getContext();

  // The new operand groups and their maps, in the scan's group order.
  SmallVector<AffineMap> maps = scan.getIndexingMapsArray();
  auto groupMaps = [&](unsigned group) {
    auto [first, count] = scan.getODSOperandIndexAndLength(group);
    return ArrayRef<AffineMap>(maps).slice(first, count);
  };
  SmallVector<Value> inputs, params(scan.getParams());
  SmallVector<AffineMap> inputMaps, paramMaps(groupMaps(2));
  for (auto [k, value, map] : llvm::enumerate(scan.getInputs(), groupMaps(0))) {
    if (k == inputIndex)
      continue;
    inputs.push_back(value);
    inputMaps.push_back(map);
  }
  SmallVector<Value> tensorOperands, scalarOperands;
  for (auto [operand, map] :
       llvm::zip_equal(producer.getDpsInputOperands(), plan->operandMaps)) {
    if (map) {
      inputs.push_back(operand->get());
      inputMaps.push_back(map);
      tensorOperands.push_back(operand->get());
    } else {
      params.push_back(operand->get());
      paramMaps.push_back(AffineMap::get(domainRank, 0, ctx));
      scalarOperands.push_back(operand->get());
    }
  }
  SmallVector<AffineMap> newMaps(inputMaps);
  llvm::append_range(newMaps, groupMaps(1));
  llvm::append_range(newMaps, paramMaps);
  for (unsigned group : {3, 4, 5})
    llvm::append_range(newMaps, groupMaps(group));
  DenseI64ArrayAttr optional;
  if (auto old = scan.getOptionalInputs())
    optional = rewriter.getDenseI64ArrayAttr(llvm::map_to_vector(
        *old, [&](int64_t i) { return i > inputIndex ? i - 1 : i; }));

  OpBuilder::InsertionGuard guard(rewriter);
  rewriter.setInsertionPoint(scan);
  auto fused = ScanOp::create(
      rewriter, scan.getLoc(), scan.getResultTypes(), FlatSymbolRefAttr(),
      inputs, scan.getInits(), params, scan.getOutputs(), scan.getStates(),
      scan.getReductions(), rewriter.getAffineMapArrayAttr(newMaps),
      scan.getReverseAttr(), optional);
  fused->setDiscardableAttrs(scan->getDiscardableAttrDictionary());
  rewriter.inlineRegionBefore(scan.getBody(), fused.getBody(),
                              fused.getBody().end());
  Block &body = fused.getBody().front();

  // The producer's operands as body arguments: tensors after the inputs
  // (read as f32), scalars after the params.
  Location loc = producer.getLoc();
  Block &payload = *producer.getBlock();
  IRMapping mapping;
  unsigned nextInput = numInputs;
  for (OpOperand *operand : producer.getDpsInputOperands()) {
    BlockArgument payloadArg = producer.getMatchingBlockArgument(operand);
    if (!isa<ShapedType>(operand->get().getType())) {
      mapping.map(payloadArg, body.addArgument(operand->get().getType(), loc));
      continue;
    }
    BlockArgument arg =
        body.insertArgument(nextInput++, rewriter.getF32Type(), loc);
    mapping.map(payloadArg, arg);
    for (Operation *user : payloadArg.getUsers())
      if (isExtensionOfArgument(*user, payload))
        mapping.map(user->getResult(0), arg);
  }

  // The payload, at the start of the body; its constants from above along.
  rewriter.setInsertionPointToStart(&body);
  for (Operation &op : payload.without_terminator())
    for (Value value : op.getOperands())
      if (value.getParentBlock() != &payload && !mapping.contains(value))
        rewriter.clone(*value.getDefiningOp(), mapping);
  for (Operation &op : payload.without_terminator())
    if (!isExtensionOfArgument(op, payload))
      rewriter.clone(op, mapping);
  Value yielded =
      payload.getTerminator()->getOperand(plan->result.getResultNumber());
  Value replacement = mapping.lookupOrDefault(yielded);
  if (replacement.getParentBlock() != &body) // a constant from above
    replacement = rewriter.clone(*replacement.getDefiningOp())->getResult(0);
  rewriter.replaceAllUsesWith(body.getArgument(inputIndex), replacement);
  body.eraseArgument(inputIndex);

  rewriter.replaceOp(scan, fused.getResults());
  rewriter.eraseOp(producer);
  return fused;
}

namespace {
struct FuseProducersPattern : OpRewritePattern<ScanOp> {
  FuseProducersPattern(MLIRContext *ctx, ControlFusionFn control)
      : OpRewritePattern<ScanOp>(ctx), control(std::move(control)) {}

  LogicalResult matchAndRewrite(ScanOp scan,
                                PatternRewriter &rewriter) const override {
    for (OpOperand &input : scan.getInputsMutable()) {
      std::string reason;
      if (failed(checkProducerFusion(input, &reason))) {
        LLVM_DEBUG(llvm::dbgs() << "not fusing into " << scan.getLoc() << ": "
                                << reason << "\n");
        continue;
      }
      if (control && !control(&input))
        continue;
      if (succeeded(fuseProducer(rewriter, input)))
        return success();
    }
    return rewriter.notifyMatchFailure(scan, "no input has a producer to fuse");
  }

  ControlFusionFn control;
};

struct FuseProducersPass
    : flexsn::impl::FlexSNFuseProducersBase<FuseProducersPass> {
  using Base::Base;

  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    populateFuseProducersPatterns(patterns);
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      return signalPassFailure();
    if (!remarks)
      return;
    // What stayed: each scan input still produced by a linalg op, and why.
    getOperation()->walk([](ScanOp scan) {
      for (OpOperand &input : scan.getInputsMutable()) {
        if (!input.get().getDefiningOp<linalg::LinalgOp>())
          continue;
        std::string reason;
        if (failed(checkProducerFusion(input, &reason)))
          scan.emitRemark() << "not fused: " << reason;
      }
    });
  }
};
} // namespace

void mlir::flexsn::populateFuseProducersPatterns(
    RewritePatternSet &patterns, const ControlFusionFn &control) {
  patterns.add<FuseProducersPattern>(patterns.getContext(), control);
}
