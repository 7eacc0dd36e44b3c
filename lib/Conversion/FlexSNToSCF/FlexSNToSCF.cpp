//===- FlexSNToSCF.cpp - Lower flexsn.scan to SCF loops -------------------===//
//
// Part of the FlexSN project: an MLIR compiler for spiking-neuron dynamics.
//
//===----------------------------------------------------------------------===//

#include "flexsn/Conversion/Passes.h"
#include "flexsn/Dialect/FlexSN/IR/FlexSNOps.h"
#include "flexsn/Dialect/FlexSN/Utils/KernelFunctions.h"
#include "flexsn/Dialect/FlexSN/Utils/StepBuilder.h"

#include "mlir/Dialect/OpenMP/OpenMPDialect.h"
#include "mlir/Dialect/SCF/Utils/Utils.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/SymbolTable.h"

namespace mlir::flexsn {
#define GEN_PASS_DEF_CONVERTFLEXSNTOSCF
#include "flexsn/Conversion/Passes.h.inc"
} // namespace mlir::flexsn

using namespace mlir;
using namespace mlir::flexsn;

namespace {

/// Loads `buffer[indices]` as f32.
Value loadAsF32(OpBuilder &b, Location loc, Value buffer, ValueRange indices) {
  Value value = memref::LoadOp::create(b, loc, buffer, indices);
  if (!value.getType().isF32())
    value = arith::ExtFOp::create(b, loc, b.getF32Type(), value);
  return value;
}

/// Stores the f32 `value` into `buffer[indices]`, converting to its storage.
void storeFromF32(OpBuilder &b, Location loc, Value value, Value buffer,
                  ValueRange indices) {
  Type elementType = cast<MemRefType>(buffer.getType()).getElementType();
  if (isa<IntegerType>(elementType))
    value = arith::FPToUIOp::create(b, loc, elementType, value);
  else if (elementType != value.getType())
    value = arith::TruncFOp::create(b, loc, elementType, value);
  memref::StoreOp::create(b, loc, value, buffer, indices);
}

/// An absent buffer is one whose base pointer is null.
Value isPresent(OpBuilder &b, Location loc, Value buffer) {
  Value pointer =
      memref::ExtractAlignedPointerAsIndexOp::create(b, loc, buffer);
  Value null = arith::ConstantIndexOp::create(b, loc, 0);
  return arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ne, pointer, null);
}

Value f32Constant(OpBuilder &b, Location loc, double value) {
  return arith::ConstantOp::create(b, loc, b.getF32FloatAttr(value));
}

/// Loads `buffer[indices]` as f32 when `present` holds, else zero.
Value loadIfPresent(OpBuilder &b, Location loc, Value present, Value buffer,
                    ValueRange indices) {
  auto load = scf::IfOp::create(
      b, loc, present,
      [&](OpBuilder &then, Location loc) {
        scf::YieldOp::create(then, loc, loadAsF32(then, loc, buffer, indices));
      },
      [&](OpBuilder &otherwise, Location loc) {
        scf::YieldOp::create(otherwise, loc, f32Constant(otherwise, loc, 0.0));
      });
  return load.getResult(0);
}

/// Stores the 0/1 spike `value` at `indices` into the bit-packed `buffer`
/// (i1, 8 per byte; `SpikeStorage` gives the layout): element e (its
/// linear index, in elements, from the buffer's offset and strides) lies in
/// row t = e / ld at column n = e mod ld, ld being the time stride, and is
/// bit n mod 8 of byte t * ceil(ld / 8) + n / 8. The loops visit a row's
/// neurons in order, so the first of each byte writes it whole (clearing
/// the bits past N) and the others add their bit to it.
void storeBits(OpBuilder &b, Location loc, Value value, Value buffer,
               ValueRange indices) {
  auto metadata = memref::ExtractStridedMetadataOp::create(b, loc, buffer);
  ValueRange strides = metadata.getStrides();
  Value element = metadata.getOffset();
  for (auto [index, stride] : llvm::zip_equal(indices, strides))
    element = arith::AddIOp::create(
        b, loc, element, arith::MulIOp::create(b, loc, index, stride));
  auto index = [&](int64_t v) {
    return arith::ConstantIndexOp::create(b, loc, v);
  };
  Value ld = strides[0];
  Value neuron = arith::RemUIOp::create(b, loc, element, ld);
  Value rowBytes = arith::CeilDivUIOp::create(b, loc, ld, index(8));
  Value offset = arith::AddIOp::create(
      b, loc,
      arith::MulIOp::create(b, loc, arith::DivUIOp::create(b, loc, element, ld),
                            rowBytes),
      arith::DivUIOp::create(b, loc, neuron, index(8)));
  Value base = memref::ExtractAlignedPointerAsIndexOp::create(b, loc, buffer);
  Type i8 = b.getI8Type(), i64 = b.getI64Type();
  Value integer = arith::IndexCastUIOp::create(
      b, loc, i64, arith::AddIOp::create(b, loc, base, offset));
  Value address = LLVM::IntToPtrOp::create(
      b, loc, LLVM::LLVMPointerType::get(b.getContext()), integer);
  Value position = arith::RemUIOp::create(b, loc, neuron, index(8));
  Value spike = arith::ExtUIOp::create(
      b, loc, i8,
      arith::CmpFOp::create(b, loc, arith::CmpFPredicate::UNE, value,
                            f32Constant(b, loc, 0.0)));
  Value bit = arith::ShLIOp::create(
      b, loc, spike, arith::IndexCastUIOp::create(b, loc, i8, position));
  Value starts = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq,
                                       position, index(0));
  scf::IfOp::create(
      b, loc, starts,
      [&](OpBuilder &then, Location loc) {
        LLVM::StoreOp::create(then, loc, bit, address, 1);
        scf::YieldOp::create(then, loc);
      },
      [&](OpBuilder &otherwise, Location loc) {
        Value old = LLVM::LoadOp::create(otherwise, loc, i8, address, 1);
        LLVM::StoreOp::create(otherwise, loc,
                              arith::OrIOp::create(otherwise, loc, old, bit),
                              address, 1);
        scf::YieldOp::create(otherwise, loc);
      });
}

