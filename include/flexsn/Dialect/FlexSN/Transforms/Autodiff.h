//===- Autodiff.h - Reverse-mode differentiation of step bodies -*- C++ -*-===//
//
// Part of the FlexSN project: an MLIR compiler for spiking-neuron dynamics.
//
//===----------------------------------------------------------------------===//
//
// Training kernels come from a forward scan's body alone, whatever wrote it
// (a neuron, specialized and inlined, or a kernel built by hand or by
// another pass). The forward step is that body plus the values the backward
// step must not recompute; the backward step recomputes what it needs from
// those saved values and runs the reverse sweep of the body, op by op, with
// one derivative rule per op.
//
//===----------------------------------------------------------------------===//

#ifndef FLEXSN_DIALECT_FLEXSN_TRANSFORMS_AUTODIFF_H
#define FLEXSN_DIALECT_FLEXSN_TRANSFORMS_AUTODIFF_H

#include "flexsn/Dialect/FlexSN/IR/FlexSNOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

namespace mlir::flexsn {

/// What the backward step reads besides incoming gradients: per step,
/// `saved` values written by the forward step, and `rereadInputs`, inputs
/// read again from the input sequences (cheaper than saving a copy).
struct SavePlan {
  SmallVector<Value> saved;           // values of the forward body
  SmallVector<unsigned> rereadInputs; // input positions
  SmallVector<Value> needed; // what the derivative rules read (not free)
};

/// Chooses what to save so the backward step moves the fewest bytes: a
/// minimum vertex cut, in the forward body's dataflow graph, between the
/// step's sources (inputs, states) and the values the derivative rules
/// read. Saving a value costs a write and a read, re-reading an input one
/// read; parameters and constants are free. `storeAll` saves every value
/// the rules read instead.
FailureOr<SavePlan> planSaves(Block &forwardBody, unsigned numInputs,
                              unsigned numStates, unsigned numOutputs,
                              ArrayRef<bool> trainable, bool storeAll);

/// Emits the backward step into `backward`, whose arguments are
/// (grad outputs..., grad state sequences..., saved..., reread inputs...,
/// state-gradient carries..., params...), and yields
/// (grad inputs..., new carries..., trainable-parameter contributions...).
LogicalResult emitBackwardStep(Block &forwardBody, const SavePlan &plan,
                               unsigned numInputs, unsigned numStates,
                               unsigned numOutputs, ArrayRef<bool> trainable,
                               Block &backward);

/// The values the forward step stores for `plan.saved` when they are saved
/// in `storage` (f16, bf16), as f32 values `storage` holds exactly: each
/// rounded to nearest, unless a decision that the backward step recomputes
/// from the saved values (a `flexsn.spike` or an `i1` value its rules read)
/// would then differ from the forward's; then every inexact one takes its
/// other neighbour in `storage`, on the forward value's side of the
/// rounding. A decision monotonic in one saved value (a spike of `h - v_th`)
/// then always agrees, so the backward never takes the branch the forward
/// did not. Emitted before the body's terminator.
SmallVector<Value> roundSavesKeepingDecisions(Block &forwardBody,
                                              const SavePlan &plan,
                                              unsigned numInputs,
                                              unsigned numStates,
                                              FloatType storage);

/// Makes `forward` trainable. It must be a forward kernel function that
/// saves nothing yet, whose scan runs an inline body forward in time over
/// state sequences, without reductions. Plans what the step saves, adds
/// those `saved_output` buffers to `forward` (after its last output or state
/// sequence) and creates its backward kernel function right after it, named
/// by `getBackwardKernelName`, with buffers named after the forward's
/// (`<output>_grad`, `<state seq>_grad`, `<state>_final_grad`,
/// `<input>_grad`, `<init>_grad`, `<param>_grad`). `trainable` says, for
/// each of the scan's parameters, whether it gets a gradient.
///
/// `storeAll` saves every value the backward reads instead of the cheapest
/// set; `saveInStorageType` saves them in the kernel's storage type instead
/// of f32 (fewer bytes; the backward then reads values rounded by
/// `roundSavesKeepingDecisions`).
FailureOr<func::FuncOp> differentiateKernel(func::FuncOp forward,
                                            ArrayRef<bool> trainable,
                                            bool storeAll,
                                            bool saveInStorageType);

/// The backward kernel's name of the forward kernel `forwardName`: its last
/// `forward` replaced by `backward` (`lif_forward_f32` ->
/// `lif_backward_f32`), or `_backward` appended.
std::string getBackwardKernelName(StringRef forwardName);

} // namespace mlir::flexsn

#endif // FLEXSN_DIALECT_FLEXSN_TRANSFORMS_AUTODIFF_H
