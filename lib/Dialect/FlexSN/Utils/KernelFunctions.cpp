//===- KernelFunctions.cpp - Kernel functions and their scan --------------===//
//
// Part of the FlexSN project: an MLIR compiler for spiking-neuron dynamics.
//
//===----------------------------------------------------------------------===//

#include "flexsn/Dialect/FlexSN/Utils/KernelFunctions.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/SymbolTable.h"

using namespace mlir;
using namespace mlir::flexsn;

LogicalResult mlir::flexsn::checkBlocksCompiled(ModuleOp module) {
  bool found = false;
  for (auto func : module.getOps<func::FuncOp>())
    if (func->hasAttr("flexsn.block")) {
      func.emitError() << "block @" << func.getSymName()
                       << " has no kernel: flexsn-generate-block-kernels "
                          "compiles blocks (the pipelines do, for variants "
                          "inference, forward or backward)";
      found = true;
    }
  return failure(found);
}

SmallVector<func::FuncOp> mlir::flexsn::getKernelFunctions(ModuleOp module) {
  SmallVector<func::FuncOp> kernels;
  for (auto func : module.getOps<func::FuncOp>())
    if (func->hasAttr(KernelSignatureAttr::getAttrName()))
      kernels.push_back(func);
  return kernels;
}

/// Where a coupled kernel's coupling lies among its scan's operands:
/// `operandBuffers` maps the scan's buffer operands to the signature's
/// buffers. The coupled input must be an input sequence of the scan and
/// the value feeding it an output sequence, over a [T, N] domain.
static FailureOr<KernelFunction::Coupling>
findCoupling(ScanOp scan, KernelSignatureAttr signature,
             ArrayRef<unsigned> operandBuffers) {
  ArrayRef<KernelBufferAttr> buffers = signature.getBuffers();
  auto [to, from] = signature.getCouplingBindings();
  auto operandOf = [&](BindingAttr binds) -> int64_t {
    for (auto [k, index] : llvm::enumerate(operandBuffers))
      if (buffers[index].getBinds() == binds)
        return k;
    return -1;
  };
  KernelFunction::Coupling coupling;
  unsigned numInputs = scan.getInputs().size();
  unsigned firstOutput = numInputs + scan.getInits().size() +
                         llvm::count_if(scan.getParams(), [](Value v) {
                           return isa<MemRefType>(v.getType());
                         });
  int64_t input = operandOf(to), output = operandOf(from);
  if (input < 0 || input >= numInputs || output < int64_t(firstOutput) ||
      output >= int64_t(firstOutput + scan.getOutputs().size()) ||
      scan.getDomainRank() != 2)
    return scan.emitError("a coupled kernel's scan runs over [T, N], its "
                          "coupled input an input sequence of the scan and "
                          "the value feeding it an output sequence");
  coupling.input = input;
  coupling.output = output - firstOutput;
  coupling.weights =
      llvm::find_if(buffers,
                    [](KernelBufferAttr buffer) {
                      return buffer.getRole() == BufferRole::CouplingWeights;
                    }) -
      buffers.begin();
  return coupling;
}

