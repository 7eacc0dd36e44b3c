//===- FusionUtils.cpp - What the fusions into flexsn.scan share ----------===//
//
// Part of the FlexSN project: an MLIR compiler for spiking-neuron dynamics.
//
//===----------------------------------------------------------------------===//
//
// What producer, consumer and sibling fusion share (FusionUtils.h), and
// `materializeInlineBody`, which each of them runs first. The fusions
// themselves, with their patterns and passes, are in ProducerFusion.cpp,
// ConsumerFusion.cpp and SiblingFusion.cpp.
//
//===----------------------------------------------------------------------===//

#include "FusionUtils.h"

#include "flexsn/Dialect/FlexSN/Transforms/Fusion.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

using namespace mlir;
using namespace mlir::flexsn;

namespace mlir::flexsn::fusion {

bool keepsDimensionsInOrder(AffineMap map) {
  int64_t last = -1;
  for (AffineExpr expr : map.getResults()) {
    auto dim = dyn_cast<AffineDimExpr>(expr);
    if (!dim || static_cast<int64_t>(dim.getPosition()) <= last)
      return false;
    last = dim.getPosition();
  }
  return true;
}

std::string describe(StringRef role, linalg::LinalgOp op) {
  return (role + " '" + op->getName().getStringRef() + "'").str();
}

bool isExtensionOfArgument(Operation &op, Block &payload) {
  auto ext = dyn_cast<arith::ExtFOp>(op);
  return ext && ext.getType().isF32() && isa<BlockArgument>(ext.getIn()) &&
         cast<BlockArgument>(ext.getIn()).getOwner() == &payload;
}

Refusal checkElementwise(linalg::LinalgOp op, OpOperand *init,
                         const std::string &what) {
  if (!op.hasPureTensorSemantics())
    return what + " works on buffers";
  if (op.getNumLoops() != op.getNumParallelLoops())
    return what + " has reduction loops: only elementwise ops fuse";
  if (op.hasIndexSemantics())
    return what + " reads its loop indices (linalg.index)";
  if (op.payloadUsesValueFromOperand(init))
    return what + " reads its destination";
  return std::nullopt;
}

AffineMap getDomainToLoopsMap(IndexingMapOpInterface scan,
                              OpOperand &scanOperand, IndexingMapOpInterface op,
                              OpOperand &opOperand) {
  AffineMap loopsToTensor = op.getMatchingIndexingMap(&opOperand);
  assert(loopsToTensor.isPermutation() && "the caller checks the map");
  return inversePermutation(loopsToTensor)
      .compose(scan.getMatchingIndexingMap(&scanOperand));
}

AffineMap getMapFromDomain(IndexingMapOpInterface op, OpOperand &operand,
                           AffineMap domainToLoops) {
  return op.getMatchingIndexingMap(&operand).compose(domainToLoops);
}

FailureOr<AffineMap> operandMap(linalg::LinalgOp op, OpOperand *operand,
                                AffineMap domainToLoops,
                                const std::string &what, Refusal &refusal) {
  std::string which =
      what + " operand #" + std::to_string(operand->getOperandNumber());
  Type type = operand->get().getType();
  auto tensor = dyn_cast<RankedTensorType>(type);
  if (!tensor) {
    if (type.isF32() || type.isInteger(1) || type.isInteger(32))
      return AffineMap();
    refusal = which + " is a " + printed(type) +
              " scalar: scan params are f32, i1 or i32";
    return failure();
  }
  Type element = tensor.getElementType();
  if (!element.isF32() && !isHalf(element)) {
    refusal = which + " holds " + printed(element) +
              ": scan inputs hold f32, f16 or bf16";
    return failure();
  }
  if (isHalf(element))
    for (Operation *user : op.getMatchingBlockArgument(operand).getUsers())
      if (!isExtensionOfArgument(*user, *op.getBlock())) {
        refusal = which + " is " + printed(element) +
                  " and used other than extended to f32: a scan body "
                  "computes in f32";
        return failure();
      }
  AffineMap map = getMapFromDomain(op, *operand, domainToLoops);
  if (!keepsDimensionsInOrder(map)) {
    refusal = which + " would be read through " + printed(map) +
              ": a scan operand keeps domain dimensions once each, in order";
    return failure();
  }
  return map;
}

Refusal checkPayload(Block &payload, Value stored,
                     function_ref<bool(Operation &)> dropped,
                     const std::string &what) {
  auto isConstantFromAbove = [&](Value value) {
    Operation *def = value.getDefiningOp();
    return def && def->getBlock() != &payload &&
           def->hasTrait<OpTrait::ConstantLike>();
  };
  if (stored.getParentBlock() != &payload && !isConstantFromAbove(stored))
    return what + " yields a value defined outside it that is not a constant";
  for (Operation &op : payload.without_terminator()) {
    if (dropped(op))
      continue;
    std::string name = "'" + op.getName().getStringRef().str() + "'";
    if (op.getNumRegions() != 0 || !isMemoryEffectFree(&op))
      return what + " computes with " + name +
             ", which has regions or memory effects";
    for (Type type :
         llvm::concat<Type>(op.getOperandTypes(), op.getResultTypes()))
      if (!isStepScalarType(type))
        return what + " computes with " + name + " in " + printed(type) +
               ": a scan body computes in f32";
    for (Value value : op.getOperands())
      if (value.getParentBlock() != &payload && !isConstantFromAbove(value))
        return what + " uses a value defined outside it that is not a "
                      "constant";
  }
  return std::nullopt;
}

Value clonePayload(RewriterBase &rewriter, Block &payload, Value stored,
                   function_ref<bool(Operation &)> dropped,
                   IRMapping &mapping) {
  Block *target = rewriter.getInsertionBlock();
  for (Operation &op : payload.without_terminator())
    for (Value value : op.getOperands())
      if (value.getParentBlock() != &payload && !mapping.contains(value))
        rewriter.clone(*value.getDefiningOp(), mapping);
  for (Operation &op : payload.without_terminator())
    if (!dropped(op))
      rewriter.clone(op, mapping);
  Value value = mapping.lookupOrDefault(stored);
  if (value.getParentBlock() != target) // a constant from above
    value = rewriter.clone(*value.getDefiningOp())->getResult(0);
  return value;
}

SmallVector<AffineMap> groupMaps(ScanOp scan, unsigned group) {
  auto [first, count] = scan.getODSOperandIndexAndLength(group);
  return llvm::to_vector(
      ArrayRef<AffineMap>(scan.getIndexingMapsArray()).slice(first, count));
}

AddedOperands::AddedOperands(ScanOp scan, std::optional<unsigned> droppedInput)
    : scanInputs(scan.getInputs()), scanParams(scan.getParams()),
      scanInputMaps(groupMaps(scan, 0)), scanParamMaps(groupMaps(scan, 2)),
      droppedInput(droppedInput), domainRank(scan.getDomainRank()) {}

void AddedOperands::add(OpOperand *operand, AffineMap map) {
  Value value = operand->get();
  if (!map)
    map = AffineMap::get(domainRank, 0, value.getContext());
  bool perStep = map.getNumResults() && map.getDimPosition(0) == 0;
  auto find = [&](ArrayRef<Value> values, ArrayRef<AffineMap> maps,
                  std::optional<unsigned> skip) -> std::optional<unsigned> {
    for (auto [k, v, m] : llvm::enumerate(values, maps))
      if (v == value && m == map && k != skip)
        return k;
    return std::nullopt;
  };
  if (perStep) {
    if (auto k = find(scanInputs, scanInputMaps, droppedInput))
      inputOf[operand] = *k;
    else if (auto k = find(inputs, inputMaps, std::nullopt))
      inputOf[operand] = scanInputs.size() + *k;
    else {
      inputOf[operand] = scanInputs.size() + inputs.size();
      inputs.push_back(value);
      inputMaps.push_back(map);
    }
    return;
  }
  if (auto k = find(scanParams, scanParamMaps, std::nullopt))
    paramOf[operand] = *k;
  else if (auto k = find(params, paramMaps, std::nullopt))
    paramOf[operand] = scanParams.size() + *k;
  else {
    paramOf[operand] = scanParams.size() + params.size();
    params.push_back(value);
    paramMaps.push_back(map);
  }
}

void AddedOperands::addArguments(Block &body, linalg::LinalgOp op,
                                 IRMapping &mapping) {
  Location loc = op.getLoc();
  Type f32 = Float32Type::get(op.getContext());
  for (unsigned k = 0; k < inputs.size(); ++k)
    body.insertArgument(scanInputs.size() + k, f32, loc);
  unsigned firstParam = body.getNumArguments() - scanParams.size();
  for (Value param : params)
    body.addArgument(isa<ShapedType>(param.getType()) ? f32 : param.getType(),
                     loc);
  auto bind = [&](OpOperand *operand, BlockArgument arg) {
    BlockArgument payloadArg = op.getMatchingBlockArgument(operand);
    mapping.map(payloadArg, arg);
    for (Operation *user : payloadArg.getUsers())
      if (isExtensionOfArgument(*user, *op.getBlock()))
        mapping.map(user->getResult(0), arg);
  };
  for (auto [operand, k] : inputOf)
    bind(operand, body.getArgument(k));
  for (auto [operand, k] : paramOf)
    bind(operand, body.getArgument(firstParam + k));
}

ScanOp rebuildScan(RewriterBase &rewriter, ScanOp scan,
                   const AddedOperands &added,
                   std::optional<unsigned> droppedInput, ValueRange outputs,
                   ArrayRef<AffineMap> outputMaps, ValueRange reductions,
                   ArrayRef<AffineMap> reductionMaps, TypeRange resultTypes) {
  SmallVector<Value> inputs;
  SmallVector<AffineMap> maps;
  for (auto [k, value, map] :
       llvm::enumerate(scan.getInputs(), groupMaps(scan, 0))) {
    if (droppedInput && k == *droppedInput)
      continue;
    inputs.push_back(value);
    maps.push_back(map);
  }
  llvm::append_range(inputs, added.inputs);
  llvm::append_range(maps, added.inputMaps);
  llvm::append_range(maps, groupMaps(scan, 1));
  SmallVector<Value> params(scan.getParams());
  llvm::append_range(params, added.params);
  llvm::append_range(maps, groupMaps(scan, 2));
  llvm::append_range(maps, added.paramMaps);
  llvm::append_range(maps, outputMaps);
  llvm::append_range(maps, groupMaps(scan, 4));
  llvm::append_range(maps, reductionMaps);
  DenseI64ArrayAttr optional;
  if (auto old = scan.getOptionalInputs())
    optional =
        rewriter.getDenseI64ArrayAttr(llvm::map_to_vector(*old, [&](int64_t i) {
          return droppedInput && i > int64_t(*droppedInput) ? i - 1 : i;
        }));
  OpBuilder::InsertionGuard guard(rewriter);
  rewriter.setInsertionPoint(scan);
  auto fused = ScanOp::create(
      rewriter, scan.getLoc(), resultTypes, FlatSymbolRefAttr(), inputs,
      scan.getInits(), params, outputs, scan.getStates(), reductions,
      rewriter.getAffineMapArrayAttr(maps), scan.getReverseAttr(), optional);
  fused->setDiscardableAttrs(scan->getDiscardableAttrDictionary());
  rewriter.inlineRegionBefore(scan.getBody(), fused.getBody(),
                              fused.getBody().end());
  return fused;
}

} // namespace mlir::flexsn::fusion

