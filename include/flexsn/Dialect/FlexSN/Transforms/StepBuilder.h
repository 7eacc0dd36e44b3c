//===- StepBuilder.h - Emit one time step of a per-step body ----*- C++ -*-===//
//
// Part of the FlexSN project: an MLIR compiler for spiking-neuron dynamics.
//
//===----------------------------------------------------------------------===//
//
// Both lowerings of flexsn.scan (CPU loops, GPU threads) place the step body
// inside their own time loop. These helpers emit that body once, at a
// builder's insertion point, from scalar values.
//
//===----------------------------------------------------------------------===//

#ifndef FLEXSN_DIALECT_FLEXSN_TRANSFORMS_STEPBUILDER_H
#define FLEXSN_DIALECT_FLEXSN_TRANSFORMS_STEPBUILDER_H

#include "flexsn/Dialect/FlexSN/IR/FlexSNOps.h"

namespace mlir::flexsn {

/// Inlines every `flexsn.apply` in the neurons of `module` (and in what the
/// inlined bodies apply in turn) with MLIR's inliner, so that step bodies are
/// flat. Fails, with an error on the application, if a body holds an op whose
/// dialect does not allow inlining.
LogicalResult inlineApplications(ModuleOp module);

/// Emits one step of `neuron`: `inputsAndStates` feed its inputs and states,
/// `runtimeParams` its runtime and trainable parameters (in order), and
/// `const` parameters become constants. The body must hold no `flexsn.apply`
/// (see inlineApplications). Returns (outputs..., new_states...).
SmallVector<Value> emitNeuronStep(OpBuilder &builder, Location loc,
                                  NeuronOp neuron, ValueRange inputsAndStates,
                                  ValueRange runtimeParams);

/// Emits a single-block step body (a neuron's or a scan's inline region)
/// with `args` for its block arguments, and returns the values it yields.
SmallVector<Value> emitStepBody(OpBuilder &builder, Block &body,
                                ValueRange args);

} // namespace mlir::flexsn

#endif // FLEXSN_DIALECT_FLEXSN_TRANSFORMS_STEPBUILDER_H
