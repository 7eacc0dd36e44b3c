//===- CpuKernel.h - JIT-compiled CPU kernels of a neuron -------*- C++ -*-===//
//
// Part of the FlexSN project: an MLIR compiler for spiking-neuron dynamics.
//
//===----------------------------------------------------------------------===//
//
// Compiles one kernel variant of one neuron through `flexsn-lower-to-cpu` and
// runs it in process with MLIR's ExecutionEngine: the CPU path that serves
// as the numerics oracle (flexsn-run, the unit tests).
//
//===----------------------------------------------------------------------===//

#ifndef FLEXSN_RUNNER_CPUKERNEL_H
#define FLEXSN_RUNNER_CPUKERNEL_H

#include "flexsn/Dialect/FlexSN/IR/FlexSNAttrs.h"

#include "mlir/IR/Attributes.h"
#include "mlir/IR/BuiltinOps.h"
#include "llvm/Support/Error.h"

#include <memory>

namespace mlir {
class ExecutionEngine;

namespace flexsn {
class NeuronOp;

/// One buffer argument: contiguous, shape [T, N] (sequences), [N]
/// (per-neuron states) or [] (a reduced parameter gradient); in a kernel
/// with channels, [T, B, C, S], [B, C, S] and [C] (per-channel parameters
/// and their gradients). A null `data`
/// marks the buffer absent: an absent initial state or incoming gradient
/// reads as zeros, an absent result is not written.
struct KernelBuffer {
  void *data = nullptr;
  SmallVector<int64_t, 4> shape;
};

/// Sets the default of parameter `name` of `neuron` (a `const` parameter is
/// then specialized to it). Fails with a message if there is no such
/// parameter or `value`'s type is not the parameter's.
llvm::Error setParamDefault(NeuronOp neuron, StringRef name, TypedAttr value);

/// A compiled kernel variant of one neuron, for one storage type.
class CpuKernel {
public:
  /// Compiles `variant` of `neuron` (in `module`, which is not modified)
  /// with sequences stored as `storageType` (f32, f16 or bf16) and spike
  /// outputs as `spikes` (u8: bytes, bits: 8 per byte; inference and
  /// final-state only). `perfListener` tells perf about the JIT-compiled
  /// code: it writes a jitdump directory under $JITDUMPDIR (else the
  /// temporary directory)/.debug/jit for every kernel, so it is off unless
  /// asked for. `saveInStorageType` is the pipelines' option of that name
  /// (training kernels of f16/bf16 save in f16/bf16, else in f32).
  static llvm::Expected<std::unique_ptr<CpuKernel>>
  compile(ModuleOp module, StringRef neuron, KernelVariant variant,
          Type storageType, SpikeStorage spikes = SpikeStorage::Dense,
          bool perfListener = false, bool saveInStorageType = true);
  ~CpuKernel();

  /// Runs the kernel. `buffers` come in the order of the kernel's signature
  /// (for inference and final-state: inputs, initial states, outputs, state
  /// results; for the training variants see flexsn-autodiff), and `params`
  /// give the runtime parameters in declaration order (FloatAttr for f32,
  /// IntegerAttr for i1 and i32). The neurons run on `numThreads` threads
  /// (not positive: OpenMP's default); the results are bitwise the same
  /// for any count.
  llvm::Error run(ArrayRef<KernelBuffer> buffers, ArrayRef<TypedAttr> params,
                  int32_t numThreads = 0) const;

  /// The runtime parameters' types, in order.
  SmallVector<Type> getParamTypes() const;
  StringRef getFunctionName() const { return functionName; }
  /// The kernel's signature: its buffers in order, the workspace.
  KernelSignatureAttr getSignature() const { return signature; }

private:
  CpuKernel() = default;

  std::unique_ptr<ExecutionEngine> engine;
  std::string functionName;
  KernelSignatureAttr signature;
};

} // namespace flexsn
} // namespace mlir

#endif // FLEXSN_RUNNER_CPUKERNEL_H
