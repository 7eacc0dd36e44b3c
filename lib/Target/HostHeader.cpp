//===- HostHeader.cpp - C header of the CPU kernels -----------------------===//
//
// Part of the FlexSN project: an MLIR compiler for spiking-neuron dynamics.
//
//===----------------------------------------------------------------------===//
//
// The CPU kernels' C interface (`_mlir_ciface_<kernel>`) takes one MLIR
// memref descriptor per buffer. The header declares those functions and
// wraps each in a function shaped like the GPU header's (T, N, typed
// pointers, parameters; a flexsn_status), which checks its arguments and
// fills the descriptors, so a C program calls the object file of
// --flexsn-to-host-object without knowing MLIR's ABI.
//
//===----------------------------------------------------------------------===//

#include "CHeader.h"
#include "flexsn/Target/HostObject.h"
#include "flexsn/Target/Manifest.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;
using namespace mlir::flexsn;

namespace {

/// The largest element size in bytes of the kernel's buffers (bits count as
/// one byte): bounds every buffer's extent by T * N of them.
int64_t largestElementBytes(KernelSignatureAttr signature) {
  int64_t bytes = 1;
  for (KernelBufferAttr b : signature.getBuffers())
    bytes = std::max<int64_t>(
        bytes, (b.getElementType().getIntOrFloatBitWidth() + 7) / 8);
  return bytes;
}

/// Writes the declaration of `function` (the kernel's C interface) and the
/// checked wrapper `flexsn_cpu_<kernel>` around it.
LogicalResult writeKernel(raw_ostream &os, CompiledKernelAttr k,
                          LLVM::LLVMFuncOp function) {
  KernelSignatureAttr signature = k.getSignature();
  ArrayRef<KernelBufferAttr> buffers = signature.getBuffers();
  ArrayRef<ParamAttr> params = signature.getParams();
  StringRef name = k.getName().getValue();
  bool channels = signature.hasChannels();
  bool coupled = signature.isCoupled();

  // The C interface: a descriptor pointer per buffer, the runtime
  // parameters, then the thread count of a parallel kernel.
  LLVM::LLVMFunctionType type = function.getFunctionType();
  unsigned expected = buffers.size() + params.size();
  bool threads = type.getNumParams() == expected + 1;
  if (type.getNumParams() != expected && !threads)
    return function.emitError("its ")
           << type.getNumParams() << " arguments do not match the "
           << buffers.size() << " buffers and " << params.size()
           << " parameters of kernel " << name;
  if (threads && !type.getParamType(expected).isInteger(32))
    return function.emitError("its last argument should be the i32 thread "
                              "count");
  for (KernelBufferAttr b : buffers)
    if (b.getShape() == BufferShape::Scratch)
      return function.emitError("a CPU kernel has no reduction scratch");

  os << "void " << function.getName() << "(";
  llvm::interleaveComma(buffers, os, [&](KernelBufferAttr b) {
    os << "flexsn_memref" << getBufferSizeNames(b.getShape(), channels).size()
       << " *";
  });
  for (ParamAttr p : params)
    os << ", " << cheader::scalarType(p.getType());
  if (threads)
    os << ", int32_t";
  os << ");\n\n";

  bool hasWorkspace = cheader::hasWorkspace(k);
  WorkspaceLayout layout = k.getWorkspaceLayout();
  if (hasWorkspace)
    os << "/* Bytes of the training workspace of flexsn_cpu_" << name
       << ":\n * " << signature.getWorkspaceSequences()
       << " saved sequence(s) of T x N, " << layout.savedBytes
       << " byte(s) per element together, rounded up\n * to whole floats. "
       << "Every training kernel of " << signature.getNeuron().getValue()
       << " reports the same size. */\n"
       << "static inline size_t flexsn_cpu_" << name
       << "_workspace_bytes(int64_t T, int64_t N) {\n  return "
       << cheader::savedBytesExpr(k, "(size_t)T * (size_t)N") << ";\n}\n\n";

  cheader::writeKernelComment(
      os, k,
      "T steps of N neurons; sequences are\n * contiguous [T, N] (row t at "
      "t * N).");
  os << "static inline flexsn_status flexsn_cpu_" << name
     << "(int64_t T, int64_t N";
  if (channels)
    os << ", int64_t C, int64_t S";
  if (coupled)
    os << ", int64_t H";
  cheader::writeKernelParameters(os, k);
  if (threads)
    os << ",\n    int32_t num_threads";
  os << ") {\n";

  // The checks, in the GPU runtime's order; the function itself trusts its
  // descriptors.
  os << "  if (T < 0 || N < 0)\n    return FLEXSN_ERROR_NEGATIVE_SIZE;\n";
  if (channels)
    os << "  if (C < 1 || C > INT32_MAX || S < 1 || S > INT64_MAX / C ||\n"
       << "      N % (C * S) != 0)\n    return FLEXSN_ERROR_BAD_CHANNELS;\n";
  if (coupled)
    os << "  if (H < 1 || H > INT32_MAX || N % H != 0)\n"
       << "    return FLEXSN_ERROR_BAD_COUPLING;\n";
  for (KernelBufferAttr b : buffers)
    if (!isOptionalRole(b.getRole()) && !isWorkspaceRole(b.getRole()))
      os << "  if (!" << b.getName().getValue()
         << ")\n    return FLEXSN_ERROR_NULL_POINTER;\n";
  if (hasWorkspace)
    os << "  if (!workspace)\n    return FLEXSN_ERROR_NULL_POINTER;\n";
  os << "  if (T > 0 && N > INT64_MAX / " << largestElementBytes(signature)
     << " / T)\n    return FLEXSN_ERROR_SIZE_OVERFLOW;\n";
  if (channels)
    os << "  const int64_t B = N / (C * S);\n";
  if (hasWorkspace)
    os << "  char *const workspace_bytes = (char *)(uintptr_t)workspace;\n";

  // One descriptor per buffer: contiguous, row-major; a NULL pointer is an
  // absent buffer.
  for (auto [i, b] : llvm::enumerate(buffers)) {
    SmallVector<StringRef, 4> sizes =
        getBufferSizeNames(b.getShape(), channels);
    std::string pointer =
        isWorkspaceRole(b.getRole())
            ? ("workspace_bytes + " + Twine(layout.savedOffsets[i]) +
               " * T * N")
                  .str()
            : ("(void *)(uintptr_t)" + b.getName().getValue()).str();
    os << "  flexsn_memref" << sizes.size() << " d" << i << " = {" << pointer
       << ", " << pointer << ", 0";
    if (!sizes.empty()) {
      os << ", {" << llvm::join(sizes, ", ") << "}, {";
      for (size_t d = 0; d < sizes.size(); ++d) {
        os << (d ? ", " : "");
        ArrayRef<StringRef> inner = ArrayRef(sizes).drop_front(d + 1);
        os << (inner.empty() ? "1" : llvm::join(inner, " * "));
      }
      os << "}";
    }
    os << "};\n";
  }
  os << "  " << function.getName() << "(";
  llvm::interleaveComma(llvm::seq<size_t>(0, buffers.size()), os,
                        [&](size_t i) { os << "&d" << i; });
  for (ParamAttr p : params)
    os << ", " << p.getName().getValue();
  if (threads)
    os << ", num_threads";
  os << ");\n  return FLEXSN_SUCCESS;\n}\n\n";
  return success();
}

} // namespace

