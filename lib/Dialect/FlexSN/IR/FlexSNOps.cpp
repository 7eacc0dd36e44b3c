//===- FlexSNOps.cpp - FlexSN operations ----------------------------------===//
//
// Part of the FlexSN project: an MLIR compiler for spiking-neuron dynamics.
//
//===----------------------------------------------------------------------===//

#include "flexsn/Dialect/FlexSN/IR/FlexSNOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/Matchers.h"
#include "mlir/IR/OpImplementation.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/SmallPtrSet.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/ADT/StringSwitch.h"

using namespace mlir;
using namespace mlir::flexsn;

//===----------------------------------------------------------------------===//
// Helpers
//===----------------------------------------------------------------------===//

bool mlir::flexsn::isStepScalarType(Type type) {
  return type.isF32() || type.isSignlessInteger() || type.isIndex();
}

/// Whether `op` is an integer division or remainder, and if so whether it is
/// signed: ops whose result LLVM leaves undefined for a zero divisor (and,
/// signed, for the minimum integer divided by -1).
static std::optional<bool> isSignedDivision(Operation &op) {
  return llvm::StringSwitch<std::optional<bool>>(op.getName().getStringRef())
      .Cases({"arith.divsi", "arith.remsi", "arith.ceildivsi",
              "arith.floordivsi", "index.divs", "index.rems", "index.ceildivs",
              "index.floordivs", "llvm.sdiv", "llvm.srem"},
             true)
      .Cases({"arith.divui", "arith.remui", "arith.ceildivui", "index.divu",
              "index.remu", "index.ceildivu", "llvm.udiv", "llvm.urem"},
             false)
      .Default(std::nullopt);
}

/// Checks an integer division's divisor: a constant other than 0 (and -1
/// for a signed op). Undefined behaviour has no place in a step body: on the
/// CPU it kills the process (SIGFPE), and LLVM deletes a kernel that
/// divides by a constant 0.
static LogicalResult verifyDivisor(Operation &op, bool isSigned,
                                   StringRef owner) {
  APInt divisor;
  if (!matchPattern(op.getOperand(1), m_ConstantInt(&divisor)))
    return op.emitOpError()
           << "divides by a value known only at run time: in a " << owner
           << " body an integer division or remainder needs a constant "
              "divisor other than 0"
           << (isSigned ? " and -1" : "") << ", since dividing by 0"
           << (isSigned ? " (or the minimum integer by -1)" : "")
           << " has no defined result";
  if (divisor.isZero())
    return op.emitOpError() << "divides by 0, which has no defined result";
  if (isSigned && divisor.isAllOnes())
    return op.emitOpError()
           << "divides by -1, which has no defined result for the minimum "
              "integer: negate with arith.subi instead";
  return success();
}

/// Checks the ops of a per-step body: ops free of memory effects and
/// regions, and applications of neurons, on scalars; so the body lowers the
/// same way to CPU loops and GPU threads, and autodiff needs only a per-op
/// rule. Asked through interfaces: any dialect's such ops qualify. Integer
/// divisions and remainders need a safe constant divisor.
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
      if (isStepScalarType(type))
        continue;
      if (isa<FloatType>(type))
        return op.emitOpError() << "computes in " << type << ", but a " << owner
                                << " body computes in f32";
      return op.emitOpError() << "uses non-scalar type " << type << ": a "
                              << owner << " body works on scalars only";
    }
    if (std::optional<bool> isSigned = isSignedDivision(op))
      if (failed(verifyDivisor(op, *isSigned, owner)))
        return failure();
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

/// Whether `value`, in a neuron body, is always 0 or 1.
static bool isSpikeValue(Value value) {
  Operation *def = value.getDefiningOp();
  if (isa_and_nonnull<SpikeOp>(def))
    return true;
  if (auto detach = dyn_cast_or_null<DetachOp>(def))
    return isSpikeValue(detach.getInput());
  if (auto apply = dyn_cast_or_null<ApplyOp>(def)) {
    // Neurons do not apply themselves (verified), so this terminates.
    auto callee = SymbolTable::lookupNearestSymbolFrom<NeuronOp>(
        apply, apply.getCalleeAttr());
    unsigned index = cast<OpResult>(value).getResultNumber();
    return callee && index < callee.getNumOutputs() &&
           callee.isSpikeOutput(index);
  }
  return false;
}

