//===- GPUBinary.h - Cubin, fatbin, PTX and C header emitters ---*- C++ -*-===//
//
// Part of the FlexSN project: an MLIR compiler for spiking-neuron dynamics.
//
//===----------------------------------------------------------------------===//
//
// Translations of a module lowered by `flexsn-lower-to-nvvm`: its
// `gpu.binary` objects written raw (cubin, PTX), bundled (fatbin), or
// embedded with typed launch functions in a self-contained C header.
//
//===----------------------------------------------------------------------===//

#ifndef FLEXSN_TARGET_GPUBINARY_H
#define FLEXSN_TARGET_GPUBINARY_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Support/LLVM.h"

namespace mlir::flexsn {

/// Writes the module's one cubin (`--flexsn-to-cubin`).
LogicalResult translateToCubin(ModuleOp module, raw_ostream &os);
/// Writes the module's one PTX text, of `flexsn-lower-to-nvvm=format=isa`
/// (`--flexsn-to-ptx`).
LogicalResult translateToPTX(ModuleOp module, raw_ostream &os);
/// Bundles the cubins of every target chip into one fatbin
/// (`--flexsn-to-fatbin`).
LogicalResult translateToFatbin(ModuleOp module, raw_ostream &os);
/// Same, with the `fatbinary` of `toolkit` (not --flexsn-toolkit's).
LogicalResult translateToFatbin(ModuleOp module, raw_ostream &os,
                                StringRef toolkit);
/// Writes a C header: the embedded kernels and a typed launch function per
/// kernel (`--flexsn-to-header`).
LogicalResult translateToHeader(ModuleOp module, raw_ostream &os);

} // namespace mlir::flexsn

#endif // FLEXSN_TARGET_GPUBINARY_H
