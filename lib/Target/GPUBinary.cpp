//===- GPUBinary.cpp - Cubin, fatbin, PTX and C header emitters -----------===//
//
// Part of the FlexSN project: an MLIR compiler for spiking-neuron dynamics.
//
//===----------------------------------------------------------------------===//

#include "flexsn/Target/GPUBinary.h"
#include "CHeader.h"
#include "flexsn/Dialect/FlexSN/IR/FlexSNAttrs.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/ScopeExit.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;
using namespace mlir::flexsn;

static llvm::cl::opt<std::string> toolkitPath(
    "flexsn-toolkit",
    llvm::cl::desc("CUDA toolkit whose `fatbinary` bundles several cubins"),
    llvm::cl::init("/usr/local/cuda"));

static llvm::cl::opt<bool> singleFileHeader(
    "flexsn-header-single-file",
    llvm::cl::desc("--flexsn-to-header: put the FlexSN runtime in the header "
                   "too (its code where FLEXSN_IMPLEMENTATION is defined), so "
                   "that it needs no include path and no runtime library"),
    llvm::cl::init(false));

// kRuntimeStatusHeader, kRuntimeHeader, kRuntimeDriverHeader,
// kRuntimeBackendHeader, kRuntimeCUDASource, kRuntimeSource: the runtime
// library's own files (cmake/EmbedText.cmake).
#include "RuntimeSources.inc"

