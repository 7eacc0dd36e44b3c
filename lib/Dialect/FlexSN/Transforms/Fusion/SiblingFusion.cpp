//===- SiblingFusion.cpp - Merging scans over one domain ------------------===//
//
// Part of the FlexSN project: an MLIR compiler for spiking-neuron dynamics.
//
//===----------------------------------------------------------------------===//
//
// Two scans where one reads the other's sequences (a neuron feeding a
// neuron), or both read one input along one domain, become one: each step
// runs the first body, then the second on what the first yields.
//
//===----------------------------------------------------------------------===//

#include "FusionUtils.h"

#include "flexsn/Dialect/FlexSN/Transforms/Fusion.h"
#include "flexsn/Dialect/FlexSN/Transforms/Passes.h"

#include "llvm/Support/Debug.h"

#define DEBUG_TYPE "flexsn-fusion"

namespace mlir::flexsn {
#define GEN_PASS_DEF_FLEXSNFUSESIBLINGS
#include "flexsn/Dialect/FlexSN/Transforms/Passes.h.inc"
} // namespace mlir::flexsn

using namespace mlir;
using namespace mlir::flexsn;
using namespace mlir::flexsn::fusion;

/// The number of states `scan`'s body carries.
static unsigned numCarriedStates(ScanOp scan) {
  if (!scan.getInits().empty())
    return scan.getInits().size();
  if (!scan.getStates().empty())
    return scan.getStates().size();
  if (auto callee = scan.getCallee())
    if (auto neuron = SymbolTable::lookupNearestSymbolFrom<NeuronOp>(
            scan, scan.getCalleeAttr()))
      return neuron.getNumStates();
  Block &body = scan.getBody().front();
  return body.getNumArguments() - scan.getInputs().size() -
         scan.getParams().size();
}

/// Whether `a` and `b` read one tensor through the identity map: they run
/// over the same domain.
static bool shareDomainInput(ScanOp a, ScanOp b) {
  for (OpOperand &x : a.getInputsMutable())
    for (OpOperand &y : b.getInputsMutable())
      if (x.get() == y.get() && a.getMatchingIndexingMap(&x).isIdentity() &&
          b.getMatchingIndexingMap(&y).isIdentity())
        return true;
  return false;
}

LogicalResult mlir::flexsn::checkSiblingFusion(ScanOp first, ScanOp second,
                                               std::string *reason) {
  auto fail = [&](const Twine &why) {
    if (reason)
      *reason = why.str();
    return failure();
  };
  if (first == second || first->getBlock() != second->getBlock() ||
      !first->isBeforeInBlock(second))
    return fail("the first scan must come before the second in one block");
  if (!first.hasTensorSemantics() || !second.hasTensorSemantics())
    return fail("fusion runs on tensors, before bufferization");
  if (first.getReverse() != second.getReverse())
    return fail("one scan runs forward in time, the other in reverse");
  if (first.getOptionalInputs() || second.getOptionalInputs())
    return fail("a scan has optional inputs");
  if (first.getInits().empty() != second.getInits().empty() &&
      numCarriedStates(first) && numCarriedStates(second))
    return fail("one scan starts its states from given values, the other "
                "from zeros");
  if (first.getStates().empty() != second.getStates().empty() &&
      numCarriedStates(first) && numCarriedStates(second))
    return fail("one scan returns its states, the other does not");

  // What the second reads of the first: its f32 sequences, along the domain.
  bool dependent = false;
  unsigned numSequences = first.getOutputs().size() + first.getStates().size();
  for (OpOperand &operand : second->getOpOperands()) {
    auto result = dyn_cast<OpResult>(operand.get());
    if (!result || result.getOwner() != first)
      continue;
    std::string which = "the second scan's operand #" +
                        std::to_string(operand.getOperandNumber());
    auto [inputsFirst, inputsCount] = second.getODSOperandIndexAndLength(0);
    unsigned r = result.getResultNumber();
    if (operand.getOperandNumber() >= inputsFirst + inputsCount)
      return fail(which + " is a result of the first scan but no input");
    if (r >= numSequences ||
        !first.getMatchingIndexingMap(first.getDpsInitOperand(r)).isIdentity())
      return fail(which + " is a result of the first scan that is no "
                          "sequence (a final state or a reduction)");
    if (!getElementTypeOrSelf(result.getType()).isF32())
      return fail(which + " is the first scan's " +
                  printed(getElementTypeOrSelf(result.getType())) +
                  " sequence: the body's values are f32 before storage");
    if (!second.getMatchingIndexingMap(&operand).isIdentity())
      return fail(which + " reads the first scan's sequence other than along "
                          "the domain");
    dependent = true;
  }
  if (!dependent && !shareDomainInput(first, second))
    return fail("the scans neither feed one another nor read one input "
                "along one domain");
  // The fused scan takes the second's place: nothing between them may use
  // the first's results.
  for (Operation *user : first->getUsers())
    if (user != second && user->getBlock() == second->getBlock() &&
        user->isBeforeInBlock(second))
      return fail("a result of the first scan is used before the second");
  return success();
}

