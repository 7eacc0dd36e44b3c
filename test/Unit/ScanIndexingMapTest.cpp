//===- ScanIndexingMapTest.cpp - flexsn.scan as an IndexingMapOpInterface -===//
//
// Part of the FlexSN project: an MLIR compiler for spiking-neuron dynamics.
//
//===----------------------------------------------------------------------===//
//
// Scans parsed from text answer upstream's IndexingMapOpInterface queries
// (maps, shapes, static loop ranges) from their `indexing_maps`, give `t`
// the `reduction` iterator type, agree with their TilingInterface model,
// and report wrong sizes with FlexSN's diagnostic rather than upstream's.
//
//===----------------------------------------------------------------------===//

#include "flexsn/Dialect/FlexSN/IR/FlexSNOps.h"
#include "flexsn/Tools/Registration.h"

#include "mlir/AsmParser/AsmParser.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Interfaces/TilingInterface.h"
#include "mlir/Parser/Parser.h"

#include "gtest/gtest.h"

#include <string>
#include <vector>

using namespace mlir;
using namespace mlir::flexsn;

namespace {

using utils::IteratorType;

constexpr int64_t kDynamic = ShapedType::kDynamic;

/// A per-channel input and a per-channel sum over [T, C, HW]; T is static
/// only in the output, and the first input leaves it dynamic.
constexpr const char *kPerChannelScan = R"mlir(
func.func @f(%x: tensor<?x4x8xf32>, %w: tensor<4xf32>,
             %e0: tensor<6x4x8xf32>, %e1: tensor<4xf32>)
    -> (tensor<6x4x8xf32>, tensor<4xf32>) {
  %y, %h = flexsn.scan ins(%x, %w : tensor<?x4x8xf32>, tensor<4xf32>)
      outs(%e0 : tensor<6x4x8xf32>) reductions(%e1 : tensor<4xf32>)
      indexing_maps = [affine_map<(t, c, hw) -> (t, c, hw)>,
                       affine_map<(t, c, hw) -> (c)>,
                       affine_map<(t, c, hw) -> (t, c, hw)>,
                       affine_map<(t, c, hw) -> (c)>] {
  ^bb0(%xi: f32, %wi: f32):
    %p = arith.mulf %xi, %wi : f32
    flexsn.yield %p, %p : f32, f32
  }
  return %y, %h : tensor<6x4x8xf32>, tensor<4xf32>
}
)mlir";

/// A neuron over [T, N] with the maps the ranks imply: an initial state
/// per neuron, a scalar param, bytes as the output, the final state.
constexpr const char *kNeuronScan = R"mlir(
flexsn.neuron @leaky inputs(%x: f32) states(%v: f32) outputs(spike)
    params(%tau: f32 = 2.0 runtime) {
  %h = arith.mulf %x, %tau : f32
  %d = arith.addf %v, %h : f32
  %s = flexsn.spike %d surrogate(#flexsn.sigmoid<alpha = 4.0>) : f32
  flexsn.yield %s, %d : f32, f32
}

func.func @f(%x: memref<?x16xf32>, %v0: memref<16xf32>, %tau: f32,
             %s: memref<?x16xi8>, %v: memref<16xf32>) {
  flexsn.scan @leaky ins(%x : memref<?x16xf32>) inits(%v0 : memref<16xf32>)
      params(%tau : f32) outs(%s : memref<?x16xi8>) states(%v : memref<16xf32>)
  return
}
)mlir";

class ScanIndexingMapTest : public ::testing::Test {
protected:
  ScanIndexingMapTest() {
    // The TilingInterface model is an external one: register it too.
    registerAllDialects(registry);
    context = std::make_unique<MLIRContext>(registry);
    context->loadAllAvailableDialects();
  }

  /// Parses `source` and returns its only scan (null when there is none).
  ScanOp parseScan(StringRef source) {
    module = parseSourceString<ModuleOp>(source, context.get());
    if (!module)
      return {};
    ScanOp found;
    module->walk([&](ScanOp scan) { found = scan; });
    return found;
  }

  AffineMap map(StringRef text) {
    return cast<AffineMapAttr>(parseAttribute(text, context.get())).getValue();
  }

  DialectRegistry registry;
  std::unique_ptr<MLIRContext> context;
  OwningOpRef<ModuleOp> module;
};

