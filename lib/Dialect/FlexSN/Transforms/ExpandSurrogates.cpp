//===- ExpandSurrogates.cpp - flexsn per-step ops to arith/math -----------===//
//
// Part of the FlexSN project: an MLIR compiler for spiking-neuron dynamics.
//
//===----------------------------------------------------------------------===//

#include "flexsn/Dialect/FlexSN/IR/FlexSNOps.h"
#include "flexsn/Dialect/FlexSN/Transforms/Passes.h"

#include "mlir/IR/PatternMatch.h"

namespace mlir::flexsn {
#define GEN_PASS_DEF_FLEXSNEXPANDSURROGATES
#include "flexsn/Dialect/FlexSN/Transforms/Passes.h.inc"
} // namespace mlir::flexsn

using namespace mlir;
using namespace mlir::flexsn;

namespace {
struct ExpandSurrogatesPass
    : flexsn::impl::FlexSNExpandSurrogatesBase<ExpandSurrogatesPass> {
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
        rewriter.replaceOp(grad, grad.getSurrogate().buildDerivative(
                                     rewriter, loc, grad.getInput()));
      }
    });
  }
};
} // namespace