LogicalResult mlir::flexsn::translateToHostHeader(ModuleOp module,
                                                  raw_ostream &os) {
  auto kernels =
      cheader::readKernels(module, "flexsn.cpu_kernels", "flexsn-lower-to-cpu");
  if (failed(kernels))
    return failure();
  SmallVector<LLVM::LLVMFuncOp> functions;
  for (CompiledKernelAttr k : *kernels) {
    std::string name = ("_mlir_ciface_" + k.getName().getValue()).str();
    auto function = module.lookupSymbol<LLVM::LLVMFuncOp>(name);
    if (!function)
      return module.emitError("no function @")
             << name << ": lower the module with flexsn-lower-to-cpu";
    functions.push_back(function);
  }

  std::string stem = cheader::neuronStem(*kernels);
  std::string guard = "FLEXSN_CPU_" + StringRef(stem).upper() + "_H";
  os << "/* Generated by flexsn-translate --flexsn-to-host-header: " << stem
     << " CPU kernels. Do not edit.\n"
     << " *\n * The functions are in the object file that "
        "--flexsn-to-host-object writes\n * for the same module; link it with "
        "libm and, for parallel kernels, LLVM's\n * OpenMP runtime (libomp). "
        "Every function checks its arguments, returns a\n * flexsn_status, "
        "allocates nothing and returns when the results are written.\n"
     << " * num_threads: the threads that run the neurons (not positive: "
        "OpenMP's\n * default); the results are bitwise the same for any "
        "count. */\n";
  os << "#ifndef " << guard << "\n#define " << guard << "\n\n";
  os << "#include \"flexsn_status.h\"\n\n#include <stdbool.h>\n"
     << "#include <stddef.h>\n#include <stdint.h>\n\n";
  os << "#ifdef __cplusplus\nextern \"C\" {\n#endif\n\n";
  os << "#ifndef FLEXSN_MEMREF_DESCRIPTORS\n"
     << "#define FLEXSN_MEMREF_DESCRIPTORS\n"
     << "/* MLIR's memref descriptors (StridedMemRefType) of rank 0 to 4: the "
        "CPU\n * functions' C interface takes one per buffer. */\n";
  for (int rank = 0; rank <= 4; ++rank) {
    os << "typedef struct flexsn_memref" << rank
       << " {\n  void *allocated;\n  void *aligned;\n  int64_t offset;\n";
    if (rank)
      os << "  int64_t sizes[" << rank << "];\n  int64_t strides[" << rank
         << "];\n";
    os << "} flexsn_memref" << rank << ";\n";
  }
  os << "#endif\n\n";
  for (auto [k, function] : llvm::zip_equal(*kernels, functions))
    if (failed(writeKernel(os, k, function)))
      return failure();
  os << "#ifdef __cplusplus\n} /* extern \"C\" */\n#endif\n\n#endif /* "
     << guard << " */\n";
  return success();
}
