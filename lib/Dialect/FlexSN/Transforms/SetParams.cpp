//===- SetParams.cpp - Configure neuron parameters and surrogates ---------===//
//
// Part of the FlexSN project: an MLIR compiler for spiking-neuron dynamics.
//
//===----------------------------------------------------------------------===//

#include "flexsn/Dialect/FlexSN/IR/FlexSNOps.h"
#include "flexsn/Dialect/FlexSN/Transforms/Passes.h"

#include "mlir/AsmParser/AsmParser.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "llvm/ADT/StringSwitch.h"

#include <cmath>

namespace mlir::flexsn {
#define GEN_PASS_DEF_FLEXSNSETPARAMS
#include "flexsn/Dialect/FlexSN/Transforms/Passes.h.inc"
} // namespace mlir::flexsn

using namespace mlir;
using namespace mlir::flexsn;

namespace {

/// Parses `text` as a value of a parameter of `type`; null if it is none.
TypedAttr parseValue(Builder &b, Type type, StringRef text) {
  text = text.trim();
  if (type.isF32()) {
    double value;
    if (text.getAsDouble(value) || !std::isfinite(value))
      return {};
    return b.getF32FloatAttr(static_cast<float>(value));
  }
  if (type.isInteger(1)) {
    std::optional<bool> value = llvm::StringSwitch<std::optional<bool>>(text)
                                    .Cases({"true", "1"}, true)
                                    .Cases({"false", "0"}, false)
                                    .Default(std::nullopt);
    return value ? b.getBoolAttr(*value) : TypedAttr();
  }
  int32_t value;
  if (text.getAsInteger(10, value))
    return {};
  return b.getI32IntegerAttr(value);
}

StringRef expectedText(Type type) {
  if (type.isF32())
    return "a finite number";
  if (type.isInteger(1))
    return "true, false, 1 or 0";
  return "a 32-bit integer";
}

struct FlexSNSetParamsPass
    : flexsn::impl::FlexSNSetParamsBase<FlexSNSetParamsPass> {
  using Base::Base;

  LogicalResult initializeOptions(
      StringRef options,
      function_ref<LogicalResult(const Twine &)> errorHandler) override {
    if (failed(Base::initializeOptions(options, errorHandler)))
      return failure();
    return checkListOptions(getArgument(), errorHandler, neurons);
  }

  void runOnOperation() override {
    ModuleOp module = getOperation();
    SmallVector<NeuronOp> neurons;
    for (NeuronOp neuron : module.getOps<NeuronOp>())
      if (this->neurons.empty() ||
          llvm::is_contained(this->neurons, neuron.getSymName()))
        neurons.push_back(neuron);
    for (const std::string &name : this->neurons)
      if (!module.lookupSymbol<NeuronOp>(name)) {
        module.emitError("flexsn-set-params: no neuron named '") << name << "'";
        return signalPassFailure();
      }

    SurrogateAttrInterface newSurrogate;
    if (!surrogate.empty()) {
      Attribute attr = parseAttribute(surrogate, &getContext());
      newSurrogate = dyn_cast_or_null<SurrogateAttrInterface>(attr);
      if (!newSurrogate) {
        module.emitError("flexsn-set-params: '")
            << surrogate << "' is not a surrogate attribute";
        return signalPassFailure();
      }
    }

    for (NeuronOp neuron : neurons)
      if (failed(configure(neuron, newSurrogate)))
        return signalPassFailure();
  }

  /// Splits "name=text" options; fails on a missing '='.
  static LogicalResult split(NeuronOp neuron, StringRef option, StringRef entry,
                             StringRef &name, StringRef &text) {
    if (!entry.contains('='))
      return neuron.emitError("flexsn-set-params: expected ")
             << option << "=NAME=VALUE, got '" << entry << "'";
    std::tie(name, text) = entry.split('=');
    name = name.trim();
    return success();
  }

  LogicalResult configure(NeuronOp neuron, SurrogateAttrInterface surrogate) {
    Builder b(neuron.getContext());
    SmallVector<ParamAttr> params = neuron.getParamAttrs();
    auto find = [&](StringRef name) -> ParamAttr * {
      for (ParamAttr &param : params)
        if (param.getName().getValue() == name)
          return &param;
      return nullptr;
    };
    auto unknown = [&](StringRef name) {
      std::string known;
      llvm::raw_string_ostream os(known);
      llvm::interleaveComma(params, os,
                            [&](ParamAttr p) { os << p.getName().getValue(); });
      return neuron.emitError("flexsn-set-params: @")
             << neuron.getSymName() << " has no parameter '" << name
             << "' (it has: " << (known.empty() ? "none" : known) << ")";
    };

    for (const std::string &entry : values) {
      StringRef name, text;
      if (failed(split(neuron, "values", entry, name, text)))
        return failure();
      ParamAttr *param = find(name);
      if (!param)
        return unknown(name);
      TypedAttr value = parseValue(b, param->getType(), text);
      if (!value)
        return neuron.emitError("flexsn-set-params: parameter '")
               << name << "' is " << param->getType() << ": expected "
               << expectedText(param->getType()) << ", got '" << text.trim()
               << "'";
      *param = ParamAttr::get(b.getContext(), param->getName(), value,
                              param->getKind(), param->getShape());
      // A divisor set to 0 makes every state a NaN or an infinity (LIF's
      // tau), as flexsn-run refuses it too.
      size_t index = param - params.begin();
      BlockArgument arg = neuron.getParamArgs()[index];
      auto isDivisor = [&](Operation *user) {
        return isa<arith::DivFOp, arith::RemFOp>(user) &&
               user->getOperand(1) == arg;
      };
      auto floatValue = dyn_cast<FloatAttr>(value);
      if (floatValue && floatValue.getValue().isZero() &&
          llvm::any_of(arg.getUsers(), isDivisor))
        return neuron.emitError("flexsn-set-params: @")
               << neuron.getSymName() << " divides by '" << name
               << "', which must not be 0";
    }
    for (const std::string &entry : kinds) {
      StringRef name, text;
      if (failed(split(neuron, "kinds", entry, name, text)))
        return failure();
      ParamAttr *param = find(name);
      if (!param)
        return unknown(name);
      std::optional<ParamKind> kind = symbolizeParamKind(text.trim());
      if (!kind)
        return neuron.emitError("flexsn-set-params: binding of '")
               << name << "' must be const, runtime or trainable, got '"
               << text.trim() << "'";
      if (*kind == ParamKind::Trainable && !param->getType().isF32())
        return neuron.emitError("flexsn-set-params: parameter '")
               << name << "' is " << param->getType()
               << ": only f32 parameters can be trainable";
      *param = param->withKind(*kind);
    }
    for (const std::string &entry : shapes) {
      StringRef name, text;
      if (failed(split(neuron, "shapes", entry, name, text)))
        return failure();
      ParamAttr *param = find(name);
      if (!param)
        return unknown(name);
      std::optional<ParamShape> shape = symbolizeParamShape(text.trim());
      if (!shape)
        return neuron.emitError("flexsn-set-params: shape of '")
               << name << "' must be scalar, per_neuron or per_channel, got '"
               << text.trim() << "'";
      *param =
          ParamAttr::get(b.getContext(), param->getName(),
                         param->getDefaultValue(), param->getKind(), *shape);
    }
    // The bindings and shapes must agree (a per-neuron const, say).
    for (ParamAttr &param : params) {
      auto emitError = [&] { return neuron.emitError("flexsn-set-params: "); };
      if (failed(ParamAttr::verify(emitError, param.getName(),
                                   param.getDefaultValue(), param.getKind(),
                                   param.getShape())))
        return failure();
    }
    SmallVector<Attribute> attrs(params.begin(), params.end());
    neuron.setParamsAttr(b.getArrayAttr(attrs));

    if (surrogate)
      neuron.walk([&](SpikeOp spike) { spike.setSurrogateAttr(surrogate); });
    return success();
  }
};

} // namespace
