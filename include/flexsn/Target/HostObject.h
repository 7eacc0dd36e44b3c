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
// does, so no JIT is needed to run CPU kernels).
//
//===----------------------------------------------------------------------===//

#ifndef FLEXSN_TARGET_HOSTOBJECT_H
#define FLEXSN_TARGET_HOSTOBJECT_H

namespace mlir::flexsn {

/// Registers --flexsn-to-host-object.
void registerHostObjectTranslation();

} // namespace mlir::flexsn

#endif // FLEXSN_TARGET_HOSTOBJECT_H
