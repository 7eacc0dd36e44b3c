//===- StepBuilder.cpp - Emit one time step of a per-step body ------------===//
//
// Part of the FlexSN project: an MLIR compiler for spiking-neuron dynamics.
//
//===----------------------------------------------------------------------===//

#include "flexsn/Dialect/FlexSN/Transforms/StepBuilder.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Transforms/Inliner.h"
#include "mlir/Transforms/InliningUtils.h"

using namespace mlir;
using namespace mlir::flexsn;

LogicalResult mlir::flexsn::inlineApplications(ModuleOp module) {
  InlinerInterface interface(module.getContext());
  InlinerConfig config;
  SymbolTableCollection symbolTables;
  // Each round inlines the applications in sight; the bodies they bring may
  // apply further neurons. The verifier rejects cycles, so the chains end;
  // the bound only guards modules that were never verified.
  for (unsigned round = 0;; ++round) {
    SmallVector<ApplyOp> applications;
    for (auto neuron : module.getOps<NeuronOp>())
      neuron.walk([&](ApplyOp apply) { applications.push_back(apply); });
    if (applications.empty())
      return success();
    if (round == 64)
      return applications.front().emitOpError(
          "applies neurons more than 64 levels deep (a cycle?)");
    for (ApplyOp apply : applications) {
      auto callee = symbolTables.lookupNearestSymbolFrom<NeuronOp>(
          apply, apply.getCalleeAttr());
      if (!callee)
        return apply.emitOpError() << "'@" << apply.getCallee()
                                   << "' does not reference a flexsn.neuron";
      if (failed(inlineCall(interface, config.getCloneCallback(),
                            cast<CallOpInterface>(apply.getOperation()),
                            cast<CallableOpInterface>(callee.getOperation()),
                            &callee.getBody())))
        return apply.emitOpError()
               << "cannot be inlined: @" << apply.getCallee()
               << " holds an op whose dialect does not allow inlining";
      apply.erase();
    }
  }
}

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
    assert(!isa<ApplyOp>(op) && "flexsn.apply not inlined (inlineApplications)");
    builder.clone(op, mapping);
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