bool NeuronOp::isSpikeOutput(unsigned index) {
  return isSpikeValue(getBodyBlock().getTerminator()->getOperand(index));
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

  // params(%name: type = default [const|runtime|trainable] [per_neuron], ...)
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
      // [const|runtime|trainable] [per_neuron|per_channel]
      ParamKind kind = ParamKind::Const;
      ParamShape shape = ParamShape::Scalar;
      StringRef keyword;
      SMLoc kindLoc = parser.getCurrentLocation();
      if (succeeded(parser.parseOptionalKeyword(&keyword))) {
        std::optional<ParamKind> parsedKind = symbolizeParamKind(keyword);
        std::optional<ParamShape> parsedShape = symbolizeParamShape(keyword);
        if (!parsedKind && (!parsedShape || parsedShape == ParamShape::Scalar))
          return parser.emitError(kindLoc)
                 << "expected 'const', 'runtime', 'trainable', 'per_neuron' "
                    "or 'per_channel', got '"
                 << keyword << "'";
        if (parsedKind) {
          kind = *parsedKind;
          StringRef shapeKeyword;
          SMLoc shapeLoc = parser.getCurrentLocation();
          if (succeeded(parser.parseOptionalKeyword(&shapeKeyword))) {
            parsedShape = symbolizeParamShape(shapeKeyword);
            if (!parsedShape || parsedShape == ParamShape::Scalar)
              return parser.emitError(shapeLoc)
                     << "expected 'per_neuron' or 'per_channel', got '"
                     << shapeKeyword << "'";
            shape = *parsedShape;
          }
        } else {
          shape = *parsedShape;
          StringRef late;
          SMLoc lateLoc = parser.getCurrentLocation();
          if (succeeded(parser.parseOptionalKeyword(&late)))
            return parser.emitError(lateLoc)
                   << "the binding comes before the shape: write '" << late
                   << " " << keyword << "'";
        }
      }
      StringAttr name = builder.getStringAttr(arg.ssaName.name.drop_front());
      auto emitError = [&] { return parser.emitError(arg.ssaName.location); };
      // `true`/`false` parse as i1 whatever type was asked for.
      if (value.getType() != arg.type)
        return emitError() << "default value of parameter '" << name.getValue()
                           << "' has type " << value.getType()
                           << ", but the parameter has type " << arg.type;
      ParamAttr param = ParamAttr::getChecked(emitError, builder.getContext(),
                                              name, value, kind, shape);
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
          if (param.isShaped())
            p << ' ' << stringifyParamShape(param.getShape());
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

/// Whether `name` is `saved<k>`: a training workspace buffer's name.
static bool isSavedBufferName(StringRef name) {
  return name.consume_front("saved") && !name.empty() &&
         llvm::all_of(name, llvm::isDigit);
}

/// Kernel generation and autodiff name every buffer after an input, state,
/// output or parameter (KernelInterface.cpp, AutodiffPass.cpp), and a host
/// stub takes them all, with the i1 parameters' byte copies, in one C scope:
/// over every variant, no two may share a name.
static LogicalResult verifyKernelArgumentNames(NeuronOp neuron) {
  llvm::StringMap<std::string> owners;
  auto claim = [&](const Twine &buffer, const Twine &what) -> LogicalResult {
    std::string name = buffer.str();
    // A derived name is exported too (state `_` would give `__init`).
    if (std::optional<std::string> problem = checkExportedName(name))
      return neuron.emitOpError() << "would name " << what.str() << " '" << name
                                  << "', which " << *problem;
    if (isSavedBufferName(name))
      return neuron.emitOpError()
             << "would name " << what.str() << " '" << name
             << "', the name of a training kernel's saved buffer (saved0, "
                "saved1, ...)";
    auto [it, inserted] = owners.try_emplace(name, what.str());
    if (inserted)
      return success();
    return neuron.emitOpError()
           << "would give two kernel arguments the name '" << name
           << "': " << it->second << " and " << what.str();
  };
  // A name's buffer and its gradient's.
  auto claimWithGradient = [&](StringRef name, StringRef suffix,
                               const Twine &what) {
    return failure(
        failed(claim(name + suffix, what)) ||
        failed(claim(name + suffix + "_grad", "the gradient of " + what)));
  };
  for (StringRef x : neuron.getInputNames().getAsValueRange<StringAttr>())
    if (failed(claimWithGradient(x, "", "input '" + x + "'")))
      return failure();
  static constexpr std::pair<StringLiteral, StringLiteral> kStateBuffers[] = {
      {"_init", "the initial state"},
      {"_seq", "the state sequence"},
      {"_final", "the final state"}};
  for (StringRef v : neuron.getStateNames().getAsValueRange<StringAttr>())
    for (auto [suffix, what] : kStateBuffers)
      if (failed(claimWithGradient(v, suffix, what + " of state '" + v + "'")))
        return failure();
  for (StringRef y : neuron.getOutputNames().getAsValueRange<StringAttr>())
    if (failed(claimWithGradient(y, "", "output '" + y + "'")))
      return failure();
  // Any parameter may become a trainable one (flexsn-set-params).
  for (ParamAttr param : neuron.getParamAttrs()) {
    StringRef p = param.getName().getValue();
    if (failed(claimWithGradient(p, "", "parameter '" + p + "'")))
      return failure();
    if (param.getType().isInteger(1) &&
        failed(claim(p + "_i8",
                     "the host stubs' byte copy of i1 parameter '" + p + "'")))
      return failure();
  }
  return success();
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
  // Outputs live in their own namespace (they are results, not arguments);
  // the kernels' buffer names are checked next.
  seen.clear();
  if (failed(checkNames(getOutputNames(), "output")))
    return failure();
  return verifyKernelArgumentNames(*this);
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
  if (!caller && !isa_and_present<ScanOp>((*this)->getParentOp()))
    return emitOpError("must be inside a flexsn.neuron body or a "
                       "flexsn.scan's inline body");

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

  // Recursion has no meaning for a per-step body: reject any cycle. (A scan
  // is no symbol: nothing applies it.)
  if (!caller)
    return success();
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

FailureOr<SmallVector<AffineMap>> ScanOp::getDefaultIndexingMaps(
    ArrayRef<TypeRange> groups, function_ref<InFlightDiagnostic()> emitError) {
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
               << ", which implies no indexing map in a domain of rank "
               << rank << " (the first input's): expected rank ";
          llvm::interleave(
              candidates,
              [&](AffineMap map) { diag << map.getNumResults(); },
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

/// `indexing_maps = [...]`, printed only where the operands' ranks do not
/// imply the maps.
static ParseResult
parseIndexingMaps(OpAsmParser &parser, ArrayAttr &maps, ArrayRef<Type> inputs,
                  ArrayRef<Type> inits, ArrayRef<Type> params,
                  ArrayRef<Type> outputs, ArrayRef<Type> states,
                  ArrayRef<Type> reductions) {
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

static void printIndexingMaps(OpAsmPrinter &p, ScanOp scan, ArrayAttr maps,
                              TypeRange, TypeRange, TypeRange, TypeRange,
                              TypeRange, TypeRange) {
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
  llvm::append_range(types,
                     getTensorInitTypes(adaptor.getOutputs(),
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
    return op->emitOpError() << "indexing map of " << what << " #" << index
                             << " ";
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
      auto emit = [&]() {
        return emitOpError() << what << " #" << k << " ";
      };
      bool usesTime = map.getNumResults() && map.getDimPosition(0) == 0;
      bool isIdentity = map.isIdentity();
      bool isPerNeuron = map.getNumResults() == rank - 1 && !usesTime;
      switch (group) {
      case ScanGroup::Input:
        break;
      case ScanGroup::Init:
        if (usesTime)
          return emit() << "must not depend on t: its map is " << AffineMapAttr::get(map);
        break;
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
                      << AffineMapAttr::get(map) << " gives " << map.getNumResults() << " indices";
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
                        << sizeSources[dim].first << " gives domain dimension d" << dim
                        << " size " << domain[dim];
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
      InFlightDiagnostic diag = emitOpError()
                                << "param #" << i << " ('"
                                << param.getName().getValue() << "') has type "
                                << value.getType() << ", but @"
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
