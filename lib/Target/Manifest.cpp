//===- Manifest.cpp - JSON description of a FlexSN module -----------------===//
//
// Part of the FlexSN project: an MLIR compiler for spiking-neuron dynamics.
//
//===----------------------------------------------------------------------===//

#include "flexsn/Target/Manifest.h"
#include "flexsn/Dialect/FlexSN/IR/FlexSNOps.h"
#include "flexsn/Targets/Target.h"

#include "mlir/IR/BuiltinOps.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;
using namespace mlir::flexsn;

/// Bumped whenever a consumer would misread the new layout.
/// Version 4: a GPU forward kernel takes its saved buffers last, in the
/// order of its kernel function, as the CPU kernel always did. Version 5:
/// parameters have a shape (per_neuron ones are buffers of two new roles).
/// Version 7: kernels say how they store spikes ("spikes": "dense" or
/// "u8"); an output buffer's dtype may be "u8". Version 8: "spikes" may be
/// "bits", whose output buffers have dtype "bits" (8 per byte). Version 9:
/// saved sequences may have the storage type, so workspace offsets and sizes
/// are byte formulas with the saved sequences rounded up to whole floats.
/// Version 11: each target's kernels are in its section,
/// "targets": {"<name>": {"kernels": [...], ...}} (CUDA's chips there).
/// Version 12: a kernel's "options" (the compile options that chose it, by
/// their request names, {"<option>": value}) replace "spikes".
static constexpr int kManifestVersion = 12;

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
    json.attribute("shape", stringifyParamShape(param.getShape()));
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

SmallVector<StringRef, 4> mlir::flexsn::getBufferSizeNames(BufferShape shape,
                                                           bool cpuChannels) {
  switch (shape) {
  case BufferShape::Sequence:
    if (cpuChannels)
      return {"T", "B", "C", "S"};
    return {"T", "N"};
  case BufferShape::PerNeuron:
    if (cpuChannels)
      return {"B", "C", "S"};
    return {"N"};
  case BufferShape::PerChannel:
    return {"C"};
  case BufferShape::Scalar:
    return {};
  case BufferShape::Scratch:
    return {"scratch"};
  case BufferShape::Matrix:
    return {"H", "H"};
  }
  llvm_unreachable("unknown buffer shape");
}

static void writeBuffer(llvm::json::OStream &json, KernelBufferAttr buffer,
                        bool cpuChannels) {
  json.attribute("name", buffer.getName().getValue());
  json.attribute("role", stringifyBufferRole(buffer.getRole()));
  // Byte buffers hold 0/1 spikes: unsigned; i1 buffers pack them.
  Type element = buffer.getElementType();
  json.attribute("dtype", element.isInteger(8)   ? "u8"
                          : element.isInteger(1) ? "bits"
                                                 : typeName(element));
  json.attributeArray("shape", [&] {
    for (StringRef size : getBufferSizeNames(buffer.getShape(), cpuChannels))
      json.value(size);
  });
  // What the buffer holds: callers match buffers to values by this alone.
  BindingAttr binds = buffer.getBinds();
  json.attributeObject("binds", [&] {
    json.attribute("value", stringifyBoundValue(binds.getValue()));
    if (binds.getValue() == BoundValue::Param) {
      json.attribute("name", binds.getParam().getValue());
      json.attribute("shape", stringifyParamShape(binds.getParamShape()));
    } else if (binds.getValue() != BoundValue::Scratch) {
      json.attribute("index", binds.getIndex());
    }
    json.attribute("gradient", binds.getGradient());
  });
}

/// A kernel option as JSON: a string, a bool or an integer (the signature's
/// verifier allows no other).
static void writeOptionValue(llvm::json::OStream &json, NamedAttribute option) {
  StringRef name = option.getName().getValue();
  Attribute value = option.getValue();
  if (auto text = dyn_cast<StringAttr>(value))
    json.attribute(name, text.getValue());
  else if (auto flag = dyn_cast<BoolAttr>(value))
    json.attribute(name, flag.getValue());
  else
    json.attribute(name, cast<IntegerAttr>(value).getInt());
}

