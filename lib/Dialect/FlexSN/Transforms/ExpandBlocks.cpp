//===- ExpandBlocks.cpp - Declared blocks to functions on tensors ---------===//
//
// Part of the FlexSN project: an MLIR compiler for spiking-neuron dynamics.
//
//===----------------------------------------------------------------------===//
//
// `flexsn.block @b neuron(@lif) pre(...) connection(...) readout(...)
// storage(...)` becomes `func.func @b(...) attributes {flexsn.block}`:
// linalg ops around a flexsn.scan of the neuron, which fusion then makes
// one scan. Each block shape is a case here, built with builders.
//
//===----------------------------------------------------------------------===//

#include "flexsn/Dialect/FlexSN/IR/FlexSNOps.h"
#include "flexsn/Dialect/FlexSN/Transforms/Fusion.h"
#include "flexsn/Dialect/FlexSN/Transforms/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/IR/SymbolTable.h"

namespace mlir::flexsn {
#define GEN_PASS_DEF_FLEXSNEXPANDBLOCKS
#include "flexsn/Dialect/FlexSN/Transforms/Passes.h.inc"
} // namespace mlir::flexsn

using namespace mlir;
using namespace mlir::flexsn;

namespace {

/// The argument or result attributes naming a block value (`flexsn.name`)
/// and marking a trainable parameter (`flexsn.trainable`).
DictionaryAttr nameAttrs(OpBuilder &b, StringRef name, bool trainable = false) {
  SmallVector<NamedAttribute> attrs = {
      b.getNamedAttr("flexsn.name", b.getStringAttr(name))};
  if (trainable)
    attrs.push_back(b.getNamedAttr("flexsn.trainable", b.getUnitAttr()));
  return b.getDictionaryAttr(attrs);
}

/// A tensor of `rank` dynamic dims of `element`.
RankedTensorType dynamicTensor(int64_t rank, Type element) {
  return RankedTensorType::get(SmallVector<int64_t>(rank, ShapedType::kDynamic),
                               element);
}

/// Builds the function of one declared block, after `block`.
class BlockExpander {
public:
  BlockExpander(BlockOp block, NeuronOp neuron)
      : block(block), neuron(neuron), b(block), loc(block.getLoc()) {
    MLIRContext *ctx = block.getContext();
    channels = block.hasChannelPre();
    affine = block.hasAffinePre();
    preAdd = block.preAddsSkip();
    skip = block.hasSkipInput();
    rank = channels ? 4 : 2;
    f32 = b.getF32Type();
    storage = getStorageElementType(ctx, block.getStorage());
    seq = dynamicTensor(rank, storage);
    seq32 = dynamicTensor(rank, f32);
    state = dynamicTensor(rank - 1, storage);
  }

  func::FuncOp build();

private:
  func::FuncOp createFunction();
  /// `x·scale + shift` (or x) in f32, plus `added` where it is not null.
  Value buildPre(Value x, Value scale, Value shift, Value added);
  /// `connection(s, operand)`: operand is the block's input or `skip`.
  Value buildConnection(Value s, Value operand);
  Value buildReadout(Value sequence);
  /// `value` (f32 or the storage type) as f32.
  Value toF32(OpBuilder &nb, Location l, Value value) {
    return value.getType() == f32
               ? value
               : arith::ExtFOp::create(nb, l, f32, value).getResult();
  }

