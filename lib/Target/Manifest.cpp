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
static constexpr int kManifestVersion = 3;

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

/// The shape of a buffer of `role`, as names of run-time sizes.
static SmallVector<StringRef, 2> bufferShape(StringRef role) {
  if (role == "param_gradient")
    return {};
  if (role == "initial_state" || role == "final_state")
    return {"N"};
  if (role == "reduction_scratch")
    return {"scratch"};
  return {"T", "N"};
}

/// One kernel: its entry points, every argument of its C function (GPU:
/// the header's; CPU: the C interface's), and the buffers the kernel itself
/// takes, with where each workspace part lies.
static void writeKernel(llvm::json::OStream &json, DictionaryAttr kernel,
                        bool cpu) {
  auto str = [&](StringRef key) {
    auto attr = kernel.getAs<StringAttr>(key);
    return attr ? attr.getValue() : StringRef();
  };
  auto dtype = kernel.getAs<TypeAttr>("dtype");
  std::string dtypeName = dtype ? typeName(dtype.getValue()) : "";
  json.object([&] {
    json.attribute("name", str("name"));
    json.attribute("function", ((cpu ? "_mlir_ciface_" : "flexsn_") +
                                str("name"))
                                   .str());
    json.attribute("neuron", str("neuron"));
    json.attribute("variant", str("variant"));
    json.attribute("dtype", dtypeName);
    if (!cpu) {
      json.attribute("vector_kernel", str("vector_kernel"));
      json.attribute("scalar_kernel", str("scalar_kernel"));
      if (auto width = kernel.getAs<IntegerAttr>("vector_width"))
        json.attribute("vector_width", width.getInt());
    }
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
    auto roles = kernel.getAs<ArrayAttr>("buffer_roles");
    auto names = kernel.getAs<ArrayAttr>("buffer_names");
    auto dtypes = kernel.getAs<ArrayAttr>("buffer_dtypes");
    auto bufferDtype = [&](size_t i) {
      return dtypes ? typeName(cast<TypeAttr>(dtypes[i]).getValue())
                    : dtypeName;
    };
    // The kernel's own buffers, in order: what a caller of the runtime's
    // flexsn_launch (or of a CPU function) passes. Workspace parts name
    // their byte offset in the workspace; the rest are arguments.
    json.attributeArray("buffers", [&] {
      if (!roles || !names)
        return;
      int64_t savedIndex = 0;
      for (auto [i, role, name] :
           llvm::enumerate(roles.getAsValueRange<StringAttr>(),
                           names.getAsValueRange<StringAttr>()))
        json.object([&] {
          json.attribute("name", name);
          json.attribute("role", role);
          json.attribute("dtype", bufferDtype(i));
          json.attributeArray("shape", [&] {
            for (StringRef size : bufferShape(role))
              json.value(size);
          });
          if (role == "saved_output" || role == "saved_input")
            json.attribute(
                "workspace_offset",
                llvm::formatv("{0} * T * ld * 4", savedIndex++).str());
          else if (role == "reduction_scratch")
            json.attribute("workspace_offset",
                           llvm::formatv("{0} * T * ld * 4", saved).str());
        });
    });
    // Arguments: the buffers, the workspace, then the kernel's T, N, ld and
    // runtime parameters. The header's function takes the same buffers,
    // workspace and parameters, after (stream, T, N, ld).
    json.attributeArray("arguments", [&] {
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
            json.attribute("name", name);
            json.attribute("role", role);
            json.attribute("dtype", bufferDtype(i));
            json.attributeArray("shape", [&] {
              for (StringRef size : bufferShape(role))
                json.value(size);
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
    // GPU and CPU kernels, as convert-flexsn-to-gpu / -to-scf described them.
    for (auto [key, attr, cpu] :
         {std::make_tuple("kernels", "flexsn.gpu_kernels", false),
          std::make_tuple("cpu_kernels", "flexsn.cpu_kernels", true)}) {
      auto kernels = module->getAttrOfType<ArrayAttr>(attr);
      json.attributeArray(key, [&] {
        if (kernels)
          for (auto kernel : kernels.getAsRange<DictionaryAttr>())
            writeKernel(json, kernel, cpu);
      });
    }
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
