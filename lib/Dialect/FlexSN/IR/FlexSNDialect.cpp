//===- FlexSNDialect.cpp - FlexSN dialect registration --------------------===//
//
// Part of the FlexSN project: an MLIR compiler for spiking-neuron dynamics.
//
//===----------------------------------------------------------------------===//

#include "flexsn/Dialect/FlexSN/IR/FlexSNDialect.h"
#include "flexsn/Dialect/FlexSN/IR/FlexSNOps.h"

using namespace mlir;
using namespace mlir::flexsn;

#include "flexsn/Dialect/FlexSN/IR/FlexSNDialect.cpp.inc"

void FlexSNDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "flexsn/Dialect/FlexSN/IR/FlexSNOps.cpp.inc"
      >();
  registerAttributes();
}

Operation *FlexSNDialect::materializeConstant(OpBuilder &builder,
                                              Attribute value, Type type,
                                              Location loc) {
  return arith::ConstantOp::materialize(builder, value, type, loc);
}
