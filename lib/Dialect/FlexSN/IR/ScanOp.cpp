//===- ScanOp.cpp - flexsn.scan -------------------------------------------===//
//
// Part of the FlexSN project: an MLIR compiler for spiking-neuron dynamics.
//
//===----------------------------------------------------------------------===//
//
// The scan op: its operand groups and their indexing maps (implied by rank,
// parsed and printed), builders, DestinationStyleOpInterface,
// IndexingMapOpInterface and memory effects, and its verifiers.
//
//===----------------------------------------------------------------------===//

#include "FlexSNOpsDetail.h"

#include "flexsn/Dialect/FlexSN/IR/FlexSNOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/OpImplementation.h"
#include "llvm/ADT/STLExtras.h"

using namespace mlir;
using namespace mlir::flexsn;
using namespace mlir::flexsn::detail;

/// The operand groups of a scan, in operand order.
enum class ScanGroup { Input, Init, Param, Output, State, Reduction };
static constexpr ScanGroup kScanGroups[] = {
    ScanGroup::Input,  ScanGroup::Init,  ScanGroup::Param,
    ScanGroup::Output, ScanGroup::State, ScanGroup::Reduction};

static StringRef describe(ScanGroup group) {
  switch (group) {
  case ScanGroup::Input:
    return "input";
  case ScanGroup::Init:
    return "initial state";
  case ScanGroup::Param:
    return "param";
  case ScanGroup::Output:
    return "output";
  case ScanGroup::State:
    return "state";
  case ScanGroup::Reduction:
    return "reduction";
  }
  llvm_unreachable("unknown scan operand group");
}

FailureOr<SmallVector<AffineMap>>
ScanOp::getDefaultIndexingMaps(ArrayRef<TypeRange> groups,
                               function_ref<InFlightDiagnostic()> emitError) {
  assert(groups.size() == std::size(kScanGroups) && "one range per group");
  if (groups[0].empty() || !isa<ShapedType>(groups[0].front())) {
    if (emitError)
      emitError() << "needs at least one input: without 'indexing_maps', "
                     "the domain is the first input's";
    return failure();
  }
  MLIRContext *ctx = groups[0].front().getContext();
  // The domain is the first input's: inputs are sequences by default.
  unsigned rank = cast<ShapedType>(groups[0].front()).getRank();
  AffineMap sequence = AffineMap::getMultiDimIdentityMap(rank, ctx);
  AffineMap perNeuron =
      AffineMap::getMinorIdentityMap(rank, rank ? rank - 1 : 0, ctx);
  AffineMap scalar = AffineMap::get(rank, 0, ctx);
  SmallVector<AffineMap> maps;
  for (auto [group, types] : llvm::zip_equal(kScanGroups, groups)) {
    for (auto [k, type] : llvm::enumerate(types)) {
      auto shaped = dyn_cast<ShapedType>(type);
      int64_t operandRank = shaped ? shaped.getRank() : 0;
      // The maps each group's operands may take by default, by rank.
      SmallVector<AffineMap, 2> candidates;
      switch (group) {
      case ScanGroup::Input:
      case ScanGroup::Output:
        candidates = {sequence};
        break;
      case ScanGroup::Init:
        candidates = {perNeuron};
        break;
      case ScanGroup::Param:
      case ScanGroup::Reduction:
        candidates = {scalar, perNeuron};
        break;
      case ScanGroup::State:
        candidates = {sequence, perNeuron};
        break;
      }
      auto match = llvm::find_if(candidates, [&](AffineMap map) {
        return map.getNumResults() == operandRank;
      });
      if (match == candidates.end()) {
        if (emitError) {
          InFlightDiagnostic diag = emitError();
          diag << describe(group) << " #" << k << " has rank " << operandRank
               << ", which implies no indexing map in a domain of rank " << rank
               << " (the first input's): expected rank ";
          llvm::interleave(
              candidates, [&](AffineMap map) { diag << map.getNumResults(); },
              [&] { diag << " or "; });
          diag << ", or give 'indexing_maps'";
        }
        return failure();
      }
      maps.push_back(*match);
    }
  }
  return maps;
}

/// The groups' operand types, in order.
static SmallVector<TypeRange> getGroupTypes(ScanOp scan) {
  SmallVector<TypeRange> groups;
  for (unsigned i = 0; i < std::size(kScanGroups); ++i)
    groups.push_back(scan.getODSOperands(i).getTypes());
  return groups;
}

