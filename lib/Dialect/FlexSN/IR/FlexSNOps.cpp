//===- FlexSNOps.cpp - FlexSN operations ----------------------------------===//
//
// Part of the FlexSN project: an MLIR compiler for spiking-neuron dynamics.
//
//===----------------------------------------------------------------------===//

#include "flexsn/Dialect/FlexSN/IR/FlexSNOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Matchers.h"
#include "mlir/IR/OpImplementation.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/SmallPtrSet.h"
#include "llvm/ADT/StringSet.h"

using namespace mlir;
using namespace mlir::flexsn;

//===----------------------------------------------------------------------===//
// Helpers
//===----------------------------------------------------------------------===//

/// Scalars a step body may compute with: f32 and integers (flags, counters).
static bool isBodyScalarType(Type type) {
  return type.isF32() || type.isSignlessInteger() || type.isIndex();
}

/// Checks the ops of a per-step body: ops free of memory effects and
/// regions, and applications of neurons, on scalars; so the body lowers the
/// same way to CPU loops and GPU threads, and autodiff needs only a per-op
/// rule. Asked through interfaces: any dialect's such ops qualify.
static LogicalResult verifyStepBody(Block &block, StringRef owner) {
  for (Operation &op : block.without_terminator()) {
    if (isa<ScanOp, NeuronOp>(op))
      return op.emitOpError() << "cannot be nested in a " << owner << " body";
    if (op.getNumRegions() != 0 ||
        !(isMemoryEffectFree(&op) || isa<ApplyOp>(op)))
      return op.emitOpError()
             << "is not allowed in a " << owner
             << " body: its ops must be free of memory effects and regions "
                "(arith, math and flexsn ops are), or apply a neuron";
    for (Type type :
         llvm::concat<Type>(op.getOperandTypes(), op.getResultTypes())) {
      if (isBodyScalarType(type))
        continue;
      if (isa<FloatType>(type))
        return op.emitOpError() << "computes in " << type << ", but a " << owner
                                << " body computes in f32";
      return op.emitOpError() << "uses non-scalar type " << type << ": a "
                              << owner << " body works on scalars only";
    }
  }
  return success();
}

/// Checks that `types[i]` is f32 for every i, naming the offending value.
static LogicalResult expectF32(Operation *op, TypeRange types, StringRef what,
                               size_t first = 0) {
  for (auto [i, type] : llvm::enumerate(types))
    if (!type.isF32())
      return op->emitOpError()
             << what << " #" << first + i << " must be f32, got " << type;
  return success();
}

//===----------------------------------------------------------------------===//
// NeuronOp
//===----------------------------------------------------------------------===//

SmallVector<ParamAttr> NeuronOp::getParamAttrs() {
  return llvm::to_vector(getParams().getAsRange<ParamAttr>());
}

SmallVector<ParamAttr> NeuronOp::getRuntimeParamAttrs() {
  return llvm::filter_to_vector(getParamAttrs(),
                                [](ParamAttr p) { return p.isRuntime(); });
}

/// Parses `keyword(%a: t, %b: t)` into `args`, recording the names.
static ParseResult parseArgGroup(OpAsmParser &parser, StringRef keyword,
                                 bool required,
                                 SmallVectorImpl<OpAsmParser::Argument> &args,
                                 SmallVectorImpl<Attribute> &names) {
  if (required) {
    if (parser.parseKeyword(keyword))
      return failure();
  } else if (failed(parser.parseOptionalKeyword(keyword))) {
    return success();
  }
  return parser.parseCommaSeparatedList(
      AsmParser::Delimiter::Paren, [&]() -> ParseResult {
        OpAsmParser::Argument arg;
        if (parser.parseArgument(arg, /*allowType=*/true))
          return failure();
        StringRef name = arg.ssaName.name.drop_front();
        if (std::optional<std::string> problem = checkExportedName(name))
          return parser.emitError(arg.ssaName.location)
                 << keyword.drop_back() << " name '" << name << "' "
                 << *problem;
        names.push_back(
            parser.getBuilder().getStringAttr(arg.ssaName.name.drop_front()));
        args.push_back(arg);
        return success();
      });
}