/// The fused scan's inputs: the first's, then the second's but those that
/// are the first's sequences (they become the first's yielded values) and
/// those the first reads through the same map.
struct MergedInputs {
  SmallVector<Value> inputs;
  SmallVector<AffineMap> maps;
  /// The second's inputs that are the first's results: their numbers.
  DenseMap<unsigned, unsigned> fromFirst;
  /// The body argument of each input of the second (~0u: from the first).
  SmallVector<unsigned> argOfB;
};

static MergedInputs mergeInputs(ScanOp first, ScanOp second) {
  MergedInputs merged;
  merged.inputs.assign(first.getInputs().begin(), first.getInputs().end());
  merged.maps = groupMaps(first, 0);
  SmallVector<Value> &inputs = merged.inputs;
  for (auto [k, value, map] :
       llvm::enumerate(second.getInputs(), groupMaps(second, 0))) {
    if (auto result = dyn_cast<OpResult>(value);
        result && result.getOwner() == first) {
      merged.fromFirst[k] = result.getResultNumber();
      merged.argOfB.push_back(~0u);
      continue;
    }
    unsigned shared = 0;
    while (shared < inputs.size() &&
           !(inputs[shared] == value && merged.maps[shared] == map))
      ++shared;
    merged.argOfB.push_back(shared);
    if (shared < inputs.size())
      continue;
    inputs.push_back(value);
    merged.maps.push_back(map);
  }
  return merged;
}

/// Replaces the results of `first` (but its `dropped` outputs) and of
/// `second` with those of `fused`, which are: the first's kept outputs
/// (`numKept`), the second's outputs, the first's and the second's states,
/// the first's and the second's reductions. Erases both.
static void replaceSiblings(RewriterBase &rewriter, ScanOp first, ScanOp second,
                            ScanOp fused, ArrayRef<bool> dropped,
                            unsigned numKept) {
  unsigned numOutputsA = first.getOutputs().size();
  unsigned numOutputsB = second.getOutputs().size();
  unsigned numStateResultsA = first.getStates().size();
  unsigned numStateResultsB = second.getStates().size();
  unsigned numOutputsAll = numKept + numOutputsB;
  SmallVector<Value> newA, newB;
  for (unsigned r = 0, kept = 0; r < numOutputsA; ++r)
    newA.push_back(dropped[r] ? Value() : fused->getResult(kept++));
  for (unsigned r = 0; r < numOutputsB; ++r)
    newB.push_back(fused->getResult(numKept + r));
  for (unsigned s = 0; s < numStateResultsA; ++s)
    newA.push_back(fused->getResult(numOutputsAll + s));
  for (unsigned s = 0; s < numStateResultsB; ++s)
    newB.push_back(fused->getResult(numOutputsAll + numStateResultsA + s));
  unsigned firstReduction = numOutputsAll + numStateResultsA + numStateResultsB;
  unsigned numReductionsA = first.getReductions().size();
  for (unsigned i = 0; i < numReductionsA; ++i)
    newA.push_back(fused->getResult(firstReduction + i));
  for (unsigned i = 0, e = second.getReductions().size(); i < e; ++i)
    newB.push_back(fused->getResult(firstReduction + numReductionsA + i));
  rewriter.replaceOp(second, newB);
  for (auto [old, value] : llvm::zip_equal(first->getResults(), newA))
    if (value)
      rewriter.replaceAllUsesWith(old, value);
  rewriter.eraseOp(first);
}

