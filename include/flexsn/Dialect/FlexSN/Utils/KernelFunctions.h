//===- KernelFunctions.h - Kernel functions and their scan ------*- C++ -*-===//
//
// Part of the FlexSN project: an MLIR compiler for spiking-neuron dynamics.
//
//===----------------------------------------------------------------------===//
//
// A kernel function is a `func.func` carrying `flexsn.kernel` (its typed
// signature, set by kernel generation or autodiff) and holding one
// `flexsn.scan` over its arguments. Both lowerings find the scan's buffers
// here, checked once against the signature.
//
//===----------------------------------------------------------------------===//

#ifndef FLEXSN_DIALECT_FLEXSN_UTILS_KERNELFUNCTIONS_H
#define FLEXSN_DIALECT_FLEXSN_UTILS_KERNELFUNCTIONS_H

#include "flexsn/Dialect/FlexSN/IR/FlexSNOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

namespace mlir::flexsn {

/// A kernel function and its scan.
struct KernelFunction {
  func::FuncOp func;
  KernelSignatureAttr signature;
  ScanOp scan;
  NeuronOp neuron; // the callee, or null for an inline body
  /// For each memref operand of the scan, in order (inputs, inits, outputs,
  /// states, reductions): the index of its buffer in the signature, which
  /// is its function argument number.
  SmallVector<unsigned> operandBuffers;
  /// A coupled kernel's coupling (KernelSignatureAttr): the scan input it
  /// adds to and the scan output it reads at the previous step (positions
  /// in the scan's inputs and outputs), and the coupling weights' buffer
  /// (not a scan operand).
  struct Coupling {
    unsigned input, output, weights;
  };
  std::optional<Coupling> coupling;
};

/// The kernel functions of `module`: the functions carrying `flexsn.kernel`.
SmallVector<func::FuncOp> getKernelFunctions(ModuleOp module);

/// Fails, with an error on each, if `module` still holds a function marked
/// `flexsn.block`: kernel generation replaces blocks by their kernels, so a
/// lowering that meets one would otherwise leave it uncompiled.
LogicalResult checkBlocksCompiled(ModuleOp module);

/// Checks `func` (a kernel function) and maps its scan's operands to its
/// buffers: it must hold exactly one scan, whose buffers are distinct
/// function arguments of the roles their operand positions imply, and
/// whose parameters are the function's parameter arguments in order.
/// Otherwise emits an error and fails.
FailureOr<KernelFunction> analyzeKernelFunction(func::FuncOp func);

/// The buffers of a neuron's step run over sequences stored as `dtype`,
/// named after its values: inputs, initial states (`<state>_init`), outputs,
/// then state sequences (`<state>_seq`) or, with `finalStates`, final states
/// (`<state>_final`). Inference, final-state and training forward kernels
/// start with them. The spike outputs' buffers hold `spikeType` (null:
/// `dtype`).
SmallVector<KernelBufferAttr> getStepBuffers(NeuronOp neuron, Type dtype,
                                             bool finalStates,
                                             Type spikeType = {});

/// The buffers of a neuron's shaped parameters (`per_neuron_param` or
/// `per_channel_param`, f32, named after them), in declaration order. Every
/// kernel of the neuron takes them after its sequences and states.
SmallVector<KernelBufferAttr> getShapedParamBuffers(NeuronOp neuron);

/// The neuron's runtime and trainable parameters that are scalar kernel
/// arguments (the others are buffers).
SmallVector<ParamAttr> getScalarRuntimeParams(NeuronOp neuron);

/// The values a kernel function's scan takes as `neuron`'s params: each
/// runtime parameter's scalar argument or buffer, in order.
SmallVector<Value> getScanParams(func::FuncOp func, NeuronOp neuron);

/// How a kernel's scan indexes a buffer of shape class `shape`: over
/// `(t, n)`, or with `channels` over `(t, b, c, s)`.
AffineMap getShapeClassMap(BufferShape shape, bool channels, MLIRContext *ctx);

/// The memref a kernel function takes for `buffer`: a sequence has rank 2
/// (rank 4, [T, B, C, S], in a kernel with `channels`).
MemRefType getBufferType(KernelBufferAttr buffer, bool channels);

/// Creates the scan of a kernel function of `signature` on its arguments;
/// its maps are those of the buffers' shape classes.
ScanOp createKernelScan(OpBuilder &builder, Location loc,
                        KernelSignatureAttr signature, FlatSymbolRefAttr callee,
                        ValueRange inputs, ValueRange inits, ValueRange params,
                        ValueRange outputs, ValueRange states,
                        ValueRange reductions, bool reverse);

/// Creates `name`, the kernel function of `signature`, with an entry block:
/// its arguments are the buffers' memrefs, then the parameters' scalars.
func::FuncOp createKernelFunction(OpBuilder &builder, Location loc,
                                  StringRef name,
                                  KernelSignatureAttr signature);

/// How a compile option makes a kernel differ from its variant's default:
/// the spike outputs' element type (null: the storage type), the signature's
/// `options` (null: none) and what the kernel's name gains.
struct KernelChoice {
  Type spikeType;
  DictionaryAttr options;
  std::string nameSuffix;
};

/// Creates `neuron`'s kernel function of `variant`, named by getKernelName
/// and `choice`'s suffix,
/// at `builder`: its buffers are the step's (state sequences, or final
/// states for final-state kernels), then the shaped parameters'; its
/// parameters the scalar runtime ones. It holds one scan over its arguments
/// that calls the neuron, or with `callNeuron` false has an empty body
/// region for the caller to fill.
func::FuncOp createNeuronKernel(OpBuilder &builder, NeuronOp neuron,
                                KernelVariant variant, StorageType storage,
                                bool callNeuron,
                                const KernelChoice &choice = {});

/// The name of a kernel: `<neuron>_<variant>_<storage>` with `_` for `-`.
std::string getKernelName(StringRef neuron, KernelVariant variant,
                          StorageType storage);

} // namespace mlir::flexsn

#endif // FLEXSN_DIALECT_FLEXSN_UTILS_KERNELFUNCTIONS_H