ParseResult NeuronOp::parse(OpAsmParser &parser, OperationState &result) {
  Builder &builder = parser.getBuilder();
  StringAttr symName;
  if (parser.parseSymbolName(symName, getSymNameAttrName(result.name),
                             result.attributes))
    return failure();

  SmallVector<OpAsmParser::Argument> args;
  SmallVector<Attribute> inputNames, stateNames, outputNames, params;
  if (parseArgGroup(parser, "inputs", /*required=*/true, args, inputNames) ||
      parseArgGroup(parser, "states", /*required=*/false, args, stateNames))
    return failure();

  if (parser.parseKeyword("outputs") ||
      parser.parseCommaSeparatedList(
          AsmParser::Delimiter::Paren, [&]() -> ParseResult {
            std::string name;
            if (parser.parseKeywordOrString(&name))
              return failure();
            outputNames.push_back(builder.getStringAttr(name));
            return success();
          }))
    return failure();

  // params(%name: type = default [const|runtime|trainable], ...)
  if (succeeded(parser.parseOptionalKeyword("params"))) {
    auto parseParam = [&]() -> ParseResult {
      OpAsmParser::Argument arg;
      TypedAttr value;
      if (parser.parseArgument(arg, /*allowType=*/true))
        return failure();
      if (failed(parser.parseOptionalEqual())) {
        std::string typeText;
        llvm::raw_string_ostream(typeText) << arg.type;
        return parser.emitError(parser.getCurrentLocation())
               << "parameter '" << arg.ssaName.name.drop_front()
               << "' needs a default value: " << arg.ssaName.name << ": "
               << typeText << " = <value>";
      }
      if (parser.parseAttribute(value, arg.type))
        return failure();
      ParamKind kind = ParamKind::Const;
      StringRef keyword;
      SMLoc kindLoc = parser.getCurrentLocation();
      if (succeeded(parser.parseOptionalKeyword(&keyword))) {
        std::optional<ParamKind> parsed = symbolizeParamKind(keyword);
        if (!parsed)
          return parser.emitError(kindLoc)
                 << "expected 'const', 'runtime' or 'trainable', got '"
                 << keyword << "'";
        kind = *parsed;
      }
      StringAttr name = builder.getStringAttr(arg.ssaName.name.drop_front());
      auto emitError = [&] { return parser.emitError(arg.ssaName.location); };
      // `true`/`false` parse as i1 whatever type was asked for.
      if (value.getType() != arg.type)
        return emitError() << "default value of parameter '" << name.getValue()
                           << "' has type " << value.getType()
                           << ", but the parameter has type " << arg.type;
      ParamAttr param = ParamAttr::getChecked(emitError, builder.getContext(),
                                              name, value, kind);
      if (!param)
        return failure();
      params.push_back(param);
      args.push_back(arg);
      return success();
    };
    if (parser.parseCommaSeparatedList(AsmParser::Delimiter::Paren, parseParam))
      return failure();
  }

  result.addAttribute(getInputNamesAttrName(result.name),
                      builder.getArrayAttr(inputNames));
  result.addAttribute(getStateNamesAttrName(result.name),
                      builder.getArrayAttr(stateNames));
  result.addAttribute(getOutputNamesAttrName(result.name),
                      builder.getArrayAttr(outputNames));
  result.addAttribute(getParamsAttrName(result.name),
                      builder.getArrayAttr(params));
  if (parser.parseOptionalAttrDictWithKeyword(result.attributes))
    return failure();
  Region *body = result.addRegion();
  return parser.parseRegion(*body, args, /*enableNameShadowing=*/false);
}

