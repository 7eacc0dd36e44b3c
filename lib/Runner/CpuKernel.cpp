//===- CpuKernel.cpp - JIT-compiled CPU kernels of a neuron ---------------===//
//
// Part of the FlexSN project: an MLIR compiler for spiking-neuron dynamics.
//
//===----------------------------------------------------------------------===//

#include "flexsn/Runner/CpuKernel.h"
#include "flexsn/Dialect/FlexSN/IR/FlexSNOps.h"
#include "flexsn/Dialect/FlexSN/Utils/KernelFunctions.h"
#include "flexsn/Pipelines/Pipelines.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/ExecutionEngine/CRunnerUtils.h"
#include "mlir/ExecutionEngine/ExecutionEngine.h"
#include "mlir/ExecutionEngine/OptUtils.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Target/LLVMIR/Dialect/Builtin/BuiltinToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/LLVMIR/LLVMToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/OpenMP/OpenMPToLLVMIRTranslation.h"
#include "llvm/Support/TargetSelect.h"

#include <mutex>

using namespace mlir;
using namespace mlir::flexsn;

static llvm::Error makeError(const Twine &message) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), message);
}

llvm::Error mlir::flexsn::setParamDefault(NeuronOp neuron, StringRef name,
                                          TypedAttr value) {
  SmallVector<Attribute> params(neuron.getParams().getValue());
  for (Attribute &attr : params) {
    auto param = cast<ParamAttr>(attr);
    if (param.getName().getValue() != name)
      continue;
    if (param.getType() != value.getType())
      return makeError("parameter '" + name + "' of @" + neuron.getSymName() +
                       " is not of the value's type");
    attr = ParamAttr::get(neuron.getContext(), param.getName(), value,
                          param.getKind());
    neuron.setParamsAttr(ArrayAttr::get(neuron.getContext(), params));
    return llvm::Error::success();
  }
  return makeError("@" + neuron.getSymName() + " has no parameter '" + name +
                   "'");
}

llvm::Expected<std::unique_ptr<CpuKernel>>
CpuKernel::compile(ModuleOp module, StringRef neuronName, KernelVariant variant,
                   Type storageType, SpikeStorage spikes, bool perfListener,
                   bool saveInStorageType) {
  static std::once_flag initTargets;
  std::call_once(initTargets, [] {
    llvm::InitializeNativeTarget();
    llvm::InitializeNativeTargetAsmPrinter();
  });

  auto neuron = module.lookupSymbol<NeuronOp>(neuronName);
  if (!neuron)
    return makeError("no neuron named '" + neuronName + "'");
  std::string dtype;
  llvm::raw_string_ostream(dtype) << storageType;

  std::unique_ptr<CpuKernel> kernel(new CpuKernel());
  std::optional<StorageType> storage = symbolizeStorageType(dtype);
  if (!storage)
    return makeError("unknown storage type '" + dtype +
                     "'; expected f32, f16 or bf16");

  // Compile a copy: callers keep their module as it was.
  OwningOpRef<ModuleOp> copy = module.clone();
  MLIRContext *context = module.getContext();
  std::string diagnostics;
  ScopedDiagnosticHandler handler(context, [&](Diagnostic &diag) {
    llvm::raw_string_ostream(diagnostics) << diag << "\n";
    return success();
  });
  PassManager pm(context);
  LowerToCPUOptions options;
  options.variants = {variant};
  options.storageTypes = {*storage};
  options.spikeStorage = {spikes};
  options.neurons = {neuronName.str()};
  options.saveInStorageType = saveInStorageType;
#ifdef FLEXSN_SERIAL_JIT
  options.parallel = false;
#endif
  buildLowerToCPUPipeline(pm, options);
  if (failed(pm.run(*copy)))
    return makeError("lowering @" + neuronName + " to CPU code failed:\n" +
                     diagnostics);

  // The kernel's signature, as the lowering recorded it: the one of
  // `variant` named after the neuron (not a forward kernel's final-state
  // twin), stored as `storage`, its spike storage its only option.
  std::string name = getKernelName(neuronName, variant, *storage);
  if (auto kernels = (*copy)->getAttrOfType<ArrayAttr>("flexsn.cpu_kernels"))
    for (auto compiled : kernels.getAsRange<CompiledKernelAttr>()) {
      DictionaryAttr chosen = compiled.getSignature().getOptions();
      auto stored =
          chosen ? chosen.getAs<StringAttr>("spike_storage") : StringAttr();
      if (compiled.getName().getValue().starts_with(name) &&
          compiled.getSignature().getVariant() == variant &&
          (stored ? stored.getValue() : "dense") ==
              stringifySpikeStorage(spikes)) {
        kernel->functionName = compiled.getName().getValue().str();
        kernel->signature = compiled.getSignature();
      }
    }
  if (!kernel->signature ||
      !copy->lookupSymbol<LLVM::LLVMFuncOp>(kernel->functionName))
    return makeError("lowering produced no function @" + kernel->functionName);

  registerBuiltinDialectTranslation(*context);
  registerLLVMDialectTranslation(*context);
  registerOpenMPDialectTranslation(*context);
  ExecutionEngineOptions engineOptions;
  // The parallel loops call LLVM's OpenMP runtime.
  StringRef openmp = FLEXSN_OPENMP_LIBRARY;
  if (options.parallel)
    engineOptions.sharedLibPaths = ArrayRef<StringRef>(openmp);
  auto transformer = makeOptimizingTransformer(/*optLevel=*/2,
                                               /*sizeLevel=*/0, nullptr);
  engineOptions.transformer = transformer;
  // ExecutionEngine's default would leave a jitdump directory per kernel.
  engineOptions.enablePerfNotificationListener = perfListener;
  auto engine = ExecutionEngine::create(*copy, engineOptions);
  if (!engine)
    return engine.takeError();
  kernel->engine = std::move(*engine);
  return kernel;
}

