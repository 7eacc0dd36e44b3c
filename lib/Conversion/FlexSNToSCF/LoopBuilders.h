//===- LoopBuilders.h - Loads, stores and loops of the SCF lowering -------===//
//
// Part of the FlexSN project: an MLIR compiler for spiking-neuron dynamics.
//
//===----------------------------------------------------------------------===//
//
// The IR pieces convert-flexsn-to-scf builds a scan's loops from: loads and
// stores of one neuron or of a vector of neurons (f32 compute, any storage
// type, absent buffers, bit-packed spikes, streaming stores), reductions,
// and the chunk loop (serial, or an OpenMP worksharing loop). Internal to
// the conversion.
//
//===----------------------------------------------------------------------===//

#ifndef FLEXSN_LIB_CONVERSION_FLEXSNTOSCF_LOOPBUILDERS_H
#define FLEXSN_LIB_CONVERSION_FLEXSNTOSCF_LOOPBUILDERS_H

#include "mlir/IR/AffineMap.h"
#include "mlir/IR/Builders.h"

namespace mlir::flexsn::loops {

/// Loads `buffer[indices]` as f32.
Value loadAsF32(OpBuilder &b, Location loc, Value buffer, ValueRange indices);

/// An absent buffer is one whose base pointer is null.
Value isPresent(OpBuilder &b, Location loc, Value buffer);

Value f32Constant(OpBuilder &b, Location loc, double value);

/// Loads `buffer[indices]` as f32 when `present` holds, else zero.
Value loadIfPresent(OpBuilder &b, Location loc, Value present, Value buffer,
                    ValueRange indices);

/// Stores the f32 `value` (converted to the buffer's storage, or as a bit of
/// a bit-packed buffer) only when `present` holds.
void storeIfPresent(OpBuilder &b, Location loc, Value present, Value value,
                    Value buffer, ValueRange indices);

/// The indices `map` selects from the domain point `point` = (t, n...).
SmallVector<Value> selectIndices(AffineMap map, ArrayRef<Value> point);

/// Whether `map` reads the time dimension.
bool usesTime(AffineMap map);

/// Stores zero into every element of `buffer` (a reduction's destination).
void zeroFill(OpBuilder &b, Location loc, Value buffer);

/// Adds `value` into `buffer[indices]`.
void accumulate(OpBuilder &b, Location loc, Value value, Value buffer,
                ValueRange indices);

/// A vector of `width` f32 lanes.
VectorType f32Lanes(OpBuilder &b, unsigned width);

/// Loads `width` neurons from `point` on (point's last index is the first
/// of them) as an f32 vector: a vector load when `map` reads the innermost
/// domain dimension `inner` (contiguous there: isLaneAccessible), else one
/// value broadcast to every lane.
Value loadLanes(OpBuilder &b, Location loc, unsigned width, unsigned inner,
                Value buffer, AffineMap map, ArrayRef<Value> point);

/// loadLanes when `present` holds, else zeros.
Value loadLanesIfPresent(OpBuilder &b, Location loc, unsigned width,
                         unsigned inner, Value present, Value buffer,
                         AffineMap map, ArrayRef<Value> point);

/// Stores the f32 vector `value` at `indices` (contiguous lanes),
/// converting to the buffer's storage as scalar stores do. `streaming`
/// (for a buffer of floats, at an address aligned to the stored vector's
/// bytes) writes it with a non-temporal store.
void storeLanes(OpBuilder &b, Location loc, Value value, Value buffer,
                ValueRange indices, bool streaming = false);

/// Whether a scan of `elements` (T x neurons) values may write `sequences`
/// with streaming stores: it is big enough, and every row of every
/// streamable sequence starts at a multiple of a `width`-lane vector's
/// bytes, so every vector store of a chunk is aligned (chunks start at
/// multiples of their size). An absent (null) buffer passes. Null when no
/// sequence is streamable.
Value streamingCondition(OpBuilder &b, Location loc, ValueRange sequences,
                         unsigned width, Value elements);

/// Adds the vector `value` into the contiguous lanes at `indices`.
void accumulateLanes(OpBuilder &b, Location loc, Value value, Value buffer,
                     ValueRange indices);

/// The sum of `value`'s lanes, in lane order.
Value sumLanes(OpBuilder &b, Location loc, Value value);

/// Whether `buffer`, indexed through `map`, can be accessed by lanes along
/// the innermost domain dimension `inner`: either `map` does not read it
/// (one value for every lane; not for a buffer the lanes write), or it is
/// the map's last result and nowhere else, the buffer's innermost stride
/// is 1, and its elements are not bit-packed.
bool isLaneAccessible(Value buffer, AffineMap map, unsigned inner,
                      bool written);

/// `value` (an index) split over `dims` (row-major, the last fastest).
SmallVector<Value> delinearize(OpBuilder &b, Location loc, Value value,
                               ArrayRef<Value> dims);

/// Emits `body(chunk)` for every chunk in [0, numChunks): an OpenMP
/// worksharing loop (static schedule) in a parallel region of `numThreads`
/// threads (OpenMP's default when null), or an scf.for.
void emitChunkLoop(OpBuilder &b, Location loc, Value numChunks, bool parallel,
                   Value numThreads,
                   function_ref<void(OpBuilder &, Location, Value)> body);

} // namespace mlir::flexsn::loops

#endif // FLEXSN_LIB_CONVERSION_FLEXSNTOSCF_LOOPBUILDERS_H
