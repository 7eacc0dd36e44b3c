//===- Passes.h - Passes of the FlexSN pipelines ----------------*- C++ -*-===//
//
// Part of the FlexSN project: an MLIR compiler for spiking-neuron dynamics.
//
//===----------------------------------------------------------------------===//

#ifndef FLEXSN_PIPELINES_PASSES_H
#define FLEXSN_PIPELINES_PASSES_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"

namespace mlir::flexsn {

#define GEN_PASS_DECL
#include "flexsn/Pipelines/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "flexsn/Pipelines/Passes.h.inc"

} // namespace mlir::flexsn

#endif // FLEXSN_PIPELINES_PASSES_H
