//===- ProducerFusion.cpp - Producers of scan inputs into the scan --------===//
//
// Part of the FlexSN project: an MLIR compiler for spiking-neuron dynamics.
//
//===----------------------------------------------------------------------===//
//
// A producer of a scan input (batch-norm's `x * scale[c] + shift[c]`, a
// bias, a cast to f32) runs at the start of the scan's body. Its other
// operands become scan operands read through the composition of the scan's
// map for the fused input with the producer's own maps, so the [T, N...]
// tensor between the producer and the scan is never written.
//
//===----------------------------------------------------------------------===//

#include "FusionUtils.h"

#include "flexsn/Dialect/FlexSN/Transforms/Fusion.h"
#include "flexsn/Dialect/FlexSN/Transforms/Passes.h"

#include "llvm/Support/Debug.h"

#define DEBUG_TYPE "flexsn-fusion"

namespace mlir::flexsn {
#define GEN_PASS_DEF_FLEXSNFUSEPRODUCERS
#include "flexsn/Dialect/FlexSN/Transforms/Passes.h.inc"
} // namespace mlir::flexsn

using namespace mlir;
using namespace mlir::flexsn;
using namespace mlir::flexsn::fusion;

namespace {
/// How a legal producer reaches the fused scan.
struct ProducerPlan {
  linalg::LinalgOp producer;
  OpResult result;     // the value the scan reads
  unsigned inputIndex; // its position among the scan's inputs
  AddedOperands added;
};
} // namespace

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
  std::string op = describe("its producer", producer);
  OpOperand *init = producer.getDpsInitOperand(result.getResultNumber());
  if (Refusal refusal = checkElementwise(producer, init, op))
    return fail(*refusal);
  if (!result.hasOneUse())
    return fail(op + " has other uses of its result: it would run twice");
  AffineMap resultMap = producer.getMatchingIndexingMap(init);
  if (!resultMap.isPermutation())
    return fail(op + " writes its result through " +
                std::to_string(resultMap.getNumResults()) +
                " indices that are not a permutation of its loops");

  // domain -> the producer's loops -> each operand's indices.
  AffineMap domainToLoops = getDomainToLoopsMap(scan, input, producer, *init);
  ProducerPlan plan{producer, result, inputIndex,
                    AddedOperands(scan, inputIndex)};
  for (OpOperand *operand : producer.getDpsInputOperands()) {
    Refusal refusal;
    FailureOr<AffineMap> map =
        operandMap(producer, operand, domainToLoops, op, refusal);
    if (failed(map))
      return fail(*refusal);
    plan.added.add(operand, *map);
  }
  Type element = getElementTypeOrSelf(result.getType());
  if (!element.isF32())
    return fail(op + " yields " + printed(element) +
                ": its rounding cannot move into a scan body, which "
                "computes in f32");
  Block &payload = *producer.getBlock();
  Value stored = payload.getTerminator()->getOperand(result.getResultNumber());
  if (Refusal refusal = checkPayload(
          payload, stored,
          [&](Operation &o) { return isExtensionOfArgument(o, payload); }, op))
    return fail(*refusal);
  return plan;
}

LogicalResult mlir::flexsn::checkProducerFusion(OpOperand &input,
                                                std::string *reason) {
  return success(succeeded(planProducerFusion(input, reason)));
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
  ScanOp fused =
      rebuildScan(rewriter, scan, plan->added, inputIndex, scan.getOutputs(),
                  groupMaps(scan, 3), scan.getReductions(), groupMaps(scan, 5),
                  scan.getResultTypes());

  // The producer's operands after the scan's inputs, its payload first.
  Block &body = fused.getBody().front();
  Block &payload = *producer.getBlock();
  IRMapping mapping;
  plan->added.addArguments(body, producer, mapping);
  OpBuilder::InsertionGuard guard(rewriter);
  rewriter.setInsertionPointToStart(&body);
  Value value = clonePayload(
      rewriter, payload,
      payload.getTerminator()->getOperand(plan->result.getResultNumber()),
      [&](Operation &op) { return isExtensionOfArgument(op, payload); },
      mapping);
  rewriter.replaceAllUsesWith(body.getArgument(inputIndex), value);
  body.eraseArgument(inputIndex);

  rewriter.replaceOp(scan, fused.getResults());
  rewriter.eraseOp(producer);
  return fused;
}

//===----------------------------------------------------------------------===//
// Pattern and pass
//===----------------------------------------------------------------------===//

namespace {
struct FuseProducersPattern : OpRewritePattern<ScanOp> {
  FuseProducersPattern(MLIRContext *ctx, ControlFusionFn control)
      : OpRewritePattern<ScanOp>(ctx), control(std::move(control)) {}

  LogicalResult matchAndRewrite(ScanOp scan,
                                PatternRewriter &rewriter) const override {
    for (OpOperand &input : scan.getInputsMutable()) {
      std::string reason;
      if (failed(checkProducerFusion(input, &reason))) {
        LLVM_DEBUG(llvm::dbgs() << "no producer fusion into " << scan.getLoc()
                                << ": " << reason << "\n");
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
    // What stayed: each scan input still produced by a linalg op, and why.
    auto explain = [&] {
      getOperation()->walk([](ScanOp scan) {
        for (OpOperand &input : scan.getInputsMutable()) {
          if (!input.get().getDefiningOp<linalg::LinalgOp>())
            continue;
          std::string reason;
          if (failed(checkProducerFusion(input, &reason)))
            scan.emitRemark() << "not fused: " << reason;
        }
      });
    };
    if (failed(
            runFusion(getOperation(), std::move(patterns), remarks, explain)))
      signalPassFailure();
  }
};
} // namespace

void mlir::flexsn::populateFuseProducersPatterns(
    RewritePatternSet &patterns, const ControlFusionFn &control) {
  patterns.add<FuseProducersPattern>(patterns.getContext(), control);
}
