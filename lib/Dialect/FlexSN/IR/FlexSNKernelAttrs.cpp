//===- FlexSNKernelAttrs.cpp - The typed kernel signature -----------------===//
//
// Part of the FlexSN project: an MLIR compiler for spiking-neuron dynamics.
//
//===----------------------------------------------------------------------===//
//
// The verifiers of `#flexsn.buffer`, `#flexsn.kernel` and
// `#flexsn.compiled_kernel`, and of where they may appear: `flexsn.kernel`
// on a kernel function whose signature it describes, `flexsn.cpu_kernels`
// and `flexsn.gpu_kernels` on a module.
//
//===----------------------------------------------------------------------===//

#include "flexsn/Dialect/FlexSN/IR/FlexSNAttrs.h"
#include "flexsn/Dialect/FlexSN/IR/FlexSNDialect.h"

#include "mlir/IR/BuiltinTypes.h"
#include "mlir/Interfaces/FunctionInterfaces.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/FormatVariadic.h"

using namespace mlir;
using namespace mlir::flexsn;

bool mlir::flexsn::isWorkspaceRole(BufferRole role) {
  return role == BufferRole::SavedOutput || role == BufferRole::SavedInput ||
         role == BufferRole::ReductionScratch;
}

bool mlir::flexsn::isReadRole(BufferRole role) {
  return role == BufferRole::InputSequence ||
         role == BufferRole::OptionalInputSequence ||
         role == BufferRole::InitialState || role == BufferRole::SavedInput ||
         role == BufferRole::PerNeuronParam ||
         role == BufferRole::PerChannelParam ||
         role == BufferRole::CouplingWeights;
}

bool mlir::flexsn::isOptionalRole(BufferRole role) {
  return role == BufferRole::OptionalInputSequence ||
         role == BufferRole::InitialState ||
         role == BufferRole::OutputSequence ||
         role == BufferRole::StateSequence || role == BufferRole::FinalState;
}

bool mlir::flexsn::isParamRole(BufferRole role) {
  return role == BufferRole::PerNeuronParam ||
         role == BufferRole::PerChannelParam;
}

bool mlir::flexsn::isParamGradientRole(BufferRole role) {
  return role == BufferRole::ParamGradient ||
         role == BufferRole::PerNeuronParamGradient ||
         role == BufferRole::PerChannelParamGradient;
}

BufferShape mlir::flexsn::getShapeOfRole(BufferRole role) {
  switch (role) {
  case BufferRole::InitialState:
  case BufferRole::FinalState:
  case BufferRole::PerNeuronParam:
  case BufferRole::PerNeuronParamGradient:
    return BufferShape::PerNeuron;
  case BufferRole::PerChannelParam:
  case BufferRole::PerChannelParamGradient:
    return BufferShape::PerChannel;
  case BufferRole::ParamGradient:
    return BufferShape::Scalar;
  case BufferRole::ReductionScratch:
    return BufferShape::Scratch;
  case BufferRole::CouplingWeights:
    return BufferShape::Matrix;
  default:
    return BufferShape::Sequence;
  }
}

//===----------------------------------------------------------------------===//
// Bindings
//===----------------------------------------------------------------------===//

BindingAttr BindingAttr::getParam(ParamAttr param) {
  return get(param.getContext(), BoundValue::Param, 0, param.getName(),
             param.getShape(), false);
}

BindingAttr BindingAttr::getGradientBinding() const {
  return get(getContext(), getValue(), getIndex(), getParam(), getParamShape(),
             true);
}

/// Writes `binds` as a buffer spells it: `grad param "w" per_channel`.
static void writeBindingBody(llvm::raw_ostream &os, BindingAttr binds) {
  if (binds.getGradient())
    os << "grad ";
  os << stringifyBoundValue(binds.getValue());
  if (binds.getValue() == BoundValue::Param) {
    os << " \"";
    llvm::printEscapedString(binds.getParam().getValue(), os);
    os << '"';
    if (binds.getParamShape() != ParamShape::Scalar)
      os << ' ' << stringifyParamShape(binds.getParamShape());
  } else if (binds.getValue() != BoundValue::Scratch &&
             binds.getValue() != BoundValue::Coupling) {
    os << ' ' << binds.getIndex();
  }
}

void BindingAttr::printBody(AsmPrinter &printer) const {
  writeBindingBody(printer.getStream(), *this);
}

