//===- BlockKernels.cpp - One kernel per spiking block --------------------===//
//
// Part of the FlexSN project: an MLIR compiler for spiking-neuron dynamics.
//
//===----------------------------------------------------------------------===//

#include "flexsn/Dialect/FlexSN/IR/FlexSNOps.h"
#include "flexsn/Dialect/FlexSN/Transforms/Passes.h"
#include "flexsn/Dialect/FlexSN/Utils/KernelFunctions.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/SymbolTable.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/Sequence.h"
#include "llvm/ADT/StringSet.h"

namespace mlir::flexsn {
#define GEN_PASS_DEF_FLEXSNGENERATEBLOCKKERNELS
#include "flexsn/Dialect/FlexSN/Transforms/Passes.h.inc"
} // namespace mlir::flexsn

using namespace mlir;
using namespace mlir::flexsn;

namespace {

/// The name of a block function's argument or result: its `flexsn.name`
/// attribute, or `<prefix><index>`.
std::string blockName(DictionaryAttr attrs, StringRef prefix, unsigned index) {
  if (attrs)
    if (auto name = attrs.getAs<StringAttr>("flexsn.name"))
      return name.str();
  return (prefix + Twine(index)).str();
}

/// An error at `at` about `block`.
InFlightDiagnostic blockError(func::FuncOp block, Operation *at) {
  return at->emitError() << "block @" << block.getSymName() << ": ";
}

/// The one scan of `block`, whose only work it must be.
FailureOr<ScanOp> findBlockScan(func::FuncOp block) {
  ScanOp scan;
  for (Operation &op : block.getBody().front()) {
    if (auto found = dyn_cast<ScanOp>(op)) {
      if (scan)
        return blockError(block, found)
                   << "holds two scans (flexsn-fuse-siblings merges "
                      "scans that meet only at each (t, n))",
               failure();
      scan = found;
      continue;
    }
    // A fill only makes a destination, whose contents the kernel never
    // reads (a sum over t starts from zero).
    auto fill = dyn_cast<linalg::FillOp>(op);
    bool makesDestination =
        fill && llvm::all_of(fill->getUses(), [](OpOperand &use) {
          auto user = dyn_cast<ScanOp>(use.getOwner());
          return user && use.getOperandNumber() >=
                             user.getODSOperandIndexAndLength(3).first;
        });
    if (!makesDestination &&
        !isa<tensor::EmptyOp, tensor::DimOp, arith::ConstantOp, func::ReturnOp>(
            op))
      return blockError(block, &op)
                 << "'" << op.getName()
                 << "' runs outside its scan: a block kernel runs its "
                    "scan only (the flexsn-fuse-* passes move "
                    "elementwise ops into it; remarks=true says why an "
                    "op stayed)",
             failure();
  }
  if (!scan)
    return blockError(block, block) << "holds no scan", failure();
  if (!scan.getReductions().empty())
    return blockError(block, scan)
               << "its scan sums over neurons (a total, a "
                  "per-channel sum), which is no kernel buffer yet",
           failure();
  unsigned rank = scan.getDomainRank();
  if (rank != 2 && rank != 4)
    return blockError(block, scan)
               << "its scan runs over a domain of rank " << rank
               << ": a kernel runs over [T, N] or [T, B, C, S]",
           failure();
  return scan;
}

/// The names of the scan's results: each returned once, named by the
/// block's result.
FailureOr<SmallVector<std::string>> nameResults(func::FuncOp block,
                                                ScanOp scan) {
  auto ret = cast<func::ReturnOp>(block.getBody().front().getTerminator());
  SmallVector<std::string> resultNames(scan->getNumResults());
  for (auto [i, value] : llvm::enumerate(ret.getOperands())) {
    auto result = dyn_cast<OpResult>(value);
    if (!result || result.getOwner() != scan ||
        !resultNames[result.getResultNumber()].empty())
      return blockError(block, ret)
                 << "returns a value that is not a scan result (or "
                    "one twice)",
             failure();
    resultNames[result.getResultNumber()] =
        blockName(block.getResultAttrDict(i), "result", i);
  }
  for (auto [r, name] : llvm::enumerate(resultNames))
    if (name.empty())
      return blockError(block, scan) << "does not return scan result #" << r
                                     << ": a kernel writes all of them",
             failure();
  return resultNames;
}

/// A block kernel's arguments: its buffers (in a neuron kernel's order)
/// and scalar params, and where each operand of the block's scan goes.
struct BlockKernelArguments {
  SmallVector<KernelBufferAttr> buffers;
  SmallVector<ParamAttr> params;
  /// Per scan operand: its buffer's index, or -1 - its param's index.
  SmallVector<int64_t> argumentOf;
  /// The param buffers to differentiate.
  SmallVector<unsigned> trainableBuffers;
  /// Initial-state buffers the kernel adds after its inputs (the block's
  /// states start at zero).
  unsigned addedInits = 0;
};

/// Collects the kernel's arguments from the scan's operands, in their
/// order. Block buffers are named after the block's values, so the ABI
/// builder gives only their roles.
class BlockArgumentCollector {
public:
  BlockArgumentCollector(OpBuilder &builder, func::FuncOp block, ScanOp scan,
                         ArrayRef<std::string> resultNames)
      : builder(builder), ctx(block.getContext()), block(block), scan(scan),
        resultNames(resultNames) {}