namespace {

/// One compiled object: the target chip and its bytes.
struct DeviceObject {
  std::string chip;
  gpu::CompilationTarget format;
  StringRef bytes;
};

FailureOr<SmallVector<DeviceObject>> collectObjects(ModuleOp module) {
  SmallVector<DeviceObject> objects;
  SmallVector<gpu::BinaryOp> binaries(module.getOps<gpu::BinaryOp>());
  if (binaries.size() != 1)
    return module.emitError()
           << "expected one gpu.binary (run flexsn-lower-to-nvvm first), found "
           << binaries.size();
  for (Attribute attr : binaries.front().getObjects()) {
    auto object = cast<gpu::ObjectAttr>(attr);
    auto target = dyn_cast<NVVM::NVVMTargetAttr>(object.getTarget());
    if (!target)
      return binaries.front().emitError("expected NVVM objects");
    objects.push_back({target.getChip().str(), object.getFormat(),
                       object.getObject().getValue()});
  }
  return objects;
}

/// The single object of `format`, with a clear error otherwise.
FailureOr<DeviceObject> singleObject(ModuleOp module,
                                     gpu::CompilationTarget format,
                                     StringRef formatOption) {
  auto objects = collectObjects(module);
  if (failed(objects))
    return failure();
  if (objects->size() != 1)
    return module.emitError()
           << "expected one target chip, found " << objects->size()
           << "; use --flexsn-to-fatbin for several";
  if (objects->front().format != format)
    return module.emitError()
           << "the gpu.binary does not hold " << formatOption
           << " objects; lower with "
           << "flexsn-lower-to-nvvm=\"format=" << formatOption << "\"";
  return objects->front();
}

/// Bundles several cubins with the `fatbinary` of `toolkit`.
FailureOr<std::string> bundleFatbin(ModuleOp module,
                                    ArrayRef<DeviceObject> objects,
                                    StringRef toolkit = toolkitPath) {
  if (objects.size() == 1 &&
      objects.front().format == gpu::CompilationTarget::Fatbin)
    return objects.front().bytes.str();
  SmallString<128> fatbinary(toolkit);
  llvm::sys::path::append(fatbinary, "bin", "fatbinary");
  if (!llvm::sys::fs::can_execute(fatbinary))
    return module.emitError()
           << "cannot run '" << fatbinary << "': set --flexsn-toolkit";
  SmallVector<std::string> args = {fatbinary.str().str(), "-64", "--create"};
  SmallVector<SmallString<128>, 4> temporaries;
  llvm::scope_exit cleanup([&] {
    for (auto &path : temporaries)
      (void)llvm::sys::fs::remove(path);
  });
  SmallString<128> output;
  if (llvm::sys::fs::createTemporaryFile("flexsn", "fatbin", output))
    return module.emitError("cannot create a temporary file");
  temporaries.push_back(output);
  args.push_back(output.str().str());
  for (const DeviceObject &object : objects) {
    if (object.format != gpu::CompilationTarget::Binary)
      return module.emitError("bundling needs cubin objects (format=bin)");
    SmallString<128> path;
    int fd;
    if (llvm::sys::fs::createTemporaryFile("flexsn", "cubin", fd, path))
      return module.emitError("cannot create a temporary file");
    temporaries.push_back(path);
    llvm::raw_fd_ostream(fd, /*shouldClose=*/true) << object.bytes;
    StringRef sm = StringRef(object.chip).drop_front(3); // "sm_90" -> "90"
    args.push_back(
        llvm::formatv("--image3=kind=elf,sm={0},file={1}", sm, path).str());
  }
  SmallVector<StringRef> argRefs(args.begin(), args.end());
  std::string message;
  if (llvm::sys::ExecuteAndWait(fatbinary, argRefs, std::nullopt, {}, 0, 0,
                                &message) != 0)
    return module.emitError() << "fatbinary failed: " << message;
  auto buffer = llvm::MemoryBuffer::getFile(output);
  if (!buffer)
    return module.emitError("cannot read the bundled fatbin");
  return (*buffer)->getBuffer().str();
}

//===----------------------------------------------------------------------===//
// C header
//===----------------------------------------------------------------------===//

/// The runtime's constant for `role`: FLEXSN_ and the role in capitals.
std::string runtimeKind(BufferRole role) {
  return "FLEXSN_" + stringifyBufferRole(role).upper();
}

void emitKernelFunction(raw_ostream &os, CompiledKernelAttr k,
                        StringRef image) {
  KernelSignatureAttr signature = k.getSignature();
  ArrayRef<KernelBufferAttr> buffers = signature.getBuffers();
  ArrayRef<ParamAttr> params = signature.getParams();
  StringRef name = k.getName().getValue();
  StringRef neuron = signature.getNeuron().getValue();
  Type dtype = signature.getStorageType();
  int64_t saved = signature.getWorkspaceSequences();
  WorkspaceLayout layout = k.getWorkspaceLayout();
  int64_t reductionSlots = layout.reductionSlots;
  auto isWorkspace = [](KernelBufferAttr b) {
    return isWorkspaceRole(b.getRole());
  };
  // The training workspace: the saved sequences (savedBytes * T * ld bytes,
  // rounded up to whole floats), then, for a neuron with trainable
  // parameters, the deterministic reduction scratch (a counter and one float
  // per parameter and block).
  bool hasWorkspace = cheader::hasWorkspace(k);
  auto savedBytes = [&](StringRef elements) {
    return cheader::savedBytesExpr(k, elements);
  };
  if (hasWorkspace) {
    os << "/* Bytes of the training workspace of flexsn_" << name << ": "
       << saved << " saved sequence(s) of T x ld (ld = 0: N), "
       << layout.savedBytes
       << " byte(s) per element\n * together, rounded up to whole floats";
    if (reductionSlots)
      os << ", then the deterministic reduction scratch\n * (4 + 4 * "
         << reductionSlots << " * ceil(N / 256) bytes)";
    os << ". Every training kernel of " << neuron
       << " reports\n * the same size: one allocation serves them all. */\n"
       << "static inline size_t flexsn_" << name
       << "_workspace_bytes(int64_t T, int64_t N, int64_t ld) {\n"
       << "  return " << savedBytes("(size_t)T * (size_t)(ld ? ld : N)");
    if (reductionSlots)
      os << " +\n         (1 + (size_t)" << reductionSlots
         << " * (((size_t)N + 255) / 256)) * sizeof(float)";
    os << ";\n}\n\n";
  }

  bool channels = signature.hasChannels();
  bool coupled = signature.isCoupled();
  cheader::writeKernelComment(
      os, k,
      "T steps of N neurons; ld = time stride of the [T, N]\n * buffers in "
      "elements (0: N).");
  os << "static inline flexsn_status flexsn_" << name
     << "(flexsn_stream stream, int64_t T, int64_t N, int64_t ld";
  if (channels)
    os << ", int64_t C, int64_t S";
  if (coupled)
    os << ", int64_t H";
  cheader::writeKernelParameters(os, k);
  os << ") {\n";
  os << "  static const flexsn_buffer_kind kinds[] = {";
  llvm::interleaveComma(
      buffers, os, [&](KernelBufferAttr b) { os << runtimeKind(b.getRole()); });
  os << "};\n";
  Type first = buffers.front().getElementType();
  bool mixed = llvm::any_of(
      buffers, [&](KernelBufferAttr b) { return b.getElementType() != first; });
  if (mixed) {
    os << "  static const int element_sizes[] = {";
    llvm::interleaveComma(buffers, os, [&](KernelBufferAttr b) {
      if (b.getElementType().isInteger(1))
        os << "FLEXSN_BIT_PACKED";
      else
        os << b.getElementType().getIntOrFloatBitWidth() / 8;
    });
    os << "};\n";
  }
  os << "  static const flexsn_kernel_desc desc = {\""
     << k.getVectorEntry().getValue() << "\", \""
     << k.getScalarEntry().getValue() << "\", " << k.getVectorWidth() << ", "
     << dtype.getIntOrFloatBitWidth() / 8 << ", " << buffers.size()
     << ", kinds, " << params.size() << ", "
     << (mixed ? "element_sizes" : "NULL") << "};\n";
  // Workspace parts lie at byte offsets, in elements of one sequence. The
  // offsets are added to the address as an integer: the workspace may be
  // NULL here (the launch refuses it), and NULL plus an offset is undefined.
  if (hasWorkspace)
    os << "  const size_t saved_stride = (size_t)T * (size_t)(ld ? ld : N);\n"
       << "  const uintptr_t workspace_bytes = (uintptr_t)workspace;\n";
  os << "  void *const buffers[] = {";
  llvm::interleaveComma(llvm::enumerate(buffers), os, [&](auto indexed) {
    auto [i, b] = indexed;
    if (b.getRole() == BufferRole::ReductionScratch)
      os << "(void *)(workspace_bytes + " << savedBytes("saved_stride") << ")";
    else if (isWorkspace(b))
      os << "(void *)(workspace_bytes + " << layout.savedOffsets[i]
         << " * saved_stride)";
    else
      os << "(void *)(uintptr_t)" << b.getName().getValue();
  });
  os << "};\n";
  for (ParamAttr p : params)
    if (p.getType().isInteger(1))
      os << "  const int8_t " << p.getName().getValue()
         << "_i8 = " << p.getName().getValue() << " ? 1 : 0;\n";
  if (params.empty()) {
    os << "  const void *const *scalars = NULL;\n";
  } else {
    os << "  const void *const scalars[] = {";
    llvm::interleaveComma(params, os, [&](ParamAttr p) {
      os << "&" << p.getName().getValue()
         << (p.getType().isInteger(1) ? "_i8" : "");
    });
    os << "};\n";
  }
  if (channels)
    os << "  return flexsn_launch_channels(&" << image
       << ", &desc, stream, T, N, ld, C, S, buffers, scalars);\n}\n\n";
  else if (coupled)
    os << "  return flexsn_launch_coupled(&" << image
       << ", &desc, stream, T, N, ld, H, buffers, scalars);\n}\n\n";
  else
    os << "  return flexsn_launch(&" << image
       << ", &desc, stream, T, N, ld, buffers, scalars);\n}\n\n";
}

} // namespace

