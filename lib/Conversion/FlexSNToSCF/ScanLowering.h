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

/// The coupling of a coupled kernel's scan (#flexsn.kernel): the scan
/// input it adds to, the scan output feeding it, and the [H, H] weights.
struct ScanCoupling {
  unsigned input, output;
  Value weights;
};

/// Rewrites a coupled kernel's scan into loops: per sample of H neurons
/// (in parallel under OpenMP with `parallel`), a loop over time whose each
/// step first computes the coupled drive of every neuron of the sample
/// from the previous step's outputs, then steps each neuron. Erases the
/// scan.
void lowerCoupledScan(ScanOp scan, const ScanCoupling &coupling, bool parallel,
                      Value numThreads);

} // namespace mlir::flexsn

#endif // FLEXSN_LIB_CONVERSION_FLEXSNTOSCF_SCANLOWERING_H
