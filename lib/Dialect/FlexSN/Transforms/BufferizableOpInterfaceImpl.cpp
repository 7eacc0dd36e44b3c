//===- BufferizableOpInterfaceImpl.cpp - Bufferizing flexsn.scan ----------===//
//
// Part of the FlexSN project: an MLIR compiler for spiking-neuron dynamics.
//
//===----------------------------------------------------------------------===//

#include "flexsn/Dialect/FlexSN/IR/FlexSNOps.h"
#include "flexsn/Dialect/FlexSN/Transforms/ScanInterfaceImpls.h"

#include "mlir/Dialect/Bufferization/IR/BufferizableOpInterface.h"
#include "mlir/Dialect/Bufferization/IR/DstBufferizableOpInterfaceImpl.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/PatternMatch.h"

using namespace mlir;
using namespace mlir::bufferization;
using namespace mlir::flexsn;

namespace {

/// A tensor scan becomes the same scan on the operands' buffers, writing
/// its destinations in place; its results are those destinations.
struct ScanOpInterface
    : DstBufferizableOpInterfaceExternalModel<ScanOpInterface, ScanOp> {
  /// Every element of a destination is overwritten (outputs and states are
  /// written for every step or neuron, reductions are sums, not updates),
  /// so destinations need no copy of their contents.
  bool bufferizesToMemoryRead(Operation *op, OpOperand &operand,
                              const AnalysisState &) const {
    return !cast<DestinationStyleOpInterface>(op).isDpsInit(&operand);
  }

  LogicalResult bufferize(Operation *op, RewriterBase &rewriter,
                          const BufferizationOptions &options,
                          BufferizationState &state) const {
    auto scan = cast<ScanOp>(op);
    SmallVector<Value> operands;
    for (Value operand : scan->getOperands()) {
      if (!isa<TensorType>(operand.getType())) {
        operands.push_back(operand);
        continue;
      }
      FailureOr<Value> buffer = getBuffer(rewriter, operand, options, state);
      if (failed(buffer))
        return failure();
      operands.push_back(*buffer);
    }
    rewriter.setInsertionPoint(scan);
    scan.cloneWithOperands(rewriter, operands, /*resultTypes=*/TypeRange());
    SmallVector<Value> destinations;
    for (OpOperand &init : scan.getDpsInitsMutable())
      destinations.push_back(operands[init.getOperandNumber()]);
    replaceOpWithBufferizedValues(rewriter, scan, destinations);
    return success();
  }
};

} // namespace

void mlir::flexsn::registerBufferizableOpInterfaceExternalModels(
    DialectRegistry &registry) {
  registry.addExtension(+[](MLIRContext *ctx, FlexSNDialect *) {
    ScanOp::attachInterface<ScanOpInterface>(*ctx);
  });
}
