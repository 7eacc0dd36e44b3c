//===- CHeader.h - Pieces shared by the generated C headers -----*- C++ -*-===//
//
// Part of the FlexSN project: an MLIR compiler for spiking-neuron dynamics.
//
//===----------------------------------------------------------------------===//
//
// The GPU header (--flexsn-to-header) and the CPU header
// (--flexsn-to-host-header) describe the same kernel signatures to C: the
// same element and scalar types, buffer comments and workspace sizes, so a
// caller can move between them by changing the function's prefix.
//
//===----------------------------------------------------------------------===//

#ifndef FLEXSN_LIB_TARGET_CHEADER_H
#define FLEXSN_LIB_TARGET_CHEADER_H

#include "flexsn/Dialect/FlexSN/IR/FlexSNAttrs.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Support/LLVM.h"

#include <string>

namespace mlir::flexsn::cheader {

/// The C type of one element of a buffer of `type`.
std::string elementType(Type type);

/// The C type of a runtime parameter of `type`.
std::string scalarType(Type type);

/// What a buffer of `role` holds in a kernel of `variant`, for comments.
const char *roleComment(BufferRole role, KernelVariant variant);

/// The kernels the module's `attrName` list (flexsn.gpu_kernels or
/// flexsn.cpu_kernels) describes; an error naming `pipeline` without one.
FailureOr<SmallVector<CompiledKernelAttr>>
readKernels(ModuleOp module, StringRef attrName, StringRef pipeline);

/// The kernels' neuron names joined by '_', in order of first appearance:
/// the stem of the header's names, so two headers share a translation unit.
std::string neuronStem(ArrayRef<CompiledKernelAttr> kernels);

/// Whether the kernel takes a training workspace (saved sequences or the
/// deterministic reduction scratch).
bool hasWorkspace(CompiledKernelAttr kernel);

/// Whether the kernel writes its workspace (a forward kernel, or one with
/// reduction scratch).
bool writesWorkspace(CompiledKernelAttr kernel);

/// The C expression of the saved sequences' bytes for `elements` elements
/// per sequence, rounded up to whole floats.
std::string savedBytesExpr(CompiledKernelAttr kernel, StringRef elements);

/// The comment above a kernel's function: the neuron, variant and storage,
/// `shapeNote` (how T and N lay out its buffers), one line per argument
/// buffer, the workspace and runtime parameters.
void writeKernelComment(raw_ostream &os, CompiledKernelAttr kernel,
                        StringRef shapeNote);

/// The kernel's buffers, workspace and runtime parameters as C parameters
/// (each after ",\n    "), in the order both headers' functions take them.
void writeKernelParameters(raw_ostream &os, CompiledKernelAttr kernel);

} // namespace mlir::flexsn::cheader

#endif // FLEXSN_LIB_TARGET_CHEADER_H
