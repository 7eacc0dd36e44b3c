//===- Passes.td - FlexSN conversion passes ----------------*- tablegen -*-===//
//
// Part of the FlexSN project: an MLIR compiler for spiking-neuron dynamics.
//
//===----------------------------------------------------------------------===//

#ifndef FLEXSN_CONVERSION_PASSES_TD
#define FLEXSN_CONVERSION_PASSES_TD

include "mlir/Pass/PassBase.td"

def ConvertFlexSNToSCF : Pass<"convert-flexsn-to-scf", "::mlir::ModuleOp"> {
  let summary = "Lower flexsn.scan to SCF loops: neurons outside, time inside";
  let description = [{
    Rewrites every `flexsn.scan` into a loop nest over the neuron dimensions
    `N...` around an `scf.for` over time carrying the states in registers
    (iteration arguments). Each step loads the inputs (extending `f16`/`bf16`
    to `f32`), emits the step body — the neuron's body with `const`
    parameters replaced by their values and `flexsn.apply` inlined, or the
    scan's own region — and stores the outputs (truncating to the storage
    type; `i8` stores the value converted to an unsigned integer, for 0/1
    spikes). Absent buffers (null base pointer) read as zeros or are not
    written. Reductions are summed per neuron over time in registers, then
    added into their rank-0 buffer, which is zeroed first.

    Then the `flexsn.neuron` definitions, inlined everywhere, are erased.
    The per-step `flexsn` ops (spike, detach, surrogate_grad) are left for
    `flexsn-expand-surrogates`.

    Rationale:
    * The time loop is innermost so states stay in registers and each neuron
      reads and writes its sequence once; this is the CPU reference, kept
      simple rather than fast.
  }];
  let dependentDialects = ["::mlir::arith::ArithDialect",
                           "::mlir::memref::MemRefDialect",
                           "::mlir::scf::SCFDialect"];
}

#endif // FLEXSN_CONVERSION_PASSES_TD