/// Prints a parameter default without its type: floats shortest ("2.0").
static void printParamValue(OpAsmPrinter &p, TypedAttr value) {
  if (auto f = dyn_cast<FloatAttr>(value))
    p << formatShortest(static_cast<float>(f.getValueAsDouble()));
  else if (auto b = dyn_cast<BoolAttr>(value))
    p << (b.getValue() ? "true" : "false");
  else
    p.printAttributeWithoutType(value);
}

void NeuronOp::print(OpAsmPrinter &p) {
  p << ' ';
  p.printSymbolName(getSymName());
  Block &block = getBodyBlock();
  auto printArgs = [&](StringRef keyword, ArrayRef<BlockArgument> args) {
    p << ' ' << keyword << '(';
    llvm::interleaveComma(
        args, p, [&](BlockArgument arg) { p.printRegionArgument(arg); });
    p << ')';
  };
  // Invalid IR (printed for diagnostics) may lack the arguments it names.
  bool wellFormed = block.getNumArguments() ==
                    getNumInputs() + getNumStates() + getNumParams();
  if (wellFormed) {
    printArgs("inputs", getInputArgs());
    if (getNumStates() != 0)
      printArgs("states", getStateArgs());
  }
  p << " outputs(";
  llvm::interleaveComma(getOutputNames().getAsValueRange<StringAttr>(), p,
                        [&](StringRef name) { p.printKeywordOrString(name); });
  p << ')';
  if (wellFormed && getNumParams() != 0) {
    p.increaseIndent();
    p.printNewline();
    p << "params(";
    // Long parameter lists read best one per line.
    bool onePerLine = getNumParams() > 2;
    if (onePerLine)
      p.increaseIndent();
    llvm::interleave(
        llvm::zip_equal(getParamArgs(), getParamAttrs()),
        [&](auto pair) {
          auto [arg, param] = pair;
          if (onePerLine)
            p.printNewline();
          p.printRegionArgument(arg);
          p << " = ";
          printParamValue(p, param.getDefaultValue());
          if (param.getKind() != ParamKind::Const)
            p << ' ' << stringifyParamKind(param.getKind());
        },
        [&] { p << (onePerLine ? "," : ", "); });
    if (onePerLine)
      p.decreaseIndent();
    p << ')';
    p.decreaseIndent();
  }
  SmallVector<StringRef> elided = {
      getSymNameAttrName(), getInputNamesAttrName(), getStateNamesAttrName(),
      getOutputNamesAttrName(), getParamsAttrName()};
  if (!wellFormed) {
    elided.pop_back_n(4);
  }
  p.printOptionalAttrDictWithKeyword((*this)->getAttrs(), elided);
  p << ' ';
  p.printRegion(getBody(), /*printEntryBlockArgs=*/!wellFormed,
                /*printBlockTerminators=*/true);
}

void NeuronOp::getAsmBlockArgumentNames(Region &region,
                                        OpAsmSetValueNameFn setNameFn) {
  if (region.empty())
    return;
  SmallVector<StringRef> names;
  for (StringAttr name :
       llvm::concat<const StringAttr>(getInputNames().getAsRange<StringAttr>(),
                                      getStateNames().getAsRange<StringAttr>()))
    names.push_back(name.getValue());
  for (ParamAttr param : getParamAttrs())
    names.push_back(param.getName().getValue());
  for (auto [arg, name] : llvm::zip(region.getArguments(), names))
    setNameFn(arg, name);
}

