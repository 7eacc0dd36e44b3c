//===- KernelInterface.h - What a kernel function's arguments are -*- C++ -*-===//
//
// Part of the FlexSN project: an MLIR compiler for spiking-neuron dynamics.
//
//===----------------------------------------------------------------------===//
//
// A kernel function (a `func.func` with `flexsn.variant`, holding one
// `flexsn.scan`) takes its buffers in the order of docs/ABI.md. Both
// lowerings describe each kernel they produce with the same dictionary
// (`flexsn.gpu_kernels`, `flexsn.cpu_kernels` on the module), which the
// header and manifest emitters read: roles are classified here, once.
//
//===----------------------------------------------------------------------===//

#ifndef FLEXSN_DIALECT_FLEXSN_TRANSFORMS_KERNELINTERFACE_H
#define FLEXSN_DIALECT_FLEXSN_TRANSFORMS_KERNELINTERFACE_H

#include "flexsn/Dialect/FlexSN/IR/FlexSNOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

namespace mlir::flexsn {

/// The buffers of one kernel function's scan: its memref operands in order
/// (inputs, inits, outputs, states, reductions), each with a role spelled as
/// the runtime's buffer kind (`input_sequence`, `saved_output`, ...).
struct KernelBuffers {
  func::FuncOp func;
  ScanOp scan;
  NeuronOp neuron; // the callee, or null for an inline body
  SmallVector<StringRef> roles;
  SmallVector<Type> elementTypes;

  unsigned size() const { return roles.size(); }
};

/// Classifies the buffers of `func`, which must hold exactly one scan and
/// carry `flexsn.variant`; otherwise emits an error on `func` and fails.
FailureOr<KernelBuffers> classifyKernelBuffers(func::FuncOp func);

/// The kernel's description: name, neuron, variant, dtype, buffer roles,
/// names and dtypes, workspace (saved sequences, reduction slots), runtime
/// parameters; for a GPU kernel (`vectorWidth` > 0), its two entry points
/// and the vector kernel's neurons per thread. A
/// `deterministic` kernel has the reduction scratch as its last buffer.
DictionaryAttr describeKernel(Builder &b, const KernelBuffers &buffers,
                              int64_t vectorWidth, bool deterministic);

} // namespace mlir::flexsn

#endif // FLEXSN_DIALECT_FLEXSN_TRANSFORMS_KERNELINTERFACE_H