CpuKernel::~CpuKernel() = default;

SmallVector<Type> CpuKernel::getParamTypes() const {
  return llvm::map_to_vector(signature.getParams(),
                             [](ParamAttr p) { return p.getType(); });
}

llvm::Error CpuKernel::run(ArrayRef<KernelBuffer> buffers,
                           ArrayRef<TypedAttr> params,
                           int32_t numThreads) const {
  SmallVector<Type> paramTypes = getParamTypes();
  if (params.size() != paramTypes.size())
    return makeError("expected " + Twine(paramTypes.size()) +
                     " runtime parameters, got " + Twine(params.size()));

  // Memref descriptors of the C interface, by rank (the element type does
  // not change the layout).
  SmallVector<StridedMemRefType<char, 0>> scalars0;
  SmallVector<StridedMemRefType<char, 1>> ranked1;
  SmallVector<StridedMemRefType<char, 2>> ranked2;
  SmallVector<StridedMemRefType<char, 3>> ranked3;
  SmallVector<StridedMemRefType<char, 4>> ranked4;
  scalars0.reserve(buffers.size());
  ranked1.reserve(buffers.size());
  ranked2.reserve(buffers.size());
  ranked3.reserve(buffers.size());
  ranked4.reserve(buffers.size());
  SmallVector<void *> descriptors;
  for (auto [i, buffer] : llvm::enumerate(buffers)) {
    char *data = static_cast<char *>(buffer.data);
    switch (buffer.shape.size()) {
    case 0:
      scalars0.push_back({data, data, 0});
      descriptors.push_back(&scalars0.back());
      break;
    case 1:
      ranked1.push_back({data, data, 0, {buffer.shape[0]}, {1}});
      descriptors.push_back(&ranked1.back());
      break;
    case 2:
      ranked2.push_back({data,
                         data,
                         0,
                         {buffer.shape[0], buffer.shape[1]},
                         {buffer.shape[1], 1}});
      descriptors.push_back(&ranked2.back());
      break;
    case 3: {
      ArrayRef<int64_t> s = buffer.shape;
      ranked3.push_back(
          {data, data, 0, {s[0], s[1], s[2]}, {s[1] * s[2], s[2], 1}});
      descriptors.push_back(&ranked3.back());
      break;
    }
    case 4: {
      ArrayRef<int64_t> s = buffer.shape;
      ranked4.push_back({data,
                         data,
                         0,
                         {s[0], s[1], s[2], s[3]},
                         {s[1] * s[2] * s[3], s[2] * s[3], s[3], 1}});
      descriptors.push_back(&ranked4.back());
      break;
    }
    default:
      return makeError("buffer #" + Twine(i) + " must have rank 0 to 4");
    }
  }
  ArrayRef<KernelBufferAttr> expected = signature.getBuffers();
  if (buffers.size() != expected.size())
    return makeError("expected " + Twine(expected.size()) + " buffers, got " +
                     Twine(buffers.size()));
  bool channels = signature.hasChannels();
  for (auto [i, buffer, spec] : llvm::enumerate(buffers, expected)) {
    size_t rank = getBufferType(spec, channels).getRank();
    if (buffer.shape.size() != rank)
      return makeError("buffer #" + Twine(i) + " ('" +
                       spec.getName().getValue() + "') must have rank " +
                       Twine(rank));
  }

  // Scalars are passed by address: f32 as float, i1 as one byte, i32.
  struct Scalar {
    float f32;
    int8_t i1;
    int32_t i32;
  };
  SmallVector<Scalar> values(params.size());
  SmallVector<void *> args;
  for (void *&descriptor : descriptors)
    args.push_back(&descriptor);
  for (auto [i, param, type] : llvm::enumerate(params, paramTypes)) {
    if (param.getType() != type)
      return makeError("runtime parameter #" + Twine(i) +
                       " has the wrong type");
    if (auto f = dyn_cast<FloatAttr>(param)) {
      values[i].f32 = f.getValue().convertToFloat();
      args.push_back(&values[i].f32);
    } else if (type.isInteger(1)) {
      values[i].i1 = cast<IntegerAttr>(param).getValue().getBoolValue();
      args.push_back(&values[i].i1);
    } else {
      values[i].i32 = cast<IntegerAttr>(param).getValue().getSExtValue();
      args.push_back(&values[i].i32);
    }
  }
  args.push_back(&numThreads);
  return engine->invokePacked("_mlir_ciface_" + functionName, args);
}
