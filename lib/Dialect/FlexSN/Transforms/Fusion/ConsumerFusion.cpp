//===- ConsumerFusion.cpp - Consumers of scan results into the scan -------===//
//
// Part of the FlexSN project: an MLIR compiler for spiking-neuron dynamics.
//
//===----------------------------------------------------------------------===//
//
// A consumer of a scan's sequence (a residual add, a scaling, a cast to f16)
// runs at the end of the scan's body, its result a new scan output; a sum
// over t becomes a new scan reduction. Scan outputs that only the consumer
// read are dropped, so the [T, N...] tensor between the scan and the
// consumer is never written.
//
//===----------------------------------------------------------------------===//

#include "FusionUtils.h"

#include "flexsn/Dialect/FlexSN/Transforms/Fusion.h"
#include "flexsn/Dialect/FlexSN/Transforms/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Dominance.h"
#include "mlir/IR/Matchers.h"

#include "llvm/Support/Debug.h"

#define DEBUG_TYPE "flexsn-fusion"

namespace mlir::flexsn {
#define GEN_PASS_DEF_FLEXSNFUSECONSUMERS
#include "flexsn/Dialect/FlexSN/Transforms/Passes.h.inc"
} // namespace mlir::flexsn

using namespace mlir;
using namespace mlir::flexsn;
using namespace mlir::flexsn::fusion;

namespace {
/// How a legal consumer moves into its scan.
struct ConsumerPlan {
  linalg::LinalgOp consumer;
  ScanOp scan;
  // Per DPS input of the consumer that is a result of `scan`: its result
  // number.
  DenseMap<OpOperand *, unsigned> scanResults;
  AddedOperands added;
  // The value the payload stores (before a final truncation to the
  // destination's half type, which the scan's storage does).
  Value stored;
  Operation *storageTruncation = nullptr;
  // Whether the consumer's destination, made after the scan, is only a
  // shape (a tensor.empty, or zeros for a sum, which a scan reduction
  // starts from anyway): fusion makes an empty tensor before the scan.
  bool freshDestination = false;
  // The map from the scan's domain to the consumer's result.
  AffineMap resultMap;
  // A sum over time: the payload's `acc + stored`, which becomes a scan
  // reduction of `stored` (null for an elementwise consumer).
  Operation *accumulation = nullptr;
};
} // namespace

/// Whether `payload` sums into its destination `init`, starting from +0
/// (the value a scan reduction starts from): it yields `acc + v` with the
/// accumulator `acc` used only there, and `init` holds zeros (a linalg.fill
/// or constant of +0.0). Records `v` and the addition in `plan`.
static Refusal checkSumOverTime(ConsumerPlan &plan, Block &payload,
                                OpOperand *init, const std::string &what) {
  BlockArgument acc = plan.consumer.getMatchingBlockArgument(init);
  auto add =
      payload.getTerminator()->getOperand(0).getDefiningOp<arith::AddFOp>();
  if (!add || add->getBlock() != &payload || !acc.hasOneUse() ||
      !llvm::is_contained(add->getOperands(), Value(acc)) ||
      add.getLhs() == add.getRhs())
    return what + " reduces other than by adding each step's value to its "
                  "accumulator";
  plan.accumulation = add;
  plan.stored = add.getLhs() == acc ? add.getRhs() : add.getLhs();
  auto isPositiveZero = [](Attribute attr) {
    auto value = dyn_cast_or_null<FloatAttr>(attr);
    if (auto splat = dyn_cast_or_null<SplatElementsAttr>(attr))
      value = dyn_cast<FloatAttr>(splat.getSplatValue<Attribute>());
    return value && value.getValue().isPosZero();
  };
  Attribute zeros;
  if (auto fill = init->get().getDefiningOp<linalg::FillOp>())
    matchPattern(fill.getInputs().front(), m_Constant(&zeros));
  else
    matchPattern(init->get(), m_Constant(&zeros));
  if (!isPositiveZero(zeros))
    return what + " sums into a destination not known to hold +0.0 (a "
                  "scan reduction starts from +0.0)";
  return std::nullopt;
}

