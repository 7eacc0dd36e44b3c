//===- FlexSNOpsDetail.h - What the FlexSN op files share -------*- C++ -*-===//
//
// Part of the FlexSN project: an MLIR compiler for spiking-neuron dynamics.
//
//===----------------------------------------------------------------------===//
//
// Declarations shared by FlexSNOps.cpp, NeuronOp.cpp and ScanOp.cpp: the
// checks a neuron's and a scan's step bodies share, and the scan's custom
// directive, which the generated op definitions in FlexSNOps.cpp call.
// Private to the dialect's IR library.
//
//===----------------------------------------------------------------------===//

#ifndef FLEXSN_LIB_DIALECT_FLEXSN_IR_FLEXSNOPSDETAIL_H
#define FLEXSN_LIB_DIALECT_FLEXSN_IR_FLEXSNOPSDETAIL_H

#include "flexsn/Dialect/FlexSN/IR/FlexSNOps.h"

namespace mlir::flexsn {
namespace detail {

/// Checks the ops of a per-step body: ops free of memory effects and
/// regions, and applications of neurons, on scalars; so the body lowers the
/// same way to CPU loops and GPU threads, and autodiff needs only a per-op
/// rule. Asked through interfaces: any dialect's such ops qualify. Integer
/// divisions and remainders need a safe constant divisor. `owner` names the
/// body's op in diagnostics ("neuron", "scan").
LogicalResult verifyStepBody(Block &block, StringRef owner);

/// Checks that `types[i]` is f32 for every i, naming the offending value
/// `what #(first + i)`.
LogicalResult expectF32(Operation *op, TypeRange types, StringRef what,
                        size_t first = 0);

} // namespace detail

/// `indexing_maps = [...]`, parsed where given, else the maps the operand
/// groups' ranks imply.
ParseResult parseIndexingMaps(OpAsmParser &parser, ArrayAttr &maps,
                              ArrayRef<Type> inputs, ArrayRef<Type> inits,
                              ArrayRef<Type> params, ArrayRef<Type> outputs,
                              ArrayRef<Type> states, ArrayRef<Type> reductions);

/// Prints `indexing_maps = [...]` only where the operands' ranks do not
/// imply the maps.
void printIndexingMaps(OpAsmPrinter &p, ScanOp scan, ArrayAttr maps,
                       TypeRange inputs, TypeRange inits, TypeRange params,
                       TypeRange outputs, TypeRange states,
                       TypeRange reductions);

} // namespace mlir::flexsn

#endif // FLEXSN_LIB_DIALECT_FLEXSN_IR_FLEXSNOPSDETAIL_H