FailureOr<ScanOp> mlir::flexsn::materializeInlineBody(RewriterBase &rewriter,
                                                      ScanOp scan) {
  if (!scan.getCallee())
    return scan;
  auto neuron = SymbolTable::lookupNearestSymbolFrom<NeuronOp>(
      scan, scan.getCalleeAttr());
  if (!neuron)
    return failure();
  Location loc = scan.getLoc();
  OpBuilder::InsertionGuard guard(rewriter);
  rewriter.setInsertionPoint(scan);
  auto inlined = ScanOp::create(
      rewriter, loc, scan.getResultTypes(), FlatSymbolRefAttr(),
      scan.getInputs(), scan.getInits(), scan.getParams(), scan.getOutputs(),
      scan.getStates(), scan.getReductions(), scan.getIndexingMaps(),
      scan.getReverseAttr(), scan.getOptionalInputsAttr());
  inlined->setDiscardableAttrs(scan->getDiscardableAttrDictionary());

  // The body's arguments: inputs and states as f32, params as the scan
  // passes them (shaped ones per element, as f32).
  Type f32 = rewriter.getF32Type();
  SmallVector<Type> argTypes(scan.getInputs().size() + neuron.getNumStates(),
                             f32);
  for (Value param : scan.getParams())
    argTypes.push_back(isa<ShapedType>(param.getType()) ? f32
                                                        : param.getType());
  Block *body =
      rewriter.createBlock(&inlined.getBody(), {}, argTypes,
                           SmallVector<Location>(argTypes.size(), loc));
  unsigned numInputsAndStates = scan.getInputs().size() + neuron.getNumStates();
  SmallVector<Value> operands(
      body->getArguments().take_front(numInputsAndStates));
  auto runtime = body->getArguments().drop_front(numInputsAndStates).begin();
  for (ParamAttr param : neuron.getParamAttrs())
    operands.push_back(
        param.isRuntime()
            ? *runtime++
            : arith::ConstantOp::create(rewriter, loc, param.getDefaultValue())
                  .getResult());
  auto apply = ApplyOp::create(
      rewriter, loc,
      SmallVector<Type>(neuron.getNumOutputs() + neuron.getNumStates(), f32),
      scan.getCalleeAttr(), operands, ArrayAttr(), ArrayAttr());
  YieldOp::create(rewriter, loc, apply.getResults());
  rewriter.replaceOp(scan, inlined.getResults());
  return inlined;
}

LogicalResult fusion::runFusion(Operation *root, RewritePatternSet &&patterns,
                                bool remarks, function_ref<void()> explain) {
  if (failed(applyPatternsGreedily(root, std::move(patterns))))
    return failure();
  if (remarks)
    explain();
  return success();
}
