//===- Passes.td - Passes of the FlexSN pipelines ----------*- tablegen -*-===//
//
// Part of the FlexSN project: an MLIR compiler for spiking-neuron dynamics.
//
//===----------------------------------------------------------------------===//
//
// Passes that only the pipelines run: checks of a pipeline's own options.
//
//===----------------------------------------------------------------------===//

#ifndef FLEXSN_PIPELINES_PASSES_TD
#define FLEXSN_PIPELINES_PASSES_TD

include "mlir/Pass/PassBase.td"

def FlexSNCheckGPUOptions : Pass<"flexsn-check-gpu-options",
                                 "::mlir::ModuleOp"> {
  let summary = "Fail early on a GPU pipeline configuration that cannot work";
  let description = [{
    Checks, before the GPU pipeline spends time lowering, that `toolkit`
    holds `bin/ptxas` and `nvvm/libdevice/`, that `format` is one of
    `bin`, `fatbin`, `isa`, that every chip is one CUDA 13's ptxas
    targets (`sm_70` ... `sm_121f`, docs/Reference.md), and that every
    comma-separated item of `features` is `+` or `-` and a feature LLVM's
    NVPTX target knows (`+ptx80`: a PTX ISA version). `chip=` naming no
    chip is an error, not the default.

    Rationale:
    * `gpu-module-to-binary` reports both problems as diagnostics but can
      still succeed (finding ptxas elsewhere, or emitting nothing), which
      would hide a broken setup behind exit code 0.
    * An unknown chip would only fail in ptxas, after the whole lowering,
      with the PTX of every kernel in the diagnostic.
    * LLVM only warns about an unknown feature and drops it: the kernels
      would target another PTX ISA than the one asked for.
  }];
  let options = [
    Option<"toolkit", "toolkit", "std::string", "\"/usr/local/cuda\"",
           "CUDA toolkit directory">,
    Option<"format", "format", "std::string", "\"bin\"",
           "Object format: bin, fatbin or isa">,
    ListOption<"chips", "chip", "std::string",
               "Target architectures (sm_90, ...)">,
    Option<"features", "features", "std::string", "\"+ptx80\"",
           "PTX features, e.g. +ptx80 (empty: none)">,
  ];
}

#endif // FLEXSN_PIPELINES_PASSES_TD