/// Stores `value` only when `present` holds.
void storeIfPresent(OpBuilder &b, Location loc, Value present, Value value,
                    Value buffer, ValueRange indices) {
  bool bits = cast<MemRefType>(buffer.getType()).getElementType().isInteger(1);
  scf::IfOp::create(b, loc, present, [&](OpBuilder &then, Location loc) {
    if (bits)
      storeBits(then, loc, value, buffer, indices);
    else
      storeFromF32(then, loc, value, buffer, indices);
    scf::YieldOp::create(then, loc);
  });
}

/// The indices `map` selects from the domain point `point` = (t, n...).
SmallVector<Value> selectIndices(AffineMap map, ArrayRef<Value> point) {
  return llvm::map_to_vector(map.getResults(), [&](AffineExpr expr) {
    return point[cast<AffineDimExpr>(expr).getPosition()];
  });
}

bool usesTime(AffineMap map) {
  return map.getNumResults() != 0 && map.getDimPosition(0) == 0;
}

/// Stores zero into every element of `buffer` (a reduction's destination).
void zeroFill(OpBuilder &b, Location loc, Value buffer) {
  auto type = cast<MemRefType>(buffer.getType());
  Value zero = f32Constant(b, loc, 0.0);
  SmallVector<Value> lower, upper, steps;
  for (int64_t d = 0; d < type.getRank(); ++d) {
    lower.push_back(arith::ConstantIndexOp::create(b, loc, 0));
    upper.push_back(memref::DimOp::create(b, loc, buffer, d));
    steps.push_back(arith::ConstantIndexOp::create(b, loc, 1));
  }
  scf::buildLoopNest(b, loc, lower, upper, steps,
                     [&](OpBuilder &nb, Location loc, ValueRange indices) {
                       memref::StoreOp::create(nb, loc, zero, buffer, indices);
                     });
}

/// Adds `value` into `buffer[indices]`.
void accumulate(OpBuilder &b, Location loc, Value value, Value buffer,
                ValueRange indices) {
  Value total = memref::LoadOp::create(b, loc, buffer, indices);
  Value sum = arith::AddFOp::create(b, loc, total, value);
  memref::StoreOp::create(b, loc, sum, buffer, indices);
}

/// A vector of `width` f32 lanes.
VectorType f32Lanes(OpBuilder &b, unsigned width) {
  return VectorType::get({width}, b.getF32Type());
}

/// Loads `width` neurons from `point` on (point's last index is the first
/// of them) as an f32 vector: a vector load when `map` reads the innermost
/// domain dimension `inner` (contiguous there: isLaneAccessible), else one
/// value broadcast to every lane.
Value loadLanes(OpBuilder &b, Location loc, unsigned width, unsigned inner,
                Value buffer, AffineMap map, ArrayRef<Value> point) {
  SmallVector<Value> indices = selectIndices(map, point);
  if (!map.isFunctionOfDim(inner))
    return vector::BroadcastOp::create(b, loc, f32Lanes(b, width),
                                       loadAsF32(b, loc, buffer, indices));
  Type element = cast<MemRefType>(buffer.getType()).getElementType();
  Value value = vector::LoadOp::create(
      b, loc, VectorType::get({width}, element), buffer, indices);
  if (!element.isF32())
    value = arith::ExtFOp::create(b, loc, f32Lanes(b, width), value);
  return value;
}

/// loadLanes when `present` holds, else zeros.
Value loadLanesIfPresent(OpBuilder &b, Location loc, unsigned width,
                         unsigned inner, Value present, Value buffer,
                         AffineMap map, ArrayRef<Value> point) {
  auto load = scf::IfOp::create(
      b, loc, present,
      [&](OpBuilder &then, Location loc) {
        scf::YieldOp::create(
            then, loc, loadLanes(then, loc, width, inner, buffer, map, point));
      },
      [&](OpBuilder &otherwise, Location loc) {
        scf::YieldOp::create(otherwise, loc, zeroLanes(otherwise, loc, width));
      });
  return load.getResult(0);
}

/// Whether vectors of `buffer`'s elements may be written with streaming
/// (non-temporal) stores: f32, f16 or bf16, whose aligned vectors x86
/// stores whole (a byte vector would go out a word at a time).
bool isStreamable(Value buffer) {
  Type element = cast<MemRefType>(buffer.getType()).getElementType();
  return isa<FloatType>(element);
}

/// Stores the f32 vector `value` at `indices` (contiguous lanes),
/// converting to the buffer's storage as storeFromF32 does. `streaming`
/// (for a buffer that isStreamable, at an address aligned to the stored
/// vector's bytes) writes it with a non-temporal store.
void storeLanes(OpBuilder &b, Location loc, Value value, Value buffer,
                ValueRange indices, bool streaming = false) {
  auto lanes = cast<VectorType>(value.getType());
  Type element = cast<MemRefType>(buffer.getType()).getElementType();
  Type stored = lanes.clone(element);
  if (isa<IntegerType>(element))
    value = arith::FPToUIOp::create(b, loc, stored, value);
  else if (!element.isF32())
    value = arith::TruncFOp::create(b, loc, stored, value);
  if (!streaming || !isStreamable(buffer)) {
    vector::StoreOp::create(b, loc, value, buffer, indices);
    return;
  }
  int64_t bytes = lanes.getNumElements() * element.getIntOrFloatBitWidth() / 8;
  vector::StoreOp::create(b, loc, value, buffer, indices,
                          /*nontemporal=*/true, llvm::MaybeAlign(bytes));
}

/// Scans of at least this many bytes of f32 per value stream their
/// sequences (4 Mi elements: 16 MiB, half of the development machine's
/// L3): a smaller output may still be in cache when the next op reads it,
/// which a non-temporal store would have sent to memory.
constexpr int64_t kStreamingBytes = 16 << 20;

