//===- TorchStep.cpp - A neuron's step as a PyTorch function --------------===//
//
// Part of the FlexSN project: an MLIR compiler for spiking-neuron dynamics.
//
//===----------------------------------------------------------------------===//

#include "flexsn/Target/TorchStep.h"
#include "flexsn/Dialect/FlexSN/IR/FlexSNOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/StringSwitch.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/raw_ostream.h"

#include <cmath>
#include <string>

using namespace mlir;
using namespace mlir::flexsn;

namespace {

/// A Python literal of an f32, i1 or integer attribute; empty for others.
std::string pythonLiteral(Attribute attr) {
  std::string text;
  llvm::raw_string_ostream os(text);
  if (auto f = dyn_cast<FloatAttr>(attr)) {
    double value = f.getValueAsDouble();
    if (std::isnan(value))
      os << "float('nan')";
    else if (std::isinf(value))
      os << (value > 0 ? "float('inf')" : "float('-inf')");
    else // 9 significant digits hold every f32 exactly.
      os << llvm::format("%.9g", value)
         << (value == std::floor(value) && std::fabs(value) < 1e9 ? ".0" : "");
  } else if (auto i = dyn_cast<IntegerAttr>(attr)) {
    if (i.getType().isInteger(1))
      os << (i.getValue().getBoolValue() ? "True" : "False");
    else
      os << i.getValue().getSExtValue();
  }
  return text;
}

/// The F function of an op computing one value from its operands, or
/// empty where it has none.
StringRef functionOf(Operation *op) {
  return llvm::StringSwitch<StringRef>(op->getName().getStringRef())
      .Case("arith.remf", "remf")
      .Case("arith.maximumf", "maximumf")
      .Case("arith.minimumf", "minimumf")
      .Case("arith.maxnumf", "maxnumf")
      .Case("arith.minnumf", "minnumf")
      .Case("arith.select", "select")
      .Case("arith.andi", "andi")
      .Case("arith.ori", "ori")
      .Case("arith.xori", "xori")
      .Case("arith.uitofp", "tofloat")
      .Case("math.absf", "absf")
      .Case("math.exp", "exp")
      .Case("math.exp2", "exp2")
      .Case("math.expm1", "expm1")
      .Case("math.log", "log")
      .Case("math.log1p", "log1p")
      .Case("math.log2", "log2")
      .Case("math.tanh", "tanh")
      .Case("math.sqrt", "sqrt")
      .Case("math.rsqrt", "rsqrt")
      .Case("math.sin", "sin")
      .Case("math.cos", "cos")
      .Case("math.atan", "atan")
      .Case("math.atan2", "atan2")
      .Case("math.erf", "erf")
      .Case("math.powf", "powf")
      .Case("math.floor", "floor")
      .Case("math.ceil", "ceil")
      .Case("math.copysign", "copysign")
      .Case("math.fma", "fma")
      .Case("flexsn.detach", "detach")
      .Default("");
}

/// The Python operator of a binary float op, or empty.
StringRef operatorOf(Operation *op) {
  return llvm::StringSwitch<StringRef>(op->getName().getStringRef())
      .Case("arith.addf", "+")
      .Case("arith.subf", "-")
      .Case("arith.mulf", "*")
      .Case("arith.divf", "/")
      .Default("");
}

class StepEmitter {
public:
  StepEmitter(raw_ostream &os) : os(os) {}