LogicalResult NeuronOp::verify() {
  if (getNumInputs() == 0)
    return emitOpError("needs at least one input: T comes from the input "
                       "sequences");
  if (getNumOutputs() + getNumStates() == 0)
    return emitOpError("needs at least one output or state");

  // Host stubs are named after the neuron.
  if (std::optional<std::string> problem =
          checkExportedName(getSymName(), /*isPrefix=*/true))
    return emitOpError() << "name '" << getSymName() << "' " << *problem;

  llvm::StringMap<StringRef> seen; // name -> what it names
  auto checkNames = [&](ArrayAttr names, StringRef what) -> LogicalResult {
    for (StringRef name : names.getAsValueRange<StringAttr>()) {
      if (std::optional<std::string> problem = checkExportedName(name))
        return emitOpError() << what << " name '" << name << "' " << *problem;
      auto [it, inserted] = seen.try_emplace(name, what);
      if (!inserted)
        return emitOpError()
               << what << " name '" << name << "' is already used by "
               << (StringRef("aeiou").contains(it->second.front()) ? "an "
                                                                   : "a ")
               << it->second;
    }
    return success();
  };
  SmallVector<Attribute> paramNames = llvm::map_to_vector(
      getParamAttrs(), [](ParamAttr p) -> Attribute { return p.getName(); });
  if (failed(checkNames(getInputNames(), "input")) ||
      failed(checkNames(getStateNames(), "state")) ||
      failed(checkNames(ArrayAttr::get(getContext(), paramNames), "parameter")))
    return failure();
  // Outputs live in their own namespace (they are results, not arguments).
  seen.clear();
  return checkNames(getOutputNames(), "output");
}

LogicalResult NeuronOp::verifyRegions() {
  Block &block = getBodyBlock();
  unsigned expected = getNumInputs() + getNumStates() + getNumParams();
  if (block.getNumArguments() != expected)
    return emitOpError() << "body takes " << block.getNumArguments()
                         << " arguments, but the neuron declares " << expected
                         << " (" << getNumInputs() << " inputs + "
                         << getNumStates() << " states + " << getNumParams()
                         << " params)";
  if (failed(expectF32(*this, TypeRange(getInputArgs()), "input")) ||
      failed(expectF32(*this, TypeRange(getStateArgs()), "state")))
    return failure();
  for (auto [arg, param] : llvm::zip_equal(getParamArgs(), getParamAttrs()))
    if (arg.getType() != param.getType())
      return emitOpError() << "parameter '" << param.getName().getValue()
                           << "' has type " << arg.getType()
                           << " but its default value has type "
                           << param.getType();

  auto yield = dyn_cast<YieldOp>(block.getTerminator());
  if (!yield)
    return emitOpError("body must end with flexsn.yield");
  unsigned numResults = getNumOutputs() + getNumStates();
  if (yield.getValues().size() != numResults)
    return yield.emitOpError()
           << "yields " << yield.getValues().size()
           << " values, but the neuron declares " << numResults << " ("
           << getNumOutputs() << " outputs + " << getNumStates()
           << " new states)";
  if (failed(expectF32(yield, yield.getValues().getTypes(), "yielded value")))
    return failure();
  return verifyStepBody(block, "neuron");
}

FunctionType NeuronOp::getStepType() {
  SmallVector<Type> results(getNumOutputs() + getNumStates(),
                            Float32Type::get(getContext()));
  return FunctionType::get(getContext(), getBodyBlock().getArgumentTypes(),
                           results);
}

Region *NeuronOp::getCallableRegion() { return &getBody(); }

// Function types are uniqued in the context, which owns these arrays.
ArrayRef<Type> NeuronOp::getArgumentTypes() { return getStepType().getInputs(); }

ArrayRef<Type> NeuronOp::getResultTypes() { return getStepType().getResults(); }

//===----------------------------------------------------------------------===//
// ApplyOp
//===----------------------------------------------------------------------===//

/// Finds a chain of applications leading from `from` back to `target`.
static bool findApplyCycle(NeuronOp from, NeuronOp target,
                           SymbolTableCollection &symbolTable,
                           llvm::SmallPtrSetImpl<Operation *> &visited,
                           SmallVectorImpl<StringRef> &path) {
  if (!visited.insert(from).second)
    return false;
  path.push_back(from.getSymName());
  WalkResult walk = from.walk([&](ApplyOp apply) {
    auto callee = symbolTable.lookupNearestSymbolFrom<NeuronOp>(
        apply, apply.getCalleeAttr());
    if (!callee)
      return WalkResult::advance();
    if (callee == target ||
        findApplyCycle(callee, target, symbolTable, visited, path))
      return WalkResult::interrupt();
    return WalkResult::advance();
  });
  if (walk.wasInterrupted())
    return true;
  path.pop_back();
  return false;
}