FailureOr<ScanOp> mlir::flexsn::fuseSiblings(RewriterBase &rewriter,
                                             ScanOp first, ScanOp second) {
  if (failed(checkSiblingFusion(first, second)))
    return failure();
  FailureOr<ScanOp> a = materializeInlineBody(rewriter, first);
  if (failed(a))
    return failure();
  FailureOr<ScanOp> b = materializeInlineBody(rewriter, second);
  if (failed(b))
    return failure();
  first = *a;
  second = *b;
  unsigned numOutputsA = first.getOutputs().size();
  unsigned numStatesA = numCarriedStates(first);

  MergedInputs merged = mergeInputs(first, second);
  SmallVector<Value> &inputs = merged.inputs;
  SmallVector<AffineMap> &inputMaps = merged.maps;
  DenseMap<unsigned, unsigned> &fromFirst = merged.fromFirst;
  SmallVector<unsigned> &inputArgOfB = merged.argOfB;
  unsigned numInputs = inputs.size();

  // Outputs of the first that only the second reads are dropped.
  SmallVector<bool> dropped(numOutputsA, false);
  for (unsigned r = 0; r < numOutputsA; ++r)
    dropped[r] =
        llvm::all_of(first->getResult(r).getUsers(),
                     [&](Operation *u) { return u == second.getOperation(); });
  SmallVector<Value> outputs;
  SmallVector<AffineMap> maps = inputMaps;
  SmallVector<AffineMap> outputMaps;
  for (auto [r, value, map] :
       llvm::enumerate(first.getOutputs(), groupMaps(first, 3)))
    if (!dropped[r]) {
      outputs.push_back(value);
      outputMaps.push_back(map);
    }
  unsigned numKept = outputs.size();
  llvm::append_range(outputs, second.getOutputs());
  llvm::append_range(outputMaps, groupMaps(second, 3));
  auto both = [&](ValueRange x, ValueRange y) {
    SmallVector<Value> all(x);
    llvm::append_range(all, y);
    return all;
  };
  SmallVector<Value> inits = both(first.getInits(), second.getInits());
  SmallVector<Value> params = both(first.getParams(), second.getParams());
  SmallVector<Value> states = both(first.getStates(), second.getStates());
  SmallVector<Value> reductions =
      both(first.getReductions(), second.getReductions());
  for (unsigned group : {1, 2, 3, 4, 5}) {
    if (group == 3) {
      llvm::append_range(maps, outputMaps);
      continue;
    }
    llvm::append_range(maps, groupMaps(first, group));
    llvm::append_range(maps, groupMaps(second, group));
  }
  SmallVector<Type> resultTypes;
  for (Value destination : llvm::concat<Value>(outputs, states, reductions))
    resultTypes.push_back(destination.getType());

  OpBuilder::InsertionGuard guard(rewriter);
  rewriter.setInsertionPoint(second);
  auto fused =
      ScanOp::create(rewriter, second.getLoc(), resultTypes,
                     FlatSymbolRefAttr(), inputs, inits, params, outputs,
                     states, reductions, rewriter.getAffineMapArrayAttr(maps),
                     second.getReverseAttr(), DenseI64ArrayAttr());
  fused->setDiscardableAttrs(first->getDiscardableAttrDictionary());

  // The body: the first's arguments, with the second's new inputs after
  // its inputs and the second's states and params after its own; the
  // first's ops, then the second's on the mapped values.
  Block &bodyB = second.getBody().front();
  rewriter.inlineRegionBefore(first.getBody(), fused.getBody(),
                              fused.getBody().end());
  Block &body = fused.getBody().front();
  Location loc = second.getLoc();
  Type f32 = rewriter.getF32Type();
  unsigned numInputsA = first.getInputs().size();
  for (unsigned k = numInputsA; k < numInputs; ++k)
    body.insertArgument(k, f32, loc);
  unsigned numStatesB = numCarriedStates(second);
  for (unsigned s = 0; s < numStatesB; ++s)
    body.insertArgument(numInputs + numStatesA + s, f32, loc);
  for (BlockArgument arg :
       bodyB.getArguments().drop_front(second.getInputs().size() + numStatesB))
    body.addArgument(arg.getType(), loc);

  auto yieldA = cast<YieldOp>(body.getTerminator());
  auto yieldB = cast<YieldOp>(bodyB.getTerminator());
  IRMapping mapping;
  unsigned numInputsB = second.getInputs().size();
  for (unsigned k = 0; k < numInputsB; ++k)
    mapping.map(bodyB.getArgument(k), fromFirst.count(k)
                                          ? yieldA.getValues()[fromFirst[k]]
                                          : body.getArgument(inputArgOfB[k]));
  for (unsigned s = 0; s < numStatesB; ++s)
    mapping.map(bodyB.getArgument(numInputsB + s),
                body.getArgument(numInputs + numStatesA + s));
  unsigned numParamsA = first.getParams().size();
  unsigned firstParam = numInputs + numStatesA + numStatesB;
  for (auto [k, arg] : llvm::enumerate(
           bodyB.getArguments().drop_front(numInputsB + numStatesB)))
    mapping.map(arg, body.getArgument(firstParam + numParamsA + k));
  rewriter.setInsertionPoint(yieldA);
  for (Operation &op : bodyB.without_terminator())
    rewriter.clone(op, mapping);
  auto valuesB = llvm::map_to_vector(
      yieldB.getValues(), [&](Value v) { return mapping.lookupOrDefault(v); });
  unsigned numOutputsB = second.getOutputs().size();
  ValueRange valuesA = yieldA.getValues();
  SmallVector<Value> yielded;
  for (unsigned r = 0; r < numOutputsA; ++r)
    if (!dropped[r])
      yielded.push_back(valuesA[r]);
  llvm::append_range(yielded, ArrayRef<Value>(valuesB).take_front(numOutputsB));
  llvm::append_range(yielded, valuesA.slice(numOutputsA, numStatesA));
  llvm::append_range(yielded,
                     ArrayRef<Value>(valuesB).slice(numOutputsB, numStatesB));
  llvm::append_range(yielded, valuesA.drop_front(numOutputsA + numStatesA));
  llvm::append_range(
      yielded, ArrayRef<Value>(valuesB).drop_front(numOutputsB + numStatesB));
  rewriter.replaceOpWithNewOp<YieldOp>(yieldA, yielded);

  replaceSiblings(rewriter, first, second, fused, dropped, numKept);
  return fused;
}