ParseResult mlir::flexsn::parseIndexingMaps(
    OpAsmParser &parser, ArrayAttr &maps, ArrayRef<Type> inputs,
    ArrayRef<Type> inits, ArrayRef<Type> params, ArrayRef<Type> outputs,
    ArrayRef<Type> states, ArrayRef<Type> reductions) {
  if (succeeded(parser.parseOptionalKeyword("indexing_maps")))
    return failure(parser.parseEqual() || parser.parseAttribute(maps));
  // Reported at the op: the parser has reached the next op.
  SMLoc loc = parser.getNameLoc();
  FailureOr<SmallVector<AffineMap>> defaults = ScanOp::getDefaultIndexingMaps(
      {inputs, inits, params, outputs, states, reductions},
      [&] { return parser.emitError(loc); });
  if (failed(defaults))
    return failure();
  maps = parser.getBuilder().getAffineMapArrayAttr(*defaults);
  return success();
}

void mlir::flexsn::printIndexingMaps(OpAsmPrinter &p, ScanOp scan,
                                     ArrayAttr maps, TypeRange, TypeRange,
                                     TypeRange, TypeRange, TypeRange,
                                     TypeRange) {
  FailureOr<SmallVector<AffineMap>> defaults =
      ScanOp::getDefaultIndexingMaps(getGroupTypes(scan));
  if (succeeded(defaults) &&
      maps == Builder(scan.getContext()).getAffineMapArrayAttr(*defaults))
    return;
  p << " indexing_maps = ";
  p.printAttribute(maps);
}

/// Result types: the tensor destinations' types.
static SmallVector<Type> getTensorInitTypes(ValueRange outputs,
                                            ValueRange states,
                                            ValueRange reductions) {
  SmallVector<Type> types;
  for (Value init : llvm::concat<const Value>(outputs, states, reductions))
    if (isa<RankedTensorType>(init.getType()))
      types.push_back(init.getType());
  return types;
}

void ScanOp::build(OpBuilder &b, OperationState &state,
                   FlatSymbolRefAttr callee, ValueRange inputs,
                   ValueRange inits, ValueRange params, ValueRange outputs,
                   ValueRange states, ValueRange reductions, bool reverse,
                   DenseI64ArrayAttr optionalInputs) {
  // Operands without default maps get none: the verifier reports them.
  FailureOr<SmallVector<AffineMap>> maps = getDefaultIndexingMaps(
      {inputs.getTypes(), inits.getTypes(), params.getTypes(),
       outputs.getTypes(), states.getTypes(), reductions.getTypes()});
  build(b, state, getTensorInitTypes(outputs, states, reductions), callee,
        inputs, inits, params, outputs, states, reductions,
        b.getAffineMapArrayAttr(succeeded(maps) ? *maps
                                                : SmallVector<AffineMap>()),
        reverse, optionalInputs);
}

LogicalResult ScanOp::inferReturnTypes(MLIRContext *, std::optional<Location>,
                                       Adaptor adaptor,
                                       SmallVectorImpl<Type> &types) {
  llvm::append_range(types, getTensorInitTypes(adaptor.getOutputs(),
                                               adaptor.getStates(),
                                               adaptor.getReductions()));
  return success();
}

ScanOp ScanOp::cloneWithOperands(OpBuilder &builder, ValueRange operands,
                                 TypeRange resultTypes) {
  assert(operands.size() == getNumOperands() && "one value per operand");
  auto group = [&](unsigned index) {
    auto [first, count] = getODSOperandIndexAndLength(index);
    return operands.slice(first, count);
  };
  auto scan = ScanOp::create(builder, getLoc(), resultTypes, getCalleeAttr(),
                             group(0), group(1), group(2), group(3), group(4),
                             group(5), getIndexingMaps(), getReverseAttr(),
                             getOptionalInputsAttr());
  scan->setDiscardableAttrs(getOperation()->getDiscardableAttrDictionary());
  IRMapping mapping;
  getBody().cloneInto(&scan.getBody(), mapping);
  return scan;
}

MutableOperandRange ScanOp::getDpsInitsMutable() {
  // Outputs, states and reductions: the last three groups.
  unsigned first = getODSOperandIndexAndLength(3).first;
  return MutableOperandRange(*this, first, getNumOperands() - first);
}