/// Whether a scan of `elements` (T x neurons) values may write `sequences`
/// with streaming stores: it is big enough, and every row of every
/// streamable sequence starts at a multiple of a `width`-lane vector's
/// bytes, so every vector store of a chunk is aligned (chunks start at
/// multiples of kChunkNeurons). An absent (null) buffer passes. Null when
/// no sequence is streamable.
Value streamingCondition(OpBuilder &b, Location loc, ValueRange sequences,
                         unsigned width, Value elements) {
  auto index = [&](int64_t v) {
    return arith::ConstantIndexOp::create(b, loc, v);
  };
  auto isZero = [&](Value v) {
    return arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, v, index(0));
  };
  Value ok;
  auto require = [&](Value condition) {
    ok = ok ? arith::AndIOp::create(b, loc, ok, condition) : condition;
  };
  for (Value buffer : sequences) {
    if (!isStreamable(buffer))
      continue;
    int64_t bytes = cast<MemRefType>(buffer.getType())
                        .getElementType()
                        .getIntOrFloatBitWidth() /
                    8;
    auto metadata = memref::ExtractStridedMetadataOp::create(b, loc, buffer);
    Value base = memref::ExtractAlignedPointerAsIndexOp::create(b, loc, buffer);
    Value start = arith::AddIOp::create(
        b, loc, base,
        arith::MulIOp::create(b, loc, metadata.getOffset(), index(bytes)));
    require(
        isZero(arith::RemUIOp::create(b, loc, start, index(width * bytes))));
    for (Value stride : metadata.getStrides().drop_back())
      require(isZero(arith::RemUIOp::create(b, loc, stride, index(width))));
  }
  if (!ok)
    return Value();
  require(arith::CmpIOp::create(b, loc, arith::CmpIPredicate::uge, elements,
                                index(kStreamingBytes / 4)));
  return ok;
}

/// Adds the vector `value` into the contiguous lanes at `indices`.
void accumulateLanes(OpBuilder &b, Location loc, Value value, Value buffer,
                     ValueRange indices) {
  Value total =
      vector::LoadOp::create(b, loc, value.getType(), buffer, indices);
  vector::StoreOp::create(b, loc, arith::AddFOp::create(b, loc, total, value),
                          buffer, indices);
}

/// The sum of `value`'s lanes, in lane order.
Value sumLanes(OpBuilder &b, Location loc, Value value) {
  return vector::ReductionOp::create(b, loc, vector::CombiningKind::ADD, value);
}

/// Whether `buffer`, indexed through `map`, can be accessed by lanes along
/// the innermost domain dimension `inner`: either `map` does not read it
/// (one value for every lane; not for a buffer the lanes write), or it is
/// the map's last result and nowhere else, the buffer's innermost stride
/// is 1, and its elements are not bit-packed.
bool isLaneAccessible(Value buffer, AffineMap map, unsigned inner,
                      bool written) {
  if (!map.isFunctionOfDim(inner))
    return !written;
  unsigned last = map.getNumResults() - 1;
  if (map.getResult(last) != getAffineDimExpr(inner, map.getContext()))
    return false;
  for (unsigned i = 0; i < last; ++i)
    if (map.getResult(i).isFunctionOfDim(inner))
      return false;
  auto type = cast<MemRefType>(buffer.getType());
  if (type.getElementType().isInteger(1))
    return false;
  SmallVector<int64_t> strides;
  int64_t offset;
  return succeeded(type.getStridesAndOffset(strides, offset)) &&
         strides.back() == 1;
}

/// Neurons per chunk of the innermost neuron dimension in parallel mode.
/// Fixed, so that the chunks, and the order of every sum, do not depend on
/// the thread count.
constexpr int64_t kChunkNeurons = 4096;

/// Where a reduction's contributions go in parallel mode.
enum class SumKind {
  /// Keeps every neuron dimension: each element belongs to one neuron, so
  /// to one chunk; added in place.
  PerNeuron,
  /// Keeps no innermost neuron dimension: a chunk adds to one element (per
  /// step, if it keeps t); the chunk's sum goes to its own partial, and the
  /// partials are added in chunk order after the parallel loop.
  PerChunk,
  /// Keeps the innermost dimension but not every outer one: chunks share
  /// elements, which only a serial chunk loop adds in place.
  Shared,
};

/// `value` (an index) split over `dims` (row-major, the last fastest).
SmallVector<Value> delinearize(OpBuilder &b, Location loc, Value value,
                               ArrayRef<Value> dims) {
  SmallVector<Value> indices(dims.size());
  for (int64_t d = static_cast<int64_t>(dims.size()) - 1; d >= 0; --d) {
    indices[d] = arith::RemUIOp::create(b, loc, value, dims[d]);
    value = arith::DivUIOp::create(b, loc, value, dims[d]);
  }
  return indices;
}

/// Emits `body(chunk)` for every chunk in [0, numChunks): an OpenMP
/// worksharing loop (static schedule) in a parallel region of `numThreads`
/// threads (OpenMP's default when null), or an scf.for.
void emitChunkLoop(OpBuilder &b, Location loc, Value numChunks, bool parallel,
                   Value numThreads,
                   function_ref<void(OpBuilder &, Location, Value)> body) {
  Value zero = arith::ConstantIndexOp::create(b, loc, 0);
  Value one = arith::ConstantIndexOp::create(b, loc, 1);
  if (!parallel) {
    scf::ForOp::create(
        b, loc, zero, numChunks, one, ValueRange(),
        [&](OpBuilder &fb, Location loc, Value chunk, ValueRange) {
          body(fb, loc, chunk);
          scf::YieldOp::create(fb, loc);
        });
    return;
  }
  OpBuilder::InsertionGuard guard(b);
  omp::ParallelOperands parallelClauses;
  parallelClauses.numThreads = numThreads;
  auto region = omp::ParallelOp::create(b, loc, parallelClauses);
  b.createBlock(&region.getRegion());
  omp::WsloopOperands loopClauses;
  loopClauses.scheduleKind = omp::ClauseScheduleKindAttr::get(
      b.getContext(), omp::ClauseScheduleKind::Static);
  auto wsloop = omp::WsloopOp::create(b, loc, loopClauses);
  omp::TerminatorOp::create(b, loc);
  b.createBlock(&wsloop.getRegion());
  omp::LoopNestOperands nestClauses;
  nestClauses.loopLowerBounds = {zero};
  nestClauses.loopUpperBounds = {numChunks};
  nestClauses.loopSteps = {one};
  auto nest = omp::LoopNestOp::create(b, loc, nestClauses);
  Block *nestBody =
      b.createBlock(&nest.getRegion(), {}, {b.getIndexType()}, {loc});
  body(b, loc, nestBody->getArgument(0));
  omp::YieldOp::create(b, loc);
}

