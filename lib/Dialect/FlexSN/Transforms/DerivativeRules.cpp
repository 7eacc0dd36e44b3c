//===- DerivativeRules.cpp - One derivative rule per op
//--------------------===//
//
// Part of the FlexSN project: an MLIR compiler for spiking-neuron dynamics.
//
//===----------------------------------------------------------------------===//
//
// Each rule reads the adjoint `a` of the op's result r and adds each active
// operand's contribution. Rules ask for forward values through fwd(), so the
// save planner learns exactly which values the backward step reads.
//
//===----------------------------------------------------------------------===//

#include "flexsn/Dialect/FlexSN/Transforms/AdjointBuilder.h"

#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/IR/DialectRegistry.h"

using namespace mlir;
using namespace mlir::flexsn;

//===----------------------------------------------------------------------===//
// AdjointBuilder
//===----------------------------------------------------------------------===//

void AdjointBuilder::accumulate(Value v, Value contribution) {
  if (!isActive(v))
    return;
  Value &slot = adjoints[v];
  slot = slot ? add(slot, contribution) : contribution;
}

Value AdjointBuilder::constant(double c) {
  return arith::ConstantOp::create(builder, loc, builder.getF32FloatAttr(c));
}
Value AdjointBuilder::add(Value x, Value y) {
  return arith::AddFOp::create(builder, loc, x, y);
}
Value AdjointBuilder::sub(Value x, Value y) {
  return arith::SubFOp::create(builder, loc, x, y);
}
Value AdjointBuilder::mul(Value x, Value y) {
  return arith::MulFOp::create(builder, loc, x, y);
}
Value AdjointBuilder::div(Value x, Value y) {
  return arith::DivFOp::create(builder, loc, x, y);
}
Value AdjointBuilder::neg(Value x) {
  return arith::NegFOp::create(builder, loc, x);
}
Value AdjointBuilder::select(Value cond, Value x, Value y) {
  return arith::SelectOp::create(builder, loc, cond, x, y);
}
Value AdjointBuilder::cmp(arith::CmpFPredicate predicate, Value x, Value y) {
  return arith::CmpFOp::create(builder, loc, predicate, x, y);
}

//===----------------------------------------------------------------------===//
// The rules
//===----------------------------------------------------------------------===//

namespace {

/// Shorthands for a rule: the op, its result's adjoint, its operands.
struct Rule {
  Operation *op;
  AdjointBuilder &b;
  Value a;