/// Writes the module's one object of `target` (`format` names it in
/// diagnostics).
static LogicalResult writeSingleObject(ModuleOp module,
                                       gpu::CompilationTarget target,
                                       StringRef format, raw_ostream &os) {
  auto object = singleObject(module, target, format);
  if (failed(object))
    return failure();
  os << object->bytes;
  return success();
}

LogicalResult mlir::flexsn::translateToCubin(ModuleOp module, raw_ostream &os) {
  return writeSingleObject(module, gpu::CompilationTarget::Binary, "bin", os);
}

LogicalResult mlir::flexsn::translateToPTX(ModuleOp module, raw_ostream &os) {
  return writeSingleObject(module, gpu::CompilationTarget::Assembly, "isa", os);
}

LogicalResult mlir::flexsn::translateToFatbin(ModuleOp module,
                                              raw_ostream &os) {
  return translateToFatbin(module, os, toolkitPath);
}

LogicalResult mlir::flexsn::translateToFatbin(ModuleOp module, raw_ostream &os,
                                              StringRef toolkit) {
  auto objects = collectObjects(module);
  if (failed(objects))
    return failure();
  auto bytes = bundleFatbin(module, *objects, toolkit);
  if (failed(bytes))
    return failure();
  os << *bytes;
  return success();
}