BindingAttr BindingAttr::parseBody(AsmParser &parser) {
  MLIRContext *ctx = parser.getContext();
  SMLoc loc = parser.getCurrentLocation();
  bool gradient = succeeded(parser.parseOptionalKeyword("grad"));
  StringRef keyword;
  if (failed(parser.parseKeyword(&keyword)))
    return {};
  std::optional<BoundValue> value = symbolizeBoundValue(keyword);
  if (!value) {
    parser.emitError(loc) << "expected what the buffer binds (input, "
                             "state_init, state_seq, state_final, output, "
                             "param, saved, scratch or coupling), got '"
                          << keyword << "'";
    return {};
  }
  int64_t index = 0;
  std::string param;
  ParamShape shape = ParamShape::Scalar;
  if (*value == BoundValue::Param) {
    if (failed(parser.parseString(&param)))
      return {};
    StringRef shapeKeyword;
    if (succeeded(parser.parseOptionalKeyword(
            &shapeKeyword, {"scalar", "per_neuron", "per_channel"})))
      shape = *symbolizeParamShape(shapeKeyword);
  } else if (*value != BoundValue::Scratch && *value != BoundValue::Coupling) {
    if (failed(parser.parseInteger(index)))
      return {};
  }
  return parser.getChecked<BindingAttr>(
      loc, ctx, *value, index,
      param.empty() ? StringAttr() : StringAttr::get(ctx, param), shape,
      gradient);
}

void BindingAttr::print(AsmPrinter &printer) const {
  printer << '<';
  printBody(printer);
  printer << '>';
}

Attribute BindingAttr::parse(AsmParser &parser, Type) {
  if (failed(parser.parseLess()))
    return {};
  BindingAttr binds = parseBody(parser);
  if (!binds || failed(parser.parseGreater()))
    return {};
  return binds;
}

ParseResult mlir::flexsn::parseBindingBody(AsmParser &parser,
                                           BindingAttr &binds) {
  BindingAttr parsed = BindingAttr::parseBody(parser);
  if (!parsed)
    return failure();
  binds = parsed;
  return success();
}

void mlir::flexsn::printBindingBody(AsmPrinter &printer, BindingAttr binds) {
  binds.printBody(printer);
}

LogicalResult BindingAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                                  BoundValue value, int64_t index,
                                  StringAttr param, ParamShape paramShape,
                                  bool gradient) {
  bool isParam = value == BoundValue::Param;
  if (index < 0)
    return emitError() << "a binding's index is not negative, got " << index;
  if (isParam != (param && !param.getValue().empty()))
    return emitError() << (isParam ? "a parameter binding names its parameter"
                                   : "only a parameter binding names a "
                                     "parameter");
  if (!isParam && paramShape != ParamShape::Scalar)
    return emitError() << "only a parameter binding has a shape";
  bool unindexed =
      isParam || value == BoundValue::Scratch || value == BoundValue::Coupling;
  if (unindexed && index != 0)
    return emitError() << "a " << stringifyBoundValue(value)
                       << " binding has no index";
  if (gradient && (value == BoundValue::Saved || value == BoundValue::Scratch ||
                   value == BoundValue::Coupling))
    return emitError() << "a " << stringifyBoundValue(value)
                       << " buffer has no gradient";
  return success();
}

BufferRole mlir::flexsn::getRoleOfBinding(BindingAttr binds,
                                          KernelVariant variant) {
  bool grad = binds.getGradient();
  switch (binds.getValue()) {
  case BoundValue::Input:
    return grad ? BufferRole::OutputSequence : BufferRole::InputSequence;
  case BoundValue::StateInit:
    return grad ? BufferRole::FinalState : BufferRole::InitialState;
  case BoundValue::StateSeq:
    return grad ? BufferRole::OptionalInputSequence : BufferRole::StateSequence;
  case BoundValue::StateFinal:
    // The reverse scan starts from the final states' gradients.
    return grad ? BufferRole::InitialState : BufferRole::FinalState;
  case BoundValue::Output:
    return grad ? BufferRole::OptionalInputSequence
                : BufferRole::OutputSequence;
  case BoundValue::Param:
    switch (binds.getParamShape()) {
    case ParamShape::Scalar:
      return BufferRole::ParamGradient;
    case ParamShape::PerNeuron:
      return grad ? BufferRole::PerNeuronParamGradient
                  : BufferRole::PerNeuronParam;
    case ParamShape::PerChannel:
      return grad ? BufferRole::PerChannelParamGradient
                  : BufferRole::PerChannelParam;
    }
    llvm_unreachable("unknown parameter shape");
  case BoundValue::Saved:
    return variant == KernelVariant::Backward ? BufferRole::SavedInput
                                              : BufferRole::SavedOutput;
  case BoundValue::Scratch:
    return BufferRole::ReductionScratch;
  case BoundValue::Coupling:
    return BufferRole::CouplingWeights;
  }
  llvm_unreachable("unknown bound value");
}