  Value x(unsigned i) const { return op->getOperand(i); }
  Value fx(unsigned i) const { return b.fwd(op->getOperand(i)); }
  Value fr() const { return b.fwd(op->getResult(0)); }
  bool active(unsigned i) const { return b.isActive(op->getOperand(i)); }
  void add(unsigned i, Value contribution) { b.accumulate(x(i), contribution); }
};

LogicalResult addRule(Rule r) {
  r.add(0, r.a);
  r.add(1, r.a);
  return success();
}
LogicalResult subRule(Rule r) {
  r.add(0, r.a);
  if (r.active(1))
    r.add(1, r.b.neg(r.a));
  return success();
}
LogicalResult mulRule(Rule r) {
  if (r.active(0))
    r.add(0, r.b.mul(r.a, r.fx(1)));
  if (r.active(1))
    r.add(1, r.b.mul(r.a, r.fx(0)));
  return success();
}
LogicalResult divRule(Rule r) {
  if (r.active(0))
    r.add(0, r.b.div(r.a, r.fx(1)));
  if (r.active(1)) // d(x/y)/dy = -(x/y)/y
    r.add(1, r.b.neg(r.b.div(r.b.mul(r.a, r.fr()), r.fx(1))));
  return success();
}
LogicalResult negRule(Rule r) {
  r.add(0, r.b.neg(r.a));
  return success();
}
LogicalResult selectRule(Rule r) {
  Value zero = r.b.constant(0.0), cond = r.fx(0);
  if (r.active(1))
    r.add(1, r.b.select(cond, r.a, zero));
  if (r.active(2))
    r.add(2, r.b.select(cond, zero, r.a));
  return success();
}
/// max/min: the chosen operand gets the gradient; ties go to the first.
/// The NaN-ignoring forms (maxnumf / minnumf, torch.fmax / fmin) choose the
/// first operand too when the second is NaN, where the ordered comparison
/// alone is false (torch's rule: (x >= y) | isnan(y)).
template <arith::CmpFPredicate FirstWins, bool IgnoresNaN = false>
LogicalResult extremumRule(Rule r) {
  Value first = r.b.cmp(FirstWins, r.fx(0), r.fx(1));
  if (IgnoresNaN) {
    Value secondIsNaN = r.b.cmp(arith::CmpFPredicate::UNO, r.fx(1), r.fx(1));
    first = arith::OrIOp::create(r.b.getBuilder(), r.b.getLoc(), first,
                                 secondIsNaN);
  }
  Value zero = r.b.constant(0.0);
  if (r.active(0))
    r.add(0, r.b.select(first, r.a, zero));
  if (r.active(1))
    r.add(1, r.b.select(first, zero, r.a));
  return success();
}
LogicalResult expRule(Rule r) {
  r.add(0, r.b.mul(r.a, r.fr()));
  return success();
}
LogicalResult logRule(Rule r) {
  r.add(0, r.b.div(r.a, r.fx(0)));
  return success();
}
LogicalResult log1pRule(Rule r) {
  r.add(0, r.b.div(r.a, r.b.add(r.b.constant(1.0), r.fx(0))));
  return success();
}
LogicalResult sqrtRule(Rule r) {
  r.add(0, r.b.div(r.b.mul(r.a, r.b.constant(0.5)), r.fr()));
  return success();
}
LogicalResult tanhRule(Rule r) {
  Value t = r.fr();
  r.add(0, r.b.mul(r.a, r.b.sub(r.b.constant(1.0), r.b.mul(t, t))));
  return success();
}
LogicalResult absRule(Rule r) {
  Value positive =
      r.b.cmp(arith::CmpFPredicate::OGE, r.fx(0), r.b.constant(0.0));
  r.add(0, r.b.select(positive, r.a, r.b.neg(r.a)));
  return success();
}
LogicalResult sinRule(Rule r) {
  OpBuilder &ob = r.b.getBuilder();
  r.add(0, r.b.mul(r.a, math::CosOp::create(ob, r.b.getLoc(), r.fx(0))));
  return success();
}
LogicalResult cosRule(Rule r) {
  OpBuilder &ob = r.b.getBuilder();
  r.add(0,
        r.b.neg(r.b.mul(r.a, math::SinOp::create(ob, r.b.getLoc(), r.fx(0)))));
  return success();
}
LogicalResult atanRule(Rule r) {
  Value x = r.fx(0);
  r.add(0, r.b.div(r.a, r.b.add(r.b.constant(1.0), r.b.mul(x, x))));
  return success();
}
LogicalResult erfRule(Rule r) {
  Value x = r.fx(0);
  Value gauss = math::ExpOp::create(r.b.getBuilder(), r.b.getLoc(),
                                    r.b.neg(r.b.mul(x, x)));
  // d erf(x)/dx = 2/sqrt(pi) exp(-x^2)
  r.add(0, r.b.mul(r.a, r.b.mul(r.b.constant(1.1283791670955126), gauss)));
  return success();
}
LogicalResult powRule(Rule r) {
  OpBuilder &ob = r.b.getBuilder();
  Location loc = r.b.getLoc();
  if (r.active(0)) {
    Value ym1 = r.b.sub(r.fx(1), r.b.constant(1.0));
    r.add(0, r.b.mul(r.a, r.b.mul(r.fx(1), math::PowFOp::create(
                                               ob, loc, r.fx(0), ym1))));
  }
  if (r.active(1))
    r.add(1,
          r.b.mul(r.a, r.b.mul(r.fr(), math::LogOp::create(ob, loc, r.fx(0)))));
  return success();
}
LogicalResult fmaRule(Rule r) {
  if (r.active(0))
    r.add(0, r.b.mul(r.a, r.fx(1)));
  if (r.active(1))
    r.add(1, r.b.mul(r.a, r.fx(0)));
  r.add(2, r.a);
  return success();
}
/// The surrogate stands in for the Heaviside's derivative.
LogicalResult spikeRule(Rule r) {
  auto spike = cast<SpikeOp>(r.op);
  Value g = SurrogateGradOp::create(r.b.getBuilder(), r.b.getLoc(), r.fx(0),
                                    spike.getSurrogate());
  r.add(0, r.b.mul(r.a, g));
  return success();
}
/// Stop-gradient: nothing flows back.
LogicalResult detachRule(Rule) { return success(); }

/// Attaches rule `R` to op `OpT`.
template <typename OpT, LogicalResult (*R)(Rule)>
struct RuleModel
    : DifferentiableOpInterface::ExternalModel<RuleModel<OpT, R>, OpT> {
  LogicalResult emitAdjoint(Operation *op, AdjointBuilder &builder) const {
    Value a = builder.adjoint(op->getResult(0));
    if (!a)
      return success();
    return R(Rule{op, builder, a});
  }
};

template <typename OpT, LogicalResult (*R)(Rule)>
void attach(MLIRContext *ctx) {
  OpT::template attachInterface<RuleModel<OpT, R>>(*ctx);
}

} // namespace

void mlir::flexsn::registerDerivativeRules(DialectRegistry &registry) {
  registry.addExtension(+[](MLIRContext *ctx, arith::ArithDialect *) {
    using P = arith::CmpFPredicate;
    attach<arith::AddFOp, addRule>(ctx);
    attach<arith::SubFOp, subRule>(ctx);
    attach<arith::MulFOp, mulRule>(ctx);
    attach<arith::DivFOp, divRule>(ctx);
    attach<arith::NegFOp, negRule>(ctx);
    attach<arith::SelectOp, selectRule>(ctx);
    attach<arith::MaximumFOp, extremumRule<P::OGE>>(ctx);
    attach<arith::MaxNumFOp, extremumRule<P::OGE, true>>(ctx);
    attach<arith::MinimumFOp, extremumRule<P::OLE>>(ctx);
    attach<arith::MinNumFOp, extremumRule<P::OLE, true>>(ctx);
  });
  registry.addExtension(+[](MLIRContext *ctx, math::MathDialect *) {
    attach<math::ExpOp, expRule>(ctx);
    attach<math::LogOp, logRule>(ctx);
    attach<math::Log1pOp, log1pRule>(ctx);
    attach<math::SqrtOp, sqrtRule>(ctx);
    attach<math::TanhOp, tanhRule>(ctx);
    attach<math::AbsFOp, absRule>(ctx);
    attach<math::SinOp, sinRule>(ctx);
    attach<math::CosOp, cosRule>(ctx);
    attach<math::AtanOp, atanRule>(ctx);
    attach<math::ErfOp, erfRule>(ctx);
    attach<math::PowFOp, powRule>(ctx);
    attach<math::FmaOp, fmaRule>(ctx);
  });
  registry.addExtension(+[](MLIRContext *ctx, FlexSNDialect *) {
    attach<SpikeOp, spikeRule>(ctx);
    attach<DetachOp, detachRule>(ctx);
  });
}