TEST_F(ScanIndexingMapTest, PerChannelMapsThroughTheInterface) {
  ScanOp scan = parseScan(kPerChannelScan);
  ASSERT_TRUE(scan);
  auto op = cast<IndexingMapOpInterface>(scan.getOperation());

  AffineMap sequence = map("affine_map<(t, c, hw) -> (t, c, hw)>");
  AffineMap perChannel = map("affine_map<(t, c, hw) -> (c)>");
  std::vector<AffineMap> expected = {sequence, perChannel, sequence,
                                     perChannel};
  SmallVector<AffineMap> maps = op.getIndexingMapsArray();
  EXPECT_EQ(std::vector<AffineMap>(maps.begin(), maps.end()), expected);

  // Per operand, through the interface and through the op.
  OpOperand &weight = scan.getInputsMutable()[1];
  EXPECT_EQ(op.getMatchingIndexingMap(&weight), perChannel);
  EXPECT_EQ(scan.getMatchingIndexingMap(&scan.getReductionsMutable()[0]),
            perChannel);
  EXPECT_EQ(op.getStaticOperandShape(&weight), SmallVector<int64_t>({4}));

  // T comes from the output: the first input leaves it dynamic.
  EXPECT_EQ(op.getStaticLoopRanges(), SmallVector<int64_t>({6, 4, 8}));
  EXPECT_EQ(op.getLoopsToShapesMap().getNumResults(), 3u + 1u + 3u + 1u);
  EXPECT_TRUE(op.getShapesToLoopsMap());
  EXPECT_TRUE(succeeded(op.verifyImpl()));
}

TEST_F(ScanIndexingMapTest, TimeIsAReductionAndSoIsASummedDimension) {
  ScanOp scan = parseScan(kPerChannelScan);
  ASSERT_TRUE(scan);
  // t carries the body's order; hw is summed by the per-channel reduction.
  SmallVector<IteratorType> expected = {
      IteratorType::reduction, IteratorType::parallel, IteratorType::reduction};
  EXPECT_EQ(scan.getLoopIteratorTypes(), expected);
  // Tiling reads the same iterator types.
  auto tiling = dyn_cast<TilingInterface>(scan.getOperation());
  ASSERT_TRUE(tiling);
  EXPECT_EQ(tiling.getLoopIteratorTypes(), expected);
}

TEST_F(ScanIndexingMapTest, ImpliedMapsOfANeuronScan) {
  ScanOp scan = parseScan(kNeuronScan);
  ASSERT_TRUE(scan);
  auto op = cast<IndexingMapOpInterface>(scan.getOperation());

  AffineMap sequence = map("affine_map<(t, n) -> (t, n)>");
  AffineMap perNeuron = map("affine_map<(t, n) -> (n)>");
  AffineMap scalar = map("affine_map<(t, n) -> ()>");
  // ins, inits, params, outs, states.
  std::vector<AffineMap> expected = {sequence, perNeuron, scalar, sequence,
                                     perNeuron};
  SmallVector<AffineMap> maps = op.getIndexingMapsArray();
  EXPECT_EQ(std::vector<AffineMap>(maps.begin(), maps.end()), expected);
  EXPECT_TRUE(scan.isFinalState(0));

  OpOperand &tau = scan.getParamsMutable()[0];
  EXPECT_EQ(op.getMatchingIndexingMap(&tau), scalar);
  EXPECT_TRUE(op.getStaticOperandShape(&tau).empty());
  EXPECT_EQ(op.getStaticLoopRanges(), SmallVector<int64_t>({kDynamic, 16}));
  EXPECT_EQ(scan.getLoopIteratorTypes(),
            SmallVector<IteratorType>(
                {IteratorType::reduction, IteratorType::parallel}));
}

TEST_F(ScanIndexingMapTest, WrongSizesGetFlexSNsDiagnostic) {
  // With every size static, upstream's check would fail too; FlexSN's
  // message, naming the operands, comes first and alone.
  std::vector<std::string> errors;
  ScopedDiagnosticHandler handler(context.get(), [&](Diagnostic &diag) {
    errors.push_back(diag.str());
    return success();
  });
  ScanOp scan = parseScan(R"mlir(
flexsn.neuron @id inputs(%x: f32) outputs(s) {
  flexsn.yield %x : f32
}

func.func @f(%x: memref<8x16xf32>, %s: memref<8x32xf32>) {
  flexsn.scan @id ins(%x : memref<8x16xf32>) outs(%s : memref<8x32xf32>)
  return
}
)mlir");
  EXPECT_FALSE(scan);
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0], "'flexsn.scan' op output #0 has size 32 in dimension "
                       "1, but input #0 gives domain dimension d1 size 16");
}

} // namespace