/// Whether a buffer of `role` may hold `binds`, in a kernel of any variant.
static bool suitsBinding(BufferRole role, BindingAttr binds) {
  if (binds.getValue() == BoundValue::Param && !binds.getGradient() &&
      binds.getParamShape() == ParamShape::Scalar)
    return false; // scalar parameters are arguments, not buffers
  // The GPU lowering stores per-channel gradients as per-neuron sums.
  if (role == BufferRole::PerNeuronParamGradient && binds.getGradient() &&
      binds.getParamShape() == ParamShape::PerChannel)
    return true;
  return role == getRoleOfBinding(binds, KernelVariant::Forward) ||
         role == getRoleOfBinding(binds, KernelVariant::Backward);
}

std::string mlir::flexsn::getBufferName(BindingAttr binds,
                                        StringRef valueName) {
  std::string name;
  switch (binds.getValue()) {
  case BoundValue::Input:
  case BoundValue::Output:
    name = valueName.str();
    break;
  case BoundValue::StateInit:
    name = (valueName + "_init").str();
    break;
  case BoundValue::StateSeq:
    name = (valueName + "_seq").str();
    break;
  case BoundValue::StateFinal:
    name = (valueName + "_final").str();
    break;
  case BoundValue::Param:
    name = binds.getParam().getValue().str();
    break;
  case BoundValue::Saved:
    name = llvm::formatv("saved{0}", binds.getIndex()).str();
    break;
  case BoundValue::Scratch:
    name = "reduction_scratch";
    break;
  case BoundValue::Coupling:
    name = "coupling";
    break;
  }
  return binds.getGradient() ? name + "_grad" : name;
}

KernelBufferAttr mlir::flexsn::getKernelBuffer(BindingAttr binds,
                                               KernelVariant variant,
                                               Type elementType,
                                               StringRef valueName) {
  MLIRContext *ctx = binds.getContext();
  BufferRole role = getRoleOfBinding(binds, variant);
  return KernelBufferAttr::get(
      ctx, StringAttr::get(ctx, getBufferName(binds, valueName)), role,
      elementType, getShapeOfRole(role), binds);
}

KernelBufferAttr mlir::flexsn::getGradientBuffer(KernelBufferAttr of,
                                                 KernelVariant variant,
                                                 Type elementType) {
  MLIRContext *ctx = of.getContext();
  BindingAttr binds = of.getBinds().getGradientBinding();
  BufferRole role = getRoleOfBinding(binds, variant);
  return KernelBufferAttr::get(
      ctx, StringAttr::get(ctx, of.getName().getValue() + "_grad"), role,
      elementType, getShapeOfRole(role), binds);
}

KernelBufferAttr KernelBufferAttr::withRole(BufferRole role) const {
  return get(getContext(), getName(), role, getElementType(),
             getShapeOfRole(role), getBinds());
}

/// Whether a buffer of `role` is f32 whatever the storage type.
static bool isAlwaysF32(BufferRole role) {
  return role == BufferRole::ParamGradient ||
         role == BufferRole::ReductionScratch ||
         role == BufferRole::PerNeuronParam ||
         role == BufferRole::PerNeuronParamGradient ||
         role == BufferRole::PerChannelParam ||
         role == BufferRole::PerChannelParamGradient ||
         role == BufferRole::CouplingWeights;
}

