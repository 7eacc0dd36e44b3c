//===- Autodiff.cpp - Reverse-mode differentiation of step bodies ---------===//
//
// Part of the FlexSN project: an MLIR compiler for spiking-neuron dynamics.
//
//===----------------------------------------------------------------------===//

#include "flexsn/Dialect/FlexSN/Transforms/Autodiff.h"
#include "flexsn/Dialect/FlexSN/Transforms/AdjointBuilder.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/SetVector.h"

#include <deque>

using namespace mlir;
using namespace mlir::flexsn;

namespace {

/// Which values carry derivatives: those that depend on an input, a state or
/// a trainable parameter (varied) and reach a yielded value (useful).
struct Activity {
  llvm::DenseSet<Value> active;

  Activity(Block &body, unsigned numInputs, unsigned numStates,
           ArrayRef<bool> trainable) {
    llvm::DenseSet<Value> varied, useful;
    for (BlockArgument arg :
         body.getArguments().take_front(numInputs + numStates))
      varied.insert(arg);
    for (auto [i, isTrainable] : llvm::enumerate(trainable))
      if (isTrainable)
        varied.insert(body.getArgument(numInputs + numStates + i));
    for (Operation &op : body.without_terminator()) {
      if (isa<DetachOp>(op))
        continue; // the derivative stops here
      if (llvm::any_of(op.getOperands(),
                       [&](Value v) { return varied.contains(v); }))
        for (Value r : op.getResults())
          if (r.getType().isF32())
            varied.insert(r);
    }
    for (Value v : body.getTerminator()->getOperands())
      useful.insert(v);
    for (Operation &op : llvm::reverse(body.without_terminator()))
      if (llvm::any_of(op.getResults(),
                       [&](Value r) { return useful.contains(r); }))
        for (Value operand : op.getOperands())
          useful.insert(operand);
    for (Value v : varied)
      if (useful.contains(v))
        active.insert(v);
  }

  bool isActive(Value v) const { return active.contains(v); }
};

/// Seeds the adjoints of the yielded values and runs the reverse sweep.
/// `seeds[i]` is the incoming gradient of yielded value i (null: none).
LogicalResult reverseSweep(Block &body, AdjointBuilder &builder,
                           ArrayRef<Value> seeds) {
  for (auto [value, seed] :
       llvm::zip_equal(body.getTerminator()->getOperands(), seeds))
    if (seed)
      builder.accumulate(value, seed);
  for (Operation &op : llvm::reverse(body.without_terminator())) {
    if (op.getNumResults() != 1 || !builder.isActive(op.getResult(0)))
      continue;
    auto rule = dyn_cast<DifferentiableOpInterface>(op);
    if (!rule)
      return op.emitOpError()
             << "has no derivative rule (DifferentiableOpInterface), and a "
                "gradient flows through it (flexsn-autodiff's description "
                "lists the ops that have one)";
    if (failed(rule.emitAdjoint(builder)))
      return failure();
  }
  return success();
}

/// Max-flow min-cut on the forward body's dataflow with vertex costs.
class SaveCut {
public:
  static constexpr int64_t kInfinity = int64_t(1) << 40;

  explicit SaveCut(unsigned numNodes) : adjacency(2 * numNodes + 2) {}

  unsigned source() const { return adjacency.size() - 2; }
  unsigned sink() const { return adjacency.size() - 1; }
  static unsigned in(unsigned node) { return 2 * node; }
  static unsigned out(unsigned node) { return 2 * node + 1; }

  void addEdge(unsigned from, unsigned to, int64_t capacity) {
    adjacency[from].push_back(edges.size());
    edges.push_back({to, capacity});
    adjacency[to].push_back(edges.size());
    edges.push_back({from, 0});
  }

  /// Edmonds-Karp; bodies have tens of values.
  void maxFlow() {
    while (true) {
      std::vector<int> parentEdge(adjacency.size(), -1);
      std::deque<unsigned> queue = {source()};
      std::vector<bool> seen(adjacency.size(), false);
      seen[source()] = true;
      while (!queue.empty() && !seen[sink()]) {
        unsigned u = queue.front();
        queue.pop_front();
        for (unsigned e : adjacency[u])
          if (edges[e].capacity > 0 && !seen[edges[e].to]) {
            seen[edges[e].to] = true;
            parentEdge[edges[e].to] = e;
            queue.push_back(edges[e].to);
          }
      }
      if (!seen[sink()])
        return;
      int64_t bottleneck = kInfinity;
      for (unsigned v = sink(); v != source(); v = edges[parentEdge[v] ^ 1].to)
        bottleneck = std::min(bottleneck, edges[parentEdge[v]].capacity);
      for (unsigned v = sink(); v != source();
           v = edges[parentEdge[v] ^ 1].to) {
        edges[parentEdge[v]].capacity -= bottleneck;
        edges[parentEdge[v] ^ 1].capacity += bottleneck;
      }
    }
  }

