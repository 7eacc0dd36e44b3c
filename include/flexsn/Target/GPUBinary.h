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

namespace mlir::flexsn {

/// Registers --flexsn-to-cubin, --flexsn-to-ptx, --flexsn-to-fatbin and
/// --flexsn-to-header.
void registerGPUBinaryTranslations();

} // namespace mlir::flexsn

#endif // FLEXSN_TARGET_GPUBINARY_H