FailureOr<KernelFunction>
mlir::flexsn::analyzeKernelFunction(func::FuncOp func) {
  KernelFunction kernel;
  kernel.func = func;
  kernel.signature = func->getAttrOfType<KernelSignatureAttr>(
      KernelSignatureAttr::getAttrName());
  if (!kernel.signature)
    return func.emitError("a kernel function needs a flexsn.kernel signature");
  auto scans = llvm::to_vector(func.getOps<ScanOp>());
  if (scans.size() != 1)
    return func.emitError("a kernel function must hold exactly one scan");
  ScanOp scan = kernel.scan = scans.front();
  if (scan.hasTensorSemantics())
    return scan.emitError("a kernel's scan works on the kernel function's "
                          "buffers: bufferize it first");
  if (scan.getCallee())
    kernel.neuron = SymbolTable::lookupNearestSymbolFrom<NeuronOp>(
        scan, scan.getCalleeAttr());

  // The role each operand position implies.
  DenseSet<int64_t> optional;
  for (int64_t i : scan.getOptionalInputs().value_or(ArrayRef<int64_t>()))
    optional.insert(i);
  SmallVector<SmallVector<BufferRole, 3>> expected;
  for (unsigned i = 0, e = scan.getInputs().size(); i < e; ++i)
    expected.push_back(
        optional.contains(i)
            ? SmallVector<BufferRole, 3>{BufferRole::OptionalInputSequence}
            : SmallVector<BufferRole, 3>{BufferRole::InputSequence,
                                         BufferRole::SavedInput});
  expected.append(scan.getInits().size(), {BufferRole::InitialState});
  for (Value param : scan.getParams())
    if (isa<MemRefType>(param.getType()))
      expected.push_back(
          {BufferRole::PerNeuronParam, BufferRole::PerChannelParam});
  expected.append(scan.getOutputs().size(),
                  {BufferRole::OutputSequence, BufferRole::SavedOutput});
  for (unsigned s = 0, e = scan.getStates().size(); s < e; ++s)
    expected.push_back({scan.isFinalState(s) ? BufferRole::FinalState
                                             : BufferRole::StateSequence});
  expected.append(scan.getReductions().size(),
                  {BufferRole::ParamGradient,
                   BufferRole::PerNeuronParamGradient,
                   BufferRole::PerChannelParamGradient});

  ArrayRef<KernelBufferAttr> buffers = kernel.signature.getBuffers();
  Block &entry = func.getBody().front();
  SmallVector<bool> used(buffers.size(), false);
  unsigned rank = scan.getDomainRank();
  bool channels = kernel.signature.hasChannels();
  // The buffer operands: all but the scalar parameters.
  SmallVector<OpOperand *> operands;
  for (OpOperand &operand : scan->getOpOperands())
    if (isa<MemRefType>(operand.get().getType()))
      operands.push_back(&operand);
  for (auto [k, operand] : llvm::enumerate(operands)) {
    auto arg = dyn_cast<BlockArgument>(operand->get());
    if (!arg || arg.getOwner() != &entry ||
        arg.getArgNumber() >= buffers.size())
      return scan.emitError() << "operand #" << k
                              << " of a kernel's scan must be one of the "
                                 "kernel function's buffer arguments";
    unsigned index = arg.getArgNumber();
    if (used[index])
      return scan.emitError()
             << "buffer '" << buffers[index].getName().getValue()
             << "' is passed to the scan twice";
    used[index] = true;
    BufferRole role = buffers[index].getRole();
    if (!llvm::is_contained(expected[k], role))
      return scan.emitError()
             << "buffer '" << buffers[index].getName().getValue() << "' is a "
             << stringifyBufferRole(role) << " but the scan uses it as a "
             << stringifyBufferRole(expected[k].front());
    // The buffer's shape class is the one the scan's map gives it.
    AffineMap map = scan.getMatchingIndexingMap(operand);
    BufferShape shape = buffers[index].getShape();
    bool agrees = rank == (channels ? 4u : 2u) &&
                  map == getShapeClassMap(shape, channels, scan.getContext());
    if (!agrees)
      return scan.emitError()
             << "buffer '" << buffers[index].getName().getValue() << "' is "
             << stringifyBufferShape(shape) << ", but the scan indexes it by "
             << AffineMapAttr::get(map);
    kernel.operandBuffers.push_back(index);
  }
  for (auto [index, isUsed] : llvm::enumerate(used))
    if (!isUsed && buffers[index].getRole() != BufferRole::CouplingWeights)
      return scan.emitError() << "the scan does not use buffer '"
                              << buffers[index].getName().getValue() << "'";
  if (kernel.signature.isCoupled()) {
    FailureOr<KernelFunction::Coupling> coupling =
        findCoupling(scan, kernel.signature, kernel.operandBuffers);
    if (failed(coupling))
      return failure();
    kernel.coupling = *coupling;
  }
  auto scalarParams = llvm::filter_to_vector(
      scan.getParams(), [](Value v) { return !isa<MemRefType>(v.getType()); });
  bool paramsMatch = scalarParams.size() == kernel.signature.getParams().size();
  for (auto [i, param] : llvm::enumerate(scalarParams)) {
    auto arg = dyn_cast<BlockArgument>(param);
    paramsMatch &= arg && arg.getOwner() == &entry &&
                   arg.getArgNumber() == buffers.size() + i;
  }
  if (!paramsMatch)
    return scan.emitError("a kernel's scan takes the kernel function's "
                          "parameter arguments, in order");
  return kernel;
}