static FailureOr<ConsumerPlan> planConsumerFusion(OpOperand &use,
                                                  std::string *reason) {
  auto fail = [&](const Twine &why) -> FailureOr<ConsumerPlan> {
    if (reason)
      *reason = why.str();
    return failure();
  };
  auto consumer = dyn_cast<linalg::LinalgOp>(use.getOwner());
  auto result = dyn_cast<OpResult>(use.get());
  auto scan = result ? dyn_cast<ScanOp>(result.getOwner()) : nullptr;
  if (!consumer || !scan)
    return fail("not a linalg op's use of a flexsn.scan result");
  std::string op = describe("consumer", consumer);
  if (consumer.getNumDpsInits() != 1)
    return fail(op + " has " + std::to_string(consumer.getNumDpsInits()) +
                " results: fusion moves ops with one");
  OpOperand *init = consumer.getDpsInitOperand(0);
  // A sum over t (a spike count, a readout's total) is the one reduction
  // that fuses: it becomes a scan reduction.
  bool sumsOverTime = consumer.getNumReductionLoops() == 1;
  bool fusesAsReduction = sumsOverTime && consumer.hasPureTensorSemantics() &&
                          !consumer.hasIndexSemantics();
  if (Refusal refusal = checkElementwise(consumer, init, op);
      refusal && !fusesAsReduction)
    return fail(*refusal);
  // A scan result that is a sequence: the body's f32 value at each step.
  unsigned numSequences = scan.getOutputs().size() + scan.getStates().size();
  auto checkSequence = [&](OpOperand *operand, OpResult value) -> Refusal {
    std::string which =
        op + " operand #" + std::to_string(operand->getOperandNumber());
    unsigned r = value.getResultNumber();
    if (r >= numSequences ||
        !scan.getMatchingIndexingMap(scan.getDpsInitOperand(r)).isIdentity())
      return which + " is a scan result that is no sequence (a final state "
                     "or a reduction)";
    Type element = getElementTypeOrSelf(value.getType());
    if (!element.isF32())
      return which + " is the scan's " + printed(element) +
             " sequence: the body's values are f32 before storage";
    return std::nullopt;
  };
  if (consumer.isDpsInit(&use))
    return fail(op + " writes into the scan's result");
  if (Refusal refusal = checkSequence(&use, result))
    return fail(*refusal);
  AffineMap useMap = consumer.getMatchingIndexingMap(&use);
  if (!useMap.isPermutation())
    return fail(op + " reads the scan's result through " + printed(useMap) +
                ", not a permutation of its loops");
  // domain -> the consumer's loops, through the scan's destination.
  AffineMap domainToLoops =
      getDomainToLoopsMap(scan, *scan.getTiedOpOperand(result), consumer, use);

  DominanceInfo dominance(scan->getParentOp());
  ConsumerPlan plan{consumer, scan, DenseMap<OpOperand *, unsigned>(),
                    AddedOperands(scan, std::nullopt)};
  for (OpOperand *operand : consumer.getDpsInputOperands()) {
    auto other = dyn_cast<OpResult>(operand->get());
    if (other && other.getOwner() == scan) {
      if (Refusal refusal = checkSequence(operand, other))
        return fail(*refusal);
      if (!getMapFromDomain(consumer, *operand, domainToLoops).isIdentity())
        return fail(op + " operand #" +
                    std::to_string(operand->getOperandNumber()) +
                    " reads a scan sequence other than along the scan's "
                    "domain");
      plan.scanResults[operand] = other.getResultNumber();
      continue;
    }
    if (!dominance.properlyDominates(operand->get(), scan))
      return fail(op + " operand #" +
                  std::to_string(operand->getOperandNumber()) +
                  " is computed after the scan");
    Refusal refusal;
    FailureOr<AffineMap> map =
        operandMap(consumer, operand, domainToLoops, op, refusal);
    if (failed(map))
      return fail(*refusal);
    plan.added.add(operand, *map);
  }
  AffineMap resultMap = getMapFromDomain(consumer, *init, domainToLoops);
  Block &payload = *consumer.getBlock();
  if (sumsOverTime) {
    unsigned rank = scan.getDomainRank();
    SmallVector<unsigned> reductionLoops;
    consumer.getReductionDims(reductionLoops);
    if (domainToLoops.getDimPosition(0) != reductionLoops.front() ||
        resultMap != AffineMap::getMultiDimIdentityMap(rank, scan.getContext())
                         .dropResult(0))
      return fail(op + " reduces other than over t into one value per "
                       "neuron");
    if (Refusal refusal = checkSumOverTime(plan, payload, init, op))
      return fail(*refusal);
    plan.freshDestination = !dominance.properlyDominates(init->get(), scan);
  } else {
    if (!dominance.properlyDominates(init->get(), scan)) {
      // Only an empty tensor's shape matters, and it is the scan's domain.
      if (!init->get().getDefiningOp<tensor::EmptyOp>())
        return fail(op + "'s destination is computed after the scan");
      plan.freshDestination = true;
    }
    if (!resultMap.isIdentity())
      return fail(op + " writes its result other than along the scan's "
                       "domain");
  }
  plan.resultMap = resultMap;

  if (!sumsOverTime)
    plan.stored = payload.getTerminator()->getOperand(0);
  Type element = getElementTypeOrSelf(init->get().getType());
  if (sumsOverTime && !element.isF32()) {
    return fail(op + " sums into " + printed(element) +
                ": scan reductions are f32");
  } else if (isHalf(element)) {
    // The scan's storage rounds f32 to the destination's type as this
    // truncation does (arith.truncf, to nearest even).
    auto trunc = plan.stored.getDefiningOp<arith::TruncFOp>();
    if (!trunc || trunc->getBlock() != &payload ||
        !trunc.getIn().getType().isF32() || !trunc->hasOneUse() ||
        trunc.getRoundingmodeAttr())
      return fail(op + " yields " + printed(element) +
                  " other than by rounding an f32 value to nearest: a scan "
                  "body computes in f32");
    plan.storageTruncation = trunc;
    plan.stored = trunc.getIn();
  } else if (!element.isF32()) {
    return fail(op + " yields " + printed(element) +
                ": a scan stores its body's f32 values as f32, f16 or bf16 "
                "(and spikes as bytes or bits, which kernel generation "
                "chooses)");
  }
  Operation *truncation = plan.storageTruncation;
  Operation *accumulation = plan.accumulation;
  if (Refusal refusal = checkPayload(
          payload, plan.stored,
          [&](Operation &o) {
            return &o == truncation || &o == accumulation ||
                   isExtensionOfArgument(o, payload);
          },
          op))
    return fail(*refusal);
  return plan;
}