void ScanOp::getEffects(
    SmallVectorImpl<SideEffects::EffectInstance<MemoryEffects::Effect>>
        &effects) {
  for (OpOperand &operand : getOperation()->getOpOperands()) {
    if (!isa<MemRefType>(operand.get().getType()))
      continue;
    if (isDpsInit(&operand))
      effects.emplace_back(MemoryEffects::Write::get(), &operand,
                           SideEffects::DefaultResource::get());
    else
      effects.emplace_back(MemoryEffects::Read::get(), &operand,
                           SideEffects::DefaultResource::get());
  }
}

unsigned ScanOp::getDomainRank() {
  return cast<AffineMapAttr>(getIndexingMaps()[0]).getValue().getNumDims();
}

SmallVector<int64_t> ScanOp::getStaticLoopRanges() {
  // Any operand keeping a dimension may know its size (T may be static in
  // the outputs only), where the interface's default reads only the first
  // operand keeping it. The verifier makes all of them agree.
  SmallVector<int64_t> ranges(getDomainRank(), ShapedType::kDynamic);
  for (OpOperand &operand : getOperation()->getOpOperands()) {
    AffineMap map = getMatchingIndexingMap(&operand);
    for (auto [i, size] : llvm::enumerate(getShape(&operand)))
      if (ShapedType::isDynamic(ranges[map.getDimPosition(i)]))
        ranges[map.getDimPosition(i)] = size;
  }
  return ranges;
}

SmallVector<utils::IteratorType> ScanOp::getLoopIteratorTypes() {
  unsigned rank = getDomainRank();
  SmallVector<utils::IteratorType> types(rank, utils::IteratorType::parallel);
  types[0] = utils::IteratorType::reduction;
  for (OpOperand &reduction : getReductionsMutable()) {
    AffineMap map = getMatchingIndexingMap(&reduction);
    for (unsigned d = 1; d < rank; ++d)
      if (!map.isFunctionOfDim(d))
        types[d] = utils::IteratorType::reduction;
  }
  return types;
}

bool ScanOp::isFinalState(unsigned index) {
  OpOperand &state = getStatesMutable()[index];
  return getMatchingIndexingMap(&state).getNumResults() != getDomainRank();
}

Value ScanOp::getDomainOperand() {
  for (OpOperand &operand :
       llvm::concat<OpOperand>(getInputsMutable(), getOutputsMutable()))
    if (getMatchingIndexingMap(&operand).isIdentity())
      return operand.get();
  return {};
}

/// Checks a map's form: the dims it keeps, distinct and in order.
static LogicalResult verifyMapForm(Operation *op, AffineMap map,
                                   unsigned domainRank, StringRef what,
                                   unsigned index) {
  auto emit = [&]() {
    return op->emitOpError()
           << "indexing map of " << what << " #" << index << " ";
  };
  if (map.getNumDims() != domainRank || map.getNumSymbols() != 0)
    return emit() << AffineMapAttr::get(map) << " must take the " << domainRank
                  << " domain dimensions (t, n...) and no symbols";
  int64_t last = -1;
  for (AffineExpr expr : map.getResults()) {
    auto dim = dyn_cast<AffineDimExpr>(expr);
    if (!dim)
      return emit() << AffineMapAttr::get(map)
                    << " must keep domain dimensions, not compute with them";
    if (static_cast<int64_t>(dim.getPosition()) <= last)
      return emit() << AffineMapAttr::get(map)
                    << " must keep domain dimensions once each, in order";
    last = dim.getPosition();
  }
  return success();
}

