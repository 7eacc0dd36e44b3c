//===- LoopBuilders.cpp - Loads, stores and loops of the SCF lowering -----===//
//
// Part of the FlexSN project: an MLIR compiler for spiking-neuron dynamics.
//
//===----------------------------------------------------------------------===//

#include "LoopBuilders.h"

#include "flexsn/Dialect/FlexSN/Utils/StepBuilder.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/OpenMP/OpenMPDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/SCF/Utils/Utils.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

using namespace mlir;
using namespace mlir::flexsn;
using namespace mlir::flexsn::loops;

namespace {

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

/// Stores the 0/1 spike `value` at `indices` into the bit-packed `buffer`
/// (i1, 8 per byte; `#flexsn.buffer` gives the layout): element e (its
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

/// Whether vectors of `buffer`'s elements may be written with streaming
/// (non-temporal) stores: f32, f16 or bf16, whose aligned vectors x86
/// stores whole (a byte vector would go out a word at a time).
bool isStreamable(Value buffer) {
  Type element = cast<MemRefType>(buffer.getType()).getElementType();
  return isa<FloatType>(element);
}

/// Scans of at least this many bytes of f32 per value stream their
/// sequences (4 Mi elements: 16 MiB, half of the development machine's
/// L3): a smaller output may still be in cache when the next op reads it,
/// which a non-temporal store would have sent to memory.
constexpr int64_t kStreamingBytes = 16 << 20;

} // namespace

Value loops::loadAsF32(OpBuilder &b, Location loc, Value buffer,
                       ValueRange indices) {
  Value value = memref::LoadOp::create(b, loc, buffer, indices);
  if (!value.getType().isF32())
    value = arith::ExtFOp::create(b, loc, b.getF32Type(), value);
  return value;
}

Value loops::isPresent(OpBuilder &b, Location loc, Value buffer) {
  Value pointer =
      memref::ExtractAlignedPointerAsIndexOp::create(b, loc, buffer);
  Value null = arith::ConstantIndexOp::create(b, loc, 0);
  return arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ne, pointer, null);
}

Value loops::f32Constant(OpBuilder &b, Location loc, double value) {
  return arith::ConstantOp::create(b, loc, b.getF32FloatAttr(value));
}

Value loops::loadIfPresent(OpBuilder &b, Location loc, Value present,
                           Value buffer, ValueRange indices) {
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

void loops::storeIfPresent(OpBuilder &b, Location loc, Value present,
                           Value value, Value buffer, ValueRange indices) {
  bool bits = cast<MemRefType>(buffer.getType()).getElementType().isInteger(1);
  scf::IfOp::create(b, loc, present, [&](OpBuilder &then, Location loc) {
    if (bits)
      storeBits(then, loc, value, buffer, indices);
    else
      storeFromF32(then, loc, value, buffer, indices);
    scf::YieldOp::create(then, loc);
  });
}

SmallVector<Value> loops::selectIndices(AffineMap map, ArrayRef<Value> point) {
  return llvm::map_to_vector(map.getResults(), [&](AffineExpr expr) {
    return point[cast<AffineDimExpr>(expr).getPosition()];
  });
}

bool loops::usesTime(AffineMap map) {
  return map.getNumResults() != 0 && map.getDimPosition(0) == 0;
}

void loops::zeroFill(OpBuilder &b, Location loc, Value buffer) {
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

void loops::accumulate(OpBuilder &b, Location loc, Value value, Value buffer,
                       ValueRange indices) {
  Value total = memref::LoadOp::create(b, loc, buffer, indices);
  Value sum = arith::AddFOp::create(b, loc, total, value);
  memref::StoreOp::create(b, loc, sum, buffer, indices);
}

VectorType loops::f32Lanes(OpBuilder &b, unsigned width) {
  return VectorType::get({width}, b.getF32Type());
}

Value loops::loadLanes(OpBuilder &b, Location loc, unsigned width,
                       unsigned inner, Value buffer, AffineMap map,
                       ArrayRef<Value> point) {
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

Value loops::loadLanesIfPresent(OpBuilder &b, Location loc, unsigned width,
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

void loops::storeLanes(OpBuilder &b, Location loc, Value value, Value buffer,
                       ValueRange indices, bool streaming) {
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

Value loops::streamingCondition(OpBuilder &b, Location loc,
                                ValueRange sequences, unsigned width,
                                Value elements) {
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

void loops::accumulateLanes(OpBuilder &b, Location loc, Value value,
                            Value buffer, ValueRange indices) {
  Value total =
      vector::LoadOp::create(b, loc, value.getType(), buffer, indices);
  vector::StoreOp::create(b, loc, arith::AddFOp::create(b, loc, total, value),
                          buffer, indices);
}

Value loops::sumLanes(OpBuilder &b, Location loc, Value value) {
  return vector::ReductionOp::create(b, loc, vector::CombiningKind::ADD, value);
}

bool loops::isLaneAccessible(Value buffer, AffineMap map, unsigned inner,
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

SmallVector<Value> loops::delinearize(OpBuilder &b, Location loc, Value value,
                                      ArrayRef<Value> dims) {
  SmallVector<Value> indices(dims.size());
  for (int64_t d = static_cast<int64_t>(dims.size()) - 1; d >= 0; --d) {
    indices[d] = arith::RemUIOp::create(b, loc, value, dims[d]);
    value = arith::DivUIOp::create(b, loc, value, dims[d]);
  }
  return indices;
}

void loops::emitChunkLoop(
    OpBuilder &b, Location loc, Value numChunks, bool parallel,
    Value numThreads, function_ref<void(OpBuilder &, Location, Value)> body) {
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