LogicalResult
KernelBufferAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                         StringAttr name, BufferRole role, Type elementType,
                         BufferShape shape, BindingAttr binds) {
  if (std::optional<std::string> problem = checkExportedName(name.getValue()))
    return emitError() << "buffer name '" << name.getValue() << "' "
                       << *problem;
  // Bytes and bits hold 0/1 spikes, which only outputs are.
  bool isSpikeType = elementType.isInteger(8) || elementType.isInteger(1);
  if (!elementType.isF32() && !elementType.isF16() && !elementType.isBF16() &&
      !isSpikeType)
    return emitError() << "buffer '" << name.getValue()
                       << "' must hold f32, f16, bf16, i8 or i1, got "
                       << elementType;
  if (isSpikeType && role != BufferRole::OutputSequence)
    return emitError() << "a " << stringifyBufferRole(role) << " buffer ('"
                       << name.getValue() << "') cannot hold " << elementType
                       << ": only spike outputs (output_sequence) are stored "
                          "as bytes or bits";
  if (shape != getShapeOfRole(role))
    return emitError() << "a " << stringifyBufferRole(role) << " buffer ('"
                       << name.getValue() << "') has shape class "
                       << stringifyBufferShape(getShapeOfRole(role)) << ", not "
                       << stringifyBufferShape(shape);
  if (isAlwaysF32(role) && !elementType.isF32())
    return emitError() << "a " << stringifyBufferRole(role) << " buffer ('"
                       << name.getValue() << "') holds f32, not "
                       << elementType;
  if (!binds || !suitsBinding(role, binds)) {
    InFlightDiagnostic diag = emitError() << "a " << stringifyBufferRole(role)
                                          << " buffer ('" << name.getValue()
                                          << "') cannot bind ";
    std::string text = "nothing";
    if (binds) {
      llvm::raw_string_ostream os(text = "");
      writeBindingBody(os, binds);
    }
    return diag << text;
  }
  return success();
}

Type mlir::flexsn::getStorageElementType(MLIRContext *ctx,
                                         StorageType storage) {
  switch (storage) {
  case StorageType::F32:
    return Float32Type::get(ctx);
  case StorageType::F16:
    return Float16Type::get(ctx);
  case StorageType::BF16:
    return BFloat16Type::get(ctx);
  }
  llvm_unreachable("unknown storage type");
}

Type KernelSignatureAttr::getStorageType() const {
  return getStorageElementType(getContext(), getStorage());
}

unsigned KernelSignatureAttr::count(BufferRole role) const {
  return llvm::count_if(getBuffers(), [&](KernelBufferAttr buffer) {
    return buffer.getRole() == role;
  });
}

bool KernelSignatureAttr::hasChannels() const {
  return llvm::any_of(getBuffers(), [](KernelBufferAttr buffer) {
    return buffer.getShape() == BufferShape::PerChannel;
  });
}

KernelSignatureAttr
KernelSignatureAttr::withBuffer(KernelBufferAttr buffer) const {
  SmallVector<KernelBufferAttr> buffers(getBuffers());
  buffers.push_back(buffer);
  return withBuffers(buffers);
}

KernelSignatureAttr
KernelSignatureAttr::withBuffers(ArrayRef<KernelBufferAttr> buffers) const {
  return get(getContext(), getNeuron(), getVariant(), getStorage(), buffers,
             getParams(), getWorkspaceSequences(), getReductionSlots(),
             getOptions(), getCoupledInput(), getCoupledOutput());
}

/// (the coupled input's binding, the coupled output's) in a kernel of
/// `variant`: the values, or in a backward kernel the gradients of the
/// output (which the coupling adds to) and of the input (which feeds it).
static std::pair<BindingAttr, BindingAttr>
getCouplingBindings(MLIRContext *ctx, KernelVariant variant, int64_t input,
                    int64_t output) {
  auto in = BindingAttr::get(ctx, BoundValue::Input, input);
  auto out = BindingAttr::get(ctx, BoundValue::Output, output);
  if (variant == KernelVariant::Backward)
    return {out.getGradientBinding(), in.getGradientBinding()};
  return {in, out};
}

std::pair<BindingAttr, BindingAttr>
KernelSignatureAttr::getCouplingBindings() const {
  return ::getCouplingBindings(getContext(), getVariant(), getCoupledInput(),
                               getCoupledOutput());
}

KernelSignatureAttr
KernelSignatureAttr::withCoupling(int64_t input, int64_t output,
                                  StringRef weightsName) const {
  MLIRContext *ctx = getContext();
  SmallVector<KernelBufferAttr> buffers(getBuffers());
  auto binds = BindingAttr::get(ctx, BoundValue::Coupling, 0);
  buffers.push_back(KernelBufferAttr::get(
      ctx, StringAttr::get(ctx, weightsName), BufferRole::CouplingWeights,
      Float32Type::get(ctx), BufferShape::Matrix, binds));
  return get(ctx, getNeuron(), getVariant(), getStorage(), buffers, getParams(),
             getWorkspaceSequences(), getReductionSlots(), getOptions(), input,
             output);
}

