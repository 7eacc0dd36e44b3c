//===- FlexSNOps.cpp - FlexSN operations ----------------------------------===//
//
// Part of the FlexSN project: an MLIR compiler for spiking-neuron dynamics.
//
//===----------------------------------------------------------------------===//
//
// The step-body checks that flexsn.neuron and flexsn.scan share, the per-step
// ops, and the generated op definitions. flexsn.neuron is in NeuronOp.cpp,
// flexsn.scan in ScanOp.cpp.
//
//===----------------------------------------------------------------------===//

#include "FlexSNOpsDetail.h"

#include "flexsn/Dialect/FlexSN/IR/FlexSNOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Matchers.h"
#include "mlir/IR/OpImplementation.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallPtrSet.h"
#include "llvm/ADT/StringSwitch.h"

using namespace mlir;
using namespace mlir::flexsn;
using namespace mlir::flexsn::detail;

//===----------------------------------------------------------------------===//
// Helpers
//===----------------------------------------------------------------------===//

bool mlir::flexsn::isStepScalarType(Type type) {
  return type.isF32() || type.isSignlessInteger() || type.isIndex();
}

/// Whether `op` is an integer division or remainder, and if so whether it is
/// signed: ops whose result LLVM leaves undefined for a zero divisor (and,
/// signed, for the minimum integer divided by -1).
static std::optional<bool> isSignedDivision(Operation &op) {
  return llvm::StringSwitch<std::optional<bool>>(op.getName().getStringRef())
      .Cases({"arith.divsi", "arith.remsi", "arith.ceildivsi",
              "arith.floordivsi", "index.divs", "index.rems", "index.ceildivs",
              "index.floordivs", "llvm.sdiv", "llvm.srem"},
             true)
      .Cases({"arith.divui", "arith.remui", "arith.ceildivui", "index.divu",
              "index.remu", "index.ceildivu", "llvm.udiv", "llvm.urem"},
             false)
      .Default(std::nullopt);
}

/// Checks an integer division's divisor: a constant other than 0 (and -1
/// for a signed op). Undefined behaviour has no place in a step body: on the
/// CPU it kills the process (SIGFPE), and LLVM deletes a kernel that
/// divides by a constant 0.
static LogicalResult verifyDivisor(Operation &op, bool isSigned,
                                   StringRef owner) {
  APInt divisor;
  if (!matchPattern(op.getOperand(1), m_ConstantInt(&divisor)))
    return op.emitOpError()
           << "divides by a value known only at run time: in a " << owner
           << " body an integer division or remainder needs a constant "
              "divisor other than 0"
           << (isSigned ? " and -1" : "") << ", since dividing by 0"
           << (isSigned ? " (or the minimum integer by -1)" : "")
           << " has no defined result";
  if (divisor.isZero())
    return op.emitOpError() << "divides by 0, which has no defined result";
  if (isSigned && divisor.isAllOnes())
    return op.emitOpError()
           << "divides by -1, which has no defined result for the minimum "
              "integer: negate with arith.subi instead";
  return success();
}

LogicalResult mlir::flexsn::detail::verifyStepBody(Block &block,
                                                   StringRef owner) {
  for (Operation &op : block.without_terminator()) {
    if (isa<ScanOp, NeuronOp>(op))
      return op.emitOpError() << "cannot be nested in a " << owner << " body";
    if (op.getNumRegions() != 0 ||
        !(isMemoryEffectFree(&op) || isa<ApplyOp>(op)))
      return op.emitOpError()
             << "is not allowed in a " << owner
             << " body: its ops must be free of memory effects and regions "
                "(arith, math and flexsn ops are), or apply a neuron";
    for (Type type :
         llvm::concat<Type>(op.getOperandTypes(), op.getResultTypes())) {
      if (isStepScalarType(type))
        continue;
      if (isa<FloatType>(type))
        return op.emitOpError() << "computes in " << type << ", but a " << owner
                                << " body computes in f32";
      return op.emitOpError() << "uses non-scalar type " << type << ": a "
                              << owner << " body works on scalars only";
    }
    if (std::optional<bool> isSigned = isSignedDivision(op))
      if (failed(verifyDivisor(op, *isSigned, owner)))
        return failure();
  }
  return success();
}

