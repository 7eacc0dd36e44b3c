//===- Fusion.cpp - Elementwise linalg ops into flexsn.scan ---------------===//
//
// Part of the FlexSN project: an MLIR compiler for spiking-neuron dynamics.
//
//===----------------------------------------------------------------------===//
//
// Moves the elementwise linalg ops around a scan into its body, and merges
// scans over one domain. A producer of a scan input (batch-norm's
// `x * scale[c] + shift[c]`, a bias, a cast to f32) runs at the start of
// the body; a consumer of a scan's sequence (a residual add, a scaling, a
// cast to f16) at its end, its result a new scan output, and a sum over t
// a new scan reduction. Their other operands become scan operands read
// through composed indexing maps, so the [T, N...] tensors between them and
// the scan are never written. Two scans where one reads the other's
// sequences (a neuron feeding a neuron), or both read one input, become
// one.
//
//===----------------------------------------------------------------------===//

#include "flexsn/Dialect/FlexSN/Transforms/Fusion.h"
#include "flexsn/Dialect/FlexSN/Transforms/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Dominance.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/Matchers.h"
#include "mlir/Interfaces/IndexingMapOpInterface.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

#include "llvm/Support/Debug.h"
#include "llvm/Support/raw_ostream.h"

#include <optional>

#define DEBUG_TYPE "flexsn-fusion"

namespace mlir::flexsn {
#define GEN_PASS_DEF_FLEXSNFUSECONSUMERS
#define GEN_PASS_DEF_FLEXSNFUSEPRODUCERS
#define GEN_PASS_DEF_FLEXSNFUSESIBLINGS
#include "flexsn/Dialect/FlexSN/Transforms/Passes.h.inc"
} // namespace mlir::flexsn

using namespace mlir;
using namespace mlir::flexsn;

/// Why a fusion is refused; none when it is legal.
using Refusal = std::optional<std::string>;

//===----------------------------------------------------------------------===//
// What a linalg op must be to run in a scan body
//===----------------------------------------------------------------------===//

/// Whether `map` keeps domain dimensions, each once and in order: the maps
/// a scan operand may have.
static bool keepsDimensionsInOrder(AffineMap map) {
  int64_t last = -1;
  for (AffineExpr expr : map.getResults()) {
    auto dim = dyn_cast<AffineDimExpr>(expr);
    if (!dim || static_cast<int64_t>(dim.getPosition()) <= last)
      return false;
    last = dim.getPosition();
  }
  return true;
}

static bool isHalf(Type type) { return type.isF16() || type.isBF16(); }

/// `value` as printed, for reasons.
template <typename T>
static std::string printed(const T &value) {
  std::string text;
  llvm::raw_string_ostream(text) << value;
  return text;
}

/// "its producer 'linalg.generic'", for reasons.
static std::string describe(StringRef role, linalg::LinalgOp op) {
  return (role + " '" + op->getName().getStringRef() + "'").str();
}

/// An extension to f32 of a half-precision payload argument: the scan
/// reads its inputs as f32 already, so fusion drops it.
static bool isExtensionOfArgument(Operation &op, Block &payload) {
  auto ext = dyn_cast<arith::ExtFOp>(op);
  return ext && ext.getType().isF32() && isa<BlockArgument>(ext.getIn()) &&
         cast<BlockArgument>(ext.getIn()).getOwner() == &payload;
}