LogicalResult ScanOp::verify() {
  bool hasCallee = getCallee().has_value();
  bool hasBody = !getBody().empty();
  if (hasCallee == hasBody)
    return emitOpError("needs either a neuron @callee or an inline body, "
                       "not both or neither");
  if (hasCallee && !getReductions().empty())
    return emitOpError("reductions need an inline body: a neuron yields none");
  if (getInputs().empty())
    return emitOpError("needs at least one input");
  if (auto optional = getOptionalInputs())
    for (int64_t i : *optional)
      if (i < 0 || i >= static_cast<int64_t>(getInputs().size()))
        return emitOpError() << "optional input #" << i << " is not one of its "
                             << getInputs().size() << " inputs";
  if (!getInits().empty() && !getStates().empty() &&
      getInits().size() != getStates().size())
    return emitOpError() << "has " << getInits().size()
                         << " initial states but " << getStates().size()
                         << " state results";

  // One form: all tensors or all memrefs.
  std::optional<bool> tensors;
  for (Type type : getOperandTypes()) {
    if (!isa<ShapedType>(type))
      continue;
    bool isTensor = isa<RankedTensorType>(type);
    if (tensors && *tensors != isTensor)
      return emitOpError("mixes tensors and memrefs: its operands are all "
                         "tensors (the value form) or all memrefs (the "
                         "buffer form)");
    tensors = isTensor;
  }

  ArrayAttr maps = getIndexingMaps();
  if (maps.size() != getNumOperands())
    return emitOpError() << "has " << maps.size() << " indexing maps for "
                         << getNumOperands() << " operands";
  unsigned rank = getDomainRank();
  if (rank < 2 || rank > 5)
    return emitOpError() << "has a domain of rank " << rank
                         << ": the domain is (t, n...) with 1 to 4 neuron "
                            "dimensions";

  // Each group's maps, and the domain's static sizes.
  SmallVector<int64_t> domain(rank, ShapedType::kDynamic);
  SmallVector<std::pair<unsigned, StringRef>> sizeSources(rank);
  SmallVector<AffineMap> allMaps = getIndexingMapsArray();
  for (auto [groupIndex, group] : llvm::enumerate(kScanGroups)) {
    auto [first, count] = getODSOperandIndexAndLength(groupIndex);
    for (unsigned k = 0; k < count; ++k) {
      Value operand = getOperand(first + k);
      AffineMap map = allMaps[first + k];
      StringRef what = describe(group);
      if (failed(verifyMapForm(*this, map, rank, what, k)))
        return failure();
      auto emit = [&]() { return emitOpError() << what << " #" << k << " "; };
      bool usesTime = map.getNumResults() && map.getDimPosition(0) == 0;
      bool isIdentity = map.isIdentity();
      bool isPerNeuron = map.getNumResults() == rank - 1 && !usesTime;
      switch (group) {
      case ScanGroup::Input:
        break;
      case ScanGroup::Init:
      case ScanGroup::Param:
        if (usesTime)
          return emit() << "must not depend on t: its map is "
                        << AffineMapAttr::get(map);
        break;
      case ScanGroup::Output:
        if (!isIdentity)
          return emit() << "must be a sequence: its map must be the "
                           "identity, got "
                        << AffineMapAttr::get(map);
        break;
      case ScanGroup::State:
        if (!isIdentity && !isPerNeuron)
          return emit() << "must be a sequence (the identity map) or the "
                           "final state (every dimension but t), got "
                        << AffineMapAttr::get(map);
        break;
      case ScanGroup::Reduction:
        if (isIdentity)
          return emit() << "keeps every dimension: that is an output, not "
                           "a reduction";
        break;
      }
      auto shaped = dyn_cast<ShapedType>(operand.getType());
      int64_t operandRank = shaped ? shaped.getRank() : 0;
      if (map.getNumResults() != operandRank)
        return emit() << "has rank " << operandRank << ", but its indexing map "
                      << AffineMapAttr::get(map) << " gives "
                      << map.getNumResults() << " indices";
      if (!shaped)
        continue;
      for (auto [i, size] : llvm::enumerate(shaped.getShape())) {
        unsigned dim = map.getDimPosition(i);
        if (ShapedType::isDynamic(size))
          continue;
        if (ShapedType::isDynamic(domain[dim])) {
          domain[dim] = size;
          sizeSources[dim] = {k, what};
          continue;
        }
        if (domain[dim] != size)
          return emit() << "has size " << size << " in dimension " << i
                        << ", but " << sizeSources[dim].second << " #"
                        << sizeSources[dim].first << " gives domain dimension d"
                        << dim << " size " << domain[dim];
      }
    }
  }
  if (!getDomainOperand())
    return emitOpError("needs an input or output spanning the whole domain "
                       "(t, n...) with the identity map: T and N... come from "
                       "it");
  // Upstream's checks last: FlexSN's above say more about the same errors.
  return cast<IndexingMapOpInterface>(getOperation()).verifyImpl();
}