/// A coupled kernel's checks: both indices set or neither, one
/// coupling_weights buffer exactly when coupled, buffers binding the
/// coupled values, no per-channel buffers, no options.
static LogicalResult
verifyCoupling(function_ref<InFlightDiagnostic()> emitError, MLIRContext *ctx,
               KernelVariant variant, ArrayRef<KernelBufferAttr> buffers,
               DictionaryAttr options, int64_t input, int64_t output) {
  unsigned weights = llvm::count_if(buffers, [](KernelBufferAttr buffer) {
    return buffer.getRole() == BufferRole::CouplingWeights;
  });
  if ((input >= 0) != (output >= 0) || input < -1 || output < -1)
    return emitError() << "coupled_input and coupled_output are both set (an "
                          "input and an output of the neuron) or both -1, "
                          "got "
                       << input << " and " << output;
  if (input < 0)
    return weights ? emitError() << "a coupling_weights buffer belongs to a "
                                    "coupled kernel (coupled_input, "
                                    "coupled_output)"
                   : success();
  if (weights != 1)
    return emitError() << "a coupled kernel has one coupling_weights buffer, "
                          "not "
                       << weights;
  if (options || llvm::any_of(buffers, [](KernelBufferAttr buffer) {
        return buffer.getShape() == BufferShape::PerChannel;
      }))
    return emitError() << "a coupled kernel has no options and no "
                          "per-channel buffers";
  auto [to, from] = getCouplingBindings(ctx, variant, input, output);
  for (BindingAttr binds : {to, from})
    if (llvm::none_of(buffers, [&](KernelBufferAttr buffer) {
          return buffer.getBinds() == binds;
        })) {
      std::string text;
      llvm::raw_string_ostream os(text);
      writeBindingBody(os, binds);
      return emitError() << "a coupled kernel has a buffer binding " << text;
    }
  return success();
}