/// Rewrites one scan into loops: a sequential loop over time inside a loop
/// nest over the neurons. The step body comes from the callee neuron or the
/// scan's own region; each operand is indexed through its map. With
/// `parallel`, the neurons are split into fixed chunks (kChunkNeurons of
/// the innermost dimension, at one point of the outer ones) run by an
/// OpenMP worksharing loop of `numThreads` threads, each chunk by vectors of
/// `vectorWidth` neurons (0: one at a time) where the step body and every
/// buffer allow it, then one at a time.
void lowerScan(ScanOp scan, bool parallel, unsigned vectorWidth,
               Value numThreads) {
  OpBuilder b(scan);
  Location loc = scan.getLoc();
  NeuronOp neuron;
  if (scan.getCallee())
    neuron = SymbolTable::lookupNearestSymbolFrom<NeuronOp>(
        scan, scan.getCalleeAttr());
  Block &body = neuron ? neuron.getBodyBlock() : scan.getBody().front();
  unsigned numInputs = scan.getInputs().size();
  unsigned numStates =
      neuron ? neuron.getNumStates()
             : body.getNumArguments() - numInputs - scan.getParams().size();

  auto mapsOf = [&](MutableOperandRange range) {
    return llvm::map_to_vector(range, [&](OpOperand &operand) {
      return scan.getMatchingIndexingMap(&operand);
    });
  };
  SmallVector<AffineMap> inputMaps = mapsOf(scan.getInputsMutable());
  SmallVector<AffineMap> initMaps = mapsOf(scan.getInitsMutable());
  SmallVector<AffineMap> outputMaps = mapsOf(scan.getOutputsMutable());
  SmallVector<AffineMap> stateMaps = mapsOf(scan.getStatesMutable());
  SmallVector<AffineMap> reductionMaps = mapsOf(scan.getReductionsMutable());

  // T and N... are the dims of an operand spanning the domain.
  Value domainOperand = scan.getDomainOperand();
  unsigned rank = scan.getDomainRank();
  Value zeroIndex = arith::ConstantIndexOp::create(b, loc, 0);
  Value oneIndex = arith::ConstantIndexOp::create(b, loc, 1);
  Value numSteps = memref::DimOp::create(b, loc, domainOperand, 0);
  SmallVector<Value> neuronDims;
  for (unsigned d = 1; d < rank; ++d)
    neuronDims.push_back(memref::DimOp::create(b, loc, domainOperand, d));

  auto presence = [&](ValueRange buffers) {
    return llvm::map_to_vector(
        buffers, [&](Value buffer) { return isPresent(b, loc, buffer); });
  };
  SmallVector<Value> inputPresent(scan.getInputs().size());
  if (auto optional = scan.getOptionalInputs())
    for (int64_t i : *optional)
      inputPresent[i] = isPresent(b, loc, scan.getInputs()[i]);
  SmallVector<Value> initPresent = presence(scan.getInits());
  SmallVector<Value> outputPresent = presence(scan.getOutputs());
  SmallVector<Value> statePresent = presence(scan.getStates());

  // Reductions overwrite their destinations: zero them, then add into them.
  for (Value buffer : scan.getReductions())
    zeroFill(b, loc, buffer);
  // Sums over time are carried; those that keep t are added every step.
  SmallVector<unsigned> carriedReductions;
  for (auto [r, map] : llvm::enumerate(reductionMaps))
    if (!usesTime(map))
      carriedReductions.push_back(r);

  // One neuron at a domain point (t, n...) with t still to be chosen (with
  // `width`, that many consecutive neurons of the innermost dimension from
  // it on, as vector lanes): how its buffers are read and written.
  using AddAtStep = function_ref<void(OpBuilder &, Location, unsigned r,
                                      Value step, Value value)>;
  unsigned inner = rank - 1;
  struct NeuronAccess {
    OpBuilder &nb;
    Location loc;
    SmallVector<Value> point;
    unsigned width;
    // Vectors whose sequence stores stream (see streamingCondition).
    bool streaming = false;
  };
  // Reads `buffer` (null `present`: always there) at `at` through `map`.
  auto load = [&](const NeuronAccess &n, Value present, Value buffer,
                  AffineMap map, ArrayRef<Value> at) -> Value {
    if (n.width)
      return present ? loadLanesIfPresent(n.nb, n.loc, n.width, inner, present,
                                          buffer, map, at)
                     : loadLanes(n.nb, n.loc, n.width, inner, buffer, map, at);
    SmallVector<Value> indices = selectIndices(map, at);
    return present ? loadIfPresent(n.nb, n.loc, present, buffer, indices)
                   : loadAsF32(n.nb, n.loc, buffer, indices);
  };
  auto store = [&](const NeuronAccess &n, Value present, Value value,
                   Value buffer, AffineMap map, ArrayRef<Value> at) {
    SmallVector<Value> indices = selectIndices(map, at);
    if (!n.width)
      return storeIfPresent(n.nb, n.loc, present, value, buffer, indices);
    scf::IfOp::create(n.nb, n.loc, present, [&](OpBuilder &then, Location loc) {
      storeLanes(then, loc, value, buffer, indices, n.streaming);
      scf::YieldOp::create(then, loc);
    });
  };
  // The initial states (zero when absent).
  auto initialStates = [&](const NeuronAccess &n) {
    SmallVector<Value> states;
    for (unsigned s = 0; s < numStates; ++s) {
      if (scan.getInits().empty()) {
        states.push_back(zeroLanes(n.nb, n.loc, n.width));
        continue;
      }
      states.push_back(
          load(n, initPresent[s], scan.getInits()[s], initMaps[s], n.point));
    }
    return states;
  };
  // Params: scalars as they are (on every lane); shaped ones
  // (time-invariant), through their maps.
  auto paramsAt = [&](const NeuronAccess &n) {
    SmallVector<Value> params;
    for (OpOperand &param : scan.getParamsMutable()) {
      Value value = param.get();
      if (isa<MemRefType>(value.getType()))
        value = load(n, Value(), value, scan.getMatchingIndexingMap(&param),
                     n.point);
      else if (n.width)
        value = vector::BroadcastOp::create(
            n.nb, n.loc, VectorType::get({n.width}, value.getType()), value);
      params.push_back(value);
    }
    return params;
  };
  // Calls `use` with the access to the neuron's buffers at each step;
  // `addAtStep` takes the per-step reductions.
  auto withAccess = [&](const NeuronAccess &n, AddAtStep addAtStep,
                        function_ref<void(const ScanGroupAccess &)> use) {
    auto at = [&](Value step) {
      SmallVector<Value> index(n.point);
      index[0] = step;
      return index;
    };
    auto loadInput = [&](unsigned k, Value step) {
      return SmallVector<Value>{load(n, inputPresent[k], scan.getInputs()[k],
                                     inputMaps[k], at(step))};
    };
    auto storeOutput = [&](unsigned k, Value step, ValueRange lanes) {
      store(n, outputPresent[k], lanes.front(), scan.getOutputs()[k],
            outputMaps[k], at(step));
    };
    auto storeState = [&](unsigned s, Value step, ValueRange lanes) {
      store(n, statePresent[s], lanes.front(), scan.getStates()[s],
            stateMaps[s], at(step));
    };
    auto addStep = [&](unsigned r, Value step, ValueRange lanes) {
      addAtStep(n.nb, n.loc, r, step, lanes.front());
    };
    use(ScanGroupAccess{1, loadInput, storeOutput, storeState, addStep,
                        n.width});
  };
  // Stores the final states of `finals` (states, then sums).
  auto storeFinalStates = [&](const NeuronAccess &n, ValueRange finals) {
    for (auto [s, buffer] : llvm::enumerate(scan.getStates()))
      if (scan.isFinalState(s))
        store(n, statePresent[s], finals[s], buffer, stateMaps[s], n.point);
  };
  // Emits one neuron at `neuronIndex`: its time loop, its state sequences
  // and final states. Returns the carried sums of `carriedReductions`, in
  // order.
  auto emitNeuron = [&](OpBuilder &nb, Location loc, ValueRange neuronIndex,
                        AddAtStep addAtStep) -> SmallVector<Value> {
    NeuronAccess n{nb, loc, {zeroIndex}, /*width=*/0};
    llvm::append_range(n.point, neuronIndex);
    SmallVector<Value> states = initialStates(n);
    SmallVector<Value> params = paramsAt(n);
    SmallVector<Value> sums;
    withAccess(n, addAtStep, [&](const ScanGroupAccess &access) {
      ValueRange finals = emitTimeLoop(nb, loc, scan, neuron, numSteps, states,
                                       {params}, carriedReductions, access);
      storeFinalStates(n, finals);
      sums = llvm::to_vector(finals.drop_front(numStates));
    });
    return sums;
  };
  // Adds `value` to reduction r's element at `point` (t first).
  auto addInPlace = [&](OpBuilder &nb, Location loc, unsigned r,
                        ArrayRef<Value> point, Value value) {
    accumulate(nb, loc, value, scan.getReductions()[r],
               selectIndices(reductionMaps[r], point));
  };

  if (!parallel || neuronDims.empty()) {
    SmallVector<Value> lowerBounds(neuronDims.size(), zeroIndex);
    SmallVector<Value> steps(neuronDims.size(), oneIndex);
    scf::buildLoopNest(
        b, loc, lowerBounds, neuronDims, steps,
        [&](OpBuilder &nb, Location loc, ValueRange neuronIndex) {
          SmallVector<Value> point = {zeroIndex};
          llvm::append_range(point, neuronIndex);
          auto addAtStep = [&](OpBuilder &sb, Location loc, unsigned r,
                               Value step, Value value) {
            SmallVector<Value> stepPoint(point);
            stepPoint[0] = step;
            addInPlace(sb, loc, r, stepPoint, value);
          };
          SmallVector<Value> sums = emitNeuron(nb, loc, neuronIndex, addAtStep);
          for (auto [c, r] : llvm::enumerate(carriedReductions))
            addInPlace(nb, loc, r, point, sums[c]);
        });
    scan.erase();
    return;
  }

  // Chunks: blocks of the innermost neuron dimension at each point of the
  // outer ones, numbered row-major.
  ArrayRef<Value> outerDims = ArrayRef<Value>(neuronDims).drop_back();
  Value innerDim = neuronDims.back();
  Value chunkNeurons = arith::ConstantIndexOp::create(b, loc, kChunkNeurons);
  Value blocks = arith::CeilDivUIOp::create(b, loc, innerDim, chunkNeurons);
  Value numChunks = blocks;
  for (Value dim : outerDims)
    numChunks = arith::MulIOp::create(b, loc, numChunks, dim);

  // Each reduction's kind; per-chunk ones get their partials buffer:
  // [chunks] (a sum over time) or [chunks, T] (per step).
  bool sharedSums = false;
  SmallVector<SumKind> kinds;
  SmallVector<Value> partials(reductionMaps.size());
  for (auto [r, map] : llvm::enumerate(reductionMaps)) {
    bool keepsAll = llvm::all_of(llvm::seq(1u, rank), [&](unsigned d) {
      return map.isFunctionOfDim(d);
    });
    SumKind kind = keepsAll                      ? SumKind::PerNeuron
                   : !map.isFunctionOfDim(inner) ? SumKind::PerChunk
                                                 : SumKind::Shared;
    kinds.push_back(kind);
    sharedSums |= kind == SumKind::Shared;
    if (kind != SumKind::PerChunk)
      continue;
    SmallVector<Value> sizes = {numChunks};
    if (usesTime(map))
      sizes.push_back(numSteps);
    partials[r] = memref::AllocOp::create(
        b, loc,
        MemRefType::get(
            SmallVector<int64_t>(sizes.size(), ShapedType::kDynamic),
            b.getF32Type()),
        sizes);
  }

  // Lanes need a step body of elementwise ops and buffers contiguous along
  // the innermost dimension (or the same for every lane).
  auto accessible = [&](MutableOperandRange operands, bool written) {
    return llvm::all_of(operands, [&](OpOperand &operand) {
      return !isa<MemRefType>(operand.get().getType()) ||
             isLaneAccessible(operand.get(),
                              scan.getMatchingIndexingMap(&operand), inner,
                              written);
    });
  };
  bool vectorize =
      vectorWidth > 1 && isVectorizableBody(body) &&
      accessible(scan.getInputsMutable(), false) &&
      accessible(scan.getInitsMutable(), false) &&
      accessible(scan.getParamsMutable(), false) &&
      accessible(scan.getOutputsMutable(), true) &&
      accessible(scan.getStatesMutable(), true) &&
      llvm::all_of(scan.getReductionsMutable(), [&](OpOperand &operand) {
        AffineMap map = scan.getMatchingIndexingMap(&operand);
        return !map.isFunctionOfDim(inner) ||
               isLaneAccessible(operand.get(), map, inner, true);
      });

  // Big scans whose written sequences are aligned stream them.
  Value streaming;
  if (vectorize) {
    SmallVector<Value> sequences(scan.getOutputs());
    for (auto [s, buffer] : llvm::enumerate(scan.getStates()))
      if (!scan.isFinalState(s))
        sequences.push_back(buffer);
    Value elements = numSteps;
    for (Value dim : neuronDims)
      elements = arith::MulIOp::create(b, loc, elements, dim);
    streaming = streamingCondition(b, loc, sequences, vectorWidth, elements);
  }

  // The point (t = 0, outer..., n = 0) of `chunk`'s first neuron, and the
  // chunk's range of the innermost dimension.
  auto chunkStart = [&](OpBuilder &cb, Location loc, Value chunk) {
    Value outer = arith::DivUIOp::create(cb, loc, chunk, blocks);
    SmallVector<Value> point = {zeroIndex};
    llvm::append_range(point, delinearize(cb, loc, outer, outerDims));
    Value first = arith::MulIOp::create(
        cb, loc, arith::RemUIOp::create(cb, loc, chunk, blocks), chunkNeurons);
    point.push_back(first);
    return point;
  };

  // Bit-packed spikes: a byte holds 8 neurons in a row's linear order, and
  // its first neuron writes it whole; with outer dimensions a byte may span
  // two chunks, which then run in order on one thread.
  bool sharedBytes =
      !outerDims.empty() && llvm::any_of(scan.getOutputs(), [](Value buffer) {
        return cast<MemRefType>(buffer.getType()).getElementType().isInteger(1);
      });
  emitChunkLoop(
      b, loc, numChunks, /*parallel=*/!sharedSums && !sharedBytes, numThreads,
      [&](OpBuilder &cb, Location loc, Value chunk) {
        SmallVector<Value> start = chunkStart(cb, loc, chunk);
        Value first = start.back();
        Value last = arith::MinUIOp::create(
            cb, loc, arith::AddIOp::create(cb, loc, first, chunkNeurons),
            innerDim);
        // Per-step partials start at zero; per-chunk sums over time are
        // carried by the neuron loop.
        SmallVector<Value> chunkSums;
        for (auto [r, kind] : llvm::enumerate(kinds)) {
          if (kind != SumKind::PerChunk)
            continue;
          if (usesTime(reductionMaps[r]))
            scf::ForOp::create(
                cb, loc, zeroIndex, numSteps, oneIndex, ValueRange(),
                [&, r = r](OpBuilder &zb, Location loc, Value t, ValueRange) {
                  memref::StoreOp::create(zb, loc, f32Constant(zb, loc, 0.0),
                                          partials[r], ValueRange{chunk, t});
                  scf::YieldOp::create(zb, loc);
                });
          else
            chunkSums.push_back(f32Constant(cb, loc, 0.0));
        }
        // Adds a contribution of reduction r at `at` (t first): a sum some
        // chunks share takes the lanes' sum into the chunk's partial; one
        // kept per neuron takes each lane into its own element.
        auto add = [&](OpBuilder &ab, Location loc, unsigned width, unsigned r,
                       ArrayRef<Value> at, Value value) {
          if (kinds[r] == SumKind::PerChunk) {
            Value total = width ? sumLanes(ab, loc, value) : value;
            accumulate(ab, loc, total, partials[r], ValueRange{chunk, at[0]});
          } else if (width) {
            accumulateLanes(ab, loc, value, scan.getReductions()[r],
                            selectIndices(reductionMaps[r], at));
          } else {
            addInPlace(ab, loc, r, at, value);
          }
        };
        // The sums over time a neuron (or vector) ends with: added to the
        // chunk's running `sums`, returned, or in place.
        auto addCarried = [&](OpBuilder &ab, Location loc, unsigned width,
                              ArrayRef<Value> point, ValueRange carried,
                              ValueRange sums) {
          SmallVector<Value> next;
          auto sum = sums.begin();
          for (auto [c, r] : llvm::enumerate(carriedReductions)) {
            if (kinds[r] != SumKind::PerChunk) {
              add(ab, loc, width, r, point, carried[c]);
              continue;
            }
            Value total = width ? sumLanes(ab, loc, carried[c]) : carried[c];
            next.push_back(arith::AddFOp::create(ab, loc, *sum++, total));
          }
          return next;
        };
        auto pointAt = [&](Value n) {
          SmallVector<Value> point(start);
          point.back() = n;
          return point;
        };
        auto addAtStepOf = [&](ArrayRef<Value> point, unsigned width) {
          return [&, point, width](OpBuilder &sb, Location loc, unsigned r,
                                   Value step, Value value) {
            SmallVector<Value> stepPoint(point);
            stepPoint[0] = step;
            add(sb, loc, width, r, stepPoint, value);
          };
        };
        // Neurons [from, to) one at a time, each through its time loop.
        auto neuronLoop = [&](Value from, Value to, ValueRange sumsIn) {
          return scf::ForOp::create(
              cb, loc, from, to, oneIndex, sumsIn,
              [&](OpBuilder &nb, Location loc, Value n, ValueRange sums) {
                SmallVector<Value> point = pointAt(n);
                SmallVector<Value> carried =
                    emitNeuron(nb, loc, ArrayRef<Value>(point).drop_front(),
                               addAtStepOf(point, 0));
                scf::YieldOp::create(
                    nb, loc, addCarried(nb, loc, 0, point, carried, sums));
              });
        };
        // Neurons [from, to) in vectors, one time step at a time: each
        // step streams the chunk's rows of every sequence, and the vectors'
        // carries (states, sums over time) wait in a buffer of the chunk.
        auto vectorSteps = [&](Value from, Value to,
                               ValueRange sumsIn) -> SmallVector<Value> {
          unsigned width = vectorWidth;
          int64_t numCarries = numStates + carriedReductions.size();
          OpBuilder::InsertionGuard guard(cb);
          auto scope =
              memref::AllocaScopeOp::create(cb, loc, sumsIn.getTypes());
          cb.createBlock(&scope.getBodyRegion());
          Value carries = memref::AllocaOp::create(
              cb, loc,
              MemRefType::get({std::max<int64_t>(numCarries, 1), kChunkNeurons},
                              cb.getF32Type()));
          Value lanes = arith::ConstantIndexOp::create(cb, loc, width);
          auto vectors = [&](OpBuilder &b, ValueRange iterArgs,
                             function_ref<SmallVector<Value>(
                                 OpBuilder &, Location, Value, ValueRange)>
                                 body) {
            return scf::ForOp::create(
                b, loc, from, to, lanes, iterArgs,
                [&](OpBuilder &vb, Location loc, Value n, ValueRange args) {
                  scf::YieldOp::create(vb, loc, body(vb, loc, n, args));
                });
          };
          auto slot = [&](OpBuilder &b, Location loc, int64_t k, Value n) {
            return SmallVector<Value>{arith::ConstantIndexOp::create(b, loc, k),
                                      arith::SubIOp::create(b, loc, n, from)};
          };
          auto keep = [&](OpBuilder &b, Location loc, Value n,
                          ValueRange values) {
            for (auto [k, value] : llvm::enumerate(values))
              vector::StoreOp::create(b, loc, value, carries,
                                      slot(b, loc, k, n));
          };
          auto fetch = [&](OpBuilder &b, Location loc, Value n) {
            SmallVector<Value> values;
            for (int64_t k = 0; k < numCarries; ++k)
              values.push_back(vector::LoadOp::create(
                  b, loc, f32Lanes(b, width), carries, slot(b, loc, k, n)));
            return values;
          };
          vectors(cb, {},
                  [&](OpBuilder &vb, Location loc, Value n, ValueRange) {
                    NeuronAccess a{vb, loc, pointAt(n), width};
                    SmallVector<Value> initial = initialStates(a);
                    initial.append(carriedReductions.size(),
                                   zeroLanes(vb, loc, width));
                    keep(vb, loc, n, initial);
                    return SmallVector<Value>();
                  });
          auto stepLoop = [&](OpBuilder &sb, bool stream) {
            scf::ForOp::create(
                sb, loc, zeroIndex, numSteps, oneIndex, ValueRange(),
                [&](OpBuilder &tb, Location loc, Value iteration, ValueRange) {
                  Value step = iteration;
                  if (scan.getReverse())
                    step = arith::SubIOp::create(
                        tb, loc,
                        arith::SubIOp::create(tb, loc, numSteps, oneIndex),
                        iteration);
                  vectors(
                      tb, {},
                      [&](OpBuilder &vb, Location loc, Value n, ValueRange) {
                        NeuronAccess a{vb, loc, pointAt(n), width, stream};
                        SmallVector<Value> params = paramsAt(a);
                        SmallVector<Value> current = fetch(vb, loc, n);
                        withAccess(a, addAtStepOf(a.point, width),
                                   [&](const ScanGroupAccess &access) {
                                     keep(vb, loc, n,
                                          emitStep(vb, loc, scan, neuron, step,
                                                   current, {params},
                                                   carriedReductions, access));
                                   });
                        return SmallVector<Value>();
                      });
                  scf::YieldOp::create(tb, loc);
                });
          };
          if (!streaming) {
            stepLoop(cb, /*stream=*/false);
          } else {
            scf::IfOp::create(
                cb, loc, streaming,
                [&](OpBuilder &then, Location loc) {
                  stepLoop(then, /*stream=*/true);
                  // Streaming stores are weakly ordered: drain them before
                  // the chunk counts as done.
                  LLVM::FenceOp::create(then, loc,
                                        LLVM::AtomicOrdering::seq_cst);
                  scf::YieldOp::create(then, loc);
                },
                [&](OpBuilder &otherwise, Location loc) {
                  stepLoop(otherwise, /*stream=*/false);
                  scf::YieldOp::create(otherwise, loc);
                });
          }
          auto finish = vectors(
              cb, sumsIn,
              [&](OpBuilder &vb, Location loc, Value n, ValueRange sums) {
                NeuronAccess a{vb, loc, pointAt(n), width};
                SmallVector<Value> finals = fetch(vb, loc, n);
                storeFinalStates(a, finals);
                return addCarried(vb, loc, width, a.point,
                                  ArrayRef<Value>(finals).drop_front(numStates),
                                  sums);
              });
          memref::AllocaScopeReturnOp::create(cb, loc, finish.getResults());
          return SmallVector<Value>(scope.getResults());
        };
        // Whole vectors first, then the rest one at a time.
        scf::ForOp neurons;
        if (vectorize) {
          Value lanes = arith::ConstantIndexOp::create(cb, loc, vectorWidth);
          Value count = arith::SubIOp::create(cb, loc, last, first);
          Value vectorEnd = arith::AddIOp::create(
              cb, loc, first,
              arith::MulIOp::create(
                  cb, loc, arith::DivUIOp::create(cb, loc, count, lanes),
                  lanes));
          SmallVector<Value> sums = vectorSteps(first, vectorEnd, chunkSums);
          neurons = neuronLoop(vectorEnd, last, sums);
        } else {
          neurons = neuronLoop(first, last, chunkSums);
        }
        auto sum = neurons.getResults().begin();
        for (unsigned r : carriedReductions)
          if (kinds[r] == SumKind::PerChunk)
            memref::StoreOp::create(cb, loc, *sum++, partials[r],
                                    ValueRange{chunk});
      });

  // The partials, added in chunk order: the same sums for any thread count.
  bool anyPartials = llvm::any_of(partials, [](Value p) { return !!p; });
  if (anyPartials)
    scf::ForOp::create(
        b, loc, zeroIndex, numChunks, oneIndex, ValueRange(),
        [&](OpBuilder &cb, Location loc, Value chunk, ValueRange) {
          SmallVector<Value> point = chunkStart(cb, loc, chunk);
          for (auto [r, partial] : llvm::enumerate(partials)) {
            if (!partial)
              continue;
            if (!usesTime(reductionMaps[r])) {
              addInPlace(
                  cb, loc, r, point,
                  memref::LoadOp::create(cb, loc, partial, ValueRange{chunk}));
              continue;
            }
            scf::ForOp::create(
                cb, loc, zeroIndex, numSteps, oneIndex, ValueRange(),
                [&, r = r, partial = partial](OpBuilder &tb, Location loc,
                                              Value t, ValueRange) {
                  SmallVector<Value> stepPoint(point);
                  stepPoint[0] = t;
                  addInPlace(tb, loc, r, stepPoint,
                             memref::LoadOp::create(tb, loc, partial,
                                                    ValueRange{chunk, t}));
                  scf::YieldOp::create(tb, loc);
                });
          }
          scf::YieldOp::create(cb, loc);
        });
  for (Value partial : partials)
    if (partial)
      memref::DeallocOp::create(b, loc, partial);
  scan.erase();
}

