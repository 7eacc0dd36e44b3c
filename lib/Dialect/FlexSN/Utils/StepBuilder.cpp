//===- StepBuilder.cpp - Emit one time step of a per-step body ------------===//
//
// Part of the FlexSN project: an MLIR compiler for spiking-neuron dynamics.
//
//===----------------------------------------------------------------------===//

#include "flexsn/Dialect/FlexSN/Utils/StepBuilder.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
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
    // In neurons and in scans' inline bodies.
    SmallVector<ApplyOp> applications;
    module.walk([&](ApplyOp apply) { applications.push_back(apply); });
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

/// `type` as a vector of `width` lanes (`type` itself when `width` is 0).
static Type widen(Type type, unsigned width) {
  return width ? VectorType::get({width}, type) : type;
}

/// Clones the constant `op` into `builder`, splatted over `width` lanes.
static Value cloneConstant(OpBuilder &builder, Operation *op, unsigned width,
                           IRMapping &mapping) {
  if (!width)
    return builder.clone(*op, mapping)->getResult(0);
  auto value = cast<TypedAttr>(cast<arith::ConstantOp>(op).getValue());
  auto type = cast<ShapedType>(widen(value.getType(), width));
  Value splat = arith::ConstantOp::create(builder, op->getLoc(),
                                          DenseElementsAttr::get(type, value));
  mapping.map(op->getResult(0), splat);
  return splat;
}

bool mlir::flexsn::isVectorizableBody(Block &body) {
  auto isScalar = [](Type type) { return type.isIntOrFloat(); };
  for (Operation &op : body.without_terminator()) {
    bool constant =
        isa<arith::ConstantOp>(op) && isScalar(op.getResult(0).getType());
    if (!constant && !op.hasTrait<OpTrait::Elementwise>())
      return false;
    if (!llvm::all_of(op.getOperandTypes(), isScalar) ||
        !llvm::all_of(op.getResultTypes(), isScalar) || op.getNumRegions() != 0)
      return false;
    // Only constants may come from outside the body.
    for (Value operand : op.getOperands())
      if (operand.getParentBlock() != &body &&
          !isa_and_nonnull<arith::ConstantOp>(operand.getDefiningOp()))
        return false;
  }
  return llvm::all_of(body.getTerminator()->getOperands(),
                      [&](Value v) { return v.getParentBlock() == &body; });
}

SmallVector<Value> mlir::flexsn::emitStepBody(OpBuilder &builder, Block &body,
                                              ValueRange args, unsigned width) {
  IRMapping mapping;
  mapping.map(body.getArguments(), args);
  // Constants hoisted out of the body (by canonicalization) are cloned
  // along, so the step does not refer back to where the body came from.
  for (Operation &op : body)
    for (Value v : op.getOperands())
      if (v.getParentBlock() != &body && !mapping.contains(v))
        if (Operation *def = v.getDefiningOp();
            def && def->hasTrait<OpTrait::ConstantLike>())
          cloneConstant(builder, def, width, mapping);
  for (Operation &op : body.without_terminator()) {
    assert(!isa<ApplyOp>(op) &&
           "flexsn.apply not inlined (inlineApplications)");
    if (width && isa<arith::ConstantOp>(op)) {
      cloneConstant(builder, &op, width, mapping);
      continue;
    }
    // With lanes, an elementwise op (isVectorizableBody) applies to vectors
    // of its scalar types.
    Operation *clone = builder.clone(op, mapping);
    for (Value result : clone->getResults())
      result.setType(widen(result.getType(), width));
  }
  // A scan's inline body may yield values defined above it.
  return llvm::map_to_vector(body.getTerminator()->getOperands(), [&](Value v) {
    return mapping.lookupOrDefault(v);
  });
}

SmallVector<Value> mlir::flexsn::emitNeuronStep(OpBuilder &builder,
                                                Location loc, NeuronOp neuron,
                                                ValueRange inputsAndStates,
                                                ValueRange runtimeParams,
                                                unsigned width) {
  SmallVector<Value> args(inputsAndStates);
  auto runtime = runtimeParams.begin();
  for (ParamAttr param : neuron.getParamAttrs()) {
    if (param.isRuntime()) {
      args.push_back(*runtime++);
      continue;
    }
    TypedAttr value = param.getDefaultValue();
    if (width)
      value = DenseElementsAttr::get(
          cast<ShapedType>(widen(value.getType(), width)), value);
    args.push_back(arith::ConstantOp::create(builder, loc, value));
  }
  return emitStepBody(builder, neuron.getBodyBlock(), args, width);
}