LogicalResult KernelSignatureAttr::verify(
    function_ref<InFlightDiagnostic()> emitError, StringAttr neuron,
    KernelVariant variant, StorageType storage,
    ArrayRef<KernelBufferAttr> buffers, ArrayRef<ParamAttr> params,
    int64_t workspaceSequences, int64_t reductionSlots, DictionaryAttr options,
    int64_t coupledInput, int64_t coupledOutput) {
  if (!neuron.getValue().empty())
    if (std::optional<std::string> problem =
            checkExportedName(neuron.getValue(), /*isPrefix=*/true))
      return emitError() << "neuron name '" << neuron.getValue() << "' "
                         << *problem;
  if (buffers.empty())
    return emitError() << "a kernel has at least one buffer";
  // Names become C arguments of one function: buffers and parameters alike.
  llvm::StringSet<> names;
  for (KernelBufferAttr buffer : buffers)
    if (!names.insert(buffer.getName().getValue()).second)
      return emitError() << "two buffers are named '"
                         << buffer.getName().getValue() << "'";
  // A caller finds a buffer by what it binds: one buffer per value.
  for (auto [i, buffer] : llvm::enumerate(buffers))
    for (KernelBufferAttr other : buffers.take_front(i))
      if (other.getBinds() == buffer.getBinds())
        return emitError() << "buffers '" << other.getName().getValue()
                           << "' and '" << buffer.getName().getValue()
                           << "' bind the same value";
  for (ParamAttr param : params) {
    if (!names.insert(param.getName().getValue()).second)
      return emitError() << "parameter '" << param.getName().getValue()
                         << "' has the name of another argument";
    if (param.getKind() == ParamKind::Const)
      return emitError() << "parameter '" << param.getName().getValue()
                         << "' is const: only runtime and trainable "
                            "parameters are kernel arguments";
  }
  if (workspaceSequences < 0 || reductionSlots < 0)
    return emitError() << "workspace sizes must not be negative";

  bool training =
      variant == KernelVariant::Forward || variant == KernelVariant::Backward;
  int64_t saved = 0, scratches = 0;
  Type storageType = getStorageElementType(neuron.getContext(), storage);
  for (auto [i, buffer] : llvm::enumerate(buffers)) {
    BufferRole role = buffer.getRole();
    bool trainingRole = role == BufferRole::SavedOutput ||
                        role == BufferRole::SavedInput ||
                        role == BufferRole::ParamGradient ||
                        role == BufferRole::PerNeuronParamGradient ||
                        role == BufferRole::PerChannelParamGradient ||
                        role == BufferRole::OptionalInputSequence ||
                        role == BufferRole::ReductionScratch;
    if (trainingRole && !training)
      return emitError() << "an " << stringifyKernelVariant(variant)
                         << " kernel has no " << stringifyBufferRole(role)
                         << " buffer ('" << buffer.getName().getValue() << "')";
    BufferRole savedRole = variant == KernelVariant::Forward
                               ? BufferRole::SavedOutput
                               : BufferRole::SavedInput;
    if ((role == BufferRole::SavedOutput || role == BufferRole::SavedInput) &&
        role != savedRole)
      return emitError() << "a " << stringifyKernelVariant(variant)
                         << " kernel's saved buffers are "
                         << stringifyBufferRole(savedRole) << ", not '"
                         << buffer.getName().getValue() << "'";
    saved += role == savedRole;
    // Saved values keep f32 precision or are rounded to the storage type.
    if (role == savedRole && !buffer.getElementType().isF32() &&
        buffer.getElementType() != storageType)
      return emitError() << "saved buffer '" << buffer.getName().getValue()
                         << "' holds " << buffer.getElementType()
                         << ": saved values are f32 or the storage type ("
                         << storageType << ")";
    if (role == BufferRole::ReductionScratch) {
      ++scratches;
      if (i + 1 != buffers.size())
        return emitError() << "the reduction scratch must be the last buffer";
    }
  }
  if (saved != workspaceSequences)
    return emitError() << "workspace_sequences is " << workspaceSequences
                       << " but the kernel has " << saved << " saved buffer(s)";
  if (scratches > 1)
    return emitError() << "a kernel has at most one reduction scratch";
  // i8 (a byte per spike) and i1 (bit-packed) buffers hold spike outputs
  // stored compactly: only inference and final-state kernels store them,
  // and a kernel stores all of them one way.
  auto holds = [&](unsigned width) {
    return llvm::any_of(buffers, [&](KernelBufferAttr buffer) {
      return buffer.getElementType().isInteger(width);
    });
  };
  bool bytes = holds(8), bits = holds(1);
  if ((training && (bytes || bits)) || (bytes && bits))
    return emitError() << "i8 and i1 buffers hold spikes stored compactly, "
                          "all one way, in an inference or final-state kernel";
  // Callers select a kernel by its options: an empty set is no set.
  if (options && options.empty())
    return emitError() << "options, when given, name at least one option";
  for (NamedAttribute option :
       options ? options.getValue() : ArrayRef<NamedAttribute>())
    if (!isa<StringAttr, BoolAttr, IntegerAttr>(option.getValue()))
      return emitError() << "option '" << option.getName().getValue()
                         << "' is a string, a bool or an integer";
  return verifyCoupling(emitError, neuron.getContext(), variant, buffers,
                        options, coupledInput, coupledOutput);
}

LogicalResult
CompiledKernelAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                           StringAttr name, KernelSignatureAttr signature,
                           int64_t vectorWidth, bool deterministic,
                           StringAttr vectorEntry, StringAttr scalarEntry) {
  bool gpu = vectorWidth > 0;
  for (StringAttr entry : {vectorEntry, scalarEntry}) {
    bool named = entry && !entry.getValue().empty();
    if (named != gpu)
      return emitError() << "kernel '" << name.getValue() << "': "
                         << (gpu ? "a GPU kernel names its vector_entry and "
                                   "scalar_entry"
                                 : "a CPU kernel's entry point is its name: "
                                   "it has no vector_entry or scalar_entry");
    if (named)
      if (std::optional<std::string> problem =
              checkExportedName(entry.getValue(), /*isPrefix=*/true))
        return emitError() << "entry point '" << entry.getValue() << "' "
                           << *problem;
  }
  if (gpu && vectorEntry == scalarEntry)
    return emitError() << "kernel '" << name.getValue()
                       << "': its vector and scalar entry points are both '"
                       << vectorEntry.getValue() << "'";
  if (deterministic && !gpu)
    return emitError() << "kernel '" << name.getValue()
                       << "': only GPU kernels have a deterministic mode";
  return success();
}