  BlockOp block;
  NeuronOp neuron;
  OpBuilder b;
  Location loc;
  bool channels, affine, preAdd, skip;
  int64_t rank;
  Type f32, storage;
  RankedTensorType seq, seq32, state;
  SmallVector<OpFoldResult> dims;
  AffineMap identity;
  SmallVector<utils::IteratorType> parallel;
};

func::FuncOp BlockExpander::createFunction() {
  MLIRContext *ctx = b.getContext();
  SmallVector<Type> argTypes = {seq};
  SmallVector<Attribute> argAttrs = {nameAttrs(b, "x")};
  if (skip) {
    argTypes.push_back(seq);
    argAttrs.push_back(nameAttrs(b, "skip"));
  }
  if (affine) {
    Type param = channels ? Type(dynamicTensor(1, f32)) : f32;
    argTypes.append({param, param});
    argAttrs.append({nameAttrs(b, "scale", true), nameAttrs(b, "shift", true)});
  }
  for (ParamAttr param : neuron.getRuntimeParamAttrs()) {
    argTypes.push_back(param.getType());
    argAttrs.push_back(nameAttrs(b, param.getName().getValue(),
                                 param.getKind() == ParamKind::Trainable));
  }

  bool readout = block.getReadout() == BlockReadout::Sum;
  bool connected = block.getConnection() != BlockConnection::None;
  SmallVector<Type> resultTypes = {readout ? state : seq};
  StringRef outputName =
      readout     ? "readout"
      : connected ? "y"
                  : cast<StringAttr>(neuron.getOutputNames()[0]).getValue();
  SmallVector<Attribute> resultAttrs = {nameAttrs(b, outputName)};
  for (Attribute name : neuron.getStateNames()) {
    resultTypes.push_back(state);
    resultAttrs.push_back(nameAttrs(b, cast<StringAttr>(name).getValue()));
  }

  auto function =
      func::FuncOp::create(b, loc, block.getSymName(),
                           FunctionType::get(ctx, argTypes, resultTypes));
  function.setAllArgAttrs(argAttrs);
  function.setAllResultAttrs(resultAttrs);
  function->setAttr("flexsn.block", b.getUnitAttr());
  return function;
}

Value BlockExpander::buildPre(Value x, Value scale, Value shift, Value added) {
  MLIRContext *ctx = b.getContext();
  AffineMap param = channels ? AffineMap::get(rank, 0, b.getAffineDimExpr(2))
                             : AffineMap::get(rank, 0, ctx);
  SmallVector<Value> inputs = {x};
  SmallVector<AffineMap> maps = {identity};
  if (affine) {
    inputs.append({scale, shift});
    maps.append({param, param});
  }
  if (added) {
    inputs.push_back(added);
    maps.push_back(identity);
  }
  maps.push_back(identity);
  Value empty = tensor::EmptyOp::create(b, loc, dims, f32);
  auto pre = linalg::GenericOp::create(
      b, loc, TypeRange{seq32}, inputs, ValueRange{empty}, maps, parallel,
      [&](OpBuilder &nb, Location l, ValueRange args) {
        Value r = toF32(nb, l, args[0]);
        if (affine) {
          r = arith::MulFOp::create(nb, l, r, args[1]);
          r = arith::AddFOp::create(nb, l, r, args[2]);
        }
        // The batch norm's output plus the skip input, in that order.
        if (added)
          r = arith::AddFOp::create(nb, l, r,
                                    toF32(nb, l, args[affine ? 3 : 1]));
        linalg::YieldOp::create(nb, l, r);
      });
  return pre.getResult(0);
}

Value BlockExpander::buildConnection(Value s, Value operand) {
  Value empty = tensor::EmptyOp::create(b, loc, dims, storage);
  BlockConnection connection = block.getConnection();
  auto post = linalg::GenericOp::create(
      b, loc, TypeRange{seq}, ValueRange{s, operand}, ValueRange{empty},
      ArrayRef<AffineMap>{identity, identity, identity}, parallel,
      [&](OpBuilder &nb, Location l, ValueRange args) {
        Value si = args[0], xi = toF32(nb, l, args[1]);
        Value r;
        switch (connection) {
        case BlockConnection::Add:
          r = arith::AddFOp::create(nb, l, si, xi);
          break;
        case BlockConnection::And:
          r = arith::MulFOp::create(nb, l, si, xi);
          break;
        case BlockConnection::IAnd: {
          Value one = arith::ConstantOp::create(nb, l, nb.getF32FloatAttr(1));
          Value k = arith::SubFOp::create(nb, l, one, si);
          r = arith::MulFOp::create(nb, l, k, xi);
          break;
        }
        case BlockConnection::None:
          llvm_unreachable("no connection to build");
        }
        if (storage != f32)
          r = arith::TruncFOp::create(nb, l, storage, r);
        linalg::YieldOp::create(nb, l, r);
      });
  return post.getResult(0);
}

// The sum over t: fusion makes it the scan's reduction, and kernel
// generation a state kept at its end.
Value BlockExpander::buildReadout(Value sequence) {
  Value zero = arith::ConstantOp::create(b, loc, b.getF32FloatAttr(0));
  Value empty = tensor::EmptyOp::create(
      b, loc, ArrayRef<OpFoldResult>(dims).drop_front(), storage);
  Value zeros =
      linalg::FillOp::create(b, loc, ValueRange{zero}, ValueRange{empty})
          .getResult(0);
  auto reduce = linalg::ReduceOp::create(
      b, loc, ValueRange{sequence}, ValueRange{zeros}, ArrayRef<int64_t>{0},
      [&](OpBuilder &nb, Location l, ValueRange args) {
        Value sum = arith::AddFOp::create(nb, l, args[0], args[1]);
        linalg::YieldOp::create(nb, l, sum);
      });
  return reduce.getResult(0);
}

func::FuncOp BlockExpander::build() {
  func::FuncOp function = createFunction();
  Block *entry = function.addEntryBlock();
  b.setInsertionPointToStart(entry);
  identity = b.getMultiDimIdentityMap(rank);
  parallel.assign(rank, utils::IteratorType::parallel);

  Value x = entry->getArgument(0);
  for (int64_t i = 0; i < rank; ++i)
    dims.push_back(tensor::DimOp::create(b, loc, x, i).getResult());
  unsigned firstPre = skip ? 2 : 1;
  unsigned firstParam = firstPre + (affine ? 2 : 0);
  Value skipInput = skip ? entry->getArgument(1) : Value();
  Value source = x;
  if (affine || preAdd)
    source = buildPre(x, affine ? entry->getArgument(firstPre) : Value(),
                      affine ? entry->getArgument(firstPre + 1) : Value(),
                      preAdd ? skipInput : Value());

  // The neuron's output: the block's, or f32 for the ops after it.
  bool readout = block.getReadout() == BlockReadout::Sum;
  bool connected = block.getConnection() != BlockConnection::None;
  Type outElement = connected || readout ? f32 : storage;
  Value outEmpty = tensor::EmptyOp::create(b, loc, dims, outElement);
  SmallVector<Value> stateEmpties;
  for (unsigned i = 0, e = neuron.getNumStates(); i < e; ++i)
    stateEmpties.push_back(tensor::EmptyOp::create(
        b, loc, ArrayRef<OpFoldResult>(dims).drop_front(), storage));
  auto scan = ScanOp::create(
      b, loc, FlatSymbolRefAttr::get(neuron.getSymNameAttr()),
      ValueRange{source}, ValueRange{},
      ValueRange(entry->getArguments().drop_front(firstParam)),
      ValueRange{outEmpty}, stateEmpties, ValueRange{}, /*reverse=*/false,
      /*optionalInputs=*/nullptr);

  // An inline body applying the neuron, as fusion would make it: autodiff
  // differentiates inline bodies, and a block of the neuron alone fuses
  // nothing.
  IRRewriter rewriter(b);
  scan = *materializeInlineBody(rewriter, scan);
  b.setInsertionPointAfter(scan);

  Value result = scan.getResult(0);
  if (connected)
    result = buildConnection(result, preAdd || !skip ? x : skipInput);
  if (readout)
    result = buildReadout(result);
  SmallVector<Value> returned = {result};
  llvm::append_range(returned, scan.getResults().drop_front());
  func::ReturnOp::create(b, loc, returned);
  return function;
}

struct ExpandBlocksPass
    : flexsn::impl::FlexSNExpandBlocksBase<ExpandBlocksPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    SymbolTable symbols(module);
    for (BlockOp block : llvm::to_vector(module.getOps<BlockOp>())) {
      // The verifier checked that the neuron exists and suits a block.
      auto neuron = symbols.lookup<NeuronOp>(block.getNeuron());
      BlockExpander(block, neuron).build();
      block.erase();
    }
  }
};

} // namespace