LogicalResult mlir::flexsn::checkConsumerFusion(OpOperand &use,
                                                std::string *reason) {
  return success(succeeded(planConsumerFusion(use, reason)));
}

FailureOr<ScanOp> mlir::flexsn::fuseConsumer(RewriterBase &rewriter,
                                             OpOperand &use) {
  FailureOr<ConsumerPlan> plan = planConsumerFusion(use, nullptr);
  if (failed(plan))
    return failure();
  linalg::LinalgOp consumer = plan->consumer;
  FailureOr<ScanOp> inlined = materializeInlineBody(rewriter, plan->scan);
  if (failed(inlined))
    return failure();
  ScanOp scan = *inlined;
  unsigned numOutputs = scan.getOutputs().size();
  bool sumsOverTime = plan->accumulation;

  // Outputs that only the consumer reads are dropped: their values live on
  // in the body only.
  SmallVector<bool> dropped(numOutputs, false);
  for (unsigned r = 0; r < numOutputs; ++r)
    dropped[r] = llvm::all_of(scan->getResult(r).getUsers(), [&](Operation *u) {
      return u == consumer.getOperation();
    });
  SmallVector<Value> outputs;
  SmallVector<AffineMap> outputMaps;
  for (auto [r, value, map] :
       llvm::enumerate(scan.getOutputs(), groupMaps(scan, 3)))
    if (!dropped[r]) {
      outputs.push_back(value);
      outputMaps.push_back(map);
    }
  unsigned numKept = outputs.size();
  SmallVector<Value> reductions(scan.getReductions());
  SmallVector<AffineMap> reductionMaps = groupMaps(scan, 5);

  // The consumer's result: a new output (after the scan's own) or, for a
  // sum over t, a new reduction (after the scan's own).
  Value init = consumer.getDpsInitOperand(0)->get();
  if (plan->freshDestination) {
    // An empty tensor before the scan, sized from its domain.
    OpBuilder::InsertionGuard guard(rewriter);
    rewriter.setInsertionPoint(scan);
    auto type = cast<RankedTensorType>(init.getType());
    SmallVector<Value> sizes;
    for (auto [i, size] : llvm::enumerate(type.getShape()))
      if (ShapedType::isDynamic(size))
        sizes.push_back(tensor::DimOp::create(
            rewriter, scan.getLoc(), scan.getDomainOperand(),
            plan->resultMap.getDimPosition(i)));
    init = tensor::EmptyOp::create(rewriter, scan.getLoc(), type, sizes);
  }
  // Read through the map the plan composed: the identity for an output,
  // every dimension but t for a sum over t.
  if (sumsOverTime) {
    reductions.push_back(init);
    reductionMaps.push_back(plan->resultMap);
  } else {
    outputs.push_back(init);
    outputMaps.push_back(plan->resultMap);
  }
  SmallVector<Type> resultTypes;
  for (Value destination :
       llvm::concat<Value>(outputs, scan.getStates(), reductions))
    resultTypes.push_back(destination.getType());
  ScanOp fused =
      rebuildScan(rewriter, scan, plan->added, std::nullopt, outputs,
                  outputMaps, reductions, reductionMaps, resultTypes);

  // The consumer's payload before the yield, on the values yielded.
  Block &body = fused.getBody().front();
  Block &payload = *consumer.getBlock();
  auto yield = cast<YieldOp>(body.getTerminator());
  IRMapping mapping;
  for (auto [operand, r] : plan->scanResults)
    mapping.map(consumer.getMatchingBlockArgument(operand),
                yield.getValues()[r]);
  plan->added.addArguments(body, consumer, mapping);
  OpBuilder::InsertionGuard guard(rewriter);
  rewriter.setInsertionPoint(yield);
  Operation *truncation = plan->storageTruncation;
  Operation *accumulation = plan->accumulation;
  Value value = clonePayload(
      rewriter, payload, plan->stored,
      [&](Operation &op) {
        return &op == truncation || &op == accumulation ||
               isExtensionOfArgument(op, payload);
      },
      mapping);
  SmallVector<Value> yielded;
  for (auto [r, v] : llvm::enumerate(yield.getValues().take_front(numOutputs)))
    if (!dropped[r])
      yielded.push_back(v);
  if (!sumsOverTime)
    yielded.push_back(value);
  llvm::append_range(yielded, yield.getValues().drop_front(numOutputs));
  if (sumsOverTime)
    yielded.push_back(value);
  rewriter.replaceOpWithNewOp<YieldOp>(yield, yielded);

  unsigned newResult = sumsOverTime ? fused->getNumResults() - 1 : numKept;
  rewriter.replaceOp(consumer, fused->getResult(newResult));
  for (unsigned r = 0, next = 0, e = scan->getNumResults(); r < e; ++r) {
    if (r < numOutputs && dropped[r])
      continue;
    if (next == newResult)
      ++next;
    rewriter.replaceAllUsesWith(scan->getResult(r), fused->getResult(next++));
  }
  rewriter.eraseOp(scan);
  return fused;
}

