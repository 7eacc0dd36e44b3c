//===- NeuronOp.cpp - flexsn.neuron ---------------------------------------===//
//
// Part of the FlexSN project: an MLIR compiler for spiking-neuron dynamics.
//
//===----------------------------------------------------------------------===//
//
// The neuron op: its custom syntax, its parameters, and the checks on its
// names (every kernel buffer is named after one) and its step body.
//
//===----------------------------------------------------------------------===//

#include "FlexSNOpsDetail.h"

#include "flexsn/Dialect/FlexSN/IR/FlexSNOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/OpImplementation.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringMap.h"

using namespace mlir;
using namespace mlir::flexsn;
using namespace mlir::flexsn::detail;

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
/// output or parameter (KernelFunctions.cpp, AutodiffPass.cpp), and a host
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
ArrayRef<Type> NeuronOp::getArgumentTypes() {
  return getStepType().getInputs();
}

ArrayRef<Type> NeuronOp::getResultTypes() { return getStepType().getResults(); }