CallInterfaceCallable ApplyOp::getCallableForCallee() {
  return getCalleeAttr();
}

void ApplyOp::setCalleeFromCallable(CallInterfaceCallable callee) {
  setCalleeAttr(cast<FlatSymbolRefAttr>(cast<SymbolRefAttr>(callee)));
}

Operation::operand_range ApplyOp::getArgOperands() { return getOperands(); }

MutableOperandRange ApplyOp::getArgOperandsMutable() {
  return getOperandsMutable();
}

LogicalResult ApplyOp::verifySymbolUses(SymbolTableCollection &symbolTable) {
  auto callee =
      symbolTable.lookupNearestSymbolFrom<NeuronOp>(*this, getCalleeAttr());
  if (!callee)
    return emitOpError() << "'@" << getCallee()
                         << "' does not reference a flexsn.neuron";
  auto caller = (*this)->getParentOfType<NeuronOp>();
  if (!caller)
    return emitOpError("must be inside a flexsn.neuron body");

  Block &calleeBlock = callee.getBodyBlock();
  if (getOperands().size() != calleeBlock.getNumArguments())
    return emitOpError() << "passes " << getOperands().size()
                         << " operands, but @" << getCallee() << " takes "
                         << calleeBlock.getNumArguments() << " ("
                         << callee.getNumInputs() << " inputs + "
                         << callee.getNumStates() << " states + "
                         << callee.getNumParams() << " params)";
  for (auto [i, operand, arg] :
       llvm::enumerate(getOperands(), calleeBlock.getArguments()))
    if (operand.getType() != arg.getType())
      return emitOpError() << "operand #" << i << " has type "
                           << operand.getType() << ", but @" << getCallee()
                           << " expects " << arg.getType();
  unsigned numResults = callee.getNumOutputs() + callee.getNumStates();
  if (getNumResults() != numResults)
    return emitOpError() << "returns " << getNumResults() << " values, but @"
                         << getCallee() << " produces " << numResults << " ("
                         << callee.getNumOutputs() << " outputs + "
                         << callee.getNumStates() << " new states)";

  // Recursion has no meaning for a per-step body: reject any cycle.
  llvm::SmallPtrSet<Operation *, 8> visited;
  SmallVector<StringRef> path = {caller.getSymName()};
  if (callee == caller ||
      findApplyCycle(callee, caller, symbolTable, visited, path)) {
    path.push_back(caller.getSymName());
    InFlightDiagnostic diag = emitOpError("makes neuron @")
                              << caller.getSymName() << " recursive: ";
    llvm::interleave(
        path, [&](StringRef name) { diag << "@" << name; },
        [&] { diag << " -> "; });
    return diag;
  }
  return success();
}

//===----------------------------------------------------------------------===//
// ScanOp
//===----------------------------------------------------------------------===//

