//===- FusionUtils.h - What the fusions into flexsn.scan share --*- C++ -*-===//
//
// Part of the FlexSN project: an MLIR compiler for spiking-neuron dynamics.
//
//===----------------------------------------------------------------------===//
//
// The legality checks and rewrites that producer, consumer and sibling
// fusion share: what a linalg op must be to run in a scan body, the maps
// through which the scan reads its operands, the operands a fusion adds,
// and the rebuilt scan. Private to the fusion files.
//
//===----------------------------------------------------------------------===//

#ifndef FLEXSN_LIB_DIALECT_FLEXSN_TRANSFORMS_FUSION_FUSIONUTILS_H
#define FLEXSN_LIB_DIALECT_FLEXSN_TRANSFORMS_FUSION_FUSIONUTILS_H

#include "flexsn/Dialect/FlexSN/IR/FlexSNOps.h"

#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Interfaces/IndexingMapOpInterface.h"
#include "llvm/Support/raw_ostream.h"

#include <optional>
#include <string>

namespace mlir::flexsn::fusion {

/// Why a fusion is refused; none when it is legal.
using Refusal = std::optional<std::string>;

//===----------------------------------------------------------------------===//
// What a linalg op must be to run in a scan body
//===----------------------------------------------------------------------===//

/// Whether `map` keeps domain dimensions, each once and in order: the maps
/// a scan operand may have.
bool keepsDimensionsInOrder(AffineMap map);

inline bool isHalf(Type type) { return type.isF16() || type.isBF16(); }

/// `value` as printed, for reasons.
template <typename T>
std::string printed(const T &value) {
  std::string text;
  llvm::raw_string_ostream(text) << value;
  return text;
}

/// "its producer 'linalg.generic'", for reasons.
std::string describe(StringRef role, linalg::LinalgOp op);

/// An extension to f32 of a half-precision payload argument: the scan
/// reads its inputs as f32 already, so fusion drops it.
bool isExtensionOfArgument(Operation &op, Block &payload);

/// A linalg op fusion may move: on tensors, only parallel loops, no loop
/// indices, not reading the destination `init`.
Refusal checkElementwise(linalg::LinalgOp op, OpOperand *init,
                         const std::string &what);

/// The map from a scan's domain to the loops of `op`, a linalg op sharing a
/// tensor with it: the scan indexes the tensor through `scanOperand`, `op`
/// through `opOperand`, which must be a permutation of `op`'s loops. Both
/// sides are asked through IndexingMapOpInterface.
AffineMap getDomainToLoopsMap(IndexingMapOpInterface scan,
                              OpOperand &scanOperand, IndexingMapOpInterface op,
                              OpOperand &opOperand);

/// The map from a scan's domain to the indices of `operand` of `op`, given
/// the map from the domain to `op`'s loops.
AffineMap getMapFromDomain(IndexingMapOpInterface op, OpOperand &operand,
                           AffineMap domainToLoops);

/// The map through which the scan reads `operand` of `op` (tensors; a null
/// map for a scalar, which becomes a param), given the map from the scan's
/// domain to `op`'s loops. Fails, saying why in `refusal`, where the scan
/// cannot read it.
FailureOr<AffineMap> operandMap(linalg::LinalgOp op, OpOperand *operand,
                                AffineMap domainToLoops,
                                const std::string &what, Refusal &refusal);

/// Whether `payload` can run in a scan body, yielding `stored`: its ops
/// (but those fusion drops, `dropped`) free of memory effects and regions,
/// on f32 and integer scalars, using from outside only constants.
Refusal checkPayload(Block &payload, Value stored,
                     function_ref<bool(Operation &)> dropped,
                     const std::string &what);

/// Clones `payload` (but the ops `dropped`) at the rewriter's insertion
/// point, its constants from above along, and returns what `stored` became.
Value clonePayload(RewriterBase &rewriter, Block &payload, Value stored,
                   function_ref<bool(Operation &)> dropped, IRMapping &mapping);

//===----------------------------------------------------------------------===//
// Rebuilding the scan
//===----------------------------------------------------------------------===//

/// The maps of `scan`'s operand group `group` (in ODS order: inputs, inits,
/// params, outputs, states, reductions).
SmallVector<AffineMap> groupMaps(ScanOp scan, unsigned group);

/// The operands a fusion adds to a scan. A tensor read at every step
/// becomes an input; one that does not depend on t (a per-channel scale, a
/// per-neuron bias) and a scalar become params, as a neuron's parameters
/// are. An operand the scan already reads through the same map (the block
/// input of a residual add, say) is read once.
struct AddedOperands {
  SmallVector<Value> inputs, params;
  SmallVector<AffineMap> inputMaps, paramMaps;

  /// `scan`'s own operands (but input `droppedInput`) are there to share.
  AddedOperands(ScanOp scan, std::optional<unsigned> droppedInput);

  /// Adds `operand`, read through `map` (null for a scalar).
  void add(OpOperand *operand, AffineMap map);

  /// Adds their body arguments to `body` (inputs after the scan's, params
  /// after the scan's; tensors' elements as f32) and maps `op`'s payload
  /// arguments to them, extensions of half-precision ones included.
  void addArguments(Block &body, linalg::LinalgOp op, IRMapping &mapping);

private:
  // Per operand of the fused op: its position among the scan's inputs or
  // params (the scan's own, then the added ones).
  DenseMap<OpOperand *, unsigned> inputOf, paramOf;
  SmallVector<Value> scanInputs, scanParams;
  SmallVector<AffineMap> scanInputMaps, scanParamMaps;
  std::optional<unsigned> droppedInput;
  unsigned domainRank;
};

/// Builds the scan `scan` becomes with `added` operands, outputs `outputs`
/// and reductions `reductions` (with their maps) and results
/// `resultTypes`, its inputs but `droppedInput` (when set): the same
/// attributes; the body is moved over from `scan`.
ScanOp rebuildScan(RewriterBase &rewriter, ScanOp scan,
                   const AddedOperands &added,
                   std::optional<unsigned> droppedInput, ValueRange outputs,
                   ArrayRef<AffineMap> outputMaps, ValueRange reductions,
                   ArrayRef<AffineMap> reductionMaps, TypeRange resultTypes);

//===----------------------------------------------------------------------===//
// Passes
//===----------------------------------------------------------------------===//

/// What the three fusion passes do: apply `patterns` to `root` greedily;
/// then, with `remarks`, `explain` says why what stayed stayed.
LogicalResult runFusion(Operation *root, RewritePatternSet &&patterns,
                        bool remarks, function_ref<void()> explain);

} // namespace mlir::flexsn::fusion

#endif // FLEXSN_LIB_DIALECT_FLEXSN_TRANSFORMS_FUSION_FUSIONUTILS_H
