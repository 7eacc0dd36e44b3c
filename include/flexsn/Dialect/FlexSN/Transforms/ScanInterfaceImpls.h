//===- ScanInterfaceImpls.h - flexsn.scan's transformation interfaces -----===//
//
// Part of the FlexSN project: an MLIR compiler for spiking-neuron dynamics.
//
//===----------------------------------------------------------------------===//
//
// External models that let upstream transformations work on `flexsn.scan`:
// one-shot bufferization turns the value form into the buffer form, and
// tiling (the transform dialect's `tile_using_for`, `scf::tileUsingSCF`)
// splits the neuron dimensions.
//
//===----------------------------------------------------------------------===//

#ifndef FLEXSN_DIALECT_FLEXSN_TRANSFORMS_SCANINTERFACEIMPLS_H
#define FLEXSN_DIALECT_FLEXSN_TRANSFORMS_SCANINTERFACEIMPLS_H

namespace mlir {
class DialectRegistry;
namespace flexsn {

/// `BufferizableOpInterface` for `flexsn.scan`.
void registerBufferizableOpInterfaceExternalModels(DialectRegistry &registry);

/// `TilingInterface` for `flexsn.scan`.
void registerTilingInterfaceExternalModels(DialectRegistry &registry);

} // namespace flexsn
} // namespace mlir

#endif // FLEXSN_DIALECT_FLEXSN_TRANSFORMS_SCANINTERFACEIMPLS_H