LogicalResult ScanOp::verifyRegions() {
  if (getBody().empty())
    return success();
  if (!getBody().hasOneBlock())
    return emitOpError("body must have exactly one block");
  Block &block = getBody().front();
  unsigned numInputs = getInputs().size(), numParams = getParams().size();
  if (block.getNumArguments() < numInputs + numParams)
    return emitOpError() << "body takes " << block.getNumArguments()
                         << " arguments, fewer than its " << numInputs
                         << " inputs + " << numParams << " params";
  unsigned numStates = block.getNumArguments() - numInputs - numParams;
  for (auto [what, count] :
       {std::pair<StringRef, size_t>{"initial states", getInits().size()},
        {"state results", getStates().size()}})
    if (count != 0 && count != numStates)
      return emitOpError() << "has " << count << " " << what
                           << ", but its body carries " << numStates
                           << " states";
  TypeRange args(block.getArguments());
  if (failed(expectF32(*this, args.take_front(numInputs + numStates),
                       "body argument")))
    return failure();
  // A shaped param's elements reach the body as f32, like inputs.
  for (auto [i, param, arg] :
       llvm::enumerate(getParams(), args.drop_front(numInputs + numStates))) {
    Type expected = isa<ShapedType>(param.getType())
                        ? Float32Type::get(getContext())
                        : param.getType();
    if (expected != arg)
      return emitOpError() << "param #" << i << " has type " << param.getType()
                           << ", so the body argument must have type "
                           << expected << ", not " << arg;
  }

  auto yield = dyn_cast<YieldOp>(block.getTerminator());
  if (!yield)
    return emitOpError("body must end with flexsn.yield");
  unsigned numResults =
      getOutputs().size() + numStates + getReductions().size();
  if (yield.getValues().size() != numResults)
    return yield.emitOpError()
           << "yields " << yield.getValues().size() << " values, but the scan "
           << "expects " << numResults << " (" << getOutputs().size()
           << " outputs + " << numStates << " new states + "
           << getReductions().size() << " reductions)";
  if (failed(expectF32(yield, yield.getValues().getTypes(), "yielded value")))
    return failure();
  return verifyStepBody(block, "scan");
}

LogicalResult ScanOp::verifySymbolUses(SymbolTableCollection &symbolTable) {
  if (!getCallee())
    return success();
  auto neuron =
      symbolTable.lookupNearestSymbolFrom<NeuronOp>(*this, getCalleeAttr());
  if (!neuron)
    return emitOpError() << "'@" << *getCallee()
                         << "' does not reference a flexsn.neuron";
  auto checkCount = [&](StringRef what, size_t got, size_t want,
                        bool optional = false) -> LogicalResult {
    if (got == want || (optional && got == 0))
      return success();
    return emitOpError() << "has " << got << " " << what << ", but @"
                         << neuron.getSymName() << " has " << want;
  };
  SmallVector<ParamAttr> runtimeParams = neuron.getRuntimeParamAttrs();
  if (failed(checkCount("input sequences", getInputs().size(),
                        neuron.getNumInputs())) ||
      failed(checkCount("output sequences", getOutputs().size(),
                        neuron.getNumOutputs())) ||
      failed(checkCount("initial states", getInits().size(),
                        neuron.getNumStates(), /*optional=*/true)) ||
      failed(checkCount("state results", getStates().size(),
                        neuron.getNumStates(), /*optional=*/true)) ||
      failed(checkCount("runtime params", getParams().size(),
                        runtimeParams.size())))
    return failure();
  for (auto [i, value, param] : llvm::enumerate(getParams(), runtimeParams)) {
    auto shaped = dyn_cast<ShapedType>(value.getType());
    if (param.isShaped() ? !shaped || !shaped.getElementType().isF32()
                         : value.getType() != param.getType()) {
      InFlightDiagnostic diag =
          emitOpError() << "param #" << i << " ('" << param.getName().getValue()
                        << "') has type " << value.getType() << ", but @"
                        << neuron.getSymName() << " declares ";
      if (param.isShaped())
        diag << "it " << stringifyParamShape(param.getShape())
             << ": an f32 tensor or buffer";
      else
        diag << "a scalar " << param.getType();
      return diag;
    }
    // A neuron's param has one value per neuron, per channel (one neuron
    // dimension kept), or one in all.
    if (shaped) {
      AffineMap map = getMatchingIndexingMap(&getParamsMutable()[i]);
      unsigned kept = param.isPerNeuron() ? getDomainRank() - 1 : 1;
      if (map.getNumResults() != kept)
        return emitOpError()
               << "param #" << i << " ('" << param.getName().getValue()
               << "') is " << stringifyParamShape(param.getShape())
               << ": its map must keep "
               << (param.isPerNeuron() ? "every neuron dimension"
                                       : "one neuron dimension (the channel)")
               << ", got " << AffineMapAttr::get(map);
    }
  }
  return success();
}
