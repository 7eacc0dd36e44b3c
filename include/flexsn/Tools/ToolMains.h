//===- ToolMains.h - The mains of flexsn-opt, -translate, -compile -*- C++ -*-//
//
// Part of the FlexSN project: an MLIR compiler for spiking-neuron dynamics.
//
//===----------------------------------------------------------------------===//
//
// Each tool's main, called by its own executable and by the multi-call
// `flexsn` (tools/flexsn), which holds all three in one binary for the
// wheel. A main registers its command-line options when it runs, never at
// load time, so that one process can link all three: their options (-o,
// the positional input, ...) would otherwise collide.
//
//===----------------------------------------------------------------------===//

#ifndef FLEXSN_TOOLS_TOOLMAINS_H
#define FLEXSN_TOOLS_TOOLMAINS_H

namespace mlir::flexsn {

/// mlir-opt with the flexsn dialect and every FlexSN pass and pipeline.
int optMain(int argc, char **argv);

/// mlir-translate with every upstream translation and FlexSN's own.
int translateMain(int argc, char **argv);

/// A neuron file to its kernels in one run (configured module, manifests,
/// CPU library, GPU image).
int compileMain(int argc, char **argv);

} // namespace mlir::flexsn

#endif // FLEXSN_TOOLS_TOOLMAINS_H