  LogicalResult emit(NeuronOp neuron, StringRef function) {
    os << "\n\ndef " << function << "(F, inputs, states, params):\n";
    os << R"(    """@)" << neuron.getSymName()
       << R"(: ([outputs], [new states]) of one step.""")" << "\n";
    Block &body = neuron.getBodyBlock();
    for (auto [i, arg] : llvm::enumerate(neuron.getInputArgs()))
      os << "    " << bind(arg) << " = inputs[" << i << "]\n";
    for (auto [i, arg] : llvm::enumerate(neuron.getStateArgs()))
      os << "    " << bind(arg) << " = states[" << i << "]\n";
    for (auto [param, arg] :
         llvm::zip(neuron.getParamAttrs(), neuron.getParamArgs()))
      os << "    " << bind(arg) << " = params.get(\"" << param.getName().str()
         << "\", " << pythonLiteral(param.getDefaultValue()) << ")\n";
    for (Operation &op : body) {
      if (auto yield = dyn_cast<YieldOp>(op)) {
        unsigned outputs = neuron.getNumOutputs();
        os << "    return [";
        for (auto [i, v] : llvm::enumerate(yield.getValues()))
          os << (i == outputs ? "], [" : i ? ", " : "") << names.lookup(v);
        if (outputs == yield.getValues().size())
          os << "], [";
        os << "]\n";
        continue;
      }
      if (failed(emitOp(op)))
        return failure();
    }
    return success();
  }

private:
  std::string bind(Value v) {
    std::string name = "v" + std::to_string(names.size());
    names[v] = name;
    return name;
  }

  std::string operands(Operation &op) {
    std::string text;
    for (auto [i, v] : llvm::enumerate(op.getOperands()))
      text += (i ? ", " : "") + names.lookup(v);
    return text;
  }

  LogicalResult emitOp(Operation &op) {
    if (op.getNumResults() != 1 || op.getNumRegions() != 0)
      return op.emitError()
             << op.getName() << " has no PyTorch form (flexsn-to-torch "
             << "takes ops of one result and no region)";
    Value result = op.getResult(0);
    std::string value;
    if (auto constant = dyn_cast<arith::ConstantOp>(op)) {
      value = pythonLiteral(constant.getValue());
      if (value.empty())
        return op.emitError() << "a constant flexsn-to-torch cannot write";
    } else if (StringRef sign = operatorOf(&op); !sign.empty()) {
      value = "(" + names.lookup(op.getOperand(0)) + " " + sign.str() + " " +
              names.lookup(op.getOperand(1)) + ")";
    } else if (isa<arith::NegFOp>(op)) {
      value = "(-" + names.lookup(op.getOperand(0)) + ")";
    } else if (auto cmp = dyn_cast<arith::CmpFOp>(op)) {
      value = "F.cmpf(\"" +
              arith::stringifyCmpFPredicate(cmp.getPredicate()).str() + "\", " +
              operands(op) + ")";
    } else if (auto spike = dyn_cast<SpikeOp>(op)) {
      std::string surrogate;
      llvm::raw_string_ostream attr(surrogate);
      attr << spike.getSurrogate();
      value = "F.spike(" + names.lookup(spike.getInput()) + ", \"" + surrogate +
              "\")";
    } else if (StringRef function = functionOf(&op); !function.empty()) {
      value = "F." + function.str() + "(" + operands(op) + ")";
    } else {
      return op.emitError()
             << op.getName() << " has no PyTorch form in flexsn-to-torch";
    }
    os << "    " << bind(result) << " = " << value << "\n";
    return success();
  }

  raw_ostream &os;
  llvm::DenseMap<Value, std::string> names;
};

} // namespace

LogicalResult mlir::flexsn::translateToTorchStep(ModuleOp module,
                                                 raw_ostream &os) {
  std::string text;
  llvm::raw_string_ostream body(text);
  std::string table;
  unsigned count = 0;
  for (auto neuron : module.getOps<NeuronOp>()) {
    std::string function = "step_" + std::to_string(count++);
    if (failed(StepEmitter(body).emit(neuron, function)))
      return failure();
    table += "    \"" + neuron.getSymName().str() + "\": " + function + ",\n";
  }
  os << "\"\"\"The step of each neuron over PyTorch tensors. Generated by "
        "flexsn-translate\n--flexsn-to-torch: do not edit.\"\"\"\n"
     << text << "\n\nNEURONS = {\n"
     << table << "}\n";
  return success();
}