/// Checks that `type`'s dims equal `expected` wherever both are static.
static LogicalResult checkShape(Operation *op, StringRef what, unsigned index,
                                MemRefType type, ArrayRef<int64_t> expected) {
  if (type.getRank() != static_cast<int64_t>(expected.size()))
    return op->emitOpError() << what << " #" << index << " must have rank "
                             << expected.size() << ", got " << type;
  for (auto [dim, want] : llvm::zip_equal(type.getShape(), expected))
    if (!ShapedType::isDynamic(dim) && !ShapedType::isDynamic(want) &&
        dim != want)
      return op->emitOpError() << what << " #" << index << " has shape " << type
                               << ", incompatible with the [T, N...] "
                               << "shape of the input sequences";
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
    return emitOpError("needs at least one input sequence: T comes from it");
  if (auto optional = getOptionalInputs())
    for (int64_t i : *optional)
      if (i < 0 || i >= static_cast<int64_t>(getInputs().size()))
        return emitOpError() << "optional input #" << i << " is not one of its "
                             << getInputs().size() << " inputs";
  if (getFinalStates() && getStates().empty())
    return emitOpError("'final_states' needs a 'states' group to write to");
  if (!getInits().empty() && !getStates().empty() &&
      getInits().size() != getStates().size())
    return emitOpError() << "has " << getInits().size()
                         << " initial states but " << getStates().size()
                         << " state results";

  // Every sequence shares [T, N...]; per-neuron buffers share [N...].
  auto first = cast<MemRefType>(getInputs().front().getType());
  SmallVector<int64_t> seqShape(first.getShape());
  auto merge = [&](MemRefType type) {
    if (type.getRank() != static_cast<int64_t>(seqShape.size()))
      return;
    for (auto [dim, known] : llvm::zip_equal(type.getShape(), seqShape))
      if (ShapedType::isDynamic(known))
        known = dim;
  };
  for (Value v : llvm::concat<Value>(getInputs(), getOutputs()))
    merge(cast<MemRefType>(v.getType()));
  ArrayRef<int64_t> neuronShape = ArrayRef<int64_t>(seqShape).drop_front();

  for (auto [i, v] : llvm::enumerate(getInputs()))
    if (failed(checkShape(*this, "input", i, cast<MemRefType>(v.getType()),
                          seqShape)))
      return failure();
  for (auto [i, v] : llvm::enumerate(getOutputs()))
    if (failed(checkShape(*this, "output", i, cast<MemRefType>(v.getType()),
                          seqShape)))
      return failure();
  for (auto [i, v] : llvm::enumerate(getInits()))
    if (failed(checkShape(*this, "initial state", i,
                          cast<MemRefType>(v.getType()), neuronShape)))
      return failure();
  for (auto [i, v] : llvm::enumerate(getStates()))
    if (failed(checkShape(*this,
                          getFinalStates() ? "final state" : "state sequence",
                          i, cast<MemRefType>(v.getType()),
                          getFinalStates() ? neuronShape : seqShape)))
      return failure();
  return success();
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
  for (auto [i, param, arg] :
       llvm::enumerate(getParams(), args.drop_front(numInputs + numStates)))
    if (param.getType() != arg)
      return emitOpError() << "param #" << i << " has type " << param.getType()
                           << ", but the body argument has type " << arg;

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
  for (auto [i, value, param] : llvm::enumerate(getParams(), runtimeParams))
    if (value.getType() != param.getType())
      return emitOpError() << "param #" << i << " ('"
                           << param.getName().getValue() << "') has type "
                           << value.getType() << ", but @"
                           << neuron.getSymName() << " declares "
                           << param.getType();
  return success();
}

//===----------------------------------------------------------------------===//
// Spike ops
//===----------------------------------------------------------------------===//

OpFoldResult SpikeOp::fold(FoldAdaptor adaptor) {
  auto input = dyn_cast_if_present<FloatAttr>(adaptor.getInput());
  if (!input || input.getValue().isNaN())
    return {};
  // H(0) = 1: a spike fires at exactly the threshold.
  return FloatAttr::get(
      getType(),
      input.getValue().isNegative() && !input.getValue().isZero() ? 0.0 : 1.0);
}

OpFoldResult SurrogateGradOp::fold(FoldAdaptor adaptor) {
  auto input = dyn_cast_if_present<FloatAttr>(adaptor.getInput());
  if (!input)
    return {};
  return FloatAttr::get(
      getType(), getSurrogate().evalDerivative(input.getValueAsDouble()));
}

#include "flexsn/Dialect/FlexSN/IR/FlexSNInterfaces.cpp.inc"

#define GET_OP_CLASSES
#include "flexsn/Dialect/FlexSN/IR/FlexSNOps.cpp.inc"