  /// Nodes reachable from the source in the residual graph.
  std::vector<bool> sourceSide() const {
    std::vector<bool> seen(adjacency.size(), false);
    std::deque<unsigned> queue = {source()};
    seen[source()] = true;
    while (!queue.empty()) {
      unsigned u = queue.front();
      queue.pop_front();
      for (unsigned e : adjacency[u])
        if (edges[e].capacity > 0 && !seen[edges[e].to]) {
          seen[edges[e].to] = true;
          queue.push_back(edges[e].to);
        }
    }
    return seen;
  }

private:
  struct Edge {
    unsigned to;
    int64_t capacity;
  };
  std::vector<Edge> edges;
  std::vector<std::vector<unsigned>> adjacency;
};

/// Values the backward step gets for free: parameters, and whatever is
/// computed from parameters and constants alone.
llvm::DenseSet<Value> freeValues(Block &body, unsigned numInputs,
                                 unsigned numStates) {
  llvm::DenseSet<Value> free;
  for (BlockArgument arg :
       body.getArguments().drop_front(numInputs + numStates))
    free.insert(arg);
  // Constants the canonicalizer hoisted out of the body.
  for (Operation &op : body)
    for (Value v : op.getOperands())
      if (v.getParentBlock() != &body)
        free.insert(v);
  for (Operation &op : body.without_terminator())
    if (llvm::all_of(op.getOperands(),
                     [&](Value v) { return free.contains(v); }))
      for (Value r : op.getResults())
        free.insert(r);
  return free;
}

} // namespace

FailureOr<SavePlan> mlir::flexsn::planSaves(Block &body, unsigned numInputs,
                                            unsigned numStates,
                                            unsigned numOutputs,
                                            ArrayRef<bool> trainable,
                                            bool storeAll) {
  Activity activity(body, numInputs, numStates, trainable);
  llvm::SetVector<Value> needed;

  // Dry run of the reverse sweep in a scratch block: every forward value a
  // derivative rule reads is needed by the backward step.
  OpBuilder b(body.getParentOp()->getContext());
  Block scratch;
  b.setInsertionPointToStart(&scratch);
  Location loc = body.getParentOp()->getLoc();
  auto record = [&](Value v) {
    needed.insert(v);
    return v;
  };
  AdjointBuilder emitter(b, loc, activity.active, record);
  SmallVector<Value> seeds;
  for (Value v : body.getTerminator()->getOperands())
    seeds.push_back(v.getType().isF32() ? emitter.constant(1.0) : Value());
  LogicalResult swept = reverseSweep(body, emitter, seeds);
  // The scratch ops use forward values: drop them before anything else.
  SmallVector<Operation *> scratchOps =
      llvm::map_to_vector(scratch, [](Operation &op) { return &op; });
  for (Operation *op : llvm::reverse(scratchOps))
    op->erase();
  if (failed(swept))
    return failure();

  llvm::DenseSet<Value> free = freeValues(body, numInputs, numStates);
  SmallVector<Value> needs;
  for (Value v : needed)
    if (!free.contains(v))
      needs.push_back(v);

  // Number the body's values.
  SmallVector<Value> values(body.getArguments());
  for (Operation &op : body.without_terminator())
    llvm::append_range(values, op.getResults());
  llvm::DenseMap<Value, unsigned> index;
  for (auto [i, v] : llvm::enumerate(values))
    index[v] = i;

  SavePlan plan;
  plan.needed = needs;
  auto addToPlan = [&](Value v) {
    auto arg = dyn_cast<BlockArgument>(v);
    if (arg && arg.getArgNumber() < numInputs)
      plan.rereadInputs.push_back(arg.getArgNumber());
    else
      plan.saved.push_back(v);
  };
  if (storeAll) {
    // Save what the rules read; i1 values through their f32 operands.
    llvm::SetVector<Value> work(needs.begin(), needs.end()), chosen;
    while (!work.empty()) {
      Value v = work.pop_back_val();
      if (free.contains(v) || chosen.contains(v))
        continue;
      if (v.getType().isF32()) {
        chosen.insert(v);
        continue;
      }
      for (Value operand : v.getDefiningOp()->getOperands())
        work.insert(operand);
    }
    for (Value v : chosen)
      addToPlan(v);
    return plan;
  }

  // Vertex costs: re-reading an input 1, saving a value 2 (write + read);
  // values that are not f32 cannot be saved in an f32 sequence.
  SaveCut cut(values.size());
  for (auto [i, v] : llvm::enumerate(values)) {
    if (free.contains(v))
      continue;
    auto arg = dyn_cast<BlockArgument>(v);
    int64_t cost = !v.getType().isF32()                    ? SaveCut::kInfinity
                   : arg && arg.getArgNumber() < numInputs ? 1
                                                           : 2;
    cut.addEdge(SaveCut::in(i), SaveCut::out(i), cost);
    if (arg)
      cut.addEdge(cut.source(), SaveCut::in(i), SaveCut::kInfinity);
  }
  for (Operation &op : body.without_terminator())
    for (Value operand : op.getOperands()) {
      if (free.contains(operand))
        continue;
      for (Value r : op.getResults())
        cut.addEdge(SaveCut::out(index[operand]), SaveCut::in(index[r]),
                    SaveCut::kInfinity);
    }
  for (Value v : needs)
    cut.addEdge(SaveCut::out(index[v]), cut.sink(), SaveCut::kInfinity);
  cut.maxFlow();
  std::vector<bool> reachable = cut.sourceSide();
  for (auto [i, v] : llvm::enumerate(values))
    if (reachable[SaveCut::in(i)] && !reachable[SaveCut::out(i)])
      addToPlan(v);
  return plan;
}