Value mlir::flexsn::zeroLanes(OpBuilder &b, Location loc, unsigned width) {
  if (!width)
    return arith::ConstantOp::create(b, loc, b.getF32FloatAttr(0.0));
  return arith::ConstantOp::create(
      b, loc,
      DenseElementsAttr::get(VectorType::get({width}, b.getF32Type()), 0.0f));
}

SmallVector<Value> mlir::flexsn::emitStep(
    OpBuilder &b, Location loc, ScanOp scan, NeuronOp neuron, Value step,
    ValueRange carries, ArrayRef<SmallVector<Value>> laneParams,
    ArrayRef<unsigned> carriedReductions, const ScanGroupAccess &access) {
  unsigned lanes = access.lanes;
  unsigned numStates = carries.size() / lanes - carriedReductions.size();
  unsigned numInputs = scan.getInputs().size();
  unsigned numOutputs = scan.getOutputs().size();
  Block *body = neuron ? nullptr : &scan.getBody().front();
  SmallVector<bool> carried(scan.getReductions().size(), false);
  for (unsigned r : carriedReductions)
    carried[r] = true;

  SmallVector<SmallVector<Value>> inputs; // [input][lane]
  for (unsigned k = 0; k < numInputs; ++k)
    inputs.push_back(access.loadInput(k, step));

  SmallVector<SmallVector<Value>> results; // [result][lane]
  for (unsigned lane = 0; lane < lanes; ++lane) {
    SmallVector<Value> args;
    for (unsigned k = 0; k < numInputs; ++k)
      args.push_back(inputs[k][lane]);
    for (unsigned s = 0; s < numStates; ++s)
      args.push_back(carries[s * lanes + lane]);
    SmallVector<Value> stepResults;
    if (neuron) {
      stepResults =
          emitNeuronStep(b, loc, neuron, args, laneParams[lane], access.width);
    } else {
      llvm::append_range(args, laneParams[lane]);
      stepResults = emitStepBody(b, *body, args, access.width);
    }
    results.resize(stepResults.size());
    for (auto [r, value] : llvm::enumerate(stepResults))
      results[r].push_back(value);
  }
  for (unsigned k = 0; k < numOutputs; ++k)
    access.storeOutput(k, step, results[k]);
  // A scan may carry states it writes nowhere (no state buffers).
  for (unsigned s = 0, e = scan.getStates().size(); s < e; ++s)
    if (!scan.isFinalState(s))
      access.storeState(s, step, results[numOutputs + s]);
  auto contributions = ArrayRef(results).drop_front(numOutputs + numStates);
  for (auto [r, lanesOf] : llvm::enumerate(contributions))
    if (!carried[r])
      access.addAtStep(r, step, lanesOf);

  SmallVector<Value> next;
  for (unsigned s = 0; s < numStates; ++s)
    next.append(results[numOutputs + s]);
  for (auto [c, r] : llvm::enumerate(carriedReductions))
    for (unsigned lane = 0; lane < lanes; ++lane)
      next.push_back(
          arith::AddFOp::create(b, loc, carries[(numStates + c) * lanes + lane],
                                contributions[r][lane]));
  return next;
}

ValueRange mlir::flexsn::emitTimeLoop(OpBuilder &b, Location loc, ScanOp scan,
                                      NeuronOp neuron, Value numSteps,
                                      ArrayRef<Value> initialStates,
                                      ArrayRef<SmallVector<Value>> laneParams,
                                      ArrayRef<unsigned> carriedReductions,
                                      const ScanGroupAccess &access) {
  Type count = numSteps.getType();
  auto constant = [&](int64_t value) {
    return arith::ConstantOp::create(b, loc, b.getIntegerAttr(count, value));
  };
  SmallVector<Value> carries(initialStates);
  carries.append(carriedReductions.size() * access.lanes,
                 zeroLanes(b, loc, access.width));

  Value one = constant(1);
  auto loop = scf::ForOp::create(
      b, loc, constant(0), numSteps, one, carries,
      [&](OpBuilder &nested, Location, Value iteration, ValueRange iter) {
        OpBuilder::InsertionGuard guard(b);
        b.setInsertionPointToStart(nested.getInsertionBlock());
        Value step = iteration;
        if (scan.getReverse())
          step = arith::SubIOp::create(
              b, loc, arith::SubIOp::create(b, loc, numSteps, one), iteration);
        scf::YieldOp::create(b, loc,
                             emitStep(b, loc, scan, neuron, step, iter,
                                      laneParams, carriedReductions, access));
      });
  return loop.getResults();
}
