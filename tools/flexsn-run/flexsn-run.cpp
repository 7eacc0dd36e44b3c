//===- flexsn-run.cpp - Run a neuron on the CPU ---------------------------===//
//
// Part of the FlexSN project: an MLIR compiler for spiking-neuron dynamics.
//
//===----------------------------------------------------------------------===//
//
// JIT-compiles one kernel variant of a neuron for the CPU and runs it on
// recorded input (.npy), modeled on IREE's iree-run-module:
//
//   flexsn-run FILE [--neuron=NAME] --variant=inference|final-state|train
//              --input=@x.npy... [--state=@v0.npy...] [--param=NAME=VALUE...]
//              [--param=NAME=@values.npy...]
//              [--grad-output=@g.npy...] [--grad-state=@g.npy...]
//              [--check-finite] [--enable-perf-listener] --output-dir=DIR
//
// Inputs are [T, N...], states [N...], all float32 or all float16. Writes
// out<k>.npy, then state_seq<k>.npy (inference, train) or final_state<k>.npy
// (final-state); train also runs the backward kernel and writes
// grad_in<k>.npy, grad_init<k>.npy and grad_param_<name>.npy. A per_neuron
// parameter takes one VALUE for every neuron, or a float32 [N...] .npy file;
// its gradient has the neuron shape. A neuron with per_channel parameters
// takes inputs [T, B, C, ...] (the channel is dimension 2); such a
// parameter takes one VALUE for every channel, or a float32 [C] file, and
// its gradient is [C]. Every argument is checked before anything is
// written: a parameter given twice, a value float32 cannot hold, 0 for a
// parameter the neuron divides by, and inputs of more than 32 dimensions
// (numpy before 2.0 could not load the results) are errors. A run whose
// results hold a NaN or an infinity while everything it read was finite
// (a parameter outside the neuron's domain) is an error too, and writes
// nothing (--check-finite reports such values and writes the results).
//
//===----------------------------------------------------------------------===//

#include "flexsn/Dialect/FlexSN/IR/FlexSNOps.h"
#include "flexsn/Runner/CpuKernel.h"
#include "flexsn/Runner/Npy.h"
#include "flexsn/Tools/ParserHazards.h"
#include "flexsn/Tools/Registration.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Support/FileUtilities.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/WithColor.h"

#include <cmath>
#include <cstring>

using namespace mlir;
using namespace mlir::flexsn;
namespace cl = llvm::cl;

static cl::OptionCategory runCategory("flexsn-run options");

static cl::opt<std::string> inputFile(cl::Positional, cl::Required,
                                      cl::desc("<neuron file>"),
                                      cl::cat(runCategory));
static cl::opt<std::string>
    neuronName("neuron",
               cl::desc("Neuron to run (optional if the file holds "
                        "one neuron)"),
               cl::cat(runCategory));
static cl::opt<std::string>
    variantName("variant", cl::Required,
                cl::desc("inference, final-state, or train (forward then "
                         "backward)"),
                cl::cat(runCategory));
static cl::list<std::string>
    inputFlags("input",
               cl::desc("@file.npy of one input sequence [T, N...], "
                        "in declaration order"),
               cl::cat(runCategory));
static cl::list<std::string>
    stateFlags("state",
               cl::desc("@file.npy of one initial state [N...], in "
                        "declaration order (absent: zeros)"),
               cl::cat(runCategory));
static cl::list<std::string>
    paramFlags("param", cl::desc("NAME=VALUE overriding a parameter default"),
               cl::cat(runCategory));
static cl::list<std::string>
    gradOutputFlags("grad-output",
                    cl::desc("train: @file.npy of the gradient of one output "
                             "sequence, in order (absent: zeros)"),
                    cl::cat(runCategory));
static cl::list<std::string>
    gradStateFlags("grad-state",
                   cl::desc("train: @file.npy of the gradient of one state "
                            "sequence, in order (absent: zeros)"),
                   cl::cat(runCategory));
static cl::opt<std::string>
    spikeStorageName("spike-storage", cl::init("dense"),
                     cl::desc("inference, final-state: dense (spike outputs "
                              "in the inputs' dtype), u8 (uint8 0/1) or bits "
                              "(uint8 [T, ceil(N/8)], 8 spikes per byte)"),
                     cl::cat(runCategory));
static cl::opt<bool> saveInStorageType(
    "save-in-storage-type", cl::init(true),
    cl::desc("train: f16 kernels save what the backward reads in f16 "
             "(rounded so that the backward's spikes are the forward's); "
             "false: in f32"),
    cl::cat(runCategory));
