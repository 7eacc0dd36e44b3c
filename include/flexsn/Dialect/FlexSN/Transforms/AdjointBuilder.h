//===- AdjointBuilder.h - What derivative rules build with ------*- C++ -*-===//
//
// Part of the FlexSN project: an MLIR compiler for spiking-neuron dynamics.
//
//===----------------------------------------------------------------------===//
//
// The reverse sweep of flexsn-autodiff hands each op's derivative rule
// (DifferentiableOpInterface) an AdjointBuilder: the adjoint of the op's
// result, the backward step's copy of any forward value, and accumulation
// of contributions into operands' adjoints.
//
//===----------------------------------------------------------------------===//

#ifndef FLEXSN_DIALECT_FLEXSN_TRANSFORMS_ADJOINTBUILDER_H
#define FLEXSN_DIALECT_FLEXSN_TRANSFORMS_ADJOINTBUILDER_H

#include "flexsn/Dialect/FlexSN/IR/FlexSNOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"

namespace mlir::flexsn {

class AdjointBuilder {
public:
  AdjointBuilder(OpBuilder &builder, Location loc,
                 const llvm::DenseSet<Value> &active,
                 function_ref<Value(Value)> forward)
      : builder(builder), loc(loc), active(active), forward(forward) {}

  /// Whether `v` carries a derivative (depends on an input, a state or a
  /// trainable parameter, and reaches a yielded value).
  bool isActive(Value v) const { return active.contains(v); }
  /// The adjoint accumulated so far for `v` (null: none).
  Value adjoint(Value v) const { return adjoints.lookup(v); }
  /// The backward step's value for forward value `v`.
  Value fwd(Value v) const { return forward(v); }
  /// Adds `contribution` to the adjoint of `v`, if `v` is active.
  void accumulate(Value v, Value contribution);

  OpBuilder &getBuilder() { return builder; }
  Location getLoc() const { return loc; }

  // Scalar f32 arithmetic at the insertion point.
  Value constant(double c);
  Value add(Value x, Value y);
  Value sub(Value x, Value y);
  Value mul(Value x, Value y);
  Value div(Value x, Value y);
  Value neg(Value x);
  Value select(Value cond, Value x, Value y);
  Value cmp(arith::CmpFPredicate predicate, Value x, Value y);

private:
  OpBuilder &builder;
  Location loc;
  const llvm::DenseSet<Value> &active;
  function_ref<Value(Value)> forward;
  llvm::DenseMap<Value, Value> adjoints;
};

/// Attaches FlexSN's derivative rules (DifferentiableOpInterface) to the
/// arith, math and flexsn ops a step body may use.
void registerDerivativeRules(DialectRegistry &registry);

} // namespace mlir::flexsn

#endif // FLEXSN_DIALECT_FLEXSN_TRANSFORMS_ADJOINTBUILDER_H
