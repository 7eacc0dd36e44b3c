//===- HostObject.h - CPU kernels as a relocatable object file --*- C++ -*-===//
//
// Part of the FlexSN project: an MLIR compiler for spiking-neuron dynamics.
//
//===----------------------------------------------------------------------===//
//
// Ahead-of-time compilation of a module lowered by `flexsn-lower-to-cpu`:
// the LLVM dialect translated to LLVM IR, optimized, and emitted as a
// position-independent object for the host architecture, which a linker
// turns into a shared library that any runtime can load (the Python layer
// does, so no JIT is needed to run CPU kernels), with a C header that lets a
// C program call them.
//
//===----------------------------------------------------------------------===//

#ifndef FLEXSN_TARGET_HOSTOBJECT_H
#define FLEXSN_TARGET_HOSTOBJECT_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Support/LLVM.h"

namespace mlir::flexsn {

/// Writes the object file of a `flexsn-lower-to-cpu` module
/// (`--flexsn-to-host-object`).
LogicalResult translateToHostObject(ModuleOp module, raw_ostream &os);

/// Prints the target the host object is compiled for by default (a line of
/// `--version`): the Python layer's compile cache keys on it, so a cached
/// library never runs on a CPU of a lower level.
void printHostObjectTarget(raw_ostream &os);

/// Writes the C header of a `flexsn-lower-to-cpu` module's kernels
/// (`--flexsn-to-host-header`): the functions of its object file, and a
/// checked wrapper per kernel that takes plain pointers.
LogicalResult translateToHostHeader(ModuleOp module, raw_ostream &os);

} // namespace mlir::flexsn

#endif // FLEXSN_TARGET_HOSTOBJECT_H