/// One kernel: its entry points, every argument of its C function (GPU:
/// the header's; CPU: the C interface's), and the buffers the kernel itself
/// takes, with where each workspace part lies.
static void writeKernel(llvm::json::OStream &json, CompiledKernelAttr kernel) {
  KernelSignatureAttr signature = kernel.getSignature();
  StringRef name = kernel.getName().getValue();
  bool cpu = !kernel.isGPU();
  bool channels = signature.hasChannels();
  json.object([&] {
    json.attribute("name", name);
    json.attribute("function",
                   ((cpu ? "_mlir_ciface_" : "flexsn_") + name).str());
    json.attribute("neuron", signature.getNeuron().getValue());
    json.attribute("variant", stringifyKernelVariant(signature.getVariant()));
    json.attribute("dtype", stringifyStorageType(signature.getStorage()));
    // The compile options that chose this kernel over its variant's
    // default, by their request names: callers select kernels by them.
    json.attributeObject("options", [&] {
      if (DictionaryAttr options = signature.getOptions())
        for (NamedAttribute option : options)
          writeOptionValue(json, option);
    });
    // Neurons seen as [B, C, S], for per-channel parameters.
    json.attribute("channels", channels);
    // A coupled (recurrent) kernel: its neurons are samples of H, input
    // `input` fed by output `output` one step before (#flexsn.kernel).
    if (signature.isCoupled())
      json.attributeObject("coupling", [&] {
        json.attribute("input", signature.getCoupledInput());
        json.attribute("output", signature.getCoupledOutput());
      });
    if (!cpu) {
      json.attribute("vector_kernel", kernel.getVectorEntry().getValue());
      json.attribute("scalar_kernel", kernel.getScalarEntry().getValue());
      json.attribute("vector_width", kernel.getVectorWidth());
    }
    // The training workspace: the saved sequences, then the deterministic
    // reduction scratch of a neuron with trainable parameters.
    int64_t saved = signature.getWorkspaceSequences();
    int64_t slots = kernel.getReductionSlots();
    std::string workspaceBytes = kernel.getWorkspaceBytesFormula();
    json.attribute("deterministic", kernel.getDeterministic());
    json.attribute("workspace_sequences", saved);
    json.attribute("reduction_slots", slots);
    json.attribute("workspace_bytes", workspaceBytes);
    // The kernel's own buffers, in order: what a caller of the runtime's
    // flexsn_launch (or of a CPU function) passes. Workspace parts name
    // their byte offset in the workspace; the rest are arguments.
    json.attributeArray("buffers", [&] {
      for (auto [i, buffer] : llvm::enumerate(signature.getBuffers()))
        json.object([&] {
          writeBuffer(json, buffer, cpu && channels);
          if (isWorkspaceRole(buffer.getRole()))
            json.attribute("workspace_offset",
                           kernel.getWorkspaceOffsetFormula(i));
        });
    });
    // Arguments: the buffers, the workspace, then the kernel's T, N, ld (and
    // C, S with channels) and runtime parameters. The header's function takes
    // the same buffers, workspace and parameters, after (stream, T, N, ld).
    json.attributeArray("arguments", [&] {
      for (KernelBufferAttr buffer : signature.getBuffers())
        if (!isWorkspaceRole(buffer.getRole()))
          json.object([&] {
            writeBuffer(json, buffer, cpu && channels);
            json.attribute("optional", isOptionalRole(buffer.getRole()));
          });
      bool reads = signature.count(BufferRole::SavedInput);
      bool writes = signature.count(BufferRole::SavedOutput) ||
                    signature.count(BufferRole::ReductionScratch);
      if (saved || slots)
        json.object([&] {
          json.attribute("name", "workspace");
          json.attribute("role", reads && writes ? "workspace_inout"
                                 : reads         ? "workspace_in"
                                                 : "workspace_out");
          json.attribute("dtype", "f32");
          json.attribute("bytes", workspaceBytes);
          json.attribute("optional", false);
        });
      SmallVector<StringRef, 5> sizes = {"T", "N", "ld"};
      if (channels && !cpu)
        sizes.append({"C", "S"});
      if (signature.isCoupled() && !cpu)
        sizes.push_back("H");
      for (StringRef size : sizes)
        json.object([&] {
          json.attribute("name", size);
          json.attribute("role", "size");
          json.attribute("dtype", "i64");
        });
      for (ParamAttr param : signature.getParams())
        json.object([&] {
          json.attribute("name", param.getName().getValue());
          json.attribute("role", "param");
          json.attribute("dtype", typeName(param.getType()));
        });
    });
  });
}

LogicalResult mlir::flexsn::translateToManifest(ModuleOp module,
                                                llvm::raw_ostream &os,
                                                const Target *only) {
  llvm::json::OStream json(os, /*IndentSize=*/2);
  json.object([&] {
    json.attribute("format", "flexsn-manifest");
    json.attribute("version", kManifestVersion);
    json.attributeArray("neurons", [&] {
      for (auto neuron : module.getOps<NeuronOp>())
        writeNeuron(json, neuron);
    });
    // Each target's kernels, as its lowering described them (for the CPU
    // and CUDA: convert-flexsn-to-scf, -to-gpu), in its section.
    json.attributeObject("targets", [&] {
      for (const Target *target : getTargets()) {
        if (only ? target != only : target->isForTesting())
          continue;
        auto kernels =
            module->getAttrOfType<ArrayAttr>(target->getKernelsAttrName());
        // The manifest of a target's lowering always has its section.
        if (!kernels && !only)
          continue;
        json.attributeObject(target->getName(), [&] {
          json.attributeArray("kernels", [&] {
            // The dialect verified the list's entries.
            if (kernels)
              for (auto kernel : kernels.getAsRange<CompiledKernelAttr>())
                writeKernel(json, kernel);
          });
          target->writeManifestEntries(module, json);
        });
      }
    });
  });
  os << "\n";
  return success();
}