LogicalResult mlir::flexsn::detail::expectF32(Operation *op, TypeRange types,
                                              StringRef what, size_t first) {
  for (auto [i, type] : llvm::enumerate(types))
    if (!type.isF32())
      return op->emitOpError()
             << what << " #" << first + i << " must be f32, got " << type;
  return success();
}

//===----------------------------------------------------------------------===//
// ApplyOp
//===----------------------------------------------------------------------===//

/// Finds a chain of applications leading from `from` back to `target`.
static bool findApplyCycle(NeuronOp from, NeuronOp target,
                           SymbolTableCollection &symbolTable,
                           llvm::SmallPtrSetImpl<Operation *> &visited,
                           SmallVectorImpl<StringRef> &path) {
  if (!visited.insert(from).second)
    return false;
  path.push_back(from.getSymName());
  WalkResult walk = from.walk([&](ApplyOp apply) {
    auto callee = symbolTable.lookupNearestSymbolFrom<NeuronOp>(
        apply, apply.getCalleeAttr());
    if (!callee)
      return WalkResult::advance();
    if (callee == target ||
        findApplyCycle(callee, target, symbolTable, visited, path))
      return WalkResult::interrupt();
    return WalkResult::advance();
  });
  if (walk.wasInterrupted())
    return true;
  path.pop_back();
  return false;
}

CallInterfaceCallable ApplyOp::getCallableForCallee() {
  return getCalleeAttr();
}

void ApplyOp::setCalleeFromCallable(CallInterfaceCallable callee) {
  setCalleeAttr(cast<FlatSymbolRefAttr>(cast<SymbolRefAttr>(callee)));
}

Operation::operand_range ApplyOp::getArgOperands() { return getOperands(); }

MutableOperandRange ApplyOp::getArgOperandsMutable() {
  return getOperandsMutable();
}

bool BlockOp::hasAffinePre() {
  BlockPre pre = getPre();
  return pre != BlockPre::None && pre != BlockPre::Add;
}

bool BlockOp::hasChannelPre() {
  return getPre() == BlockPre::ChannelAffine ||
         getPre() == BlockPre::ChannelAffineAdd;
}

bool BlockOp::preAddsSkip() {
  BlockPre pre = getPre();
  return pre == BlockPre::Add || pre == BlockPre::AffineAdd ||
         pre == BlockPre::ChannelAffineAdd;
}

LogicalResult BlockOp::verify() {
  // Its kernels and host stubs are named after the block.
  if (std::optional<std::string> problem =
          checkExportedName(getSymName(), /*isPrefix=*/true))
    return emitOpError() << "name '" << getSymName() << "' " << *problem;
  if (getReadout() == BlockReadout::Sum && getStorage() != StorageType::F32)
    return emitOpError() << "keeps readout(sum) in f32: it needs storage(f32), "
                            "not storage("
                         << stringifyStorageType(getStorage()) << ")";
  if (getConnectionOperand() == BlockConnectionOperand::Skip &&
      getConnection() == BlockConnection::None)
    return emitOpError() << "has no connection to read its 'skip' input: "
                            "connection(none, skip) declares an input "
                            "nothing reads";
  if (preAddsSkip() && getConnectionOperand() == BlockConnectionOperand::Skip)
    return emitOpError() << "has one 'skip' input, which pre("
                         << stringifyBlockPre(getPre())
                         << ") adds before the neuron: its connection reads "
                            "x, not skip";
  return success();
}

