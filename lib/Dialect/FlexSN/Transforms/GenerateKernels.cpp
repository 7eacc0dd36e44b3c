//===- GenerateKernels.cpp - Kernel variants of each neuron ---------------===//
//
// Part of the FlexSN project: an MLIR compiler for spiking-neuron dynamics.
//
//===----------------------------------------------------------------------===//

#include "flexsn/Dialect/FlexSN/IR/FlexSNOps.h"
#include "flexsn/Dialect/FlexSN/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringSet.h"

namespace mlir::flexsn {
#define GEN_PASS_DEF_FLEXSNGENERATEKERNELS
#include "flexsn/Dialect/FlexSN/Transforms/Passes.h.inc"
} // namespace mlir::flexsn

using namespace mlir;
using namespace mlir::flexsn;

namespace {

enum class Variant { Inference, FinalState };

struct KernelRequest {
  Variant variant;
  StringRef variantName; // as spelled in the option and attribute
  Type storageType;
  StringRef storageName;
};

/// Builds `@<neuron>_<variant>_<dtype>`: the ABI arguments, then one scan.
func::FuncOp buildKernel(OpBuilder &builder, NeuronOp neuron,
                         const KernelRequest &request) {
  Location loc = neuron.getLoc();
  Type dtype = request.storageType;
  auto sequence =
      MemRefType::get({ShapedType::kDynamic, ShapedType::kDynamic}, dtype);
  auto perNeuron = MemRefType::get({ShapedType::kDynamic}, dtype);
  bool finalStates = request.variant == Variant::FinalState;
  SmallVector<ParamAttr> runtimeParams = neuron.getRuntimeParamAttrs();

  SmallVector<Type> argTypes;
  argTypes.append(neuron.getNumInputs(), sequence);
  argTypes.append(neuron.getNumStates(), perNeuron);
  argTypes.append(neuron.getNumOutputs(), sequence);
  argTypes.append(neuron.getNumStates(), finalStates ? perNeuron : sequence);
  for (ParamAttr param : runtimeParams)
    argTypes.push_back(param.getType());

  std::string name = (neuron.getSymName() + "_" + request.variantName + "_" +
                      request.storageName)
                         .str();
  std::replace(name.begin(), name.end(), '-', '_');
  auto func = func::FuncOp::create(builder, loc, name,
                                   builder.getFunctionType(argTypes, {}));
  func->setAttr("flexsn.neuron", neuron.getSymNameAttr());
  func->setAttr("flexsn.variant", builder.getStringAttr(request.variantName));

  Block *entry = func.addEntryBlock();
  OpBuilder body = OpBuilder::atBlockBegin(entry);
  ValueRange args = entry->getArguments();
  unsigned numInputs = neuron.getNumInputs(), numStates = neuron.getNumStates(),
           numOutputs = neuron.getNumOutputs();
  ValueRange inputs = args.take_front(numInputs);
  ValueRange inits = args.slice(numInputs, numStates);
  ValueRange outputs = args.slice(numInputs + numStates, numOutputs);
  ValueRange states = args.slice(numInputs + numStates + numOutputs, numStates);
  ValueRange params = args.drop_front(numInputs + 2 * numStates + numOutputs);
  // A stateless neuron's final-state variant has no states to write.
  ScanOp::create(body, loc, FlatSymbolRefAttr::get(neuron.getSymNameAttr()),
                 inputs, inits, params, outputs, states,
                 /*reductions=*/ValueRange(), finalStates && numStates != 0,
                 /*reverse=*/false, /*optional_inputs=*/DenseI64ArrayAttr());
  func::ReturnOp::create(body, loc);
  return func;
}

struct GenerateKernelsPass
    : flexsn::impl::FlexSNGenerateKernelsBase<GenerateKernelsPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    MLIRContext *ctx = &getContext();

    SmallVector<KernelRequest> requests;
    SmallVector<std::string> variantNames(variants.begin(), variants.end());
    if (variantNames.empty())
      variantNames = {"inference", "final-state"};
    SmallVector<std::string> typeNames(storageTypes.begin(),
                                       storageTypes.end());
    if (typeNames.empty())
      typeNames = {"f32"};
    auto hasDuplicate = [](ArrayRef<std::string> names) {
      llvm::StringSet<> seen;
      return llvm::any_of(names, [&](const std::string &name) {
        return !seen.insert(name).second;
      });
    };
    if (hasDuplicate(variantNames) || hasDuplicate(typeNames)) {
      module.emitError("a kernel variant or storage type is listed twice");
      return signalPassFailure();
    }
    for (StringRef variantName : variantNames) {
      std::optional<Variant> variant =
          llvm::StringSwitch<std::optional<Variant>>(variantName)
              .Case("inference", Variant::Inference)
              .Case("final-state", Variant::FinalState)
              .Default(std::nullopt);
      if (!variant) {
        module.emitError()
            << "unknown kernel variant '" << variantName
            << "'; expected inference or final-state here (the lowering "
               "pipelines also take forward and backward, which "
               "flexsn-autodiff generates)";
        return signalPassFailure();
      }
      for (StringRef typeName : typeNames) {
        Type type = llvm::StringSwitch<Type>(typeName)
                        .Case("f32", Float32Type::get(ctx))
                        .Case("f16", Float16Type::get(ctx))
                        .Case("bf16", BFloat16Type::get(ctx))
                        .Default(Type());
        if (!type) {
          module.emitError() << "unknown storage type '" << typeName
                             << "'; expected f32, f16 or bf16";
          return signalPassFailure();
        }
        requests.push_back({*variant, variantName, type, typeName});
      }
    }

    SmallVector<NeuronOp> selected;
    for (NeuronOp neuron : module.getOps<NeuronOp>())
      if (neurons.empty() || llvm::is_contained(neurons, neuron.getSymName()))
        selected.push_back(neuron);
    for (const std::string &name : neurons)
      if (!module.lookupSymbol<NeuronOp>(name)) {
        module.emitError() << "no neuron named '" << name << "'";
        return signalPassFailure();
      }

    SymbolTable symbols(module);
    OpBuilder builder = OpBuilder::atBlockEnd(module.getBody());
    for (NeuronOp neuron : selected) {
      for (const KernelRequest &request : requests) {
        func::FuncOp kernel = buildKernel(builder, neuron, request);
        if (symbols.lookup(kernel.getSymName())) {
          kernel.emitError() << "kernel name '" << kernel.getSymName()
                             << "' is already taken in the module";
          kernel.erase();
          return signalPassFailure();
        }
        symbols.insert(kernel);
      }
    }
  }
};

} // namespace