WorkspaceLayout CompiledKernelAttr::getWorkspaceLayout() const {
  WorkspaceLayout layout;
  for (KernelBufferAttr buffer : getSignature().getBuffers()) {
    BufferRole role = buffer.getRole();
    bool saved =
        role == BufferRole::SavedOutput || role == BufferRole::SavedInput;
    layout.savedOffsets.push_back(saved ? layout.savedBytes : -1);
    if (saved)
      layout.savedBytes += buffer.getElementType().getIntOrFloatBitWidth() / 8;
  }
  layout.reductionSlots = getReductionSlots();
  return layout;
}

/// The bytes of `bytesPerElement` bytes for each of T * ld elements, as the
/// manifest spells them (in 4-byte units where they divide: `k * T * ld * 4`).
static std::string sequenceBytesFormula(int64_t bytesPerElement) {
  if (bytesPerElement % 4 == 0)
    return llvm::formatv("{0} * T * ld * 4", bytesPerElement / 4).str();
  return llvm::formatv("{0} * T * ld", bytesPerElement).str();
}

/// The saved sequences' bytes rounded up to 4: where the reduction scratch
/// starts, and the size of a workspace without one (so that a workspace is
/// always whole floats).
static std::string scratchOffsetFormula(const WorkspaceLayout &layout) {
  if (layout.savedBytes % 4 == 0)
    return sequenceBytesFormula(layout.savedBytes);
  return llvm::formatv("4 * ceil({0} * T * ld / 4)", layout.savedBytes).str();
}

std::string CompiledKernelAttr::getWorkspaceBytesFormula() const {
  WorkspaceLayout layout = getWorkspaceLayout();
  std::string scratch =
      llvm::formatv("4 + 4 * {0} * ceil(N / 256)", layout.reductionSlots);
  if (!layout.reductionSlots)
    return layout.savedBytes ? scratchOffsetFormula(layout) : "0";
  return layout.savedBytes ? scratchOffsetFormula(layout) + " + " + scratch
                           : scratch;
}

std::string
CompiledKernelAttr::getWorkspaceOffsetFormula(unsigned buffer) const {
  WorkspaceLayout layout = getWorkspaceLayout();
  if (getSignature().getBuffers()[buffer].getRole() ==
      BufferRole::ReductionScratch)
    return scratchOffsetFormula(layout);
  assert(layout.savedOffsets[buffer] >= 0 && "not a workspace part");
  return sequenceBytesFormula(layout.savedOffsets[buffer]);
}

/// `flexsn.kernel` describes the function's signature: one memref per
/// buffer (of the buffer's element type and shape class), then one scalar
/// per runtime parameter, and no results. A kernel with channels sees its
/// neurons as [B, C, S].
static LogicalResult verifyKernelFunction(Operation *op,
                                          KernelSignatureAttr kernel) {
  auto func = dyn_cast<FunctionOpInterface>(op);
  if (!func)
    return op->emitError("'flexsn.kernel' belongs on a kernel function");
  ArrayRef<Type> args = func.getArgumentTypes();
  ArrayRef<KernelBufferAttr> buffers = kernel.getBuffers();
  ArrayRef<ParamAttr> params = kernel.getParams();
  if (args.size() != buffers.size() + params.size() ||
      !func.getResultTypes().empty())
    return op->emitError() << "'flexsn.kernel' lists " << buffers.size()
                           << " buffer(s) and " << params.size()
                           << " parameter(s), but the function takes "
                           << args.size() << " argument(s) and returns "
                           << func.getResultTypes().size() << " value(s)";
  bool channels = kernel.hasChannels();
  for (auto [i, buffer] : llvm::enumerate(buffers)) {
    auto memref = dyn_cast<MemRefType>(args[i]);
    int64_t rank = memref ? memref.getRank() : -1;
    bool rankOk = false;
    switch (buffer.getShape()) {
    case BufferShape::Sequence:
      rankOk = channels ? rank == 4 : rank >= 2;
      break;
    case BufferShape::PerNeuron:
      rankOk = channels ? rank == 3 : rank >= 1;
      break;
    case BufferShape::PerChannel:
      rankOk = rank == 1;
      break;
    case BufferShape::Scalar:
      rankOk = rank == 0;
      break;
    case BufferShape::Matrix:
      rankOk = rank == 2;
      break;
    case BufferShape::Scratch:
      return op->emitError() << "buffer '" << buffer.getName().getValue()
                             << "': a kernel function takes no reduction "
                                "scratch (the GPU lowering adds it)";
    }
    if (!rankOk || memref.getElementType() != buffer.getElementType())
      return op->emitError()
             << "argument #" << i << " (" << args[i] << ") is not a "
             << stringifyBufferShape(buffer.getShape()) << " memref of "
             << buffer.getElementType() << ", as buffer '"
             << buffer.getName().getValue() << "' says";
  }
  for (auto [i, param] : llvm::enumerate(params)) {
    Type arg = args[buffers.size() + i];
    if (arg != param.getType())
      return op->emitError()
             << "argument #" << buffers.size() + i << " (" << arg
             << ") is not of the type of parameter '"
             << param.getName().getValue() << "' (" << param.getType() << ")";
  }
  return success();
}

