//===- TorchStep.h - A neuron's step as a PyTorch function ------*- C++ -*-===//
//
// Part of the FlexSN project: an MLIR compiler for spiking-neuron dynamics.
//
//===----------------------------------------------------------------------===//
//
// The step of each neuron as Python over PyTorch tensors: one statement per
// op of the body. Under torch.compile the Python layer runs a neuron's time
// loop with it, so that Inductor fuses the step with its neighbours (a batch
// norm before it, a residual add after it) as it fuses hand-written neurons;
// eagerly the compiled kernels run. The function computes what the kernels
// compute, op for op, in float32 arithmetic.
//
//===----------------------------------------------------------------------===//

#ifndef FLEXSN_TARGET_TORCHSTEP_H
#define FLEXSN_TARGET_TORCHSTEP_H

#include "mlir/Support/LLVM.h"

namespace llvm {
class raw_ostream;
} // namespace llvm

namespace mlir {
class ModuleOp;

namespace flexsn {

/// Writes a Python module to `os` with one function per `flexsn.neuron` of
/// `module` (after inlining `flexsn.apply`):
///
///     def <neuron>(F, <inputs>, <states>, *, <params>=<default>):
///         ...
///         return (<outputs>, <new states>)
///
/// `F` supplies what is not a Python operator (F.select, F.spike, F.exp,
/// ...: python/flexsn/torch/_torch_step.py). Fails, naming the op, on an op
/// that has no PyTorch form here.
LogicalResult translateToTorchStep(ModuleOp module, llvm::raw_ostream &os);

} // namespace flexsn
} // namespace mlir

#endif // FLEXSN_TARGET_TORCHSTEP_H