  FailureOr<BlockKernelArguments> collect();

private:
  /// A buffer; checked: a name or an element type may not suit one.
  KernelBufferAttr buffer(const Twine &name, BindingAttr binds, Type type) {
    BufferRole role = getRoleOfBinding(binds, KernelVariant::Inference);
    KernelBufferAttr attr = KernelBufferAttr::getChecked(
        [&] { return blockError(block, scan) << "its kernel's buffer: "; }, ctx,
        StringAttr::get(ctx, name), role, type, getShapeOfRole(role), binds);
    invalid |= !attr;
    return attr;
  }
  LogicalResult addOperand(OpOperand &operand);
  void addInitialStates();
  void sortIntoKernelOrder();

  OpBuilder &builder;
  MLIRContext *ctx;
  func::FuncOp block;
  ScanOp scan;
  ArrayRef<std::string> resultNames;
  BlockKernelArguments args;
  bool invalid = false;
};

FailureOr<BlockKernelArguments> BlockArgumentCollector::collect() {
  for (OpOperand &operand : scan->getOpOperands())
    if (failed(addOperand(operand)))
      return failure();
  bool channels = scan.getDomainRank() == 4;
  if (channels && !llvm::any_of(args.buffers, [](KernelBufferAttr b) {
        return b.getRole() == BufferRole::PerChannelParam;
      }))
    return blockError(block, scan)
               << "runs over [T, B, C, S] without a per-channel "
                  "param: write it over [T, N]",
           failure();
  if (invalid)
    return failure();
  addInitialStates();
  if (invalid)
    return failure();
  sortIntoKernelOrder();
  return std::move(args);
}

/// The buffer or scalar param of one scan operand.
LogicalResult BlockArgumentCollector::addOperand(OpOperand &operand) {
  unsigned rank = scan.getDomainRank();
  bool channels = rank == 4;
  AffineMap perNeuron =
      AffineMap::getMultiDimIdentityMap(rank, ctx).dropResult(0);
  auto [firstOut, numOut] = scan.getODSOperandIndexAndLength(3);
  unsigned number = operand.getOperandNumber();
  AffineMap map = scan.getMatchingIndexingMap(&operand);
  Type type = operand.get().getType();
  // Destinations: named by the results; contents are never read.
  if (number >= firstOut) {
    unsigned r = number - firstOut;
    BindingAttr binds =
        r < numOut ? BindingAttr::get(ctx, BoundValue::Output, r)
                   : BindingAttr::get(ctx,
                                      map.isIdentity() ? BoundValue::StateSeq
                                                       : BoundValue::StateFinal,
                                      r - numOut);
    args.argumentOf.push_back(args.buffers.size());
    args.buffers.push_back(
        buffer(resultNames[r], binds, getElementTypeOrSelf(type)));
    return success();
  }
  auto arg = dyn_cast<BlockArgument>(operand.get());
  if (!arg || arg.getOwner() != &block.getBody().front())
    return blockError(block, scan) << "its operand #" << number
                                   << " is not an argument of the block: a "
                                      "kernel reads its arguments";
  DictionaryAttr attrs = block.getArgAttrDict(arg.getArgNumber());
  std::string name = blockName(attrs, "arg", arg.getArgNumber());
  auto [firstParam, numParams] = scan.getODSOperandIndexAndLength(2);
  bool isParam = number >= firstParam && number < firstParam + numParams;
  if (isParam && !isa<ShapedType>(type)) {
    bool trainable = attrs && attrs.contains("flexsn.trainable");
    args.argumentOf.push_back(-1 - args.params.size());
    args.params.push_back(
        ParamAttr::get(ctx, StringAttr::get(ctx, name),
                       cast<TypedAttr>(builder.getZeroAttr(type)),
                       trainable ? ParamKind::Trainable : ParamKind::Runtime));
    return success();
  }
  BindingAttr binds;
  if (isParam && attrs && attrs.contains("flexsn.trainable"))
    args.trainableBuffers.push_back(args.buffers.size());
  if (isParam) {
    bool perChannel =
        channels && map.getNumResults() == 1 && map.getDimPosition(0) == 2;
    if (map != perNeuron && !perChannel)
      return blockError(block, scan)
             << "its param '" << name << "' is read through "
             << AffineMapAttr::get(map)
             << ": a kernel's param buffers are per neuron or per channel";
    binds = BindingAttr::get(
        ctx, BoundValue::Param, 0, StringAttr::get(ctx, name),
        perChannel ? ParamShape::PerChannel : ParamShape::PerNeuron,
        /*gradient=*/false);
  } else if (number < scan.getInputs().size()) {
    if (!map.isIdentity())
      return blockError(block, scan)
             << "its input '" << name << "' is read through "
             << AffineMapAttr::get(map) << ": a kernel's inputs are sequences";
    binds = BindingAttr::get(ctx, BoundValue::Input, number);
  } else {
    binds = BindingAttr::get(ctx, BoundValue::StateInit,
                             number - scan.getInputs().size());
  }
  args.argumentOf.push_back(args.buffers.size());
  args.buffers.push_back(buffer(name, binds, getElementTypeOrSelf(type)));
  return success();
}

/// A kernel's states start from optional initial-state buffers (absent:
/// zeros), which also give a final state its value when T = 0: a block
/// whose states start at zero gets them, `<state>_init`, after its inputs.
void BlockArgumentCollector::addInitialStates() {
  if (!scan.getInits().empty())
    return;
  unsigned numInputs = scan.getInputs().size();
  unsigned numOut = scan.getODSOperandIndexAndLength(3).second;
  for (auto [s, state] : llvm::enumerate(scan.getStates()))
    args.buffers.insert(args.buffers.begin() + numInputs + s,
                        buffer(resultNames[numOut + s] + "_init",
                               BindingAttr::get(ctx, BoundValue::StateInit, s),
                               getElementTypeOrSelf(state.getType())));
  args.addedInits = scan.getStates().size();
  for (int64_t &a : args.argumentOf)
    if (a >= int64_t(numInputs))
      a += args.addedInits;
  for (unsigned &t : args.trainableBuffers)
    t += args.addedInits;
}

/// The buffers in a neuron kernel's order (the runtimes match a kernel's
/// buffers to tensors by it): inputs, initial states, outputs, states,
/// then param buffers.
void BlockArgumentCollector::sortIntoKernelOrder() {
  auto abiGroup = [](KernelBufferAttr b) {
    switch (b.getRole()) {
    case BufferRole::InputSequence:
      return 0;
    case BufferRole::InitialState:
      return 1;
    case BufferRole::OutputSequence:
      return 2;
    case BufferRole::StateSequence:
    case BufferRole::FinalState:
      return 3;
    default:
      return 4;
    }
  };
  SmallVector<KernelBufferAttr> &buffers = args.buffers;
  SmallVector<unsigned> order =
      llvm::to_vector(llvm::seq<unsigned>(0, buffers.size()));
  llvm::stable_sort(order, [&](unsigned a, unsigned b) {
    return abiGroup(buffers[a]) < abiGroup(buffers[b]);
  });
  SmallVector<unsigned> position(buffers.size());
  for (auto [to, from] : llvm::enumerate(order))
    position[from] = to;
  buffers = llvm::map_to_vector(order, [&](unsigned i) { return buffers[i]; });
  for (int64_t &a : args.argumentOf)
    if (a >= 0)
      a = position[a];
  for (unsigned &t : args.trainableBuffers)
    t = position[t];
}

/// Moves the constants the kernel's scan body uses from the block (hoisted
/// there by canonicalization) into the kernel; fails on any other value
/// from the block.
LogicalResult bringConstants(func::FuncOp block, func::FuncOp kernel,
                             ScanOp kernelScan) {
  IRMapping constants;
  OpBuilder entry = OpBuilder::atBlockBegin(&kernel.getBody().front());
  WalkResult walk = kernelScan.getBody().walk([&](Operation *op) {
    for (OpOperand &use : op->getOpOperands()) {
      Value value = use.get();
      if (kernel.getBody().isAncestor(value.getParentRegion()))
        continue;
      Operation *def = value.getDefiningOp();
      if (!def || !def->hasTrait<OpTrait::ConstantLike>()) {
        op->emitError() << "block @" << block.getSymName()
                        << ": its scan's body uses a value from the block "
                           "that is not a constant";
        return WalkResult::interrupt();
      }
      if (!constants.contains(value))
        entry.clone(*def, constants);
      use.set(constants.lookup(value));
    }
    return WalkResult::advance();
  });
  return failure(walk.wasInterrupted());
}

/// Builds `@<block>_<variant>_<dtype>` from `block`, a function on tensors
/// marked `flexsn.block` whose only work is one scan: a kernel function
/// taking a buffer per tensor the scan reads or writes (in a neuron
/// kernel's order) and its scalar params, holding that scan on them; its
/// trainable param buffers keep their `flexsn.trainable` mark. The forward
/// kernel is the inference kernel that flexsn-autodiff then completes.
/// Emits an error and fails on anything a kernel cannot hold.
FailureOr<func::FuncOp> buildBlockKernel(OpBuilder &builder, func::FuncOp block,
                                         KernelVariant variant) {
  MLIRContext *ctx = block.getContext();
  FailureOr<ScanOp> found = findBlockScan(block);
  if (failed(found))
    return failure();
  ScanOp scan = *found;
  FailureOr<SmallVector<std::string>> resultNames = nameResults(block, scan);
  if (failed(resultNames))
    return failure();
  FailureOr<BlockKernelArguments> args =
      BlockArgumentCollector(builder, block, scan, *resultNames).collect();
  if (failed(args))
    return failure();

  Type element = getElementTypeOrSelf(scan.getInputs().front().getType());
  std::optional<StorageType> storage =
      symbolizeStorageType(element.isF32()    ? "f32"
                           : element.isF16()  ? "f16"
                           : element.isBF16() ? "bf16"
                                              : "");
  if (!storage)
    return blockError(block, scan) << "its first input holds " << element
                                   << ": kernels store f32, f16 or bf16",
           failure();
  // Checked: two of the block's names may collide (an argument read twice).
  auto signature = KernelSignatureAttr::getChecked(
      [&] { return blockError(block, scan) << "its kernel's signature: "; },
      ctx, block.getSymNameAttr(), variant, *storage,
      ArrayRef<KernelBufferAttr>(args->buffers),
      ArrayRef<ParamAttr>(args->params),
      /*workspace_sequences=*/int64_t(0), /*reduction_slots=*/int64_t(0));
  if (!signature)
    return failure();
  bool channels = scan.getDomainRank() == 4;
  if (channels != signature.hasChannels())
    return blockError(block, scan) << "its shapes do not match its kernel's",
           failure();
  func::FuncOp kernel = createKernelFunction(
      builder, block.getLoc(),
      getKernelName(block.getSymName(), variant, *storage), signature);
  for (unsigned t : args->trainableBuffers)
    kernel.setArgAttr(t, "flexsn.trainable", builder.getUnitAttr());
  OpBuilder body = OpBuilder::atBlockBegin(&kernel.getBody().front());
  unsigned numBuffers = args->buffers.size();
  SmallVector<Value> operands =
      llvm::map_to_vector(args->argumentOf, [&](int64_t a) {
        return Value(kernel.getArgument(a >= 0 ? a : numBuffers + (-1 - a)));
      });
  // The scan on the kernel's arguments, with an inits group where the
  // kernel added one (read per neuron).
  auto group = [&](unsigned g) {
    auto [first, count] = scan.getODSOperandIndexAndLength(g);
    return ValueRange(operands).slice(first, count);
  };
  unsigned numInputs = scan.getInputs().size();
  AffineMap perNeuron =
      AffineMap::getMultiDimIdentityMap(scan.getDomainRank(), ctx)
          .dropResult(0);
  SmallVector<AffineMap> maps = scan.getIndexingMapsArray();
  maps.insert(maps.begin() + numInputs, args->addedInits, perNeuron);
  ValueRange inits =
      args->addedInits
          ? kernel.getArguments().slice(numInputs, args->addedInits)
          : group(1);
  ScanOp kernelScan = ScanOp::create(
      body, scan.getLoc(), TypeRange(), scan.getCalleeAttr(), group(0), inits,
      group(2), group(3), group(4), group(5), body.getAffineMapArrayAttr(maps),
      scan.getReverseAttr(), scan.getOptionalInputsAttr());
  IRMapping mapping;
  scan.getBody().cloneInto(&kernelScan.getBody(), mapping);
  func::ReturnOp::create(body, block.getLoc());
  if (failed(bringConstants(block, kernel, kernelScan))) {
    kernel.erase();
    return failure();
  }
  return kernel;
}

/// Makes each sum over t that the scan of `block` keeps per neuron (a
/// spike count) a state kept only at its end, starting at zero and adding
/// the step's value: the same sum in the same order, which a kernel holds
/// as a final-state buffer and autodiff differentiates. Emits an error and
/// fails for a scan that also has initial states (the new state would need
/// one).
LogicalResult keepSumsAsStates(func::FuncOp block) {
  auto scans = block.getOps<ScanOp>();
  if (scans.empty())
    return success(); // buildBlockKernel says what is missing
  ScanOp scan = *scans.begin();
  unsigned rank = scan.getDomainRank();
  AffineMap perNeuron =
      AffineMap::getMultiDimIdentityMap(rank, block.getContext()).dropResult(0);
  SmallVector<AffineMap> maps = scan.getIndexingMapsArray();
  auto [firstReduction, numReductions] = scan.getODSOperandIndexAndLength(5);
  SmallVector<unsigned> sums, others;
  for (unsigned r = 0; r < numReductions; ++r)
    (maps[firstReduction + r] == perNeuron ? sums : others).push_back(r);
  if (sums.empty())
    return success();
  if (!scan.getInits().empty())
    return scan.emitError()
           << "block @" << block.getSymName()
           << ": its scan sums over t and has initial states; a kernel "
              "keeps such a sum as a state, which would need one too";

  unsigned numInputs = scan.getInputs().size();
  unsigned numStates = scan.getStates().size();
  unsigned numOutputs = scan.getOutputs().size();
  SmallVector<Value> states(scan.getStates()), reductions;
  unsigned firstState = scan.getODSOperandIndexAndLength(4).first;
  SmallVector<AffineMap> newMaps(maps.begin(),
                                 maps.begin() + firstState + numStates);
  for (unsigned r : sums) {
    states.push_back(scan.getReductions()[r]);
    newMaps.push_back(perNeuron);
  }
  for (unsigned r : others) {
    reductions.push_back(scan.getReductions()[r]);
    newMaps.push_back(maps[firstReduction + r]);
  }

  // The body: an accumulator argument per sum after the states; it yields
  // the accumulator plus the step's value in the reduction's place.
  Block &body = scan.getBody().front();
  auto yield = cast<YieldOp>(body.getTerminator());
  OpBuilder b(yield);
  SmallVector<Value> yielded(
      yield.getValues().take_front(numOutputs + numStates));
  for (auto [k, r] : llvm::enumerate(sums)) {
    BlockArgument acc = body.insertArgument(numInputs + numStates + k,
                                            b.getF32Type(), scan.getLoc());
    yielded.push_back(arith::AddFOp::create(
        b, scan.getLoc(), acc, yield.getValues()[numOutputs + numStates + r]));
  }
  for (unsigned r : others)
    yielded.push_back(yield.getValues()[numOutputs + numStates + r]);
  YieldOp::create(b, yield.getLoc(), yielded);
  yield.erase();

  SmallVector<Type> types;
  for (Value destination :
       llvm::concat<Value>(scan.getOutputs(), states, reductions))
    types.push_back(destination.getType());
  b.setInsertionPoint(scan);
  auto kept = ScanOp::create(
      b, scan.getLoc(), types, scan.getCalleeAttr(), scan.getInputs(),
      scan.getInits(), scan.getParams(), scan.getOutputs(), states, reductions,
      b.getAffineMapArrayAttr(newMaps), scan.getReverseAttr(),
      scan.getOptionalInputsAttr());
  kept.getBody().takeBody(scan.getBody());
  unsigned firstResult = numOutputs + numStates;
  for (unsigned i = 0; i < firstResult; ++i)
    scan->getResult(i).replaceAllUsesWith(kept->getResult(i));
  for (auto [k, r] : llvm::enumerate(sums))
    scan->getResult(firstResult + r)
        .replaceAllUsesWith(kept->getResult(firstResult + k));
  for (auto [k, r] : llvm::enumerate(others))
    scan->getResult(firstResult + r)
        .replaceAllUsesWith(kept->getResult(firstResult + sums.size() + k));
  scan.erase();
  return success();
}

struct GenerateBlockKernelsPass
    : flexsn::impl::FlexSNGenerateBlockKernelsBase<GenerateBlockKernelsPass> {
  using Base::Base;

  LogicalResult initializeOptions(
      StringRef options,
      function_ref<LogicalResult(const Twine &)> errorHandler) override {
    if (failed(Base::initializeOptions(options, errorHandler)))
      return failure();
    return checkListOptions(getArgument(), errorHandler, variants);
  }

  void runOnOperation() override {
    ModuleOp module = getOperation();
    SmallVector<KernelVariant> requested(variants.begin(), variants.end());
    for (KernelVariant variant : requested) {
      if (variant != KernelVariant::Inference &&
          variant != KernelVariant::Forward) {
        module.emitError() << "block kernel variant '"
                           << stringifyKernelVariant(variant)
                           << "' is not made here; expected inference or "
                              "forward (whose backward flexsn-autodiff "
                              "generates)";
        return signalPassFailure();
      }
    }
    if (requested.empty())
      requested = {KernelVariant::Inference};

    SymbolTable symbols(module);
    OpBuilder builder = OpBuilder::atBlockEnd(module.getBody());
    for (auto block : llvm::to_vector(module.getOps<func::FuncOp>())) {
      if (!block->hasAttr("flexsn.block"))
        continue;
      if (failed(keepSumsAsStates(block)))
        return signalPassFailure();
      for (KernelVariant variant : requested) {
        FailureOr<func::FuncOp> kernel =
            buildBlockKernel(builder, block, variant);
        if (failed(kernel))
          return signalPassFailure();
        if (symbols.lookup(kernel->getSymName())) {
          kernel->emitError() << "kernel name '" << kernel->getSymName()
                              << "' is already taken in the module";
          kernel->erase();
          return signalPassFailure();
        }
        symbols.insert(*kernel);
      }
      // The kernels replace the block.
      symbols.erase(block);
    }
  }
};

} // namespace
