//===- FlexSNDialect.cpp - FlexSN dialect registration --------------------===//
//
// Part of the FlexSN project: an MLIR compiler for spiking-neuron dynamics.
//
//===----------------------------------------------------------------------===//

#include "flexsn/Dialect/FlexSN/IR/FlexSNDialect.h"
#include "flexsn/Dialect/FlexSN/IR/FlexSNOps.h"

#include "mlir/Transforms/InliningUtils.h"

using namespace mlir;
using namespace mlir::flexsn;

#include "flexsn/Dialect/FlexSN/IR/FlexSNDialect.cpp.inc"

namespace {

/// Lets MLIR's inliner replace `flexsn.apply` by the applied neuron's body:
/// the per-step ops move freely (they are pure); neurons and scans, which
/// hold bodies of their own, are never inlined.
struct FlexSNInlinerInterface : public DialectInlinerInterface {
  using DialectInlinerInterface::DialectInlinerInterface;

  bool isLegalToInline(Operation *call, Operation *callable,
                       bool wouldBeCloned) const final {
    return isa<ApplyOp>(call) && isa<NeuronOp>(callable);
  }

  bool isLegalToInline(Operation *op, Region *dest, bool wouldBeCloned,
                       IRMapping &valueMapping) const final {
    return !isa<NeuronOp, ScanOp>(op);
  }

  bool isLegalToInline(Region *dest, Region *src, bool wouldBeCloned,
                       IRMapping &valueMapping) const final {
    return true;
  }

  /// The neuron's `flexsn.yield` gives the application's results.
  void handleTerminator(Operation *op, ValueRange valuesToRepl) const final {
    auto yield = cast<YieldOp>(op);
    for (auto [result, value] :
         llvm::zip_equal(valuesToRepl, yield.getValues()))
      result.replaceAllUsesWith(value);
  }
};

} // namespace

void FlexSNDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "flexsn/Dialect/FlexSN/IR/FlexSNOps.cpp.inc"
      >();
  addInterfaces<FlexSNInlinerInterface>();
  registerAttributes();
}

Operation *FlexSNDialect::materializeConstant(OpBuilder &builder,
                                              Attribute value, Type type,
                                              Location loc) {
  return arith::ConstantOp::materialize(builder, value, type, loc);
}