static cl::opt<int> numThreads(
    "num-threads", cl::init(0),
    cl::desc("Threads running the neurons (0: OpenMP's default, "
             "OMP_NUM_THREADS or every core); the results are bitwise the "
             "same for any count"),
    cl::cat(runCategory));
static cl::opt<bool>
    checkFinite("check-finite",
                cl::desc("Report the first NaN or infinity of every input, "
                         "state, gradient and result; exit 1 if any"),
                cl::cat(runCategory));
static cl::opt<bool> enablePerfListener(
    "enable-perf-listener",
    cl::desc("Tell perf about the JIT-compiled kernels (writes a jitdump "
             "directory under $JITDUMPDIR, else $TMPDIR, /.debug/jit)"),
    cl::cat(runCategory));
static cl::opt<std::string> outputDir("output-dir", cl::Required,
                                      cl::desc("Directory for the results"),
                                      cl::cat(runCategory));

namespace {
[[noreturn]] void fail(const Twine &message) {
  llvm::WithColor::error(llvm::errs(), "flexsn-run") << message << "\n";
  std::exit(1);
}

/// Reads `@path` (the '@' says "from a file").
NpyArray readNpyFlag(StringRef flag, StringRef value, unsigned index) {
  std::string what = ("--" + flag + " #" + Twine(index)).str();
  if (!value.consume_front("@"))
    fail(what + ": expected @file.npy, got '" + value + "'");
  llvm::Expected<NpyArray> array = readNpy(value);
  if (!array)
    fail(what + ": " + llvm::toString(array.takeError()));
  return std::move(*array);
}

std::string shapeString(ArrayRef<int64_t> shape) {
  std::string text = "(";
  llvm::raw_string_ostream os(text);
  llvm::interleaveComma(shape, os);
  os << (shape.size() == 1 ? ",)" : ")");
  return text;
}

/// Parses VALUE for a parameter of `type`: a float, true/false/1/0, or an
/// integer.
TypedAttr parseParamValue(Builder &b, Type type, StringRef name,
                          StringRef text) {
  if (type.isF32()) {
    double value;
    if (text.trim().getAsDouble(value) || !std::isfinite(value))
      fail("--param " + name + ": expected a finite number, got '" + text +
           "'");
    // The kernels compute in float32: a value it rounds to infinity or to
    // 0 is not the value asked for.
    llvm::APFloat f32(value);
    bool losesInfo;
    llvm::APFloat::opStatus status =
        f32.convert(llvm::APFloat::IEEEsingle(),
                    llvm::APFloat::rmNearestTiesToEven, &losesInfo);
    if (status & llvm::APFloat::opOverflow)
      fail("--param " + name + ": " + text +
           " is beyond float32's range (at most 3.4028235e+38 in magnitude)");
    if (f32.isZero() && value != 0)
      fail("--param " + name + ": " + text +
           " rounds to 0 in float32 (the smallest magnitude is 1.4e-45)");
    return b.getF32FloatAttr(f32.convertToFloat());
  }
  if (type.isInteger(1)) {
    std::optional<bool> value = llvm::StringSwitch<std::optional<bool>>(text)
                                    .Cases({"true", "1"}, true)
                                    .Cases({"false", "0"}, false)
                                    .Default(std::nullopt);
    if (!value)
      fail("--param " + name + ": expected true, false, 1 or 0, got '" + text +
           "'");
    return b.getBoolAttr(*value);
  }
  int32_t value;
  if (text.getAsInteger(10, value))
    fail("--param " + name + ": expected a 32-bit integer, got '" + text + "'");
  return b.getI32IntegerAttr(value);
}

struct Result {
  std::string fileName;
  NpyArray array;
};

/// "index (i, j, ...) = nan" for the first NaN or infinity of a float
/// array, in row-major order; nothing if all are finite.
std::optional<std::string> firstNonFinite(const NpyArray &array) {
  int64_t count = array.getNumElements();
  for (int64_t i = 0; i < count; ++i) {
    bool finite = true, nan = false, negative = false;
    if (array.dtype == NpyDType::F32) {
      float value;
      std::memcpy(&value, array.bytes.data() + 4 * i, 4);
      finite = std::isfinite(value);
      nan = std::isnan(value);
      negative = std::signbit(value);
    } else if (array.dtype == NpyDType::F16) {
      uint16_t bits;
      std::memcpy(&bits, array.bytes.data() + 2 * i, 2);
      finite = (bits & 0x7c00) != 0x7c00;
      nan = !finite && (bits & 0x3ff);
      negative = bits & 0x8000;
    }
    if (finite)
      continue;
    SmallVector<int64_t> index(array.shape.size());
    for (int64_t d = index.size() - 1, rest = i; d >= 0; --d) {
      index[d] = rest % array.shape[d];
      rest /= array.shape[d];
    }
    return "index " + shapeString(index) + " = " +
           (nan        ? "nan"
            : negative ? "-inf"
                       : "inf");
  }
  return std::nullopt;
}

/// Whether every element of a float array is finite (any other array is).
bool allFinite(const NpyArray &array) {
  return !firstNonFinite(array).has_value();
}

/// A new array of `dtype` and `shape`, zero-filled.
NpyArray makeArray(NpyDType dtype, ArrayRef<int64_t> shape) {
  NpyArray array;
  array.dtype = dtype;
  array.shape.assign(shape.begin(), shape.end());
  array.bytes.resize(array.getNumElements() * getElementSize(array.dtype));
  return array;
}

/// A null pointer marks an absent buffer, and std::vector::data() of an
/// empty array may be null: empty arrays get a valid address.
void *dataOf(NpyArray &array) {
  static uint8_t emptyStorage;
  return array.bytes.empty() ? &emptyStorage : array.bytes.data();
}

/// One run: the neuron, what the flags give, the kernels' results. Each
/// step checks what it reads and fails (exit 1) before anything is written.
class Run {
public:
  explicit Run(ModuleOp module)
      : module(module), builder(module.getContext()) {}