LogicalResult BlockOp::verifySymbolUses(SymbolTableCollection &symbolTable) {
  auto neuron =
      symbolTable.lookupNearestSymbolFrom<NeuronOp>(*this, getNeuronAttr());
  if (!neuron)
    return emitOpError() << "'@" << getNeuron()
                         << "' does not reference a flexsn.neuron";
  if (neuron.getNumInputs() != 1 || neuron.getNumOutputs() != 1)
    return emitOpError() << "needs a neuron of one input and one output; @"
                         << getNeuron() << " has " << neuron.getNumInputs()
                         << " inputs and " << neuron.getNumOutputs()
                         << " outputs";
  for (ParamAttr param : neuron.getRuntimeParamAttrs())
    if (param.isShaped())
      return emitOpError() << "passes the neuron's parameters as scalars; @"
                           << getNeuron() << "'s '"
                           << param.getName().getValue() << "' is "
                           << stringifyParamShape(param.getShape());
  return success();
}

LogicalResult ApplyOp::verifySymbolUses(SymbolTableCollection &symbolTable) {
  auto callee =
      symbolTable.lookupNearestSymbolFrom<NeuronOp>(*this, getCalleeAttr());
  if (!callee)
    return emitOpError() << "'@" << getCallee()
                         << "' does not reference a flexsn.neuron";
  auto caller = (*this)->getParentOfType<NeuronOp>();
  if (!caller && !isa_and_present<ScanOp>((*this)->getParentOp()))
    return emitOpError("must be inside a flexsn.neuron body or a "
                       "flexsn.scan's inline body");

  Block &calleeBlock = callee.getBodyBlock();
  if (getOperands().size() != calleeBlock.getNumArguments())
    return emitOpError() << "passes " << getOperands().size()
                         << " operands, but @" << getCallee() << " takes "
                         << calleeBlock.getNumArguments() << " ("
                         << callee.getNumInputs() << " inputs + "
                         << callee.getNumStates() << " states + "
                         << callee.getNumParams() << " params)";
  for (auto [i, operand, arg] :
       llvm::enumerate(getOperands(), calleeBlock.getArguments()))
    if (operand.getType() != arg.getType())
      return emitOpError() << "operand #" << i << " has type "
                           << operand.getType() << ", but @" << getCallee()
                           << " expects " << arg.getType();
  unsigned numResults = callee.getNumOutputs() + callee.getNumStates();
  if (getNumResults() != numResults)
    return emitOpError() << "returns " << getNumResults() << " values, but @"
                         << getCallee() << " produces " << numResults << " ("
                         << callee.getNumOutputs() << " outputs + "
                         << callee.getNumStates() << " new states)";

  // Recursion has no meaning for a per-step body: reject any cycle. (A scan
  // is no symbol: nothing applies it.)
  if (!caller)
    return success();
  llvm::SmallPtrSet<Operation *, 8> visited;
  SmallVector<StringRef> path = {caller.getSymName()};
  if (callee == caller ||
      findApplyCycle(callee, caller, symbolTable, visited, path)) {
    path.push_back(caller.getSymName());
    InFlightDiagnostic diag = emitOpError("makes neuron @")
                              << caller.getSymName() << " recursive: ";
    llvm::interleave(
        path, [&](StringRef name) { diag << "@" << name; },
        [&] { diag << " -> "; });
    return diag;
  }
  return success();
}

//===----------------------------------------------------------------------===//
// Spike ops
//===----------------------------------------------------------------------===//

OpFoldResult SpikeOp::fold(FoldAdaptor adaptor) {
  auto input = dyn_cast_if_present<FloatAttr>(adaptor.getInput());
  if (!input || input.getValue().isNaN())
    return {};
  // H(0) = 1: a spike fires at exactly the threshold.
  return FloatAttr::get(
      getType(),
      input.getValue().isNegative() && !input.getValue().isZero() ? 0.0 : 1.0);
}

OpFoldResult SurrogateGradOp::fold(FoldAdaptor adaptor) {
  auto input = dyn_cast_if_present<FloatAttr>(adaptor.getInput());
  if (!input)
    return {};
  return FloatAttr::get(
      getType(), getSurrogate().evalDerivative(input.getValueAsDouble()));
}

#include "flexsn/Dialect/FlexSN/IR/FlexSNInterfaces.cpp.inc"

#define GET_OP_CLASSES
#include "flexsn/Dialect/FlexSN/IR/FlexSNOps.cpp.inc"