//===----------------------------------------------------------------------===//
// Pattern and pass
//===----------------------------------------------------------------------===//

namespace {
struct FuseConsumersPattern : OpRewritePattern<ScanOp> {
  FuseConsumersPattern(MLIRContext *ctx, ControlFusionFn control)
      : OpRewritePattern<ScanOp>(ctx), control(std::move(control)) {}

  LogicalResult matchAndRewrite(ScanOp scan,
                                PatternRewriter &rewriter) const override {
    for (OpResult result : scan->getResults())
      for (OpOperand &use : result.getUses()) {
        std::string reason;
        if (failed(checkConsumerFusion(use, &reason))) {
          LLVM_DEBUG(llvm::dbgs() << "no consumer fusion into " << scan.getLoc()
                                  << ": " << reason << "\n");
          continue;
        }
        if (control && !control(&use))
          continue;
        if (succeeded(fuseConsumer(rewriter, use)))
          return success();
      }
    return rewriter.notifyMatchFailure(scan,
                                       "no result has a consumer to fuse");
  }

  ControlFusionFn control;
};

struct FuseConsumersPass
    : flexsn::impl::FlexSNFuseConsumersBase<FuseConsumersPass> {
  using Base::Base;

  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    populateFuseConsumersPatterns(patterns);
    // What stayed: each linalg op still reading a scan result, and why.
    auto explain = [&] {
      getOperation()->walk([](linalg::LinalgOp op) {
        for (OpOperand &use : op->getOpOperands()) {
          if (!use.get().getDefiningOp<ScanOp>())
            continue;
          std::string reason;
          if (failed(checkConsumerFusion(use, &reason)))
            op->emitRemark() << "not fused into the scan: " << reason;
        }
      });
    };
    if (failed(
            runFusion(getOperation(), std::move(patterns), remarks, explain)))
      signalPassFailure();
  }
};
} // namespace

void mlir::flexsn::populateFuseConsumersPatterns(
    RewritePatternSet &patterns, const ControlFusionFn &control) {
  patterns.add<FuseConsumersPattern>(patterns.getContext(), control);
}