LogicalResult FlexSNDialect::verifyOperationAttribute(Operation *op,
                                                      NamedAttribute attr) {
  StringRef name = attr.getName().getValue();
  if (name == KernelSignatureAttr::getAttrName()) {
    auto kernel = dyn_cast<KernelSignatureAttr>(attr.getValue());
    if (!kernel)
      return op->emitError("'flexsn.kernel' must be a #flexsn.kernel");
    return verifyKernelFunction(op, kernel);
  }
  if (name == "flexsn.cpu_kernels" || name == "flexsn.gpu_kernels") {
    auto list = dyn_cast<ArrayAttr>(attr.getValue());
    if (!list || !llvm::all_of(list, llvm::IsaPred<CompiledKernelAttr>))
      return op->emitError()
             << "'" << name << "' must be an array of #flexsn.compiled_kernel";
    bool gpu = name == "flexsn.gpu_kernels";
    for (auto kernel : list.getAsRange<CompiledKernelAttr>())
      if (kernel.isGPU() != gpu)
        return op->emitError()
               << "'" << name << "' lists " << kernel.getName().getValue()
               << ", a " << (gpu ? "CPU" : "GPU") << " kernel";
    return success();
  }
  if (name == "flexsn.block") {
    if (!isa<UnitAttr>(attr.getValue()) || !isa<FunctionOpInterface>(op))
      return op->emitError("'flexsn.block' is a unit attribute of a "
                           "function (a block that kernel generation "
                           "compiles)");
    return success();
  }
  return op->emitError() << "unknown attribute '" << name
                         << "': a kernel function's signature is "
                            "'flexsn.kernel', a block function's mark "
                            "'flexsn.block'";
}

/// `flexsn.name` (a C identifier naming the kernel buffer or parameter) and,
/// on arguments, `flexsn.trainable` (a unit: the parameter gets a gradient)
/// on a block function's arguments and results.
static LogicalResult
verifyBlockValueAttribute(Operation *op, NamedAttribute attr, bool isArgument) {
  StringRef name = attr.getName().getValue();
  if (name == "flexsn.name") {
    auto value = dyn_cast<StringAttr>(attr.getValue());
    if (!value)
      return op->emitError("'flexsn.name' must be a string");
    if (std::optional<std::string> problem = checkExportedName(value))
      return op->emitError()
             << "'flexsn.name' \"" << value.getValue() << "\" " << *problem;
    return success();
  }
  if (name == "flexsn.trainable" && isArgument) {
    if (!isa<UnitAttr>(attr.getValue()))
      return op->emitError("'flexsn.trainable' is a unit attribute");
    return success();
  }
  return op->emitError() << "unknown " << (isArgument ? "argument" : "result")
                         << " attribute '" << name << "': a block's "
                         << (isArgument ? "arguments take 'flexsn.name' and "
                                          "'flexsn.trainable'"
                                        : "results take 'flexsn.name'");
}

LogicalResult FlexSNDialect::verifyRegionArgAttribute(Operation *op, unsigned,
                                                      unsigned,
                                                      NamedAttribute attr) {
  return verifyBlockValueAttribute(op, attr, /*isArgument=*/true);
}

LogicalResult FlexSNDialect::verifyRegionResultAttribute(Operation *op,
                                                         unsigned, unsigned,
                                                         NamedAttribute attr) {
  return verifyBlockValueAttribute(op, attr, /*isArgument=*/false);
}
