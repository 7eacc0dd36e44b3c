//===- TilingInterfaceImpl.cpp - Tiling flexsn.scan -----------------------===//
//
// Part of the FlexSN project: an MLIR compiler for spiking-neuron dynamics.
//
//===----------------------------------------------------------------------===//
//
// A scan's iteration domain is (t, n...). Neurons are independent, so a tile
// of the neuron dimensions is a scan over the operands' matching slices.
// Time is sequential (states carry from step to step), and a reduction
// overwrites its destination with a sum over the dimensions it drops: the
// dimensions a tile may split are the neuron dimensions every reduction
// keeps. Tiles of any other dimension are refused.
//
//===----------------------------------------------------------------------===//

#include "flexsn/Dialect/FlexSN/IR/FlexSNOps.h"
#include "flexsn/Dialect/FlexSN/Transforms/ScanInterfaceImpls.h"

#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/Utils/StaticValueUtils.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/Interfaces/TilingInterface.h"

using namespace mlir;
using namespace mlir::flexsn;

namespace {

OpFoldResult getMixedSize(OpBuilder &b, Location loc, Value value,
                          int64_t dim) {
  if (isa<RankedTensorType>(value.getType()))
    return tensor::getMixedSize(b, loc, value, dim);
  return memref::getMixedSize(b, loc, value, dim);
}

/// Whether `size` is, by construction, the whole of domain dimension `dim`:
/// a constant equal to its static size, or the `dim` op reading it from an
/// operand.
bool isWholeDimension(ScanOp scan, unsigned dim, OpFoldResult size) {
  std::optional<int64_t> constant = getConstantIntValue(size);
  for (OpOperand &operand : scan->getOpOperands()) {
    auto type = dyn_cast<ShapedType>(operand.get().getType());
    if (!type)
      continue;
    std::optional<unsigned> position =
        scan.getMatchingIndexingMap(&operand).getResultPosition(
            getAffineDimExpr(dim, scan.getContext()));
    if (!position)
      continue;
    if (constant && !type.isDynamicDim(*position))
      return *constant == type.getDimSize(*position);
    auto value = dyn_cast<Value>(size);
    if (!value)
      continue;
    Value source;
    OpFoldResult index;
    if (auto dimOp = value.getDefiningOp<tensor::DimOp>()) {
      source = dimOp.getSource();
      index = dimOp.getIndex();
    } else if (auto dimOp = value.getDefiningOp<memref::DimOp>()) {
      source = dimOp.getSource();
      index = dimOp.getIndex();
    }
    if (source == operand.get() && getConstantIntValue(index) == *position)
      return true;
  }
  return false;
}

/// The offsets and sizes `map` selects from a tile of the domain.
void selectTile(AffineMap map, ArrayRef<OpFoldResult> offsets,
                ArrayRef<OpFoldResult> sizes,
                SmallVectorImpl<OpFoldResult> &selectedOffsets,
                SmallVectorImpl<OpFoldResult> &selectedSizes) {
  selectedOffsets.clear();
  selectedSizes.clear();
  for (unsigned i = 0; i < map.getNumResults(); ++i) {
    selectedOffsets.push_back(offsets[map.getDimPosition(i)]);
    selectedSizes.push_back(sizes[map.getDimPosition(i)]);
  }
}

struct ScanTilingInterface
    : TilingInterface::ExternalModel<ScanTilingInterface, ScanOp> {
  SmallVector<utils::IteratorType> getLoopIteratorTypes(Operation *op) const {
    return cast<ScanOp>(op).getLoopIteratorTypes();
  }

  SmallVector<Range> getIterationDomain(Operation *op, OpBuilder &b) const {
    auto scan = cast<ScanOp>(op);
    Value domain = scan.getDomainOperand();
    OpFoldResult zero = b.getIndexAttr(0), one = b.getIndexAttr(1);
    SmallVector<Range> ranges;
    for (unsigned d = 0, e = scan.getDomainRank(); d < e; ++d)
      ranges.push_back({zero, getMixedSize(b, op->getLoc(), domain, d), one});
    return ranges;
  }

  FailureOr<TilingResult>
  getTiledImplementation(Operation *op, OpBuilder &b,
                         ArrayRef<OpFoldResult> offsets,
                         ArrayRef<OpFoldResult> sizes) const {
    auto scan = cast<ScanOp>(op);
    Location loc = scan.getLoc();
    for (auto [d, type] : llvm::enumerate(scan.getLoopIteratorTypes())) {
      if (type == utils::IteratorType::parallel)
        continue;
      if (getConstantIntValue(offsets[d]) != 0 ||
          !isWholeDimension(scan, d, sizes[d]))
        return scan.emitOpError()
               << "cannot be tiled along domain dimension d" << d << ": "
               << (d == 0 ? "time is sequential" : "a reduction sums over it")
               << "; only the neuron dimensions every reduction keeps are "
                  "tiled";
    }

    SmallVector<Value> operands;
    SmallVector<Operation *> slices;
    SmallVector<Type> resultTypes;
    for (OpOperand &operand : scan->getOpOperands()) {
      Value value = operand.get();
      auto type = dyn_cast<ShapedType>(value.getType());
      if (!type || type.getRank() == 0) {
        operands.push_back(value);
        continue;
      }
      SmallVector<OpFoldResult> tileOffsets, tileSizes;
      selectTile(scan.getMatchingIndexingMap(&operand), offsets, sizes,
                 tileOffsets, tileSizes);
      SmallVector<OpFoldResult> strides(type.getRank(), b.getIndexAttr(1));
      Operation *slice =
          isa<RankedTensorType>(type)
              ? tensor::ExtractSliceOp::create(b, loc, value, tileOffsets,
                                               tileSizes, strides)
                    .getOperation()
              : memref::SubViewOp::create(b, loc, value, tileOffsets, tileSizes,
                                          strides)
                    .getOperation();
      slices.push_back(slice);
      operands.push_back(slice->getResult(0));
      if (scan.isDpsInit(&operand) && isa<RankedTensorType>(type))
        resultTypes.push_back(slice->getResult(0).getType());
    }
    ScanOp tiled = scan.cloneWithOperands(b, operands, resultTypes);
    return TilingResult{
        {tiled}, SmallVector<Value>(tiled->getResults()), slices};
  }

  LogicalResult
  getResultTilePosition(Operation *op, OpBuilder &b, unsigned resultNumber,
                        ArrayRef<OpFoldResult> offsets,
                        ArrayRef<OpFoldResult> sizes,
                        SmallVector<OpFoldResult> &resultOffsets,
                        SmallVector<OpFoldResult> &resultSizes) const {
    auto scan = cast<ScanOp>(op);
    selectTile(
        scan.getMatchingIndexingMap(scan.getDpsInitOperand(resultNumber)),
        offsets, sizes, resultOffsets, resultSizes);
    return success();
  }

  /// The domain tile producing a result tile: the result's dimensions as
  /// given, every other dimension whole.
  LogicalResult getIterationDomainTileFromResultTile(
      Operation *op, OpBuilder &b, unsigned resultNumber,
      ArrayRef<OpFoldResult> offsets, ArrayRef<OpFoldResult> sizes,
      SmallVectorImpl<OpFoldResult> &domainOffsets,
      SmallVectorImpl<OpFoldResult> &domainSizes) const {
    auto scan = cast<ScanOp>(op);
    AffineMap map =
        scan.getMatchingIndexingMap(scan.getDpsInitOperand(resultNumber));
    domainOffsets.clear();
    domainSizes.clear();
    for (const Range &range : getIterationDomain(op, b)) {
      domainOffsets.push_back(range.offset);
      domainSizes.push_back(range.size);
    }
    for (unsigned i = 0; i < map.getNumResults(); ++i) {
      domainOffsets[map.getDimPosition(i)] = offsets[i];
      domainSizes[map.getDimPosition(i)] = sizes[i];
    }
    return success();
  }

  FailureOr<TilingResult>
  generateResultTileValue(Operation *op, OpBuilder &b, unsigned resultNumber,
                          ArrayRef<OpFoldResult> offsets,
                          ArrayRef<OpFoldResult> sizes) const {
    SmallVector<OpFoldResult> domainOffsets, domainSizes;
    if (failed(getIterationDomainTileFromResultTile(
            op, b, resultNumber, offsets, sizes, domainOffsets, domainSizes)))
      return failure();
    return getTiledImplementation(op, b, domainOffsets, domainSizes);
  }
};

} // namespace

void mlir::flexsn::registerTilingInterfaceExternalModels(
    DialectRegistry &registry) {
  registry.addExtension(+[](MLIRContext *ctx, FlexSNDialect *) {
    ScanOp::attachInterface<ScanTilingInterface>(*ctx);
  });
}
