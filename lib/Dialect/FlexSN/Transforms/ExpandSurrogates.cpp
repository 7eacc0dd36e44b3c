//===- ExpandSurrogates.cpp - flexsn per-step ops to arith/math -----------===//
//
// Part of the FlexSN project: an MLIR compiler for spiking-neuron dynamics.
//
//===----------------------------------------------------------------------===//

#include "flexsn/Dialect/FlexSN/IR/FlexSNOps.h"
#include "flexsn/Dialect/FlexSN/Transforms/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/IR/PatternMatch.h"

namespace mlir::flexsn {
#define GEN_PASS_DEF_FLEXSNEXPANDSURROGATES
#include "flexsn/Dialect/FlexSN/Transforms/Passes.h.inc"
} // namespace mlir::flexsn

using namespace mlir;
using namespace mlir::flexsn;

namespace {
/// Collects the operations a builder creates.
struct CreatedOps : OpBuilder::Listener {
  SmallVector<Operation *> ops;
  void notifyOperationInserted(Operation *op, OpBuilder::InsertPoint) override {
    ops.push_back(op);
  }
};

struct ExpandSurrogatesPass
    : flexsn::impl::FlexSNExpandSurrogatesBase<ExpandSurrogatesPass> {
  using Base::Base;

  /// Lets the target evaluate `ops`' functions (exp, division...) to a few
  /// ulp instead of correctly rounded.
  static void approximate(ArrayRef<Operation *> ops) {
    for (Operation *op : ops)
      if (auto fastMath = dyn_cast<arith::ArithFastMathInterface>(op))
        op->setAttr(
            fastMath.getFastMathAttrName(),
            arith::FastMathFlagsAttr::get(
                op->getContext(), fastMath.getFastMathFlagsAttr().getValue() |
                                      arith::FastMathFlags::afn));
  }

  void runOnOperation() override {
    IRRewriter rewriter(&getContext());
    getOperation()->walk([&](Operation *op) {
      Location loc = op->getLoc();
      rewriter.setInsertionPoint(op);
      if (auto spike = dyn_cast<SpikeOp>(op)) {
        // H(0) = 1: `oge` is false only below zero (and for NaN).
        Type type = spike.getType();
        Value zero = arith::ConstantOp::create(
            rewriter, loc, rewriter.getFloatAttr(type, 0.0));
        Value one = arith::ConstantOp::create(rewriter, loc,
                                              rewriter.getFloatAttr(type, 1.0));
        Value fires = arith::CmpFOp::create(
            rewriter, loc, arith::CmpFPredicate::OGE, spike.getInput(), zero);
        rewriter.replaceOpWithNewOp<arith::SelectOp>(spike, fires, one, zero);
      } else if (auto detach = dyn_cast<DetachOp>(op)) {
        rewriter.replaceOp(detach, detach.getInput());
      } else if (auto grad = dyn_cast<SurrogateGradOp>(op)) {
        CreatedOps created;
        OpBuilder builder(grad, &created);
        Value derivative =
            grad.getSurrogate().buildDerivative(builder, loc, grad.getInput());
        if (approximateFunctions)
          approximate(created.ops);
        rewriter.replaceOp(grad, derivative);
      }
    });
  }
};
} // namespace
