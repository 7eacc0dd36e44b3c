//===- StepBuilder.cpp - Emit one time step of a per-step body ------------===//
//
// Part of the FlexSN project: an MLIR compiler for spiking-neuron dynamics.
//
//===----------------------------------------------------------------------===//

#include "flexsn/Dialect/FlexSN/Transforms/StepBuilder.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/SymbolTable.h"

using namespace mlir;
using namespace mlir::flexsn;

SmallVector<Value> mlir::flexsn::emitStepBody(OpBuilder &builder, Block &body,
                                              ValueRange args) {
  IRMapping mapping;
  mapping.map(body.getArguments(), args);
  // Constants hoisted out of the body (by canonicalization) are cloned
  // along, so the step does not refer back to where the body came from.
  for (Operation &op : body)
    for (Value v : op.getOperands())
      if (v.getParentBlock() != &body && !mapping.contains(v))
        if (Operation *def = v.getDefiningOp();
            def && def->hasTrait<OpTrait::ConstantLike>())
          builder.clone(*def, mapping);
  for (Operation &op : body.without_terminator()) {
    auto apply = dyn_cast<ApplyOp>(op);
    if (!apply) {
      builder.clone(op, mapping);
      continue;
    }
    // The verifier guarantees the callee exists and applications are acyclic.
    auto callee = SymbolTable::lookupNearestSymbolFrom<NeuronOp>(
        apply, apply.getCalleeAttr());
    SmallVector<Value> results =
        emitStepBody(builder, callee.getBodyBlock(),
                     llvm::map_to_vector(apply.getOperands(), [&](Value v) {
                       return mapping.lookup(v);
                     }));
    mapping.map(apply.getResults(), results);
  }
  // A scan's inline body may yield values defined above it.
  return llvm::map_to_vector(body.getTerminator()->getOperands(), [&](Value v) {
    return mapping.lookupOrDefault(v);
  });
}

SmallVector<Value> mlir::flexsn::emitNeuronStep(OpBuilder &builder,
                                                Location loc, NeuronOp neuron,
                                                ValueRange inputsAndStates,
                                                ValueRange runtimeParams) {
  SmallVector<Value> args(inputsAndStates);
  auto runtime = runtimeParams.begin();
  for (ParamAttr param : neuron.getParamAttrs()) {
    if (param.isRuntime())
      args.push_back(*runtime++);
    else
      args.push_back(
          arith::ConstantOp::create(builder, loc, param.getDefaultValue()));
  }
  return emitStepBody(builder, neuron.getBodyBlock(), args);
}
