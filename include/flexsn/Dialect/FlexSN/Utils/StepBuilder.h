//===- StepBuilder.h - Emit one time step of a per-step body ----*- C++ -*-===//
//
// Part of the FlexSN project: an MLIR compiler for spiking-neuron dynamics.
//
//===----------------------------------------------------------------------===//
//
// Both lowerings of flexsn.scan (CPU loops, GPU threads) share one time
// loop: emitTimeLoop runs the step body (emitted once per neuron of a group,
// at a builder's insertion point, from scalar values) over the steps,
// carrying states and sums; the lowerings differ only in how a group of
// neurons reaches its buffers (ScanGroupAccess) and in how groups map to
// loops or threads.
//
//===----------------------------------------------------------------------===//

#ifndef FLEXSN_DIALECT_FLEXSN_UTILS_STEPBUILDER_H
#define FLEXSN_DIALECT_FLEXSN_UTILS_STEPBUILDER_H

#include "flexsn/Dialect/FlexSN/IR/FlexSNOps.h"

namespace mlir::flexsn {

/// Inlines every `flexsn.apply` in `module`, in neurons and in scans' inline
/// bodies (and in what the inlined bodies apply in turn), with MLIR's
/// inliner, so that step bodies are flat. Fails, with an error on the
/// application, if a body holds an op whose dialect does not allow inlining.
LogicalResult inlineApplications(ModuleOp module);

/// Emits one step of `neuron`: `inputsAndStates` feed its inputs and states,
/// `runtimeParams` its runtime and trainable parameters (in order), and
/// `const` parameters become constants. The body must hold no `flexsn.apply`
/// (see inlineApplications). Returns (outputs..., new_states...).
/// With `width` lanes, every value is a vector<width x T> of its scalar
/// type T (`const` parameters are splatted; the body must be vectorizable).
SmallVector<Value> emitNeuronStep(OpBuilder &builder, Location loc,
                                  NeuronOp neuron, ValueRange inputsAndStates,
                                  ValueRange runtimeParams, unsigned width = 0);

/// Emits a single-block step body (a neuron's or a scan's inline region)
/// with `args` for its block arguments, and returns the values it yields.
/// With `width` lanes (not 0), `args` are vectors of `width` elements and
/// so is every value of the step: the body must be vectorizable.
SmallVector<Value> emitStepBody(OpBuilder &builder, Block &body,
                                ValueRange args, unsigned width = 0);

/// Zero in f32, splatted over `width` lanes when `width` is not 0.
Value zeroLanes(OpBuilder &builder, Location loc, unsigned width);

/// Whether `body` can run on vectors of lanes: every op is a scalar
/// constant or elementwise (arith, math) on integers and floats, with no
/// region, and uses no value from outside but constants.
bool isVectorizableBody(Block &body);

/// How a lowering reaches a scan's buffers for one group of neurons (a CPU
/// loop point, a GPU thread's vector lanes): every call loads or stores one
/// value per lane, at time index `step` (counted from the first row, also
/// in a reverse scan). The callbacks emit at the builder given to
/// emitTimeLoop.
struct ScanGroupAccess {
  unsigned lanes;
  /// Input k's values at `step`, as f32 (zero when an optional input is
  /// absent).
  function_ref<SmallVector<Value>(unsigned k, Value step)> loadInput;
  /// Stores output k's values at `step`.
  function_ref<void(unsigned k, Value step, ValueRange lanes)> storeOutput;
  /// Stores state s's values after `step` (state sequences only).
  function_ref<void(unsigned s, Value step, ValueRange lanes)> storeState;
  /// Adds reduction r's contributions at `step` (reductions whose map keeps
  /// t only; the others the loop carries).
  function_ref<void(unsigned r, Value step, ValueRange lanes)> addAtStep;
  /// Not 0: each lane is a vector of `width` neurons (the CPU's SIMD
  /// lanes), and so are the states, parameters and sums.
  unsigned width = 0;
};

/// Emits one step of `scan` for one group of neurons at time index `step`:
/// loads the inputs, runs the body once per lane on them, the `carries`
/// ([state][lane], then the sums over time of `carriedReductions`
/// [reduction][lane]) and `laneParams`, stores the outputs and state
/// sequences and adds the other reductions' contributions. Returns the next
/// carries, in the same order.
SmallVector<Value> emitStep(OpBuilder &builder, Location loc, ScanOp scan,
                            NeuronOp neuron, Value step, ValueRange carries,
                            ArrayRef<SmallVector<Value>> laneParams,
                            ArrayRef<unsigned> carriedReductions,
                            const ScanGroupAccess &access);

/// Emits the time loop of `scan` for one group of neurons, over `numSteps`
/// steps (an index or integer value), forward or in reverse as the scan
/// says: each step loads the inputs, runs the body once per lane (`neuron`'s
/// when the scan calls one, else the scan's region) on the inputs, the
/// carried states and `laneParams` [lane][param], stores the outputs and
/// state sequences, and adds the reductions' contributions. The loop starts
/// from `initialStates` [state][lane] and carries, after the states, the
/// sums over time of `carriedReductions` [reduction][lane], from zero.
/// Returns the loop's results: the final states, then those sums.
ValueRange emitTimeLoop(OpBuilder &builder, Location loc, ScanOp scan,
                        NeuronOp neuron, Value numSteps,
                        ArrayRef<Value> initialStates,
                        ArrayRef<SmallVector<Value>> laneParams,
                        ArrayRef<unsigned> carriedReductions,
                        const ScanGroupAccess &access);

} // namespace mlir::flexsn

#endif // FLEXSN_DIALECT_FLEXSN_UTILS_STEPBUILDER_H
