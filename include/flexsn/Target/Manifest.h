//===- Manifest.h - JSON description of a FlexSN module ---------*- C++ -*-===//
//
// Part of the FlexSN project: an MLIR compiler for spiking-neuron dynamics.
//
//===----------------------------------------------------------------------===//
//
// The manifest is how runtimes and the Python layer learn what a compiled
// module offers without parsing MLIR: each neuron's signature (inputs,
// states, outputs, parameters with types, defaults and bindings) and, once
// kernel generation has run, each kernel with its arguments.
//
//===----------------------------------------------------------------------===//

#ifndef FLEXSN_TARGET_MANIFEST_H
#define FLEXSN_TARGET_MANIFEST_H

#include "flexsn/Dialect/FlexSN/IR/FlexSNAttrs.h"

#include "mlir/Support/LLVM.h"

namespace llvm {
class raw_ostream;
} // namespace llvm

namespace mlir {
class ModuleOp;

namespace flexsn {

/// The shape of a buffer of `shape`, as names of run-time sizes, outermost
/// first (the manifest's `shape`): a CPU function of a kernel with channels
/// (`cpuChannels`) takes the neurons as [B, C, S] (N = B * C * S).
SmallVector<StringRef, 4> getBufferSizeNames(BufferShape shape,
                                             bool cpuChannels);

class Target;

/// Writes the JSON manifest of `module` to `os`: its neurons, and the
/// kernels of each registered target it has (of `only`, where given; the
/// targets of FlexSN's tests only then).
LogicalResult translateToManifest(ModuleOp module, llvm::raw_ostream &os,
                                  const Target *only = nullptr);

} // namespace flexsn
} // namespace mlir

#endif // FLEXSN_TARGET_MANIFEST_H