LogicalResult mlir::flexsn::emitBackwardStep(
    Block &body, const SavePlan &plan, unsigned numInputs, unsigned numStates,
    unsigned numOutputs, ArrayRef<bool> trainable, Block &backward) {
  Activity activity(body, numInputs, numStates, trainable);
  OpBuilder b = OpBuilder::atBlockEnd(&backward);
  Location loc = body.getParentOp()->getLoc();
  unsigned numParams = trainable.size();
  unsigned numSaved = plan.saved.size(), numReread = plan.rereadInputs.size();

  // Block arguments, in order.
  ValueRange args = backward.getArguments();
  ValueRange gradOutputs = args.take_front(numOutputs);
  ValueRange gradStates = args.slice(numOutputs, numStates);
  ValueRange saved = args.slice(numOutputs + numStates, numSaved);
  ValueRange reread = args.slice(numOutputs + numStates + numSaved, numReread);
  ValueRange carries =
      args.slice(numOutputs + numStates + numSaved + numReread, numStates);
  ValueRange params = args.take_back(numParams);

  // Recompute what the rules read from the saved values: every forward op
  // whose operands are available is cloned (unused clones fold away).
  IRMapping mapping;
  for (Operation &op : body)
    for (Value v : op.getOperands()) {
      if (v.getParentBlock() == &body || mapping.contains(v))
        continue;
      Operation *def = v.getDefiningOp();
      if (!def || !def->hasTrait<OpTrait::ConstantLike>())
        return body.getParentOp()->emitError(
            "flexsn-autodiff: the step body uses a non-constant value "
            "defined outside it");
      b.clone(*def, mapping);
    }
  for (unsigned p = 0; p < numParams; ++p)
    mapping.map(body.getArgument(numInputs + numStates + p), params[p]);
  for (auto [value, arg] : llvm::zip_equal(plan.saved, saved))
    mapping.map(value, arg);
  for (auto [input, arg] : llvm::zip_equal(plan.rereadInputs, reread))
    mapping.map(body.getArgument(input), arg);
  for (Operation &op : body.without_terminator()) {
    if (llvm::all_of(op.getResults(),
                     [&](Value r) { return mapping.contains(r); }))
      continue;
    if (llvm::all_of(op.getOperands(),
                     [&](Value v) { return mapping.contains(v); }))
      b.clone(op, mapping);
  }

  bool missing = false;
  auto forward = [&](Value v) {
    if (Value copy = mapping.lookupOrNull(v))
      return copy;
    missing = true;
    return v;
  };
  AdjointBuilder emitter(b, loc, activity.active, forward);
  SmallVector<Value> seeds(gradOutputs);
  for (unsigned s = 0; s < numStates; ++s)
    seeds.push_back(
        arith::AddFOp::create(b, loc, gradStates[s], carries[s]).getResult());
  if (failed(reverseSweep(body, emitter, seeds)))
    return failure();
  if (missing)
    return body.getParentOp()->emitError(
        "flexsn-autodiff: the save plan misses a value the backward step "
        "needs");

  SmallVector<Value> results;
  Value zero = emitter.constant(0.0);
  auto adjointOf = [&](Value v) {
    Value a = emitter.adjoint(v);
    return a ? a : zero;
  };
  for (unsigned i = 0; i < numInputs; ++i)
    results.push_back(adjointOf(body.getArgument(i)));
  for (unsigned s = 0; s < numStates; ++s)
    results.push_back(adjointOf(body.getArgument(numInputs + s)));
  for (unsigned p = 0; p < numParams; ++p)
    if (trainable[p])
      results.push_back(adjointOf(body.getArgument(numInputs + numStates + p)));
  YieldOp::create(b, loc, results);
  return success();
}