//===----------------------------------------------------------------------===//
// Pattern and pass
//===----------------------------------------------------------------------===//

namespace {
struct FuseSiblingsPattern : OpRewritePattern<ScanOp> {
  FuseSiblingsPattern(MLIRContext *ctx, ControlSiblingFusionFn control)
      : OpRewritePattern<ScanOp>(ctx), control(std::move(control)) {}

  /// The scans before `second` it could fuse with: those whose results it
  /// reads, then those reading one of its inputs.
  static SmallVector<ScanOp> candidates(ScanOp second) {
    SmallVector<ScanOp> found;
    auto note = [&](Operation *op) {
      auto scan = dyn_cast<ScanOp>(op);
      if (scan && scan != second && scan->getBlock() == second->getBlock() &&
          scan->isBeforeInBlock(second) && !llvm::is_contained(found, scan))
        found.push_back(scan);
    };
    for (Value input : second.getInputs())
      if (Operation *def = input.getDefiningOp())
        note(def);
    for (Value input : second.getInputs())
      for (Operation *user : input.getUsers())
        note(user);
    return found;
  }

  LogicalResult matchAndRewrite(ScanOp second,
                                PatternRewriter &rewriter) const override {
    for (ScanOp first : candidates(second)) {
      std::string reason;
      if (failed(checkSiblingFusion(first, second, &reason))) {
        LLVM_DEBUG(llvm::dbgs()
                   << "no sibling fusion of " << first.getLoc() << " and "
                   << second.getLoc() << ": " << reason << "\n");
        continue;
      }
      if (control && !control(first, second))
        continue;
      if (succeeded(fuseSiblings(rewriter, first, second)))
        return success();
    }
    return rewriter.notifyMatchFailure(second, "no sibling scan to fuse");
  }

  ControlSiblingFusionFn control;
};

struct FuseSiblingsPass
    : flexsn::impl::FlexSNFuseSiblingsBase<FuseSiblingsPass> {
  using Base::Base;

  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    populateFuseSiblingsPatterns(patterns);
    // What stayed: each scan reading another's result, and why.
    auto explain = [&] {
      getOperation()->walk([](ScanOp second) {
        for (Value input : second.getInputs()) {
          auto first = input.getDefiningOp<ScanOp>();
          std::string reason;
          if (first && failed(checkSiblingFusion(first, second, &reason)))
            second.emitRemark()
                << "not fused with the scan it reads: " << reason;
        }
      });
    };
    if (failed(
            runFusion(getOperation(), std::move(patterns), remarks, explain)))
      signalPassFailure();
  }
};
} // namespace

void mlir::flexsn::populateFuseSiblingsPatterns(
    RewritePatternSet &patterns, const ControlSiblingFusionFn &control) {
  patterns.add<FuseSiblingsPattern>(patterns.getContext(), control);
}
