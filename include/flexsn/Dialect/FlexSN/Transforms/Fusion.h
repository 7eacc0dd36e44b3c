//===- Fusion.h - Moving elementwise ops into flexsn.scan -------*- C++ -*-===//
//
// Part of the FlexSN project: an MLIR compiler for spiking-neuron dynamics.
//
//===----------------------------------------------------------------------===//
//
// Loop fusion on the value form of flexsn.scan: the elementwise linalg ops
// around a scan run inside its body, so the [T, N...] tensors between them
// are never written. The entry points mirror upstream linalg's elementwise
// fusion (`populateElementwiseOpsFusionPatterns` and its control function).
//
//===----------------------------------------------------------------------===//

#ifndef FLEXSN_DIALECT_FLEXSN_TRANSFORMS_FUSION_H
#define FLEXSN_DIALECT_FLEXSN_TRANSFORMS_FUSION_H

#include "flexsn/Dialect/FlexSN/IR/FlexSNOps.h"

#include "mlir/IR/PatternMatch.h"

#include <functional>
#include <string>

namespace mlir::flexsn {

/// Decides whether the op on the other side of `fusedOperand` moves into
/// the flexsn.scan: for producers, `fusedOperand` is a scan input; for
/// consumers, the consumer's use of a scan result. Asked only once the
/// move is legal.
using ControlFusionFn = std::function<bool(OpOperand *fusedOperand)>;

/// Succeeds when the producer of scan input `input` can move into the scan:
/// an elementwise linalg op on tensors whose only use is `input`, whose
/// operands the scan can read (f32, f16 or bf16 tensors through indexing
/// maps that keep the scan's domain dimensions in order; f32, i1 or i32
/// scalars as params) and whose payload a scan body can hold (f32
/// arithmetic free of memory effects; half-precision operands only
/// extended to f32). Otherwise says why in `reason`.
LogicalResult checkProducerFusion(OpOperand &input,
                                  std::string *reason = nullptr);

/// Moves the producer of scan input `input` into the scan and returns the
/// new scan: the producer's operands read at every step become inputs
/// (after the scan's own), the others (tensors that do not depend on t,
/// scalars) params (after the scan's own), an operand the scan already
/// reads through the same map is shared, its payload runs first in the
/// body, and the producer is erased. A scan that calls a
/// neuron gets an inline body applying it first. Fails, changing nothing,
/// where `checkProducerFusion` does.
FailureOr<ScanOp> fuseProducer(RewriterBase &rewriter, OpOperand &input);

/// Rewrites a scan that calls a neuron into one whose inline body applies
/// it (`flexsn.apply`, the neuron's constant params as constants): the
/// same scan, with a body that fusion can extend.
FailureOr<ScanOp> materializeInlineBody(RewriterBase &rewriter, ScanOp scan);

/// Succeeds when the linalg op owning `use`, a use of a flexsn.scan's
/// result, can move into the scan: an elementwise op on tensors with one
/// result, reading the scan's f32 output or state sequences along the
/// scan's domain, its other operands as a producer's would be (and
/// computed before the scan), writing its result along the domain as f32,
/// or as f16/bf16 by rounding an f32 value to nearest (what the scan's
/// storage does); or summing over t into zeros, one f32 value per neuron.
/// Otherwise says why in `reason`.
LogicalResult checkConsumerFusion(OpOperand &use,
                                  std::string *reason = nullptr);

/// Moves the linalg op owning `use` into the scan whose result it reads
/// and returns the new scan: its payload runs before the body's yield, on
/// the yielded values; its result becomes a new scan output (after the
/// scan's own; a tensor.empty destination is made anew before the scan),
/// or for a sum over t a new scan reduction (after the scan's own);
/// its other operands become inputs or params, as a producer's do. Scan
/// outputs that nothing else reads are dropped. Fails, changing nothing,
/// where `checkConsumerFusion` does.
FailureOr<ScanOp> fuseConsumer(RewriterBase &rewriter, OpOperand &use);

/// Succeeds when scans `first` and `second` (after it, in one block) can
/// become one: on tensors, in the same direction, without optional inputs,
/// both or neither starting from given states and returning states, and
/// either `second` reads only `first`'s f32 sequences of `first`'s results
/// (along the domain, as inputs) or both read one input along the domain;
/// nothing between them uses `first`'s results. Otherwise says why.
LogicalResult checkSiblingFusion(ScanOp first, ScanOp second,
                                 std::string *reason = nullptr);

/// Merges `first` into `second` and returns the scan that replaces both,
/// at `second`'s place: `first`'s body runs, then `second`'s on its yielded
/// values where `second` read `first`'s sequences; the operands are
/// `first`'s, then `second`'s in each group (an input both read along one
/// map is read once); `first`'s outputs that only `second` read are
/// dropped. Fails, changing nothing, where `checkSiblingFusion` does.
FailureOr<ScanOp> fuseSiblings(RewriterBase &rewriter, ScanOp first,
                               ScanOp second);

/// Decides whether `first` and `second` become one scan, once legal.
using ControlSiblingFusionFn = std::function<bool(ScanOp first, ScanOp second)>;

/// Patterns merging each scan with an earlier one it reads from or shares
/// an input with, where legal and `control` accepts.
void populateFuseSiblingsPatterns(RewritePatternSet &patterns,
                                  const ControlSiblingFusionFn &control = {});

/// Patterns moving into each scan every producer that is legal to fuse
/// and that `control` accepts (every one when `control` is empty).
void populateFuseProducersPatterns(RewritePatternSet &patterns,
                                   const ControlFusionFn &control = {});

/// The same for consumers of each scan's results; `control` gets the use of
/// the scan result.
void populateFuseConsumersPatterns(RewritePatternSet &patterns,
                                   const ControlFusionFn &control = {});

} // namespace mlir::flexsn

#endif // FLEXSN_DIALECT_FLEXSN_TRANSFORMS_FUSION_H
