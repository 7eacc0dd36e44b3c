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

/// `type` (a scalar, or a vector of lanes) with `element` for its scalar.
Type withElement(Type type, Type element) {
  if (auto lanes = dyn_cast<VectorType>(type))
    return lanes.clone(element);
  return element;
}

/// The constant `value` of `type`'s scalar, splatted over its lanes.
Value constantLike(OpBuilder &b, Location loc, Type type, TypedAttr value) {
  if (auto lanes = dyn_cast<VectorType>(type))
    return arith::ConstantOp::create(
        b, loc, DenseElementsAttr::get(lanes.clone(value.getType()), value));
  return arith::ConstantOp::create(b, loc, value);
}

/// `flexsn.round`: truncf to its type, then, for `other`, one step of the
/// rounded value's bits toward `x` (up in magnitude where `x` lies beyond it
/// away from zero; the sign is the integer's), unless it was exact.
Value expandRound(OpBuilder &b, Location loc, RoundOp round) {
  auto narrowType = cast<FloatType>(round.getNarrowType());
  Value x = round.getInput();
  Type f32 = x.getType(), storage = withElement(f32, narrowType);
  Type bitsElement = b.getIntegerType(narrowType.getWidth());
  Type bitsType = withElement(f32, bitsElement);
  Value narrow = arith::TruncFOp::create(b, loc, storage, x);
  Value nearest = arith::ExtFOp::create(b, loc, f32, narrow);
  if (!round.getOther())
    return nearest;
  auto bitsConstant = [&](int64_t value) {
    return constantLike(b, loc, bitsType, b.getIntegerAttr(bitsElement, value));
  };
  Value bits = arith::BitcastOp::create(b, loc, bitsType, narrow);
  Value negative = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::slt,
                                         bits, bitsConstant(0));
  Value above =
      arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OGT, x, nearest);
  Value away = arith::XOrIOp::create(b, loc, above, negative);
  Value step =
      arith::SelectOp::create(b, loc, away, bitsConstant(1), bitsConstant(-1));
  Value neighbourBits = arith::AddIOp::create(b, loc, bits, step);
  Value neighbour = arith::ExtFOp::create(
      b, loc, f32,
      arith::BitcastOp::create(b, loc, storage, neighbourBits).getResult());
  Value inexact =
      arith::CmpFOp::create(b, loc, arith::CmpFPredicate::ONE, x, nearest);
  return arith::SelectOp::create(b, loc, inexact, neighbour, nearest);
}

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
        Value zero =
            constantLike(rewriter, loc, type, rewriter.getF32FloatAttr(0.0));
        Value one =
            constantLike(rewriter, loc, type, rewriter.getF32FloatAttr(1.0));
        Value fires = arith::CmpFOp::create(
            rewriter, loc, arith::CmpFPredicate::OGE, spike.getInput(), zero);
        rewriter.replaceOpWithNewOp<arith::SelectOp>(spike, fires, one, zero);
      } else if (auto round = dyn_cast<RoundOp>(op)) {
        rewriter.replaceOp(round, expandRound(rewriter, loc, round));
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