/// `text` without its lines that start with one of `prefixes`, each of which
/// must match: a runtime file that no longer has a line the single-file
/// header drops is an error, not a header that silently fails to compile.
static FailureOr<std::string> withoutLines(ModuleOp module, StringRef text,
                                           ArrayRef<StringRef> prefixes) {
  std::string result;
  SmallVector<bool> found(prefixes.size(), false);
  while (!text.empty()) {
    auto [line, rest] = text.split('\n');
    text = rest;
    auto match = llvm::find_if(
        prefixes, [&](StringRef prefix) { return line.starts_with(prefix); });
    if (match != prefixes.end()) {
      found[match - prefixes.begin()] = true;
      continue;
    }
    result += line;
    result += '\n';
  }
  for (auto [prefix, seen] : llvm::zip(prefixes, found))
    if (!seen)
      return module.emitError("the embedded FlexSN runtime has no line `")
             << prefix << "`: rebuild flexsn-translate";
  return result;
}

LogicalResult mlir::flexsn::translateToHeader(ModuleOp module,
                                              raw_ostream &os) {
  auto objects = collectObjects(module);
  if (failed(objects))
    return failure();
  auto kernels = cheader::readKernels(module, "flexsn.gpu_kernels",
                                      "flexsn-lower-to-nvvm");
  if (failed(kernels))
    return failure();
  std::string bytes;
  std::string what;
  if (objects->size() == 1 &&
      objects->front().format == gpu::CompilationTarget::Binary) {
    bytes = objects->front().bytes.str();
    what = objects->front().chip + " cubin";
  } else {
    auto fatbin = bundleFatbin(module, *objects);
    if (failed(fatbin))
      return failure();
    bytes = std::move(*fatbin);
    what = "fatbin for";
    for (const DeviceObject &object : *objects)
      what += " " + object.chip;
  }

  std::string stem = cheader::neuronStem(*kernels);
  std::string image = "flexsn_" + stem + "_image";
  std::string guard = "FLEXSN_" + StringRef(stem).upper() + "_H";

  std::string runtimeHeader, runtimeSource;
  if (singleFileHeader) {
    // The runtime's files, less the includes of each other (they follow one
    // another here) and the feature macro, which comes too late in a
    // program's file to matter and would clash with the program's own.
    auto header =
        withoutLines(module, kRuntimeHeader, {"#include \"flexsn_status.h\""});
    auto backend = withoutLines(module, kRuntimeBackendHeader,
                                {"#include \"flexsn_runtime.h\""});
    auto cuda = withoutLines(module, kRuntimeCUDASource,
                             {"#define _POSIX_C_SOURCE",
                              "#include \"flexsn_backend.h\"",
                              "#include \"flexsn_cuda_driver.h\""});
    auto source = withoutLines(
        module, kRuntimeSource,
        {"#define _POSIX_C_SOURCE", "#include \"flexsn_backend.h\""});
    if (failed(header) || failed(backend) || failed(cuda) || failed(source))
      return failure();
    runtimeHeader = std::move(*header);
    runtimeSource = *backend + "\n" + *cuda + "\n" + *source;
  }

  os << "/* Generated by flexsn-translate --flexsn-to-header"
     << (singleFileHeader ? " --flexsn-header-single-file" : "") << ": " << stem
     << " kernels,\n * " << what << ". Do not edit.\n *\n";
  if (singleFileHeader)
    os << " * Single file: the FlexSN runtime is in this header too, and it "
          "needs no\n * include path, no cuda.h and no library but the C "
          "library's dlopen and\n * pthreads (-ldl -lpthread before glibc "
          "2.34). In exactly one C or C++\n * file of the program, define "
          "FLEXSN_IMPLEMENTATION before including it:\n * that file holds "
          "the runtime's code. The runtime loads the CUDA driver\n * "
          "(libcuda) at run time.";
  else
    os << " * Needs flexsn_runtime.h and the FlexSN runtime library, which "
          "loads the\n * CUDA driver (libcuda) at run time.";
  os << " Every function validates its\n * arguments, returns a "
        "flexsn_status (flexsn_status_message() explains\n * it), allocates "
        "nothing, and launches one kernel on `stream` in the\n * current "
        "context (none when T or N is 0). */\n";
  os << "#ifndef " << guard << "\n#define " << guard << "\n\n";
  if (singleFileHeader)
    os << kRuntimeStatusHeader << "\n" << runtimeHeader << "\n";
  else
    os << "#include \"flexsn_runtime.h\"\n\n";
  os << "#include <stdbool.h>\n#include <stddef.h>\n#include <stdint.h>\n\n";
  os << "#ifdef __cplusplus\nextern \"C\" {\n#endif\n\n";
  os << "static const unsigned char " << image << "_data[" << bytes.size()
     << "] = {";
  for (size_t i = 0; i < bytes.size(); ++i) {
    if (i % 16 == 0)
      os << "\n   ";
    os << llvm::formatv(" {0:x2},", static_cast<uint8_t>(bytes[i]));
  }
  os << "\n};\n\n";
  os << "static flexsn_image " << image << " = FLEXSN_IMAGE_INIT(" << image
     << "_data, sizeof(" << image << "_data));\n\n";
  os << "/* Unloads the kernels from every context; the next call loads "
        "them again. */\n"
     << "static inline flexsn_status flexsn_" << stem
     << "_unload(void) {\n  return flexsn_image_unload(&" << image
     << ");\n}\n\n";
  for (CompiledKernelAttr k : *kernels)
    emitKernelFunction(os, k, image);
  os << "#ifdef __cplusplus\n} /* extern \"C\" */\n#endif\n\n#endif /* "
     << guard << " */\n";
  if (singleFileHeader) {
    // Outside the guard, so that including the header again with
    // FLEXSN_IMPLEMENTATION defined still works; once per file whatever the
    // number of neuron headers.
    os << "\n#if defined(FLEXSN_IMPLEMENTATION) && "
          "!defined(FLEXSN_RUNTIME_IMPLEMENTATION_DEFINED)\n"
          "#define FLEXSN_RUNTIME_IMPLEMENTATION_DEFINED\n\n"
       << kRuntimeDriverHeader << "\n"
       << runtimeSource << "\n#endif /* FLEXSN_IMPLEMENTATION */\n";
  }
  return success();
}