/// A linalg op fusion may move: on tensors, only parallel loops, no loop
/// indices, not reading the destination `init`.
static Refusal checkElementwise(linalg::LinalgOp op, OpOperand *init,
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

/// The map from a scan's domain to the loops of `op`, a linalg op sharing a
/// tensor with it: the scan indexes the tensor through `scanOperand`, `op`
/// through `opOperand`, which must be a permutation of `op`'s loops. Both
/// sides are asked through IndexingMapOpInterface.
static AffineMap getDomainToLoopsMap(IndexingMapOpInterface scan,
                                     OpOperand &scanOperand,
                                     IndexingMapOpInterface op,
                                     OpOperand &opOperand) {
  AffineMap loopsToTensor = op.getMatchingIndexingMap(&opOperand);
  assert(loopsToTensor.isPermutation() && "the caller checks the map");
  return inversePermutation(loopsToTensor)
      .compose(scan.getMatchingIndexingMap(&scanOperand));
}

/// The map from a scan's domain to the indices of `operand` of `op`, given
/// the map from the domain to `op`'s loops.
static AffineMap getMapFromDomain(IndexingMapOpInterface op, OpOperand &operand,
                                  AffineMap domainToLoops) {
  return op.getMatchingIndexingMap(&operand).compose(domainToLoops);
}

/// The map through which the scan reads `operand` of `op` (tensors; a null
/// map for a scalar, which becomes a param), given the map from the scan's
/// domain to `op`'s loops.
static FailureOr<AffineMap> operandMap(linalg::LinalgOp op, OpOperand *operand,
                                       AffineMap domainToLoops,
                                       const std::string &what,
                                       Refusal &refusal) {
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

/// Whether `payload` can run in a scan body, yielding `stored`: its ops
/// (but those fusion drops, `dropped`) free of memory effects and regions,
/// on f32 and integer scalars, using from outside only constants.
static Refusal checkPayload(Block &payload, Value stored,
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

/// Clones `payload` (but the ops `dropped`) at the rewriter's insertion
/// point, its constants from above along, and returns what `stored` became.
static Value clonePayload(RewriterBase &rewriter, Block &payload, Value stored,
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

/// The maps of `scan`'s operand group `group`.
static SmallVector<AffineMap> groupMaps(ScanOp scan, unsigned group) {
  auto [first, count] = scan.getODSOperandIndexAndLength(group);
  return llvm::to_vector(
      ArrayRef<AffineMap>(scan.getIndexingMapsArray()).slice(first, count));
}

/// The operands a fusion adds to a scan. A tensor read at every step
/// becomes an input; one that does not depend on t (a per-channel scale, a
/// per-neuron bias) and a scalar become params, as a neuron's parameters
/// are. An operand the scan already reads through the same map (the block
/// input of a residual add, say) is read once.
struct AddedOperands {
  SmallVector<Value> inputs, params;
  SmallVector<AffineMap> inputMaps, paramMaps;

  /// `scan`'s own operands (but input `droppedInput`) are there to share.
  AddedOperands(ScanOp scan, std::optional<unsigned> droppedInput)
      : scanInputs(scan.getInputs()), scanParams(scan.getParams()),
        scanInputMaps(groupMaps(scan, 0)), scanParamMaps(groupMaps(scan, 2)),
        droppedInput(droppedInput), domainRank(scan.getDomainRank()) {}

  /// Adds `operand`, read through `map` (null for a scalar).
  void add(OpOperand *operand, AffineMap map) {
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

  /// Adds their body arguments to `body` (inputs after the scan's, params
  /// after the scan's; tensors' elements as f32) and maps `op`'s payload
  /// arguments to them, extensions of half-precision ones included.
  void addArguments(Block &body, linalg::LinalgOp op, IRMapping &mapping) {
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

private:
  // Per operand of the fused op: its position among the scan's inputs or
  // params (the scan's own, then the added ones).
  DenseMap<OpOperand *, unsigned> inputOf, paramOf;
  SmallVector<Value> scanInputs, scanParams;
  SmallVector<AffineMap> scanInputMaps, scanParamMaps;
  std::optional<unsigned> droppedInput;
  unsigned domainRank;
};

/// Builds the scan `scan` becomes with `added` operands, outputs `outputs`
/// and reductions `reductions` (with their maps) and results
/// `resultTypes`, its inputs but `droppedInput` (when set): the same
/// attributes; the body is moved over from `scan`.
static ScanOp
rebuildScan(RewriterBase &rewriter, ScanOp scan, const AddedOperands &added,
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

//===----------------------------------------------------------------------===//
// Producers
//===----------------------------------------------------------------------===//

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
// Consumers
//===----------------------------------------------------------------------===//

namespace {
/// How a legal consumer moves into its scan.
struct ConsumerPlan {
  linalg::LinalgOp consumer;
  ScanOp scan;
  // Per DPS input of the consumer that is a result of `scan`: its result
  // number.
  DenseMap<OpOperand *, unsigned> scanResults;
  AddedOperands added;
  // The value the payload stores (before a final truncation to the
  // destination's half type, which the scan's storage does).
  Value stored;
  Operation *storageTruncation = nullptr;
  // Whether the consumer's destination, made after the scan, is only a
  // shape (a tensor.empty, or zeros for a sum, which a scan reduction
  // starts from anyway): fusion makes an empty tensor before the scan.
  bool freshDestination = false;
  // The map from the scan's domain to the consumer's result.
  AffineMap resultMap;
  // A sum over time: the payload's `acc + stored`, which becomes a scan
  // reduction of `stored` (null for an elementwise consumer).
  Operation *accumulation = nullptr;
};
} // namespace

/// Whether `payload` sums into its destination `init`, starting from +0
/// (the value a scan reduction starts from): it yields `acc + v` with the
/// accumulator `acc` used only there, and `init` holds zeros (a linalg.fill
/// or constant of +0.0). Records `v` and the addition in `plan`.
static Refusal checkSumOverTime(ConsumerPlan &plan, Block &payload,
                                OpOperand *init, const std::string &what) {
  BlockArgument acc = plan.consumer.getMatchingBlockArgument(init);
  auto add =
      payload.getTerminator()->getOperand(0).getDefiningOp<arith::AddFOp>();
  if (!add || add->getBlock() != &payload || !acc.hasOneUse() ||
      !llvm::is_contained(add->getOperands(), Value(acc)) ||
      add.getLhs() == add.getRhs())
    return what + " reduces other than by adding each step's value to its "
                  "accumulator";
  plan.accumulation = add;
  plan.stored = add.getLhs() == acc ? add.getRhs() : add.getLhs();
  auto isPositiveZero = [](Attribute attr) {
    auto value = dyn_cast_or_null<FloatAttr>(attr);
    if (auto splat = dyn_cast_or_null<SplatElementsAttr>(attr))
      value = dyn_cast<FloatAttr>(splat.getSplatValue<Attribute>());
    return value && value.getValue().isPosZero();
  };
  Attribute zeros;
  if (auto fill = init->get().getDefiningOp<linalg::FillOp>())
    matchPattern(fill.getInputs().front(), m_Constant(&zeros));
  else
    matchPattern(init->get(), m_Constant(&zeros));
  if (!isPositiveZero(zeros))
    return what + " sums into a destination not known to hold +0.0 (a "
                  "scan reduction starts from +0.0)";
  return std::nullopt;
}

static FailureOr<ConsumerPlan> planConsumerFusion(OpOperand &use,
                                                  std::string *reason) {
  auto fail = [&](const Twine &why) -> FailureOr<ConsumerPlan> {
    if (reason)
      *reason = why.str();
    return failure();
  };
  auto consumer = dyn_cast<linalg::LinalgOp>(use.getOwner());
  auto result = dyn_cast<OpResult>(use.get());
  auto scan = result ? dyn_cast<ScanOp>(result.getOwner()) : nullptr;
  if (!consumer || !scan)
    return fail("not a linalg op's use of a flexsn.scan result");
  std::string op = describe("consumer", consumer);
  if (consumer.getNumDpsInits() != 1)
    return fail(op + " has " + std::to_string(consumer.getNumDpsInits()) +
                " results: fusion moves ops with one");
  OpOperand *init = consumer.getDpsInitOperand(0);
  // A sum over t (a spike count, a readout's total) is the one reduction
  // that fuses: it becomes a scan reduction.
  bool sumsOverTime = consumer.getNumReductionLoops() == 1;
  if (Refusal refusal = checkElementwise(consumer, init, op);
      refusal && !(sumsOverTime && consumer.hasPureTensorSemantics() &&
                   !consumer.hasIndexSemantics()))
    return fail(*refusal);
  // A scan result that is a sequence: the body's f32 value at each step.
  unsigned numSequences = scan.getOutputs().size() + scan.getStates().size();
  auto checkSequence = [&](OpOperand *operand, OpResult value) -> Refusal {
    std::string which =
        op + " operand #" + std::to_string(operand->getOperandNumber());
    unsigned r = value.getResultNumber();
    if (r >= numSequences ||
        !scan.getMatchingIndexingMap(scan.getDpsInitOperand(r)).isIdentity())
      return which + " is a scan result that is no sequence (a final state "
                     "or a reduction)";
    Type element = getElementTypeOrSelf(value.getType());
    if (!element.isF32())
      return which + " is the scan's " + printed(element) +
             " sequence: the body's values are f32 before storage";
    return std::nullopt;
  };
  if (consumer.isDpsInit(&use))
    return fail(op + " writes into the scan's result");
  if (Refusal refusal = checkSequence(&use, result))
    return fail(*refusal);
  AffineMap useMap = consumer.getMatchingIndexingMap(&use);
  if (!useMap.isPermutation())
    return fail(op + " reads the scan's result through " + printed(useMap) +
                ", not a permutation of its loops");
  // domain -> the consumer's loops, through the scan's destination.
  AffineMap domainToLoops =
      getDomainToLoopsMap(scan, *scan.getTiedOpOperand(result), consumer, use);

  DominanceInfo dominance(scan->getParentOp());
  ConsumerPlan plan{consumer, scan, DenseMap<OpOperand *, unsigned>(),
                    AddedOperands(scan, std::nullopt)};
  for (OpOperand *operand : consumer.getDpsInputOperands()) {
    auto other = dyn_cast<OpResult>(operand->get());
    if (other && other.getOwner() == scan) {
      if (Refusal refusal = checkSequence(operand, other))
        return fail(*refusal);
      if (!getMapFromDomain(consumer, *operand, domainToLoops).isIdentity())
        return fail(op + " operand #" +
                    std::to_string(operand->getOperandNumber()) +
                    " reads a scan sequence other than along the scan's "
                    "domain");
      plan.scanResults[operand] = other.getResultNumber();
      continue;
    }
    if (!dominance.properlyDominates(operand->get(), scan))
      return fail(op + " operand #" +
                  std::to_string(operand->getOperandNumber()) +
                  " is computed after the scan");
    Refusal refusal;
    FailureOr<AffineMap> map =
        operandMap(consumer, operand, domainToLoops, op, refusal);
    if (failed(map))
      return fail(*refusal);
    plan.added.add(operand, *map);
  }
  AffineMap resultMap = getMapFromDomain(consumer, *init, domainToLoops);
  Block &payload = *consumer.getBlock();
  if (sumsOverTime) {
    unsigned rank = scan.getDomainRank();
    SmallVector<unsigned> reductionLoops;
    consumer.getReductionDims(reductionLoops);
    if (domainToLoops.getDimPosition(0) != reductionLoops.front() ||
        resultMap != AffineMap::getMultiDimIdentityMap(rank, scan.getContext())
                         .dropResult(0))
      return fail(op + " reduces other than over t into one value per "
                       "neuron");
    if (Refusal refusal = checkSumOverTime(plan, payload, init, op))
      return fail(*refusal);
    plan.freshDestination = !dominance.properlyDominates(init->get(), scan);
  } else {
    if (!dominance.properlyDominates(init->get(), scan)) {
      // Only an empty tensor's shape matters, and it is the scan's domain.
      if (!init->get().getDefiningOp<tensor::EmptyOp>())
        return fail(op + "'s destination is computed after the scan");
      plan.freshDestination = true;
    }
    if (!resultMap.isIdentity())
      return fail(op + " writes its result other than along the scan's "
                       "domain");
  }
  plan.resultMap = resultMap;

  if (!sumsOverTime)
    plan.stored = payload.getTerminator()->getOperand(0);
  Type element = getElementTypeOrSelf(init->get().getType());
  if (sumsOverTime && !element.isF32()) {
    return fail(op + " sums into " + printed(element) +
                ": scan reductions are f32");
  } else if (isHalf(element)) {
    // The scan's storage rounds f32 to the destination's type as this
    // truncation does (arith.truncf, to nearest even).
    auto trunc = plan.stored.getDefiningOp<arith::TruncFOp>();
    if (!trunc || trunc->getBlock() != &payload ||
        !trunc.getIn().getType().isF32() || !trunc->hasOneUse() ||
        trunc.getRoundingmodeAttr())
      return fail(op + " yields " + printed(element) +
                  " other than by rounding an f32 value to nearest: a scan "
                  "body computes in f32");
    plan.storageTruncation = trunc;
    plan.stored = trunc.getIn();
  } else if (!element.isF32()) {
    return fail(op + " yields " + printed(element) +
                ": a scan stores its body's f32 values as f32, f16 or bf16 "
                "(and spikes as bytes or bits, which kernel generation "
                "chooses)");
  }
  Operation *truncation = plan.storageTruncation;
  Operation *accumulation = plan.accumulation;
  if (Refusal refusal = checkPayload(
          payload, plan.stored,
          [&](Operation &o) {
            return &o == truncation || &o == accumulation ||
                   isExtensionOfArgument(o, payload);
          },
          op))
    return fail(*refusal);
  return plan;
}

LogicalResult mlir::flexsn::checkConsumerFusion(OpOperand &use,
                                                std::string *reason) {
  return success(succeeded(planConsumerFusion(use, reason)));
}

FailureOr<ScanOp> mlir::flexsn::fuseConsumer(RewriterBase &rewriter,
                                             OpOperand &use) {
  FailureOr<ConsumerPlan> plan = planConsumerFusion(use, nullptr);
  if (failed(plan))
    return failure();
  linalg::LinalgOp consumer = plan->consumer;
  FailureOr<ScanOp> inlined = materializeInlineBody(rewriter, plan->scan);
  if (failed(inlined))
    return failure();
  ScanOp scan = *inlined;
  unsigned numOutputs = scan.getOutputs().size();
  bool sumsOverTime = plan->accumulation;

  // Outputs that only the consumer reads are dropped: their values live on
  // in the body only.
  SmallVector<bool> dropped(numOutputs, false);
  for (unsigned r = 0; r < numOutputs; ++r)
    dropped[r] = llvm::all_of(scan->getResult(r).getUsers(), [&](Operation *u) {
      return u == consumer.getOperation();
    });
  SmallVector<Value> outputs;
  SmallVector<AffineMap> outputMaps;
  for (auto [r, value, map] :
       llvm::enumerate(scan.getOutputs(), groupMaps(scan, 3)))
    if (!dropped[r]) {
      outputs.push_back(value);
      outputMaps.push_back(map);
    }
  unsigned numKept = outputs.size();
  SmallVector<Value> reductions(scan.getReductions());
  SmallVector<AffineMap> reductionMaps = groupMaps(scan, 5);

  // The consumer's result: a new output (after the scan's own) or, for a
  // sum over t, a new reduction (after the scan's own).
  Value init = consumer.getDpsInitOperand(0)->get();
  if (plan->freshDestination) {
    // An empty tensor before the scan, sized from its domain.
    OpBuilder::InsertionGuard guard(rewriter);
    rewriter.setInsertionPoint(scan);
    auto type = cast<RankedTensorType>(init.getType());
    SmallVector<Value> sizes;
    for (auto [i, size] : llvm::enumerate(type.getShape()))
      if (ShapedType::isDynamic(size))
        sizes.push_back(tensor::DimOp::create(
            rewriter, scan.getLoc(), scan.getDomainOperand(),
            plan->resultMap.getDimPosition(i)));
    init = tensor::EmptyOp::create(rewriter, scan.getLoc(), type, sizes);
  }
  // Read through the map the plan composed: the identity for an output,
  // every dimension but t for a sum over t.
  if (sumsOverTime) {
    reductions.push_back(init);
    reductionMaps.push_back(plan->resultMap);
  } else {
    outputs.push_back(init);
    outputMaps.push_back(plan->resultMap);
  }
  SmallVector<Type> resultTypes;
  for (Value destination :
       llvm::concat<Value>(outputs, scan.getStates(), reductions))
    resultTypes.push_back(destination.getType());
  ScanOp fused =
      rebuildScan(rewriter, scan, plan->added, std::nullopt, outputs,
                  outputMaps, reductions, reductionMaps, resultTypes);

  // The consumer's payload before the yield, on the values yielded.
  Block &body = fused.getBody().front();
  Block &payload = *consumer.getBlock();
  auto yield = cast<YieldOp>(body.getTerminator());
  IRMapping mapping;
  for (auto [operand, r] : plan->scanResults)
    mapping.map(consumer.getMatchingBlockArgument(operand),
                yield.getValues()[r]);
  plan->added.addArguments(body, consumer, mapping);
  OpBuilder::InsertionGuard guard(rewriter);
  rewriter.setInsertionPoint(yield);
  Operation *truncation = plan->storageTruncation;
  Operation *accumulation = plan->accumulation;
  Value value = clonePayload(
      rewriter, payload, plan->stored,
      [&](Operation &op) {
        return &op == truncation || &op == accumulation ||
               isExtensionOfArgument(op, payload);
      },
      mapping);
  SmallVector<Value> yielded;
  for (auto [r, v] : llvm::enumerate(yield.getValues().take_front(numOutputs)))
    if (!dropped[r])
      yielded.push_back(v);
  if (!sumsOverTime)
    yielded.push_back(value);
  llvm::append_range(yielded, yield.getValues().drop_front(numOutputs));
  if (sumsOverTime)
    yielded.push_back(value);
  rewriter.replaceOpWithNewOp<YieldOp>(yield, yielded);

  unsigned newResult = sumsOverTime ? fused->getNumResults() - 1 : numKept;
  rewriter.replaceOp(consumer, fused->getResult(newResult));
  for (unsigned r = 0, next = 0, e = scan->getNumResults(); r < e; ++r) {
    if (r < numOutputs && dropped[r])
      continue;
    if (next == newResult)
      ++next;
    rewriter.replaceAllUsesWith(scan->getResult(r), fused->getResult(next++));
  }
  rewriter.eraseOp(scan);
  return fused;
}

//===----------------------------------------------------------------------===//
// Siblings
//===----------------------------------------------------------------------===//

/// The number of states `scan`'s body carries.
static unsigned numCarriedStates(ScanOp scan) {
  if (!scan.getInits().empty())
    return scan.getInits().size();
  if (!scan.getStates().empty())
    return scan.getStates().size();
  if (auto callee = scan.getCallee())
    if (auto neuron = SymbolTable::lookupNearestSymbolFrom<NeuronOp>(
            scan, scan.getCalleeAttr()))
      return neuron.getNumStates();
  Block &body = scan.getBody().front();
  return body.getNumArguments() - scan.getInputs().size() -
         scan.getParams().size();
}

/// Whether `a` and `b` read one tensor through the identity map: they run
/// over the same domain.
static bool shareDomainInput(ScanOp a, ScanOp b) {
  for (OpOperand &x : a.getInputsMutable())
    for (OpOperand &y : b.getInputsMutable())
      if (x.get() == y.get() && a.getMatchingIndexingMap(&x).isIdentity() &&
          b.getMatchingIndexingMap(&y).isIdentity())
        return true;
  return false;
}

LogicalResult mlir::flexsn::checkSiblingFusion(ScanOp first, ScanOp second,
                                               std::string *reason) {
  auto fail = [&](const Twine &why) {
    if (reason)
      *reason = why.str();
    return failure();
  };
  if (first == second || first->getBlock() != second->getBlock() ||
      !first->isBeforeInBlock(second))
    return fail("the first scan must come before the second in one block");
  if (!first.hasTensorSemantics() || !second.hasTensorSemantics())
    return fail("fusion runs on tensors, before bufferization");
  if (first.getReverse() != second.getReverse())
    return fail("one scan runs forward in time, the other in reverse");
  if (first.getOptionalInputs() || second.getOptionalInputs())
    return fail("a scan has optional inputs");
  if (first.getInits().empty() != second.getInits().empty() &&
      numCarriedStates(first) && numCarriedStates(second))
    return fail("one scan starts its states from given values, the other "
                "from zeros");
  if (first.getStates().empty() != second.getStates().empty() &&
      numCarriedStates(first) && numCarriedStates(second))
    return fail("one scan returns its states, the other does not");

  // What the second reads of the first: its f32 sequences, along the domain.
  bool dependent = false;
  unsigned numSequences = first.getOutputs().size() + first.getStates().size();
  for (OpOperand &operand : second->getOpOperands()) {
    auto result = dyn_cast<OpResult>(operand.get());
    if (!result || result.getOwner() != first)
      continue;
    std::string which = "the second scan's operand #" +
                        std::to_string(operand.getOperandNumber());
    auto [inputsFirst, inputsCount] = second.getODSOperandIndexAndLength(0);
    unsigned r = result.getResultNumber();
    if (operand.getOperandNumber() >= inputsFirst + inputsCount)
      return fail(which + " is a result of the first scan but no input");
    if (r >= numSequences ||
        !first.getMatchingIndexingMap(first.getDpsInitOperand(r)).isIdentity())
      return fail(which + " is a result of the first scan that is no "
                          "sequence (a final state or a reduction)");
    if (!getElementTypeOrSelf(result.getType()).isF32())
      return fail(which + " is the first scan's " +
                  printed(getElementTypeOrSelf(result.getType())) +
                  " sequence: the body's values are f32 before storage");
    if (!second.getMatchingIndexingMap(&operand).isIdentity())
      return fail(which + " reads the first scan's sequence other than along "
                          "the domain");
    dependent = true;
  }
  if (!dependent && !shareDomainInput(first, second))
    return fail("the scans neither feed one another nor read one input "
                "along one domain");
  // The fused scan takes the second's place: nothing between them may use
  // the first's results.
  for (Operation *user : first->getUsers())
    if (user != second && user->getBlock() == second->getBlock() &&
        user->isBeforeInBlock(second))
      return fail("a result of the first scan is used before the second");
  return success();
}

FailureOr<ScanOp> mlir::flexsn::fuseSiblings(RewriterBase &rewriter,
                                             ScanOp first, ScanOp second) {
  if (failed(checkSiblingFusion(first, second)))
    return failure();
  FailureOr<ScanOp> a = materializeInlineBody(rewriter, first);
  if (failed(a))
    return failure();
  FailureOr<ScanOp> b = materializeInlineBody(rewriter, second);
  if (failed(b))
    return failure();
  first = *a;
  second = *b;
  unsigned numOutputsA = first.getOutputs().size();
  unsigned numStatesA = numCarriedStates(first);

  // The second's inputs that are the first's sequences become the first's
  // yielded values; its other inputs (but those the first reads through
  // the same map) and all its params are added.
  SmallVector<AffineMap> inputMapsB = groupMaps(second, 0);
  DenseMap<unsigned, unsigned> fromFirst; // second's input -> first's result
  SmallVector<Value> inputs(first.getInputs());
  SmallVector<AffineMap> inputMaps = groupMaps(first, 0);
  SmallVector<unsigned> inputArgOfB; // body argument of each input of B
  for (auto [k, value, map] : llvm::enumerate(second.getInputs(), inputMapsB)) {
    if (auto result = dyn_cast<OpResult>(value);
        result && result.getOwner() == first) {
      fromFirst[k] = result.getResultNumber();
      inputArgOfB.push_back(~0u);
      continue;
    }
    unsigned shared = 0;
    while (shared < inputs.size() &&
           !(inputs[shared] == value && inputMaps[shared] == map))
      ++shared;
    inputArgOfB.push_back(shared);
    if (shared < inputs.size())
      continue;
    inputs.push_back(value);
    inputMaps.push_back(map);
  }
  unsigned numInputs = inputs.size();

  // Outputs of the first that only the second reads are dropped.
  SmallVector<bool> dropped(numOutputsA, false);
  for (unsigned r = 0; r < numOutputsA; ++r)
    dropped[r] =
        llvm::all_of(first->getResult(r).getUsers(),
                     [&](Operation *u) { return u == second.getOperation(); });
  SmallVector<Value> outputs;
  SmallVector<AffineMap> maps = inputMaps;
  SmallVector<AffineMap> outputMaps;
  for (auto [r, value, map] :
       llvm::enumerate(first.getOutputs(), groupMaps(first, 3)))
    if (!dropped[r]) {
      outputs.push_back(value);
      outputMaps.push_back(map);
    }
  unsigned numKept = outputs.size();
  llvm::append_range(outputs, second.getOutputs());
  llvm::append_range(outputMaps, groupMaps(second, 3));
  auto both = [&](ValueRange x, ValueRange y) {
    SmallVector<Value> all(x);
    llvm::append_range(all, y);
    return all;
  };
  SmallVector<Value> inits = both(first.getInits(), second.getInits());
  SmallVector<Value> params = both(first.getParams(), second.getParams());
  SmallVector<Value> states = both(first.getStates(), second.getStates());
  SmallVector<Value> reductions =
      both(first.getReductions(), second.getReductions());
  for (unsigned group : {1, 2, 3, 4, 5}) {
    if (group == 3) {
      llvm::append_range(maps, outputMaps);
      continue;
    }
    llvm::append_range(maps, groupMaps(first, group));
    llvm::append_range(maps, groupMaps(second, group));
  }
  SmallVector<Type> resultTypes;
  for (Value destination : llvm::concat<Value>(outputs, states, reductions))
    resultTypes.push_back(destination.getType());

  OpBuilder::InsertionGuard guard(rewriter);
  rewriter.setInsertionPoint(second);
  auto fused =
      ScanOp::create(rewriter, second.getLoc(), resultTypes,
                     FlatSymbolRefAttr(), inputs, inits, params, outputs,
                     states, reductions, rewriter.getAffineMapArrayAttr(maps),
                     second.getReverseAttr(), DenseI64ArrayAttr());
  fused->setDiscardableAttrs(first->getDiscardableAttrDictionary());

  // The body: the first's arguments, with the second's new inputs after
  // its inputs and the second's states and params after its own; the
  // first's ops, then the second's on the mapped values.
  Block &bodyB = second.getBody().front();
  rewriter.inlineRegionBefore(first.getBody(), fused.getBody(),
                              fused.getBody().end());
  Block &body = fused.getBody().front();
  Location loc = second.getLoc();
  Type f32 = rewriter.getF32Type();
  unsigned numInputsA = first.getInputs().size();
  for (unsigned k = numInputsA; k < numInputs; ++k)
    body.insertArgument(k, f32, loc);
  unsigned numStatesB = numCarriedStates(second);
  for (unsigned s = 0; s < numStatesB; ++s)
    body.insertArgument(numInputs + numStatesA + s, f32, loc);
  for (BlockArgument arg :
       bodyB.getArguments().drop_front(second.getInputs().size() + numStatesB))
    body.addArgument(arg.getType(), loc);

  auto yieldA = cast<YieldOp>(body.getTerminator());
  auto yieldB = cast<YieldOp>(bodyB.getTerminator());
  IRMapping mapping;
  unsigned numInputsB = second.getInputs().size();
  for (unsigned k = 0; k < numInputsB; ++k)
    mapping.map(bodyB.getArgument(k), fromFirst.count(k)
                                          ? yieldA.getValues()[fromFirst[k]]
                                          : body.getArgument(inputArgOfB[k]));
  for (unsigned s = 0; s < numStatesB; ++s)
    mapping.map(bodyB.getArgument(numInputsB + s),
                body.getArgument(numInputs + numStatesA + s));
  unsigned numParamsA = first.getParams().size();
  unsigned firstParam = numInputs + numStatesA + numStatesB;
  for (auto [k, arg] : llvm::enumerate(
           bodyB.getArguments().drop_front(numInputsB + numStatesB)))
    mapping.map(arg, body.getArgument(firstParam + numParamsA + k));
  rewriter.setInsertionPoint(yieldA);
  for (Operation &op : bodyB.without_terminator())
    rewriter.clone(op, mapping);
  auto valuesB = llvm::map_to_vector(
      yieldB.getValues(), [&](Value v) { return mapping.lookupOrDefault(v); });
  unsigned numOutputsB = second.getOutputs().size();
  ValueRange valuesA = yieldA.getValues();
  SmallVector<Value> yielded;
  for (unsigned r = 0; r < numOutputsA; ++r)
    if (!dropped[r])
      yielded.push_back(valuesA[r]);
  llvm::append_range(yielded, ArrayRef<Value>(valuesB).take_front(numOutputsB));
  llvm::append_range(yielded, valuesA.slice(numOutputsA, numStatesA));
  llvm::append_range(yielded,
                     ArrayRef<Value>(valuesB).slice(numOutputsB, numStatesB));
  llvm::append_range(yielded, valuesA.drop_front(numOutputsA + numStatesA));
  llvm::append_range(
      yielded, ArrayRef<Value>(valuesB).drop_front(numOutputsB + numStatesB));
  rewriter.replaceOpWithNewOp<YieldOp>(yieldA, yielded);

  // Results: the first's kept outputs, the second's outputs, the first's
  // and the second's states, the first's and the second's reductions.
  unsigned numStateResultsA = first.getStates().size();
  unsigned numStateResultsB = second.getStates().size();
  unsigned numOutputsAll = numKept + numOutputsB;
  SmallVector<Value> newA, newB;
  for (unsigned r = 0, kept = 0; r < numOutputsA; ++r)
    newA.push_back(dropped[r] ? Value() : fused->getResult(kept++));
  for (unsigned r = 0; r < numOutputsB; ++r)
    newB.push_back(fused->getResult(numKept + r));
  for (unsigned s = 0; s < numStateResultsA; ++s)
    newA.push_back(fused->getResult(numOutputsAll + s));
  for (unsigned s = 0; s < numStateResultsB; ++s)
    newB.push_back(fused->getResult(numOutputsAll + numStateResultsA + s));
  unsigned firstReduction = numOutputsAll + numStateResultsA + numStateResultsB;
  unsigned numReductionsA = first.getReductions().size();
  for (unsigned i = 0; i < numReductionsA; ++i)
    newA.push_back(fused->getResult(firstReduction + i));
  for (unsigned i = 0, e = second.getReductions().size(); i < e; ++i)
    newB.push_back(fused->getResult(firstReduction + numReductionsA + i));
  rewriter.replaceOp(second, newB);
  for (auto [old, value] : llvm::zip_equal(first->getResults(), newA))
    if (value)
      rewriter.replaceAllUsesWith(old, value);
  rewriter.eraseOp(first);
  return fused;
}

//===----------------------------------------------------------------------===//
// Patterns and passes
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

struct FuseConsumersPattern : OpRewritePattern<ScanOp> {
  FuseConsumersPattern(MLIRContext *ctx, ControlFusionFn control)
      : OpRewritePattern<ScanOp>(ctx), control(std::move(control)) {}

  LogicalResult matchAndRewrite(ScanOp scan,
                                PatternRewriter &rewriter) const override {
    for (OpResult result : scan->getResults())
      for (OpOperand &use : result.getUses()) {
        std::string reason;
        if (failed(checkConsumerFusion(use, &reason))) {
          LLVM_DEBUG(llvm::dbgs() << "no consumer fusion into " << scan.getLoc()
                                  << ": " << reason << "\n");
          continue;
        }
        if (control && !control(&use))
          continue;
        if (succeeded(fuseConsumer(rewriter, use)))
          return success();
      }
    return rewriter.notifyMatchFailure(scan,
                                       "no result has a consumer to fuse");
  }

  ControlFusionFn control;
};

struct FuseSiblingsPattern : OpRewritePattern<ScanOp> {
  FuseSiblingsPattern(MLIRContext *ctx, ControlSiblingFusionFn control)
      : OpRewritePattern<ScanOp>(ctx), control(std::move(control)) {}

  /// The scans before `second` it could fuse with: those whose results it
  /// reads, then those reading one of its inputs.
  static SmallVector<ScanOp> candidates(ScanOp second) {
    SmallVector<ScanOp> found;
    auto note = [&](Operation *op) {
      auto scan = dyn_cast<ScanOp>(op);
      if (scan && scan != second && scan->getBlock() == second->getBlock() &&
          scan->isBeforeInBlock(second) && !llvm::is_contained(found, scan))
        found.push_back(scan);
    };
    for (Value input : second.getInputs())
      if (Operation *def = input.getDefiningOp())
        note(def);
    for (Value input : second.getInputs())
      for (Operation *user : input.getUsers())
        note(user);
    return found;
  }

  LogicalResult matchAndRewrite(ScanOp second,
                                PatternRewriter &rewriter) const override {
    for (ScanOp first : candidates(second)) {
      std::string reason;
      if (failed(checkSiblingFusion(first, second, &reason))) {
        LLVM_DEBUG(llvm::dbgs()
                   << "no sibling fusion of " << first.getLoc() << " and "
                   << second.getLoc() << ": " << reason << "\n");
        continue;
      }
      if (control && !control(first, second))
        continue;
      if (succeeded(fuseSiblings(rewriter, first, second)))
        return success();
    }
    return rewriter.notifyMatchFailure(second, "no sibling scan to fuse");
  }

  ControlSiblingFusionFn control;
};

/// What the three fusion passes do: apply `patterns` to `root` greedily;
/// then, with `remarks`, `explain` says why what stayed stayed.
LogicalResult runFusion(Operation *root, RewritePatternSet &&patterns,
                        bool remarks, function_ref<void()> explain) {
  if (failed(applyPatternsGreedily(root, std::move(patterns))))
    return failure();
  if (remarks)
    explain();
  return success();
}

struct FuseSiblingsPass
    : flexsn::impl::FlexSNFuseSiblingsBase<FuseSiblingsPass> {
  using Base::Base;

  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    populateFuseSiblingsPatterns(patterns);
    // What stayed: each scan reading another's result, and why.
    auto explain = [&] {
      getOperation()->walk([](ScanOp second) {
        for (Value input : second.getInputs()) {
          auto first = input.getDefiningOp<ScanOp>();
          std::string reason;
          if (first && failed(checkSiblingFusion(first, second, &reason)))
            second.emitRemark()
                << "not fused with the scan it reads: " << reason;
        }
      });
    };
    if (failed(
            runFusion(getOperation(), std::move(patterns), remarks, explain)))
      signalPassFailure();
  }
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

struct FuseConsumersPass
    : flexsn::impl::FlexSNFuseConsumersBase<FuseConsumersPass> {
  using Base::Base;

  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    populateFuseConsumersPatterns(patterns);
    // What stayed: each linalg op still reading a scan result, and why.
    auto explain = [&] {
      getOperation()->walk([](linalg::LinalgOp op) {
        for (OpOperand &use : op->getOpOperands()) {
          if (!use.get().getDefiningOp<ScanOp>())
            continue;
          std::string reason;
          if (failed(checkConsumerFusion(use, &reason)))
            op->emitRemark() << "not fused into the scan: " << reason;
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

void mlir::flexsn::populateFuseSiblingsPatterns(
    RewritePatternSet &patterns, const ControlSiblingFusionFn &control) {
  patterns.add<FuseSiblingsPattern>(patterns.getContext(), control);
}

void mlir::flexsn::populateFuseConsumersPatterns(
    RewritePatternSet &patterns, const ControlFusionFn &control) {
  patterns.add<FuseConsumersPattern>(patterns.getContext(), control);
}
