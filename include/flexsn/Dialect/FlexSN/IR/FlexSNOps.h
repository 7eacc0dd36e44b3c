//===- FlexSNOps.h - FlexSN operations --------------------------*- C++ -*-===//
//
// Part of the FlexSN project: an MLIR compiler for spiking-neuron dynamics.
//
//===----------------------------------------------------------------------===//

#ifndef FLEXSN_DIALECT_FLEXSN_IR_FLEXSNOPS_H
#define FLEXSN_DIALECT_FLEXSN_IR_FLEXSNOPS_H

#include "flexsn/Dialect/FlexSN/IR/FlexSNAttrs.h"
#include "flexsn/Dialect/FlexSN/IR/FlexSNDialect.h"

#include "mlir/Dialect/Utils/StructuredOpsUtils.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/CallInterfaces.h"
#include "mlir/Interfaces/ControlFlowInterfaces.h"
#include "mlir/Interfaces/DestinationStyleOpInterface.h"
#include "mlir/Interfaces/IndexingMapOpInterface.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

namespace mlir::flexsn {
class AdjointBuilder;
} // namespace mlir::flexsn

#include "flexsn/Dialect/FlexSN/IR/FlexSNInterfaces.h.inc"

#define GET_OP_CLASSES
#include "flexsn/Dialect/FlexSN/IR/FlexSNOps.h.inc"

namespace mlir::flexsn {
/// The scalar types a per-step body computes with: f32 and integers (flags,
/// counters).
bool isStepScalarType(Type type);
} // namespace mlir::flexsn

#endif // FLEXSN_DIALECT_FLEXSN_IR_FLEXSNOPS_H
