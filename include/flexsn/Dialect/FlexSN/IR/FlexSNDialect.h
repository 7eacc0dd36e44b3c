//===- FlexSNDialect.h - FlexSN dialect -------------------------*- C++ -*-===//
//
// Part of the FlexSN project: an MLIR compiler for spiking-neuron dynamics.
//
//===----------------------------------------------------------------------===//

#ifndef FLEXSN_DIALECT_FLEXSN_IR_FLEXSNDIALECT_H
#define FLEXSN_DIALECT_FLEXSN_IR_FLEXSNDIALECT_H

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/Dialect.h"

#include "flexsn/Dialect/FlexSN/IR/FlexSNDialect.h.inc"

#endif // FLEXSN_DIALECT_FLEXSN_IR_FLEXSNDIALECT_H
