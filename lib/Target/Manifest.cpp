//===- Manifest.cpp - JSON description of a FlexSN module -----------------===//
//
// Part of the FlexSN project: an MLIR compiler for spiking-neuron dynamics.
//
//===----------------------------------------------------------------------===//

#include "flexsn/Target/Manifest.h"
#include "flexsn/Dialect/FlexSN/IR/FlexSNOps.h"
#include "flexsn/Tools/Registration.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Tools/mlir-translate/Translation.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;
using namespace mlir::flexsn;

/// Bumped whenever a consumer would misread the new layout.
static constexpr int kManifestVersion = 2;

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

/// One kernel: its entry points, then every argument in launch order.
static void writeKernel(llvm::json::OStream &json, DictionaryAttr kernel) {
  auto str = [&](StringRef key) {
    auto attr = kernel.getAs<StringAttr>(key);
    return attr ? attr.getValue() : StringRef();
  };
  auto dtype = kernel.getAs<TypeAttr>("dtype");
  std::string dtypeName = dtype ? typeName(dtype.getValue()) : "";
  json.object([&] {
    json.attribute("name", str("name"));
    json.attribute("function", ("flexsn_" + str("name")).str());
    json.attribute("neuron", str("neuron"));
    json.attribute("variant", str("variant"));
    json.attribute("dtype", dtypeName);
    json.attribute("vector_kernel", str("vector_kernel"));
    json.attribute("scalar_kernel", str("scalar_kernel"));
    if (auto width = kernel.getAs<IntegerAttr>("vector_width"))
      json.attribute("vector_width", width.getInt());
    // The training workspace: saved * T * ld f32, then the deterministic
    // reduction scratch of a neuron with trainable parameters.
    auto integer = [&](StringRef key) -> int64_t {
      auto attr = kernel.getAs<IntegerAttr>(key);
      return attr ? attr.getInt() : 0;
    };
    int64_t saved = integer("saved"), slots = integer("reduction_slots");
    auto deterministic = kernel.getAs<BoolAttr>("deterministic");
    json.attribute("deterministic", deterministic && deterministic.getValue());
    json.attribute("workspace_sequences", saved);
    json.attribute("reduction_slots", slots);
    SmallVector<std::string> terms;
    if (saved)
      terms.push_back(llvm::formatv("{0} * T * ld * 4", saved).str());
    if (slots)
      terms.push_back(
          llvm::formatv("4 + 4 * {0} * ceil(N / 256)", slots).str());
    json.attribute("workspace_bytes",
                   terms.empty() ? "0" : llvm::join(terms, " + "));
    // Arguments: the buffers, the workspace, then the kernel's T, N, ld and
    // runtime parameters. The header's function takes the same buffers,
    // workspace and parameters, after (stream, T, N, ld).
    json.attributeArray("arguments", [&] {
      auto roles = kernel.getAs<ArrayAttr>("buffer_roles");
      auto names = kernel.getAs<ArrayAttr>("buffer_names");
      auto dtypes = kernel.getAs<ArrayAttr>("buffer_dtypes");
      bool readsWorkspace = false, writesWorkspace = false;
      if (roles && names)
        for (auto [i, role, name] :
             llvm::enumerate(roles.getAsValueRange<StringAttr>(),
                             names.getAsValueRange<StringAttr>())) {
          if (role == "saved_output" || role == "reduction_scratch") {
            writesWorkspace = true;
            continue;
          }
          if (role == "saved_input") {
            readsWorkspace = true;
            continue;
          }
          json.object([&] {
            bool perNeuron = role == "initial_state" || role == "final_state";
            bool scalar = role == "param_gradient";
            json.attribute("name", name);
            json.attribute("role", role);
            json.attribute(
                "dtype", dtypes ? typeName(cast<TypeAttr>(dtypes[i]).getValue())
                                : dtypeName);
            json.attributeArray("shape", [&] {
              if (!perNeuron && !scalar)
                json.value("T");
              if (!scalar)
                json.value("N");
            });
            json.attribute("optional", role != "input_sequence" &&
                                           role != "param_gradient");
          });
        }
      if (saved || slots)
        json.object([&] {
          json.attribute("name", "workspace");
          json.attribute("role", readsWorkspace && writesWorkspace
                                     ? "workspace_inout"
                                 : readsWorkspace ? "workspace_in"
                                                  : "workspace_out");
          json.attribute("dtype", "f32");
          json.attribute("bytes", llvm::join(terms, " + "));
          json.attribute("optional", false);
        });
      for (StringRef size : {"T", "N", "ld"})
        json.object([&] {
          json.attribute("name", size);
          json.attribute("role", "size");
          json.attribute("dtype", "i64");
        });
      if (auto params = kernel.getAs<ArrayAttr>("params"))
        for (auto param : params.getAsRange<DictionaryAttr>())
          json.object([&] {
            json.attribute("name", param.getAs<StringAttr>("name").getValue());
            json.attribute("role", "param");
            json.attribute("dtype",
                           typeName(param.getAs<TypeAttr>("type").getValue()));
          });
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
    // GPU kernels, as convert-flexsn-to-gpu described them.
    auto kernels = module->getAttrOfType<ArrayAttr>("flexsn.gpu_kernels");
    json.attributeArray("kernels", [&] {
      if (kernels)
        for (auto kernel : kernels.getAsRange<DictionaryAttr>())
          writeKernel(json, kernel);
    });
    json.attributeArray("targets", [&] {
      for (auto binary : module.getOps<gpu::BinaryOp>())
        for (auto object : binary.getObjects().getAsRange<gpu::ObjectAttr>())
          if (auto nvvm = dyn_cast<NVVM::NVVMTargetAttr>(object.getTarget()))
            json.value(nvvm.getChip());
    });
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