  void selectNeuron();
  void checkModes();
  void readSequences();
  void readParams();
  void fillParams();
  void runKernels();
  void checkResultsFinite();
  bool reportNonFinite();
  void writeResults();

private:
  void checkDivisors();
  SmallVector<KernelBuffer> forwardBuffers(CpuKernel &kernel);
  void runBackward(CpuKernel &backward);
  NpyArray &addResult(std::string name, ArrayRef<int64_t> shape,
                      NpyDType dtype) {
    results.push_back({std::move(name), makeArray(dtype, shape)});
    return results.back().array;
  }
  /// The kernels' shape of an array of the sequences' or the neurons'.
  ArrayRef<int64_t> kernelShapeOf(const NpyArray &array) const {
    return array.shape.size() == seqShape.size() ? sequence : perNeuron;
  }

  ModuleOp module;
  Builder builder;
  NeuronOp neuron;
  bool train = false;
  SpikeStorage spikes = SpikeStorage::Dense;
  KernelVariant variant = KernelVariant::Inference;
  unsigned numInputs = 0, numStates = 0, numOutputs = 0;
  SmallVector<NpyArray> inputs, states, gradOutputs, gradStates;
  /// The sequences' [T, N...] and the neurons' [N...] shapes.
  SmallVector<int64_t> seqShape, neuronShape;
  /// A neuron with per-channel parameters sees its neurons as [B, C, S].
  bool channels = false;
  SmallVector<int64_t, 4> channelShape;
  int64_t numNeurons = 1;
  /// The kernels' shapes: [T, N] and [N], or [T, B, C, S] and [B, C, S].
  SmallVector<int64_t, 4> sequence, perNeuron;
  llvm::StringMap<TypedAttr> runtimeValues;
  llvm::StringMap<NpyArray> perNeuronValues;
  llvm::StringMap<StringRef> givenParams; // name -> its --param
  SmallVector<TypedAttr> runtimeParams;
  SmallVector<KernelBuffer> paramBuffers;
  /// The training forward's workspace of saved [T, N] sequences.
  SmallVector<NpyArray> saved;
  SmallVector<Result> results;
};

void Run::selectNeuron() {
  SmallVector<NeuronOp> neurons(module.getOps<NeuronOp>());
  if (neuronName.empty()) {
    if (neurons.size() != 1)
      fail("--neuron: " + inputFile + " holds " + Twine(neurons.size()) +
           " neurons; name one");
    neuron = neurons.front();
  } else if (!(neuron = module.lookupSymbol<NeuronOp>(neuronName))) {
    fail("--neuron: no neuron named '" + neuronName + "' in " + inputFile);
  }
  numInputs = neuron.getNumInputs();
  numStates = neuron.getNumStates();
  numOutputs = neuron.getNumOutputs();
}

/// --variant, --spike-storage and the gradients' flags.
void Run::checkModes() {
  train = variantName == "train";
  std::optional<SpikeStorage> storage = symbolizeSpikeStorage(spikeStorageName);
  if (!storage)
    fail("--spike-storage: expected dense, u8 or bits, got '" +
         spikeStorageName + "'");
  spikes = *storage;
  if (train && spikes != SpikeStorage::Dense)
    fail("--spike-storage=" + spikeStorageName +
         ": training outputs carry gradients, so they stay in the inputs' "
         "dtype");
  // "train" runs the forward kernel, then the backward kernel.
  std::optional<KernelVariant> chosen =
      train ? KernelVariant::Forward : symbolizeKernelVariant(variantName);
  if (!chosen || (!train && (*chosen == KernelVariant::Forward ||
                             *chosen == KernelVariant::Backward)))
    fail("--variant: expected inference, final-state or train, got '" +
         variantName + "'");
  variant = *chosen;
  if (!train && (!gradOutputFlags.empty() || !gradStateFlags.empty()))
    fail(Twine(gradOutputFlags.empty() ? "--grad-state" : "--grad-output") +
         ": gradients are for --variant=train");
  if (train && gradOutputFlags.empty() && gradStateFlags.empty())
    llvm::WithColor::warning(llvm::errs(), "flexsn-run")
        << "--variant=train without --grad-output or --grad-state: every "
           "incoming gradient is zero, so every gradient written is zero\n";
}

/// Inputs, initial states and incoming gradients.
void Run::readSequences() {
  if (inputFlags.size() != numInputs)
    fail("--input: @" + neuron.getSymName() + " takes " + Twine(numInputs) +
         " input sequence(s), got " + Twine(inputFlags.size()));
  if (!stateFlags.empty() && stateFlags.size() != numStates)
    fail("--state: @" + neuron.getSymName() + " has " + Twine(numStates) +
         " state(s), got " + Twine(stateFlags.size()) + " (give all or none)");
  for (auto [i, flag] : llvm::enumerate(inputFlags))
    inputs.push_back(readNpyFlag("input", flag, i));
  for (auto [i, flag] : llvm::enumerate(stateFlags))
    states.push_back(readNpyFlag("state", flag, i));

  const NpyArray &first = inputs.front();
  if (first.dtype == NpyDType::U8)
    fail("--input #0: sequences must be float32 or float16, got uint8");
  if (first.shape.empty())
    fail("--input #0: expected a [T, N...] sequence, got a scalar");
  // The kernels flatten any neuron shape, but numpy before 2.0 loads at most
  // 32 dimensions: results of more could not be read back.
  constexpr size_t kMaxDims = 32;
  if (first.shape.size() > kMaxDims)
    fail("--input #0: " + Twine(first.shape.size()) +
         " dimensions; a sequence [T, N...] has at most " + Twine(kMaxDims) +
         " (numpy before 2.0 cannot load more)");
  seqShape.assign(first.shape.begin(), first.shape.end());
  neuronShape.assign(seqShape.begin() + 1, seqShape.end());
  for (auto [i, input] : llvm::enumerate(inputs)) {
    if (input.dtype != first.dtype)
      fail("--input #" + Twine(i) + ": dtype " + getDTypeName(input.dtype) +
           " differs from --input #0's " + getDTypeName(first.dtype));
    if (ArrayRef<int64_t>(input.shape) != ArrayRef<int64_t>(seqShape))
      fail("--input #" + Twine(i) + ": shape " + shapeString(input.shape) +
           " differs from --input #0's " + shapeString(seqShape));
  }
  // Incoming gradients (train): like the sequences they belong to.
  if (!gradOutputFlags.empty() && gradOutputFlags.size() != numOutputs)
    fail("--grad-output: @" + neuron.getSymName() + " has " +
         Twine(numOutputs) + " output(s), got " +
         Twine(gradOutputFlags.size()) + " (give all or none)");
  if (!gradStateFlags.empty() && gradStateFlags.size() != numStates)
    fail("--grad-state: @" + neuron.getSymName() + " has " + Twine(numStates) +
         " state(s), got " + Twine(gradStateFlags.size()) +
         " (give all or none)");
  for (auto [flags, arrays, name] :
       {std::make_tuple(&gradOutputFlags, &gradOutputs, "grad-output"),
        std::make_tuple(&gradStateFlags, &gradStates, "grad-state")})
    for (auto [i, flag] : llvm::enumerate(*flags)) {
      arrays->push_back(readNpyFlag(name, flag, i));
      const NpyArray &grad = arrays->back();
      if (grad.dtype != first.dtype ||
          ArrayRef<int64_t>(grad.shape) != ArrayRef<int64_t>(seqShape))
        fail("--" + Twine(name) + " #" + Twine(i) + ": expected " +
             getDTypeName(first.dtype) + shapeString(seqShape) + ", got " +
             getDTypeName(grad.dtype) + shapeString(grad.shape));
    }

  for (auto [i, state] : llvm::enumerate(states)) {
    if (state.dtype != first.dtype)
      fail("--state #" + Twine(i) + ": dtype " + getDTypeName(state.dtype) +
           " differs from the inputs' " + getDTypeName(first.dtype));
    if (ArrayRef<int64_t>(state.shape) != ArrayRef<int64_t>(neuronShape))
      fail("--state #" + Twine(i) + ": shape " + shapeString(state.shape) +
           " must be the inputs' neuron shape " + shapeString(neuronShape));
  }

  channels = llvm::any_of(neuron.getRuntimeParamAttrs(),
                          [](ParamAttr p) { return p.isPerChannel(); });
  if (channels && seqShape.size() < 3)
    fail("--input #0: @" + neuron.getSymName() +
         " has per_channel parameters, so its inputs are [T, B, C, ...] (the "
         "channel is dimension 2), got " +
         shapeString(seqShape));
  if (channels)
    channelShape.push_back(seqShape[2]);
  for (int64_t d : neuronShape)
    numNeurons *= d;
  sequence = {seqShape.front(), numNeurons};
  perNeuron = {numNeurons};
  if (channels) {
    int64_t batch = seqShape[1], numChannels = seqShape[2], size = 1;
    for (int64_t d : ArrayRef<int64_t>(seqShape).drop_front(3))
      size *= d;
    perNeuron = {batch, numChannels, size};
    sequence = {seqShape.front(), batch, numChannels, size};
  }
}

/// --param: const ones are specialized, runtime ones are arguments
/// (per_neuron ones: [N...] float32 arrays; per_channel ones: [C]).
void Run::readParams() {
  for (StringRef flag : paramFlags) {
    auto [name, value] = flag.split('=');
    if (!flag.contains('='))
      fail("--param: expected NAME=VALUE, got '" + flag + "'");
    auto params = neuron.getParamAttrs();
    auto *it = llvm::find_if(
        params, [&](ParamAttr p) { return p.getName().getValue() == name; });
    if (it == params.end())
      fail("--param: @" + neuron.getSymName() + " has no parameter '" + name +
           "'");
    auto [previous, inserted] = givenParams.try_emplace(name, flag);
    if (!inserted)
      fail("--param " + name + ": given twice ('" + previous->second +
           "' and '" + flag + "'); give each parameter once");
    if (value.starts_with("@")) {
      if (!it->isShaped())
        fail("--param " + name +
             ": an array is for per_neuron and per_channel parameters; '" +
             name + "' is a scalar");
      NpyArray array = readNpyFlag(("param " + name).str(), value, 0);
      ArrayRef<int64_t> expected = it->isPerNeuron()
                                       ? ArrayRef<int64_t>(neuronShape)
                                       : ArrayRef<int64_t>(channelShape);
      if (array.dtype != NpyDType::F32 ||
          ArrayRef<int64_t>(array.shape) != expected)
        fail("--param " + name + ": expected float32" + shapeString(expected) +
             (it->isPerNeuron() ? " (the neuron shape)"
                                : " (one value per channel)") +
             ", got " + getDTypeName(array.dtype) + shapeString(array.shape));
      perNeuronValues[name] = std::move(array);
      continue;
    }
    TypedAttr attr = parseParamValue(builder, it->getType(), name, value);
    if (it->isRuntime())
      runtimeValues[name] = attr;
    else if (llvm::Error error = setParamDefault(neuron, name, attr))
      fail("--param: " + llvm::toString(std::move(error)));
  }
  checkDivisors();
}

/// A parameter the body divides by cannot be 0: every result would be a
/// NaN or an infinity (LIF's tau).
void Run::checkDivisors() {
  for (auto [arg, param] :
       llvm::zip_equal(neuron.getParamArgs(), neuron.getParamAttrs())) {
    StringRef name = param.getName().getValue();
    if (!param.getType().isF32() || perNeuronValues.count(name))
      continue;
    TypedAttr value = runtimeValues.lookup(name) ?: param.getDefaultValue();
    if (!cast<FloatAttr>(value).getValue().isZero())
      continue;
    bool divisor = llvm::any_of(arg.getUsers(), [&](Operation *user) {
      return isa<arith::DivFOp, arith::RemFOp>(user) &&
             user->getOperand(1) == arg;
    });
    if (divisor)
      fail("--param " + name + ": @" + neuron.getSymName() + " divides by '" +
           name + "', which must not be 0" +
           (givenParams.count(name) ? "" : " (its default is 0)"));
  }
}

/// The runtime parameters' values: scalars in order; a shaped one not
/// given as an array gets its one value for every neuron (channel).
void Run::fillParams() {
  for (ParamAttr param : neuron.getRuntimeParamAttrs()) {
    StringRef name = param.getName().getValue();
    TypedAttr value = runtimeValues.lookup(name) ?: param.getDefaultValue();
    if (!param.isShaped()) {
      runtimeParams.push_back(value);
      continue;
    }
    if (perNeuronValues.count(name))
      continue;
    NpyArray array = makeArray(
        NpyDType::F32, param.isPerNeuron() ? ArrayRef<int64_t>(neuronShape)
                                           : ArrayRef<int64_t>(channelShape));
    float element = cast<FloatAttr>(value).getValue().convertToFloat();
    for (int64_t n = 0, count = array.getNumElements(); n < count; ++n)
      std::memcpy(array.bytes.data() + 4 * n, &element, 4);
    perNeuronValues[name] = std::move(array);
  }
  // Every kernel takes the shaped parameters after its other buffers.
  for (ParamAttr param : neuron.getRuntimeParamAttrs())
    if (param.isShaped())
      paramBuffers.push_back(
          {dataOf(perNeuronValues[param.getName().getValue()]),
           param.isPerNeuron() ? perNeuron : channelShape});
}

/// Compiles and runs the kernel (train: the forward, then the backward).
void Run::runKernels() {
  NpyDType dtype = inputs.front().dtype;
  Type storageType = dtype == NpyDType::F32 ? Type(builder.getF32Type())
                                            : Type(builder.getF16Type());
  auto compile = [&](KernelVariant v) {
    auto kernel =
        CpuKernel::compile(module, neuron.getSymName(), v, storageType,
                           train ? SpikeStorage::Dense : spikes,
                           enablePerfListener, saveInStorageType);
    if (!kernel)
      fail(llvm::toString(kernel.takeError()));
    return std::move(*kernel);
  };
  std::unique_ptr<CpuKernel> kernel = compile(variant);
  std::unique_ptr<CpuKernel> backward;
  if (train)
    backward = compile(KernelVariant::Backward);
  results.reserve(2 * (numOutputs + numStates) + numInputs +
                  neuron.getNumParams());
  SmallVector<KernelBuffer> buffers = forwardBuffers(*kernel);
  if (llvm::Error error = kernel->run(buffers, runtimeParams, numThreads))
    fail(llvm::toString(std::move(error)));
  if (train)
    runBackward(*backward);
}

/// The forward kernel's results, and its buffers: inputs, initial states,
/// outputs, states, saved values (training), shaped parameters.
SmallVector<KernelBuffer> Run::forwardBuffers(CpuKernel &kernel) {
  NpyDType dtype = inputs.front().dtype;
  int64_t numSteps = seqShape.front();
  bool finalStates = variant == KernelVariant::FinalState;
  // Output k in its kernel buffer's dtype: bytes for spikes stored as u8;
  // for spikes stored as bits, [T, ceil(N / 8)] bytes (N flattens the
  // neuron dimensions), numpy.packbits(axis=-1, bitorder="little") of the
  // [T, N] spikes.
  SmallVector<KernelBufferAttr> outputBuffers = llvm::filter_to_vector(
      kernel.getSignature().getBuffers(), [](KernelBufferAttr b) {
        return b.getRole() == BufferRole::OutputSequence;
      });
  for (unsigned k = 0; k < numOutputs; ++k) {
    Type element = outputBuffers[k].getElementType();
    SmallVector<int64_t> shape(seqShape);
    if (element.isInteger(1))
      shape = {numSteps, int64_t(llvm::divideCeil(numNeurons, 8))};
    addResult("out" + std::to_string(k) + ".npy", shape,
              element.isInteger(8) || element.isInteger(1) ? NpyDType::U8
                                                           : dtype);
  }
  for (unsigned s = 0; s < numStates; ++s)
    addResult((finalStates ? "final_state" : "state_seq") + std::to_string(s) +
                  ".npy",
              finalStates ? ArrayRef<int64_t>(neuronShape)
                          : ArrayRef<int64_t>(seqShape),
              dtype);

  SmallVector<KernelBuffer> buffers;
  for (NpyArray &input : inputs)
    buffers.push_back({dataOf(input), sequence});
  for (unsigned s = 0; s < numStates; ++s)
    buffers.push_back(
        {states.empty() ? nullptr : dataOf(states[s]), perNeuron});
  // The outputs are sequences (packed bits too), then come the states.
  for (auto [i, result] : llvm::enumerate(results))
    buffers.push_back({dataOf(result.array),
                       SmallVector<int64_t, 4>(
                           i < numOutputs ? ArrayRef<int64_t>(sequence)
                                          : kernelShapeOf(result.array))});
  // Training: the workspace of saved [T, N] sequences (2-byte ones hold
  // the storage type's bits, whatever their NpyDType says).
  for (KernelBufferAttr buffer : kernel.getSignature().getBuffers())
    if (buffer.getRole() == BufferRole::SavedOutput)
      saved.push_back(makeArray(buffer.getElementType().isF32() ? NpyDType::F32
                                                                : NpyDType::F16,
                                seqShape));
  for (NpyArray &array : saved)
    buffers.push_back({dataOf(array), sequence});
  llvm::append_range(buffers, paramBuffers);
  return buffers;
}

/// Backward: incoming gradients, saved values, re-read inputs, final-state
/// gradients (none), then the gradients it writes.
void Run::runBackward(CpuKernel &backward) {
  NpyDType dtype = inputs.front().dtype;
  SmallVector<KernelBuffer> grads;
  for (unsigned k = 0; k < numOutputs; ++k)
    grads.push_back(
        {gradOutputs.empty() ? nullptr : dataOf(gradOutputs[k]), sequence});
  for (unsigned s = 0; s < numStates; ++s)
    grads.push_back(
        {gradStates.empty() ? nullptr : dataOf(gradStates[s]), sequence});
  for (NpyArray &array : saved)
    grads.push_back({dataOf(array), sequence});
  // The inputs it reads again, named after the neuron's inputs.
  auto inputNames =
      llvm::to_vector(neuron.getInputNames().getAsValueRange<StringAttr>());
  for (KernelBufferAttr buffer : backward.getSignature().getBuffers())
    if (buffer.getRole() == BufferRole::InputSequence)
      grads.push_back(
          {dataOf(inputs[llvm::find(inputNames, buffer.getName().getValue()) -
                         inputNames.begin()]),
           sequence});
  for (unsigned s = 0; s < numStates; ++s)
    grads.push_back({nullptr, perNeuron});
  for (unsigned i = 0; i < numInputs; ++i)
    grads.push_back({dataOf(addResult("grad_in" + std::to_string(i) + ".npy",
                                      seqShape, dtype)),
                     sequence});
  for (unsigned s = 0; s < numStates; ++s)
    grads.push_back({dataOf(addResult("grad_init" + std::to_string(s) + ".npy",
                                      neuronShape, dtype)),
                     perNeuron});
  llvm::append_range(grads, paramBuffers);
  for (ParamAttr param : neuron.getRuntimeParamAttrs()) {
    if (param.getKind() != ParamKind::Trainable)
      continue;
    ArrayRef<int64_t> shape = param.isPerNeuron()    ? neuronShape
                              : param.isPerChannel() ? channelShape
                                                     : ArrayRef<int64_t>();
    grads.push_back(
        {dataOf(addResult(
             ("grad_param_" + param.getName().getValue() + ".npy").str(), shape,
             NpyDType::F32)),
         param.isPerNeuron()    ? perNeuron
         : param.isPerChannel() ? channelShape
                                : SmallVector<int64_t, 4>()});
  }
  if (llvm::Error error = backward.run(grads, runtimeParams, numThreads))
    fail(llvm::toString(std::move(error)));
}

/// Finite inputs, states, gradients and parameters giving a NaN or an
/// infinity: a parameter is outside the neuron's domain (or a value
/// overflows the storage type). An error, unless --check-finite asks for
/// the report and the results.
void Run::checkResultsFinite() {
  bool finiteInputs =
      llvm::all_of(inputs, allFinite) && llvm::all_of(states, allFinite) &&
      llvm::all_of(gradOutputs, allFinite) &&
      llvm::all_of(gradStates, allFinite) &&
      llvm::all_of(perNeuronValues,
                   [](const auto &entry) { return allFinite(entry.second); });
  for (Result &result : results) {
    std::optional<std::string> where = firstNonFinite(result.array);
    if (!finiteInputs || !where)
      continue;
    std::string given = paramFlags.empty()
                            ? std::string("the parameters' defaults")
                            : "--param " + llvm::join(paramFlags, " --param ");
    fail(result.fileName + ": " + *where +
         " from finite inputs and parameters: a parameter may be outside "
         "the neuron's domain (" +
         given +
         "); nothing was written (--check-finite writes the results and "
         "reports every such value)");
  }
}

/// --check-finite: warns of every array read or written holding a NaN or
/// an infinity; whether one did.
bool Run::reportNonFinite() {
  unsigned bad = 0;
  auto check = [&](const Twine &what, const NpyArray &array) {
    if (std::optional<std::string> where = firstNonFinite(array)) {
      llvm::WithColor::warning(llvm::errs(), "flexsn-run")
          << "--check-finite: " << what << ": " << *where << "\n";
      ++bad;
    }
  };
  for (auto [i, array] : llvm::enumerate(inputs))
    check("--input #" + Twine(i), array);
  for (auto [i, array] : llvm::enumerate(states))
    check("--state #" + Twine(i), array);
  for (auto [i, array] : llvm::enumerate(gradOutputs))
    check("--grad-output #" + Twine(i), array);
  for (auto [i, array] : llvm::enumerate(gradStates))
    check("--grad-state #" + Twine(i), array);
  for (Result &result : results)
    check(result.fileName, result.array);
  return bad != 0;
}

/// Writes every result, or none.
void Run::writeResults() {
  if (std::error_code ec = llvm::sys::fs::create_directories(outputDir))
    fail("--output-dir: cannot create '" + outputDir + "': " + ec.message());
  SmallVector<std::string> written;
  for (Result &result : results) {
    SmallString<256> path(outputDir);
    llvm::sys::path::append(path, result.fileName);
    if (llvm::Error error = writeNpy(path, result.array)) {
      for (const std::string &done : written)
        llvm::sys::fs::remove(done);
      fail("--output-dir: " + llvm::toString(std::move(error)));
    }
    written.push_back(path.str().str());
    llvm::outs() << "wrote " << path << " " << getDTypeName(result.array.dtype)
                 << shapeString(result.array.shape) << "\n";
  }
}
} // namespace

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  configureTool("flexsn-run");
  // --help shows flexsn-run's options; LLVM's and MLIR's stay reachable
  // through --help-hidden.
  for (auto &option : cl::getRegisteredOptions())
    if (!llvm::is_contained(option.second->Categories, &runCategory) &&
        option.first != "help" && option.first != "version")
      option.second->setHiddenFlag(cl::Hidden);
  cl::ParseCommandLineOptions(
      argc, argv,
      "FlexSN: run a neuron on the CPU\n\n"
      "  (LLVM's and MLIR's own options: --help-hidden)\n");

  DialectRegistry registry;
  registerAllDialects(registry);
  MLIRContext context(registry);
  // Diagnostics of the file go to stderr with their locations.
  std::string openError;
  std::unique_ptr<llvm::MemoryBuffer> file =
      openInputFile(inputFile, &openError);
  if (!file)
    fail("cannot load neuron file: " + openError);
  llvm::SourceMgr sourceMgr;
  sourceMgr.AddNewSourceBuffer(std::move(file), llvm::SMLoc());
  SourceMgrDiagnosticHandler diagHandler(sourceMgr, &context);
  OwningOpRef<ModuleOp> module;
  if (succeeded(checkParserHazards(sourceMgr, &context)))
    module = parseSourceFile<ModuleOp>(sourceMgr, &context);
  if (!module)
    fail("cannot load neuron file '" + inputFile + "'");

  Run run(*module);
  run.selectNeuron();
  run.checkModes();
  run.readSequences();
  run.readParams();
  run.fillParams();
  run.runKernels();
  if (!checkFinite)
    run.checkResultsFinite();
  bool nonFinite = checkFinite && run.reportNonFinite();
  run.writeResults();
  return nonFinite ? 1 : 0;
}