struct ConvertFlexSNToSCFPass
    : flexsn::impl::ConvertFlexSNToSCFBase<ConvertFlexSNToSCFPass> {
  using Base::Base;

  /// Appends the kernel function's `num_threads` argument (i32, last) and
  /// returns the thread count its parallel regions use: the argument, or
  /// OpenMP's default (`omp_get_max_threads()`) where it is not positive.
  Value appendThreadCount(func::FuncOp func) {
    MLIRContext *context = &getContext();
    Type i32 = IntegerType::get(context, 32);
    Location loc = func.getLoc();
    if (failed(func.insertArgument(func.getNumArguments(), i32, {}, loc)))
      return {};
    Value argument = func.getArguments().back();
    auto module = func->getParentOfType<ModuleOp>();
    // Calls in the module (a test's driver) keep OpenMP's default.
    if (std::optional<SymbolTable::UseRange> uses =
            SymbolTable::getSymbolUses(func, module))
      for (SymbolTable::SymbolUse use : *uses)
        if (auto call = dyn_cast<func::CallOp>(use.getUser())) {
          OpBuilder cb(call);
          call->insertOperands(
              call->getNumOperands(),
              arith::ConstantIntOp::create(cb, loc, i32, 0).getResult());
        }
    StringRef defaultName = "omp_get_max_threads";
    // An llvm.func: a func.func declaration would get a C-interface
    // wrapper name like the kernels.
    auto declaration = module.lookupSymbol<LLVM::LLVMFuncOp>(defaultName);
    if (!declaration) {
      OpBuilder mb = OpBuilder::atBlockBegin(module.getBody());
      declaration = LLVM::LLVMFuncOp::create(
          mb, loc, defaultName, LLVM::LLVMFunctionType::get(i32, {}));
    }
    OpBuilder b = OpBuilder::atBlockBegin(&func.getBody().front());
    Value zero = arith::ConstantIntOp::create(b, loc, i32, 0);
    Value given = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::sgt,
                                        argument, zero);
    auto ifDefault = scf::IfOp::create(
        b, loc, given,
        [&](OpBuilder &tb, Location loc) {
          scf::YieldOp::create(tb, loc, argument);
        },
        [&](OpBuilder &eb, Location loc) {
          scf::YieldOp::create(
              eb, loc,
              LLVM::CallOp::create(eb, loc, declaration, ValueRange())
                  .getResult());
        });
    return ifDefault.getResult(0);
  }

  void runOnOperation() override {
    ModuleOp module = getOperation();
    // Lanes past any SIMD register's only grow LLVM's code and compile time
    // (16384 lanes took a minute, 65536 exhausted LLVM): 64 f32 lanes are
    // four AVX-512 registers.
    constexpr unsigned maxVectorWidth = 64;
    if (vectorWidth > maxVectorWidth) {
      module.emitError() << "vector-width is at most " << maxVectorWidth
                         << " lanes, got " << vectorWidth.getValue();
      return signalPassFailure();
    }
    DenseMap<func::FuncOp, Value> threadCounts;
    // Steps are emitted from flat bodies.
    if (failed(checkBlocksCompiled(module)) ||
        failed(inlineApplications(module)))
      return signalPassFailure();
    // The kernels' signatures move to the module, for the manifest and the
    // runtimes that call the compiled functions.
    SmallVector<Attribute> kernels;
    for (func::FuncOp func : getKernelFunctions(module)) {
      FailureOr<KernelFunction> kernel = analyzeKernelFunction(func);
      if (failed(kernel))
        return signalPassFailure();
      kernels.push_back(CompiledKernelAttr::get(
          &getContext(), func.getSymNameAttr(), kernel->signature,
          /*vectorWidth=*/0, /*deterministic=*/false, StringAttr(),
          StringAttr()));
      func->removeAttr(KernelSignatureAttr::getAttrName());
      // Autodiff has read the training marks; LLVM IR has no place for
      // them (its translation would warn of each).
      for (unsigned i = 0, e = func.getNumArguments(); i < e; ++i)
        func.removeArgAttr(i, "flexsn.trainable");
      if (parallel)
        threadCounts[func] = appendThreadCount(func);
    }
    if (!kernels.empty())
      module->setAttr("flexsn.cpu_kernels",
                      ArrayAttr::get(&getContext(), kernels));

    SmallVector<ScanOp> scans;
    WalkResult walk = module.walk([&](ScanOp scan) {
      if (scan.hasTensorSemantics()) {
        scan.emitError("convert-flexsn-to-scf lowers the buffer form: "
                       "bufferize tensor scans first (one-shot-bufferize)");
        return WalkResult::interrupt();
      }
      scans.push_back(scan);
      return WalkResult::advance();
    });
    if (walk.wasInterrupted())
      return signalPassFailure();
    for (ScanOp scan : scans)
      lowerScan(scan, parallel, vectorWidth,
                threadCounts.lookup(scan->getParentOfType<func::FuncOp>()));
    // Neurons are only templates for scans: once inlined, they are dead.
    for (NeuronOp neuron :
         llvm::make_early_inc_range(module.getOps<NeuronOp>()))
      neuron.erase();
  }
};

} // namespace
