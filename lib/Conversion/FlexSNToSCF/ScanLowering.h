//===- ScanLowering.h - One flexsn.scan rewritten into loops ---*- C++ -*-===//
//
// Part of the FlexSN project: an MLIR compiler for spiking-neuron dynamics.
//
//===----------------------------------------------------------------------===//

#ifndef FLEXSN_LIB_CONVERSION_FLEXSNTOSCF_SCANLOWERING_H
#define FLEXSN_LIB_CONVERSION_FLEXSNTOSCF_SCANLOWERING_H

#include "flexsn/Dialect/FlexSN/IR/FlexSNOps.h"

namespace mlir::flexsn {

/// Rewrites one scan (buffer form, flat step body) into loops: a sequential
/// loop over time inside a loop nest over the neurons. The step body comes
/// from the callee neuron or the scan's own region; each operand is indexed
/// through its map. With `parallel`, the neurons are split into fixed chunks
/// of the innermost dimension run by an OpenMP worksharing loop of
/// `numThreads` threads (OpenMP's default when null), each chunk by vectors
/// of `vectorWidth` neurons (0: one at a time) where the step body and every
/// buffer allow it, then one at a time. Erases the scan.
void lowerScan(ScanOp scan, bool parallel, unsigned vectorWidth,
               Value numThreads);

} // namespace mlir::flexsn

#endif // FLEXSN_LIB_CONVERSION_FLEXSNTOSCF_SCANLOWERING_H
