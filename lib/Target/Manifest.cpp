//===- Manifest.cpp - JSON description of a FlexSN module -----------------===//
//
// Part of the FlexSN project: an MLIR compiler for spiking-neuron dynamics.
//
//===----------------------------------------------------------------------===//

#include "flexsn/Target/Manifest.h"
#include "flexsn/Dialect/FlexSN/IR/FlexSNOps.h"
#include "flexsn/Tools/Registration.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Tools/mlir-translate/Translation.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;
using namespace mlir::flexsn;

/// Bumped whenever a consumer would misread the new layout.
static constexpr int kManifestVersion = 1;

static std::string typeName(Type type) {
  std::string name;
  llvm::raw_string_ostream os(name);
  type.print(os);
  return name;
}

static void writeNames(llvm::json::OStream &json, StringRef key,
                       ArrayAttr names) {
  json.attributeArray(key, [&] {
    for (StringRef name : names.getAsValueRange<StringAttr>())
      json.value(name);
  });
}

static void writeParam(llvm::json::OStream &json, ParamAttr param) {
  json.object([&] {
    json.attribute("name", param.getName().getValue());
    json.attribute("type", typeName(param.getType()));
    TypedAttr value = param.getDefaultValue();
    json.attributeBegin("default");
    if (auto f = dyn_cast<FloatAttr>(value))
      // The decimal a user wrote ("0.1"), not f32's binary value widened;
      // the text is a valid JSON number since defaults are finite.
      json.rawValue(formatShortest(f.getValue().convertToFloat()));
    else if (auto b = dyn_cast<BoolAttr>(value))
      json.value(b.getValue());
    else
      json.value(cast<IntegerAttr>(value).getInt());
    json.attributeEnd();
    json.attribute("kind", stringifyParamKind(param.getKind()));
  });
}

static void writeNeuron(llvm::json::OStream &json, NeuronOp neuron) {
  json.object([&] {
    json.attribute("name", neuron.getSymName());
    writeNames(json, "inputs", neuron.getInputNames());
    writeNames(json, "states", neuron.getStateNames());
    writeNames(json, "outputs", neuron.getOutputNames());
    json.attributeArray("params", [&] {
      for (ParamAttr param : neuron.getParamAttrs())
        writeParam(json, param);
    });
  });
}

LogicalResult mlir::flexsn::translateToManifest(ModuleOp module,
                                                llvm::raw_ostream &os) {
  llvm::json::OStream json(os, /*IndentSize=*/2);
  json.object([&] {
    json.attribute("format", "flexsn-manifest");
    json.attribute("version", kManifestVersion);
    json.attributeArray("neurons", [&] {
      for (auto neuron : module.getOps<NeuronOp>())
        writeNeuron(json, neuron);
    });
    // Kernels appear here once kernel generation has produced them.
    json.attributeArray("kernels", [] {});
  });
  os << "\n";
  return success();
}

void mlir::flexsn::registerToManifestTranslation() {
  TranslateFromMLIRRegistration registration(
      "flexsn-to-manifest",
      "Describe a FlexSN module's neurons and kernels as JSON",
      [](Operation *op, llvm::raw_ostream &os) -> LogicalResult {
        auto module = dyn_cast<ModuleOp>(op);
        if (!module)
          return op->emitError("expected a builtin.module");
        return translateToManifest(module, os);
      },
      [](DialectRegistry &registry) { registerAllDialects(registry); });
}