SmallVector<KernelBufferAttr> mlir::flexsn::getStepBuffers(NeuronOp neuron,
                                                           Type dtype,
                                                           bool finalStates,
                                                           Type spikeType) {
  MLIRContext *ctx = neuron.getContext();
  SmallVector<KernelBufferAttr> buffers;
  auto add = [&](ArrayAttr names, BoundValue value) {
    for (auto [k, name] : llvm::enumerate(names.getAsValueRange<StringAttr>()))
      buffers.push_back(getKernelBuffer(BindingAttr::get(ctx, value, k),
                                        KernelVariant::Inference, dtype, name));
  };
  add(neuron.getInputNames(), BoundValue::Input);
  add(neuron.getStateNames(), BoundValue::StateInit);
  for (auto [k, name] :
       llvm::enumerate(neuron.getOutputNames().getAsValueRange<StringAttr>())) {
    Type type = spikeType && neuron.isSpikeOutput(k) ? spikeType : dtype;
    buffers.push_back(
        getKernelBuffer(BindingAttr::get(ctx, BoundValue::Output, k),
                        KernelVariant::Inference, type, name));
  }
  add(neuron.getStateNames(),
      finalStates ? BoundValue::StateFinal : BoundValue::StateSeq);
  return buffers;
}

SmallVector<KernelBufferAttr>
mlir::flexsn::getShapedParamBuffers(NeuronOp neuron) {
  MLIRContext *ctx = neuron.getContext();
  SmallVector<KernelBufferAttr> buffers;
  for (ParamAttr param : neuron.getRuntimeParamAttrs())
    if (param.isShaped())
      buffers.push_back(getKernelBuffer(BindingAttr::getParam(param),
                                        KernelVariant::Inference,
                                        Float32Type::get(ctx), ""));
  return buffers;
}

SmallVector<ParamAttr> mlir::flexsn::getScalarRuntimeParams(NeuronOp neuron) {
  return llvm::filter_to_vector(neuron.getRuntimeParamAttrs(),
                                [](ParamAttr p) { return !p.isShaped(); });
}

SmallVector<Value> mlir::flexsn::getScanParams(func::FuncOp func,
                                               NeuronOp neuron) {
  auto signature = func->getAttrOfType<KernelSignatureAttr>(
      KernelSignatureAttr::getAttrName());
  ArrayRef<KernelBufferAttr> buffers = signature.getBuffers();
  Block &entry = func.getBody().front();
  SmallVector<Value> params;
  unsigned nextScalar = buffers.size();
  for (ParamAttr param : neuron.getRuntimeParamAttrs()) {
    if (!param.isShaped()) {
      params.push_back(entry.getArgument(nextScalar++));
      continue;
    }
    auto buffer = llvm::find_if(buffers, [&](KernelBufferAttr b) {
      return isParamRole(b.getRole()) && b.getName() == param.getName();
    });
    assert(buffer != buffers.end() && "a shaped param without a buffer");
    params.push_back(entry.getArgument(buffer - buffers.begin()));
  }
  return params;
}

AffineMap mlir::flexsn::getShapeClassMap(BufferShape shape, bool channels,
                                         MLIRContext *ctx) {
  unsigned rank = channels ? 4 : 2;
  switch (shape) {
  case BufferShape::Sequence:
    return AffineMap::getMultiDimIdentityMap(rank, ctx);
  case BufferShape::PerNeuron:
    return AffineMap::getMinorIdentityMap(rank, rank - 1, ctx);
  case BufferShape::PerChannel:
    // (t, b, c, s) -> (c)
    return AffineMap::get(rank, 0, getAffineDimExpr(2, ctx));
  case BufferShape::Scalar:
  case BufferShape::Scratch:
  case BufferShape::Matrix: // not a scan operand: the lowerings read it
    break;
  }
  return AffineMap::get(rank, 0, ctx);
}

MemRefType mlir::flexsn::getBufferType(KernelBufferAttr buffer, bool channels) {
  SmallVector<int64_t, 4> shape;
  switch (buffer.getShape()) {
  case BufferShape::Sequence:
    shape.assign(channels ? 4 : 2, ShapedType::kDynamic);
    break;
  case BufferShape::PerNeuron:
    shape.assign(channels ? 3 : 1, ShapedType::kDynamic);
    break;
  case BufferShape::PerChannel:
  case BufferShape::Scratch:
    shape = {ShapedType::kDynamic};
    break;
  case BufferShape::Matrix:
    shape.assign(2, ShapedType::kDynamic);
    break;
  case BufferShape::Scalar:
    break;
  }
  return MemRefType::get(shape, buffer.getElementType());
}