SmallVector<Value>
mlir::flexsn::roundSavesKeepingDecisions(Block &body, const SavePlan &plan,
                                         unsigned numInputs, unsigned numStates,
                                         FloatType storage) {
  // What the backward step recomputes (every op whose operands it has), and
  // which of those values change with a saved value.
  llvm::DenseSet<Value> recomputed = freeValues(body, numInputs, numStates);
  llvm::DenseSet<Value> fromSaved(plan.saved.begin(), plan.saved.end());
  recomputed.insert(plan.saved.begin(), plan.saved.end());
  for (unsigned i : plan.rereadInputs)
    recomputed.insert(body.getArgument(i));
  for (Operation &op : body.without_terminator()) {
    if (llvm::all_of(op.getOperands(),
                     [&](Value v) { return recomputed.contains(v); }))
      recomputed.insert(op.result_begin(), op.result_end());
    if (llvm::any_of(op.getOperands(),
                     [&](Value v) { return fromSaved.contains(v); }))
      fromSaved.insert(op.result_begin(), op.result_end());
  }
  // The recomputed values the rules' reads depend on.
  llvm::DenseSet<Value> read(plan.needed.begin(), plan.needed.end());
  for (Operation &op : llvm::reverse(body.without_terminator()))
    if (llvm::any_of(op.getResults(),
                     [&](Value r) { return read.contains(r); }))
      for (Value operand : op.getOperands())
        if (recomputed.contains(operand))
          read.insert(operand);
  auto isRecomputedFromSaves = [&](Value v) {
    return recomputed.contains(v) && fromSaved.contains(v) &&
           read.contains(v) && !llvm::is_contained(plan.saved, v);
  };
  SmallVector<Value> decisions;
  for (Operation &op : body.without_terminator())
    for (Value r : op.getResults())
      if (isRecomputedFromSaves(r) &&
          (isa<SpikeOp>(op) || r.getType().isInteger(1)))
        decisions.push_back(r);
  if (decisions.empty())
    return plan.saved; // rounding to nearest changes no branch

  OpBuilder b(body.getTerminator());
  Location loc = body.getParentOp()->getLoc();
  Type f32 = b.getF32Type();
  IRMapping rounded;
  SmallVector<Value> nearest, other;
  for (Value v : plan.saved) {
    nearest.push_back(RoundOp::create(b, loc, f32, v, storage));
    other.push_back(RoundOp::create(b, loc, f32, v, storage, /*other=*/true));
    rounded.map(v, nearest.back());
  }
  // The decisions again, from the rounded values, as the backward makes
  // them: the ops between the saved values and the decisions.
  llvm::DenseSet<Value> feedsDecision(decisions.begin(), decisions.end());
  for (Operation &op : llvm::reverse(body.without_terminator()))
    if (llvm::any_of(op.getResults(),
                     [&](Value r) { return feedsDecision.contains(r); }))
      feedsDecision.insert(op.operand_begin(), op.operand_end());
  for (Operation &op : body.without_terminator())
    if (llvm::any_of(op.getResults(), [&](Value r) {
          return isRecomputedFromSaves(r) && feedsDecision.contains(r);
        }))
      b.clone(op, rounded);
  Value mismatch;
  for (Value decision : decisions) {
    Value again = rounded.lookup(decision);
    Value differs =
        decision.getType().isInteger(1)
            ? arith::XOrIOp::create(b, loc, decision, again).getResult()
            : arith::CmpFOp::create(b, loc, arith::CmpFPredicate::UNE, decision,
                                    again)
                  .getResult();
    mismatch =
        mismatch ? arith::OrIOp::create(b, loc, mismatch, differs) : differs;
  }
  return llvm::map_to_vector(llvm::zip_equal(nearest, other), [&](auto pair) {
    auto [n, o] = pair;
    return Value(arith::SelectOp::create(b, loc, mismatch, o, n));
  });
}
