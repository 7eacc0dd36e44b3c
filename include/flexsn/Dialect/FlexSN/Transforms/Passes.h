//===- Passes.h - FlexSN transformation passes ------------------*- C++ -*-===//
//
// Part of the FlexSN project: an MLIR compiler for spiking-neuron dynamics.
//
//===----------------------------------------------------------------------===//

#ifndef FLEXSN_DIALECT_FLEXSN_TRANSFORMS_PASSES_H
#define FLEXSN_DIALECT_FLEXSN_TRANSFORMS_PASSES_H

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Pass/Pass.h"

namespace mlir::flexsn {

#define GEN_PASS_DECL
#include "flexsn/Dialect/FlexSN/Transforms/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "flexsn/Dialect/FlexSN/Transforms/Passes.h.inc"

} // namespace mlir::flexsn

#endif // FLEXSN_DIALECT_FLEXSN_TRANSFORMS_PASSES_H