ScanOp mlir::flexsn::createKernelScan(OpBuilder &builder, Location loc,
                                      KernelSignatureAttr signature,
                                      FlatSymbolRefAttr callee,
                                      ValueRange inputs, ValueRange inits,
                                      ValueRange params, ValueRange outputs,
                                      ValueRange states, ValueRange reductions,
                                      bool reverse) {
  if (!signature.hasChannels())
    return ScanOp::create(builder, loc, callee, inputs, inits, params, outputs,
                          states, reductions, reverse,
                          /*optionalInputs=*/DenseI64ArrayAttr());
  // Over (t, b, c, s), the operands' ranks no longer tell a per-channel
  // [C] buffer from others: the maps are those of the shape classes.
  MLIRContext *ctx = builder.getContext();
  SmallVector<AffineMap> maps;
  auto add = [&](ValueRange values) {
    for (Value value : values) {
      auto type = dyn_cast<MemRefType>(value.getType());
      int64_t rank = type ? type.getRank() : 0;
      BufferShape shape = rank == 4   ? BufferShape::Sequence
                          : rank == 3 ? BufferShape::PerNeuron
                          : rank == 1 ? BufferShape::PerChannel
                                      : BufferShape::Scalar;
      maps.push_back(getShapeClassMap(shape, /*channels=*/true, ctx));
    }
  };
  for (ValueRange group : {inputs, inits, params, outputs, states, reductions})
    add(group);
  return ScanOp::create(builder, loc, TypeRange(), callee, inputs, inits,
                        params, outputs, states, reductions,
                        builder.getAffineMapArrayAttr(maps), reverse,
                        /*optional_inputs=*/DenseI64ArrayAttr());
}

func::FuncOp mlir::flexsn::createKernelFunction(OpBuilder &builder,
                                                Location loc, StringRef name,
                                                KernelSignatureAttr signature) {
  bool channels = signature.hasChannels();
  SmallVector<Type> argTypes =
      llvm::map_to_vector(signature.getBuffers(), [&](KernelBufferAttr b) {
        return Type(getBufferType(b, channels));
      });
  for (ParamAttr param : signature.getParams())
    argTypes.push_back(param.getType());
  auto func = func::FuncOp::create(builder, loc, name,
                                   builder.getFunctionType(argTypes, {}));
  func->setAttr(KernelSignatureAttr::getAttrName(), signature);
  func.addEntryBlock();
  return func;
}

func::FuncOp
mlir::flexsn::createNeuronKernel(OpBuilder &builder, NeuronOp neuron,
                                 KernelVariant variant, StorageType storage,
                                 bool callNeuron, const KernelChoice &choice) {
  Location loc = neuron.getLoc();
  MLIRContext *ctx = neuron.getContext();
  SmallVector<KernelBufferAttr> buffers =
      getStepBuffers(neuron, getStorageElementType(ctx, storage),
                     variant == KernelVariant::FinalState, choice.spikeType);
  llvm::append_range(buffers, getShapedParamBuffers(neuron));
  auto signature = KernelSignatureAttr::get(
      ctx, neuron.getSymNameAttr(), variant, storage, buffers,
      getScalarRuntimeParams(neuron), /*workspace_sequences=*/0,
      /*reduction_slots=*/0, choice.options);
  func::FuncOp func = createKernelFunction(
      builder, loc,
      getKernelName(neuron.getSymName(), variant, storage) + choice.nameSuffix,
      signature);
  OpBuilder body = OpBuilder::atBlockBegin(&func.getBody().front());
  ValueRange args = func.getArguments();
  unsigned numInputs = neuron.getNumInputs(), numStates = neuron.getNumStates(),
           numOutputs = neuron.getNumOutputs();
  // The state buffers' ranks choose sequences or final states.
  createKernelScan(body, loc, signature,
                   callNeuron ? FlatSymbolRefAttr::get(neuron.getSymNameAttr())
                              : FlatSymbolRefAttr(),
                   args.take_front(numInputs), args.slice(numInputs, numStates),
                   getScanParams(func, neuron),
                   args.slice(numInputs + numStates, numOutputs),
                   args.slice(numInputs + numStates + numOutputs, numStates),
                   /*reductions=*/ValueRange(), /*reverse=*/false);
  func::ReturnOp::create(body, loc);
  return func;
}

std::string mlir::flexsn::getKernelName(StringRef neuron, KernelVariant variant,
                                        StorageType storage) {
  std::string name = (neuron + "_" + stringifyKernelVariant(variant) + "_" +
                      stringifyStorageType(storage))
                         .str();
  std::replace(name.begin(), name.end(), '-', '_');
  return name;
}
