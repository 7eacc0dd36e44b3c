//===- ScanLowering.cpp - One flexsn.scan rewritten into loops -----------===//
//
// Part of the FlexSN project: an MLIR compiler for spiking-neuron dynamics.
//
//===----------------------------------------------------------------------===//
//
// A scan is lowered in two parts, as the GPU side's KernelPlan and
// KernelEmitter are: a ScanPlan decides, without emitting anything, where the
// step body is, how each operand is indexed, which sums are carried, how
// chunks share sums and whether they run in vectors; a ScanEmitter then
// builds the loops (serial, or chunks of neurons under OpenMP) from the
// pieces in LoopBuilders.h and the step builder's time loop.
//
//===----------------------------------------------------------------------===//

#include "ScanLowering.h"
#include "LoopBuilders.h"

#include "flexsn/Dialect/FlexSN/Utils/StepBuilder.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/SCF/Utils/Utils.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/SymbolTable.h"

using namespace mlir;
using namespace mlir::flexsn;
using namespace mlir::flexsn::loops;

namespace {

/// Neurons per chunk of the innermost neuron dimension in parallel mode.
/// Fixed, so that the chunks, and the order of every sum, do not depend on
/// the thread count.
constexpr int64_t kChunkNeurons = 4096;

/// Where a reduction's contributions go in parallel mode.
enum class SumKind {
  /// Keeps every neuron dimension: each element belongs to one neuron, so
  /// to one chunk; added in place.
  PerNeuron,
  /// Keeps no innermost neuron dimension: a chunk adds to one element (per
  /// step, if it keeps t); the chunk's sum goes to its own partial, and the
  /// partials are added in chunk order after the parallel loop.
  PerChunk,
  /// Keeps the innermost dimension but not every outer one: chunks share
  /// elements, which only a serial chunk loop adds in place.
  Shared,
};

/// What lowering a scan decides before it emits anything.
struct ScanPlan {
  ScanPlan(ScanOp scan, unsigned requestedWidth);

  ScanOp scan;
  /// The callee; null for a scan with its own step body.
  NeuronOp neuron;
  Block *body;
  unsigned numStates;
  /// The domain (t, n...) and its innermost neuron dimension.
  unsigned rank, inner;
  SmallVector<AffineMap> inputMaps, initMaps, outputMaps, stateMaps,
      reductionMaps;
  /// The sums over time (no t in their map), carried by the time loop;
  /// those that keep t are added at every step.
  SmallVector<unsigned> carriedReductions;
  /// In parallel mode: each reduction's kind; whether chunks share a sum's
  /// elements, or bytes of bit-packed spikes (then the chunks run in order
  /// on one thread).
  SmallVector<SumKind> kinds;
  bool sharedSums = false, sharedBytes = false;
  /// Whether chunks run in vectors of `vectorWidth` lanes: the step body is
  /// elementwise and every buffer is contiguous along the innermost
  /// dimension (or the same for every lane).
  bool vectorize = false;
  unsigned vectorWidth;
};

ScanPlan::ScanPlan(ScanOp scan, unsigned requestedWidth)
    : scan(scan), vectorWidth(requestedWidth) {
  if (scan.getCallee())
    neuron = SymbolTable::lookupNearestSymbolFrom<NeuronOp>(
        scan, scan.getCalleeAttr());
  body = neuron ? &neuron.getBodyBlock() : &scan.getBody().front();
  unsigned numInputs = scan.getInputs().size();
  numStates =
      neuron ? neuron.getNumStates()
             : body->getNumArguments() - numInputs - scan.getParams().size();
  rank = scan.getDomainRank();
  inner = rank - 1;

  auto mapsOf = [&](MutableOperandRange range) {
    return llvm::map_to_vector(range, [&](OpOperand &operand) {
      return scan.getMatchingIndexingMap(&operand);
    });
  };
  inputMaps = mapsOf(scan.getInputsMutable());
  initMaps = mapsOf(scan.getInitsMutable());
  outputMaps = mapsOf(scan.getOutputsMutable());
  stateMaps = mapsOf(scan.getStatesMutable());
  reductionMaps = mapsOf(scan.getReductionsMutable());

  for (auto [r, map] : llvm::enumerate(reductionMaps)) {
    if (!usesTime(map))
      carriedReductions.push_back(r);
    bool keepsAll = llvm::all_of(llvm::seq(1u, rank), [&](unsigned d) {
      return map.isFunctionOfDim(d);
    });
    SumKind kind = keepsAll                      ? SumKind::PerNeuron
                   : !map.isFunctionOfDim(inner) ? SumKind::PerChunk
                                                 : SumKind::Shared;
    kinds.push_back(kind);
    sharedSums |= kind == SumKind::Shared;
  }
  sharedBytes =
      rank > 2 && llvm::any_of(scan.getOutputs(), [](Value buffer) {
        return cast<MemRefType>(buffer.getType()).getElementType().isInteger(1);
      });

  auto accessible = [&](MutableOperandRange operands, bool written) {
    return llvm::all_of(operands, [&](OpOperand &operand) {
      return !isa<MemRefType>(operand.get().getType()) ||
             isLaneAccessible(operand.get(),
                              scan.getMatchingIndexingMap(&operand), inner,
                              written);
    });
  };
  vectorize =
      vectorWidth > 1 && isVectorizableBody(*body) &&
      accessible(scan.getInputsMutable(), false) &&
      accessible(scan.getInitsMutable(), false) &&
      accessible(scan.getParamsMutable(), false) &&
      accessible(scan.getOutputsMutable(), true) &&
      accessible(scan.getStatesMutable(), true) &&
      llvm::all_of(scan.getReductionsMutable(), [&](OpOperand &operand) {
        AffineMap map = scan.getMatchingIndexingMap(&operand);
        return !map.isFunctionOfDim(inner) ||
               isLaneAccessible(operand.get(), map, inner, true);
      });
}

/// One neuron at a domain point (t, n...) with t still to be chosen (with
/// `width`, that many consecutive neurons of the innermost dimension from
/// it on, as vector lanes): where its buffers are read and written.
struct NeuronAccess {
  OpBuilder &nb;
  Location loc;
  SmallVector<Value> point;
  unsigned width;
  /// Vectors whose sequence stores stream (see streamingCondition).
  bool streaming = false;
};

/// Takes reduction r's contribution at a step.
using AddAtStep = function_ref<void(OpBuilder &, Location, unsigned r,
                                    Value step, Value value)>;

/// A chunk of the parallel lowering: its number and the point (t = 0,
/// outer..., first) of its first neuron.
struct Chunk {
  OpBuilder &cb;
  Location loc;
  Value index;
  SmallVector<Value> start;
};

/// Builds a planned scan's loops in its place.
class ScanEmitter {
public:
  ScanEmitter(const ScanPlan &plan, Value numThreads);
  /// Emits the loops (chunks under OpenMP with `parallel`) and erases the
  /// scan.
  void emit(bool parallel);
  /// Emits a coupled kernel's loops: one chunk per sample of H neurons
  /// (under OpenMP with `parallel`), time outer, and erases the scan.
  void emitCoupled(const ScanCoupling &coupling, bool parallel);

private:
  // -- one neuron (or vector of neurons) -----------------------------------
  Value load(const NeuronAccess &n, Value present, Value buffer, AffineMap map,
             ArrayRef<Value> at);
  void store(const NeuronAccess &n, Value present, Value value, Value buffer,
             AffineMap map, ArrayRef<Value> at);
  SmallVector<Value> initialStates(const NeuronAccess &n);
  SmallVector<Value> paramsAt(const NeuronAccess &n);
  void withAccess(const NeuronAccess &n, AddAtStep addAtStep,
                  function_ref<void(const ScanGroupAccess &)> use);
  void storeFinalStates(const NeuronAccess &n, ValueRange finals);
  SmallVector<Value> emitNeuron(OpBuilder &nb, Location loc,
                                ValueRange neuronIndex, AddAtStep addAtStep);
  void addInPlace(OpBuilder &nb, Location loc, unsigned r,
                  ArrayRef<Value> point, Value value);

  // -- the loops ------------------------------------------------------------
  void emitSerial();
  void emitChunked();
  SmallVector<Value> chunkStart(OpBuilder &cb, Location loc, Value chunk);
  void emitChunk(OpBuilder &cb, Location loc, Value chunk);
  SmallVector<Value> startChunkSums(OpBuilder &cb, Location loc, Value chunk);
  void add(const Chunk &c, OpBuilder &ab, Location loc, unsigned width,
           unsigned r, ArrayRef<Value> at, Value value);
  SmallVector<Value> addCarried(const Chunk &c, OpBuilder &ab, Location loc,
                                unsigned width, ArrayRef<Value> point,
                                ValueRange carried, ValueRange sums);
  SmallVector<Value> pointAt(const Chunk &c, Value n);
  scf::ForOp neuronLoop(const Chunk &c, Value from, Value to,
                        ValueRange sumsIn);
  SmallVector<Value> vectorSteps(const Chunk &c, Value from, Value to,
                                 ValueRange sumsIn);
  void addPartials();
  void allocatePartials();
  void emitCoupledChunk(OpBuilder &cb, Location loc, Value chunk);
  void coupledStep(const Chunk &c, Value step, Value carries, Value prev,
                   Value drive);

  /// Reduction r's contributions at each step of the neuron(s) at `point`.
  auto addAtStepOf(const Chunk &c, ArrayRef<Value> point, unsigned width) {
    return [this, &c, point, width](OpBuilder &sb, Location loc, unsigned r,
                                    Value step, Value value) {
      SmallVector<Value> stepPoint(point);
      stepPoint[0] = step;
      add(c, sb, loc, width, r, stepPoint, value);
    };
  }

  const ScanPlan &plan;
  ScanOp scan;
  OpBuilder b;
  Location loc;
  Value numThreads;
  Value zeroIndex, oneIndex, numSteps;
  /// The domain's neuron dimensions (N...).
  SmallVector<Value> neuronDims;
  /// Whether each buffer is there (null: an input that always is).
  SmallVector<Value> inputPresent, initPresent, outputPresent, statePresent;
  // Parallel mode: chunks are blocks of kChunkNeurons of the innermost
  // dimension at each point of the outer ones, numbered row-major.
  SmallVector<Value> outerDims;
  Value innerDim, chunkNeurons, blocks, numChunks;
  /// Each per-chunk sum's partials ([chunks] or [chunks, T]).
  SmallVector<Value> partials;
  /// When vectors stream their sequence stores (null: never).
  Value streaming;
  /// A coupled kernel's coupling, and its sample size H (the chunks are
  /// then the samples).
  std::optional<ScanCoupling> coupling;
  Value sampleSize;
};

ScanEmitter::ScanEmitter(const ScanPlan &plan, Value numThreads)
    : plan(plan), scan(plan.scan), b(scan), loc(scan.getLoc()),
      numThreads(numThreads) {
  // T and N... are the dims of an operand spanning the domain.
  Value domainOperand = scan.getDomainOperand();
  zeroIndex = arith::ConstantIndexOp::create(b, loc, 0);
  oneIndex = arith::ConstantIndexOp::create(b, loc, 1);
  numSteps = memref::DimOp::create(b, loc, domainOperand, 0);
  for (unsigned d = 1; d < plan.rank; ++d)
    neuronDims.push_back(memref::DimOp::create(b, loc, domainOperand, d));

  auto presence = [&](ValueRange buffers) {
    return llvm::map_to_vector(
        buffers, [&](Value buffer) { return isPresent(b, loc, buffer); });
  };
  inputPresent.resize(scan.getInputs().size());
  if (auto optional = scan.getOptionalInputs())
    for (int64_t i : *optional)
      inputPresent[i] = isPresent(b, loc, scan.getInputs()[i]);
  initPresent = presence(scan.getInits());
  outputPresent = presence(scan.getOutputs());
  statePresent = presence(scan.getStates());
}

void ScanEmitter::emit(bool parallel) {
  // Reductions overwrite their destinations: zero them, then add into them.
  for (Value buffer : scan.getReductions())
    zeroFill(b, loc, buffer);
  if (!parallel || neuronDims.empty())
    emitSerial();
  else
    emitChunked();
  scan.erase();
}

// -- one neuron (or vector of neurons) ---------------------------------------

/// Reads `buffer` (null `present`: always there) at `at` through `map`.
Value ScanEmitter::load(const NeuronAccess &n, Value present, Value buffer,
                        AffineMap map, ArrayRef<Value> at) {
  if (n.width)
    return present
               ? loadLanesIfPresent(n.nb, n.loc, n.width, plan.inner, present,
                                    buffer, map, at)
               : loadLanes(n.nb, n.loc, n.width, plan.inner, buffer, map, at);
  SmallVector<Value> indices = selectIndices(map, at);
  return present ? loadIfPresent(n.nb, n.loc, present, buffer, indices)
                 : loadAsF32(n.nb, n.loc, buffer, indices);
}

void ScanEmitter::store(const NeuronAccess &n, Value present, Value value,
                        Value buffer, AffineMap map, ArrayRef<Value> at) {
  SmallVector<Value> indices = selectIndices(map, at);
  if (!n.width)
    return storeIfPresent(n.nb, n.loc, present, value, buffer, indices);
  scf::IfOp::create(n.nb, n.loc, present, [&](OpBuilder &then, Location loc) {
    storeLanes(then, loc, value, buffer, indices, n.streaming);
    scf::YieldOp::create(then, loc);
  });
}

/// The initial states (zero when absent).
SmallVector<Value> ScanEmitter::initialStates(const NeuronAccess &n) {
  SmallVector<Value> states;
  for (unsigned s = 0; s < plan.numStates; ++s) {
    if (scan.getInits().empty()) {
      states.push_back(zeroLanes(n.nb, n.loc, n.width));
      continue;
    }
    states.push_back(
        load(n, initPresent[s], scan.getInits()[s], plan.initMaps[s], n.point));
  }
  return states;
}

/// Params: scalars as they are (on every lane); shaped ones
/// (time-invariant), through their maps.
SmallVector<Value> ScanEmitter::paramsAt(const NeuronAccess &n) {
  SmallVector<Value> params;
  for (OpOperand &param : scan.getParamsMutable()) {
    Value value = param.get();
    if (isa<MemRefType>(value.getType()))
      value =
          load(n, Value(), value, scan.getMatchingIndexingMap(&param), n.point);
    else if (n.width)
      value = vector::BroadcastOp::create(
          n.nb, n.loc, VectorType::get({n.width}, value.getType()), value);
    params.push_back(value);
  }
  return params;
}

/// Calls `use` with the access to the neuron's buffers at each step;
/// `addAtStep` takes the per-step reductions.
void ScanEmitter::withAccess(const NeuronAccess &n, AddAtStep addAtStep,
                             function_ref<void(const ScanGroupAccess &)> use) {
  auto at = [&](Value step) {
    SmallVector<Value> index(n.point);
    index[0] = step;
    return index;
  };
  auto loadInput = [&](unsigned k, Value step) {
    return SmallVector<Value>{load(n, inputPresent[k], scan.getInputs()[k],
                                   plan.inputMaps[k], at(step))};
  };
  auto storeOutput = [&](unsigned k, Value step, ValueRange lanes) {
    store(n, outputPresent[k], lanes.front(), scan.getOutputs()[k],
          plan.outputMaps[k], at(step));
  };
  auto storeState = [&](unsigned s, Value step, ValueRange lanes) {
    store(n, statePresent[s], lanes.front(), scan.getStates()[s],
          plan.stateMaps[s], at(step));
  };
  auto addStep = [&](unsigned r, Value step, ValueRange lanes) {
    addAtStep(n.nb, n.loc, r, step, lanes.front());
  };
  use(ScanGroupAccess{1, loadInput, storeOutput, storeState, addStep, n.width});
}

/// Stores the final states of `finals` (states, then sums).
void ScanEmitter::storeFinalStates(const NeuronAccess &n, ValueRange finals) {
  for (auto [s, buffer] : llvm::enumerate(scan.getStates()))
    if (scan.isFinalState(s))
      store(n, statePresent[s], finals[s], buffer, plan.stateMaps[s], n.point);
}

/// Emits one neuron at `neuronIndex`: its time loop, its state sequences
/// and final states. Returns the carried sums, in carriedReductions' order.
SmallVector<Value> ScanEmitter::emitNeuron(OpBuilder &nb, Location loc,
                                           ValueRange neuronIndex,
                                           AddAtStep addAtStep) {
  NeuronAccess n{nb, loc, {zeroIndex}, /*width=*/0};
  llvm::append_range(n.point, neuronIndex);
  SmallVector<Value> states = initialStates(n);
  SmallVector<Value> params = paramsAt(n);
  SmallVector<Value> sums;
  withAccess(n, addAtStep, [&](const ScanGroupAccess &access) {
    ValueRange finals =
        emitTimeLoop(nb, loc, scan, plan.neuron, numSteps, states, {params},
                     plan.carriedReductions, access);
    storeFinalStates(n, finals);
    sums = llvm::to_vector(finals.drop_front(plan.numStates));
  });
  return sums;
}

/// Adds `value` to reduction r's element at `point` (t first).
void ScanEmitter::addInPlace(OpBuilder &nb, Location loc, unsigned r,
                             ArrayRef<Value> point, Value value) {
  accumulate(nb, loc, value, scan.getReductions()[r],
             selectIndices(plan.reductionMaps[r], point));
}

// -- the loops
// -----------------------------------------------------------------

/// A loop nest over the neurons, each through its time loop.
void ScanEmitter::emitSerial() {
  SmallVector<Value> lowerBounds(neuronDims.size(), zeroIndex);
  SmallVector<Value> steps(neuronDims.size(), oneIndex);
  scf::buildLoopNest(
      b, loc, lowerBounds, neuronDims, steps,
      [&](OpBuilder &nb, Location loc, ValueRange neuronIndex) {
        SmallVector<Value> point = {zeroIndex};
        llvm::append_range(point, neuronIndex);
        auto addAtStep = [&](OpBuilder &sb, Location loc, unsigned r,
                             Value step, Value value) {
          SmallVector<Value> stepPoint(point);
          stepPoint[0] = step;
          addInPlace(sb, loc, r, stepPoint, value);
        };
        SmallVector<Value> sums = emitNeuron(nb, loc, neuronIndex, addAtStep);
        for (auto [c, r] : llvm::enumerate(plan.carriedReductions))
          addInPlace(nb, loc, r, point, sums[c]);
      });
}

/// The chunks (in parallel where no two share an element), then the
/// per-chunk sums' partials.
void ScanEmitter::emitChunked() {
  outerDims.assign(neuronDims.begin(), neuronDims.end() - 1);
  innerDim = neuronDims.back();
  chunkNeurons = arith::ConstantIndexOp::create(b, loc, kChunkNeurons);
  blocks = arith::CeilDivUIOp::create(b, loc, innerDim, chunkNeurons);
  numChunks = blocks;
  for (Value dim : outerDims)
    numChunks = arith::MulIOp::create(b, loc, numChunks, dim);

  allocatePartials();

  // Big scans whose written sequences are aligned stream them.
  if (plan.vectorize) {
    SmallVector<Value> sequences(scan.getOutputs());
    for (auto [s, buffer] : llvm::enumerate(scan.getStates()))
      if (!scan.isFinalState(s))
        sequences.push_back(buffer);
    Value elements = numSteps;
    for (Value dim : neuronDims)
      elements = arith::MulIOp::create(b, loc, elements, dim);
    streaming =
        streamingCondition(b, loc, sequences, plan.vectorWidth, elements);
  }

  emitChunkLoop(b, loc, numChunks,
                /*parallel=*/!plan.sharedSums && !plan.sharedBytes, numThreads,
                [&](OpBuilder &cb, Location loc, Value chunk) {
                  emitChunk(cb, loc, chunk);
                });
  addPartials();
}

/// Each per-chunk sum's partials, one per chunk ([chunks] or [chunks, T]).
void ScanEmitter::allocatePartials() {
  partials.resize(plan.reductionMaps.size());
  for (auto [r, map] : llvm::enumerate(plan.reductionMaps)) {
    if (plan.kinds[r] != SumKind::PerChunk)
      continue;
    SmallVector<Value> sizes = {numChunks};
    if (usesTime(map))
      sizes.push_back(numSteps);
    partials[r] = memref::AllocOp::create(
        b, loc,
        MemRefType::get(
            SmallVector<int64_t>(sizes.size(), ShapedType::kDynamic),
            b.getF32Type()),
        sizes);
  }
}

/// The point (t = 0, outer..., n = 0) of `chunk`'s first neuron (in a
/// coupled kernel, of sample `chunk`: (0, chunk * H)).
SmallVector<Value> ScanEmitter::chunkStart(OpBuilder &cb, Location loc,
                                           Value chunk) {
  if (coupling)
    return {zeroIndex, arith::MulIOp::create(cb, loc, chunk, sampleSize)};
  Value outer = arith::DivUIOp::create(cb, loc, chunk, blocks);
  SmallVector<Value> point = {zeroIndex};
  llvm::append_range(point, delinearize(cb, loc, outer, outerDims));
  Value first = arith::MulIOp::create(
      cb, loc, arith::RemUIOp::create(cb, loc, chunk, blocks), chunkNeurons);
  point.push_back(first);
  return point;
}

/// Zeroes `chunk`'s per-step partials and returns its per-chunk sums over
/// time, all zero (what its neuron loops carry).
SmallVector<Value> ScanEmitter::startChunkSums(OpBuilder &cb, Location loc,
                                               Value chunk) {
  SmallVector<Value> chunkSums;
  for (auto [r, kind] : llvm::enumerate(plan.kinds)) {
    if (kind != SumKind::PerChunk)
      continue;
    if (usesTime(plan.reductionMaps[r]))
      scf::ForOp::create(
          cb, loc, zeroIndex, numSteps, oneIndex, ValueRange(),
          [&, r = r](OpBuilder &zb, Location loc, Value t, ValueRange) {
            memref::StoreOp::create(zb, loc, f32Constant(zb, loc, 0.0),
                                    partials[r], ValueRange{chunk, t});
            scf::YieldOp::create(zb, loc);
          });
    else
      chunkSums.push_back(f32Constant(cb, loc, 0.0));
  }
  return chunkSums;
}

/// One chunk: whole vectors first, then the rest one neuron at a time.
void ScanEmitter::emitChunk(OpBuilder &cb, Location loc, Value chunk) {
  Chunk c{cb, loc, chunk, chunkStart(cb, loc, chunk)};
  Value first = c.start.back();
  Value last = arith::MinUIOp::create(
      cb, loc, arith::AddIOp::create(cb, loc, first, chunkNeurons), innerDim);
  // Per-step partials start at zero; per-chunk sums over time are carried
  // by the neuron loop.
  SmallVector<Value> chunkSums = startChunkSums(cb, loc, chunk);
  scf::ForOp neurons;
  if (plan.vectorize) {
    Value lanes = arith::ConstantIndexOp::create(cb, loc, plan.vectorWidth);
    Value count = arith::SubIOp::create(cb, loc, last, first);
    Value vectorEnd = arith::AddIOp::create(
        cb, loc, first,
        arith::MulIOp::create(
            cb, loc, arith::DivUIOp::create(cb, loc, count, lanes), lanes));
    SmallVector<Value> sums = vectorSteps(c, first, vectorEnd, chunkSums);
    neurons = neuronLoop(c, vectorEnd, last, sums);
  } else {
    neurons = neuronLoop(c, first, last, chunkSums);
  }
  auto sum = neurons.getResults().begin();
  for (unsigned r : plan.carriedReductions)
    if (plan.kinds[r] == SumKind::PerChunk)
      memref::StoreOp::create(cb, loc, *sum++, partials[r], ValueRange{chunk});
}

/// Adds a contribution of reduction r at `at` (t first): a sum some chunks
/// share takes the lanes' sum into the chunk's partial; one kept per neuron
/// takes each lane into its own element.
void ScanEmitter::add(const Chunk &c, OpBuilder &ab, Location loc,
                      unsigned width, unsigned r, ArrayRef<Value> at,
                      Value value) {
  if (plan.kinds[r] == SumKind::PerChunk) {
    Value total = width ? sumLanes(ab, loc, value) : value;
    accumulate(ab, loc, total, partials[r], ValueRange{c.index, at[0]});
  } else if (width) {
    accumulateLanes(ab, loc, value, scan.getReductions()[r],
                    selectIndices(plan.reductionMaps[r], at));
  } else {
    addInPlace(ab, loc, r, at, value);
  }
}

/// The sums over time a neuron (or vector) ends with: added to the chunk's
/// running `sums` (returned), or in place.
SmallVector<Value> ScanEmitter::addCarried(const Chunk &c, OpBuilder &ab,
                                           Location loc, unsigned width,
                                           ArrayRef<Value> point,
                                           ValueRange carried,
                                           ValueRange sums) {
  SmallVector<Value> next;
  auto sum = sums.begin();
  for (auto [k, r] : llvm::enumerate(plan.carriedReductions)) {
    if (plan.kinds[r] != SumKind::PerChunk) {
      add(c, ab, loc, width, r, point, carried[k]);
      continue;
    }
    Value total = width ? sumLanes(ab, loc, carried[k]) : carried[k];
    next.push_back(arith::AddFOp::create(ab, loc, *sum++, total));
  }
  return next;
}

SmallVector<Value> ScanEmitter::pointAt(const Chunk &c, Value n) {
  SmallVector<Value> point(c.start);
  point.back() = n;
  return point;
}

/// Neurons [from, to) of the chunk one at a time, each through its time
/// loop.
scf::ForOp ScanEmitter::neuronLoop(const Chunk &c, Value from, Value to,
                                   ValueRange sumsIn) {
  return scf::ForOp::create(
      c.cb, c.loc, from, to, oneIndex, sumsIn,
      [&](OpBuilder &nb, Location loc, Value n, ValueRange sums) {
        SmallVector<Value> point = pointAt(c, n);
        SmallVector<Value> carried =
            emitNeuron(nb, loc, ArrayRef<Value>(point).drop_front(),
                       addAtStepOf(c, point, 0));
        scf::YieldOp::create(nb, loc,
                             addCarried(c, nb, loc, 0, point, carried, sums));
      });
}

/// Neurons [from, to) of the chunk in vectors, one time step at a time:
/// each step streams the chunk's rows of every sequence, and the vectors'
/// carries (states, sums over time) wait in a buffer of the chunk.
SmallVector<Value> ScanEmitter::vectorSteps(const Chunk &c, Value from,
                                            Value to, ValueRange sumsIn) {
  OpBuilder &cb = c.cb;
  Location loc = c.loc;
  unsigned width = plan.vectorWidth;
  unsigned numStates = plan.numStates;
  int64_t numCarries = numStates + plan.carriedReductions.size();
  OpBuilder::InsertionGuard guard(cb);
  auto scope = memref::AllocaScopeOp::create(cb, loc, sumsIn.getTypes());
  cb.createBlock(&scope.getBodyRegion());
  Value carries = memref::AllocaOp::create(
      cb, loc,
      MemRefType::get({std::max<int64_t>(numCarries, 1), kChunkNeurons},
                      cb.getF32Type()));
  Value lanes = arith::ConstantIndexOp::create(cb, loc, width);
  auto vectors = [&](OpBuilder &b, ValueRange iterArgs,
                     function_ref<SmallVector<Value>(OpBuilder &, Location,
                                                     Value, ValueRange)>
                         body) {
    return scf::ForOp::create(
        b, loc, from, to, lanes, iterArgs,
        [&](OpBuilder &vb, Location loc, Value n, ValueRange args) {
          scf::YieldOp::create(vb, loc, body(vb, loc, n, args));
        });
  };
  auto slot = [&](OpBuilder &b, Location loc, int64_t k, Value n) {
    return SmallVector<Value>{arith::ConstantIndexOp::create(b, loc, k),
                              arith::SubIOp::create(b, loc, n, from)};
  };
  auto keep = [&](OpBuilder &b, Location loc, Value n, ValueRange values) {
    for (auto [k, value] : llvm::enumerate(values))
      vector::StoreOp::create(b, loc, value, carries, slot(b, loc, k, n));
  };
  auto fetch = [&](OpBuilder &b, Location loc, Value n) {
    SmallVector<Value> values;
    for (int64_t k = 0; k < numCarries; ++k)
      values.push_back(vector::LoadOp::create(b, loc, f32Lanes(b, width),
                                              carries, slot(b, loc, k, n)));
    return values;
  };
  vectors(cb, {}, [&](OpBuilder &vb, Location loc, Value n, ValueRange) {
    NeuronAccess a{vb, loc, pointAt(c, n), width};
    SmallVector<Value> initial = initialStates(a);
    initial.append(plan.carriedReductions.size(), zeroLanes(vb, loc, width));
    keep(vb, loc, n, initial);
    return SmallVector<Value>();
  });
  auto stepLoop = [&](OpBuilder &sb, bool stream) {
    scf::ForOp::create(
        sb, loc, zeroIndex, numSteps, oneIndex, ValueRange(),
        [&](OpBuilder &tb, Location loc, Value iteration, ValueRange) {
          Value step = iteration;
          if (scan.getReverse())
            step = arith::SubIOp::create(
                tb, loc, arith::SubIOp::create(tb, loc, numSteps, oneIndex),
                iteration);
          vectors(tb, {},
                  [&](OpBuilder &vb, Location loc, Value n, ValueRange) {
                    NeuronAccess a{vb, loc, pointAt(c, n), width, stream};
                    SmallVector<Value> params = paramsAt(a);
                    SmallVector<Value> current = fetch(vb, loc, n);
                    withAccess(a, addAtStepOf(c, a.point, width),
                               [&](const ScanGroupAccess &access) {
                                 keep(vb, loc, n,
                                      emitStep(vb, loc, scan, plan.neuron, step,
                                               current, {params},
                                               plan.carriedReductions, access));
                               });
                    return SmallVector<Value>();
                  });
          scf::YieldOp::create(tb, loc);
        });
  };
  if (!streaming) {
    stepLoop(cb, /*stream=*/false);
  } else {
    scf::IfOp::create(
        cb, loc, streaming,
        [&](OpBuilder &then, Location loc) {
          stepLoop(then, /*stream=*/true);
          // Streaming stores are weakly ordered: drain them before the
          // chunk counts as done.
          LLVM::FenceOp::create(then, loc, LLVM::AtomicOrdering::seq_cst);
          scf::YieldOp::create(then, loc);
        },
        [&](OpBuilder &otherwise, Location loc) {
          stepLoop(otherwise, /*stream=*/false);
          scf::YieldOp::create(otherwise, loc);
        });
  }
  auto finish = vectors(
      cb, sumsIn, [&](OpBuilder &vb, Location loc, Value n, ValueRange sums) {
        NeuronAccess a{vb, loc, pointAt(c, n), width};
        SmallVector<Value> finals = fetch(vb, loc, n);
        storeFinalStates(a, finals);
        return addCarried(c, vb, loc, width, a.point,
                          ArrayRef<Value>(finals).drop_front(numStates), sums);
      });
  memref::AllocaScopeReturnOp::create(cb, loc, finish.getResults());
  return SmallVector<Value>(scope.getResults());
}

/// The partials, added in chunk order: the same sums for any thread count.
void ScanEmitter::addPartials() {
  if (llvm::any_of(partials, [](Value p) { return !!p; }))
    scf::ForOp::create(
        b, loc, zeroIndex, numChunks, oneIndex, ValueRange(),
        [&](OpBuilder &cb, Location loc, Value chunk, ValueRange) {
          SmallVector<Value> point = chunkStart(cb, loc, chunk);
          for (auto [r, partial] : llvm::enumerate(partials)) {
            if (!partial)
              continue;
            if (!usesTime(plan.reductionMaps[r])) {
              addInPlace(
                  cb, loc, r, point,
                  memref::LoadOp::create(cb, loc, partial, ValueRange{chunk}));
              continue;
            }
            scf::ForOp::create(
                cb, loc, zeroIndex, numSteps, oneIndex, ValueRange(),
                [&, r = r, partial = partial](OpBuilder &tb, Location loc,
                                              Value t, ValueRange) {
                  SmallVector<Value> stepPoint(point);
                  stepPoint[0] = t;
                  addInPlace(tb, loc, r, stepPoint,
                             memref::LoadOp::create(tb, loc, partial,
                                                    ValueRange{chunk, t}));
                  scf::YieldOp::create(tb, loc);
                });
          }
          scf::YieldOp::create(cb, loc);
        });
  for (Value partial : partials)
    if (partial)
      memref::DeallocOp::create(b, loc, partial);
}

// -- coupled kernels ---------------------------------------------------------

void ScanEmitter::emitCoupled(const ScanCoupling &given, bool parallel) {
  coupling = given;
  for (Value buffer : scan.getReductions())
    zeroFill(b, loc, buffer);
  sampleSize = memref::DimOp::create(b, loc, coupling->weights, 0);
  // Whole samples only: the callers pass N = B * H.
  numChunks = arith::DivUIOp::create(b, loc, neuronDims.front(), sampleSize);
  allocatePartials();
  emitChunkLoop(b, loc, numChunks, parallel, numThreads,
                [&](OpBuilder &cb, Location loc, Value chunk) {
                  emitCoupledChunk(cb, loc, chunk);
                });
  addPartials();
  scan.erase();
}

/// One sample: its neurons' carries (states, sums over time) in a buffer,
/// the previous step's coupled outputs and this step's drive in two more;
/// each step computes the drive of every neuron, then steps each.
void ScanEmitter::emitCoupledChunk(OpBuilder &cb, Location loc, Value chunk) {
  Chunk c{cb, loc, chunk, chunkStart(cb, loc, chunk)};
  Value first = c.start.back();
  SmallVector<Value> chunkSums = startChunkSums(cb, loc, chunk);
  OpBuilder::InsertionGuard guard(cb);
  auto scope =
      memref::AllocaScopeOp::create(cb, loc, ValueRange(chunkSums).getTypes());
  cb.createBlock(&scope.getBodyRegion());
  int64_t numCarries = plan.numStates + plan.carriedReductions.size();
  Value numCarriesValue =
      arith::ConstantIndexOp::create(cb, loc, std::max<int64_t>(numCarries, 1));
  auto dynamic2D = MemRefType::get({ShapedType::kDynamic, ShapedType::kDynamic},
                                   cb.getF32Type());
  auto dynamic1D = MemRefType::get({ShapedType::kDynamic}, cb.getF32Type());
  Value carries = memref::AllocaOp::create(
      cb, loc, dynamic2D, ValueRange{numCarriesValue, sampleSize});
  Value prev =
      memref::AllocaOp::create(cb, loc, dynamic1D, ValueRange{sampleSize});
  Value drive =
      memref::AllocaOp::create(cb, loc, dynamic1D, ValueRange{sampleSize});
  auto neurons = [&](OpBuilder &nb, ValueRange iterArgs,
                     function_ref<SmallVector<Value>(OpBuilder &, Location,
                                                     Value, ValueRange)>
                         body) {
    return scf::ForOp::create(
        nb, loc, zeroIndex, sampleSize, oneIndex, iterArgs,
        [&](OpBuilder &jb, Location loc, Value j, ValueRange args) {
          scf::YieldOp::create(jb, loc, body(jb, loc, j, args));
        });
  };
  // Before the first step: the initial states, no sums, no coupled output.
  neurons(cb, {}, [&](OpBuilder &jb, Location loc, Value j, ValueRange) {
    NeuronAccess a{jb, loc,
                   pointAt(c, arith::AddIOp::create(jb, loc, first, j)), 0};
    SmallVector<Value> initial = initialStates(a);
    initial.append(plan.carriedReductions.size(), f32Constant(jb, loc, 0.0));
    for (auto [k, value] : llvm::enumerate(initial))
      memref::StoreOp::create(
          jb, loc, value, carries,
          ValueRange{arith::ConstantIndexOp::create(jb, loc, k), j});
    memref::StoreOp::create(jb, loc, f32Constant(jb, loc, 0.0), prev, j);
    return SmallVector<Value>();
  });
  scf::ForOp::create(
      cb, loc, zeroIndex, numSteps, oneIndex, ValueRange(),
      [&](OpBuilder &tb, Location loc, Value iteration, ValueRange) {
        Value step = iteration;
        if (scan.getReverse())
          step = arith::SubIOp::create(
              tb, loc, arith::SubIOp::create(tb, loc, numSteps, oneIndex),
              iteration);
        OpBuilder::InsertionGuard inner(cb);
        cb.setInsertionPoint(tb.getInsertionBlock(), tb.getInsertionPoint());
        coupledStep(c, step, carries, prev, drive);
        scf::YieldOp::create(tb, loc);
      });
  auto finish = neurons(
      cb, chunkSums,
      [&](OpBuilder &jb, Location loc, Value j, ValueRange sums) {
        NeuronAccess a{jb, loc,
                       pointAt(c, arith::AddIOp::create(jb, loc, first, j)), 0};
        SmallVector<Value> finals;
        for (int64_t k = 0; k < numCarries; ++k)
          finals.push_back(memref::LoadOp::create(
              jb, loc, carries,
              ValueRange{arith::ConstantIndexOp::create(jb, loc, k), j}));
        storeFinalStates(a, finals);
        return addCarried(c, jb, loc, 0, a.point,
                          ArrayRef<Value>(finals).drop_front(plan.numStates),
                          sums);
      });
  memref::AllocaScopeReturnOp::create(cb, loc, finish.getResults());
  cb.setInsertionPointAfter(scope);
  auto sum = scope.getResults().begin();
  for (unsigned r : plan.carriedReductions)
    if (plan.kinds[r] == SumKind::PerChunk)
      memref::StoreOp::create(cb, loc, *sum++, partials[r], ValueRange{chunk});
}

/// One step of a sample at c.cb's insertion point: drive[j] = sum over k of
/// prev[k] * W[k, j] (the rows of outputs that are zero, as most spikes
/// are, skipped), then every neuron's step with the drive added to the
/// coupled input and the coupled output kept in prev.
void ScanEmitter::coupledStep(const Chunk &c, Value step, Value carries,
                              Value prev, Value drive) {
  OpBuilder &cb = c.cb;
  Location loc = c.loc;
  Value zero = f32Constant(cb, loc, 0.0);
  Value weights = coupling->weights;
  scf::ForOp::create(cb, loc, zeroIndex, sampleSize, oneIndex, ValueRange(),
                     [&](OpBuilder &jb, Location loc, Value j, ValueRange) {
                       memref::StoreOp::create(jb, loc, zero, drive, j);
                       scf::YieldOp::create(jb, loc);
                     });
  scf::ForOp::create(
      cb, loc, zeroIndex, sampleSize, oneIndex, ValueRange(),
      [&](OpBuilder &kb, Location loc, Value k, ValueRange) {
        Value p = memref::LoadOp::create(kb, loc, prev, k);
        Value nonzero =
            arith::CmpFOp::create(kb, loc, arith::CmpFPredicate::UNE, p, zero);
        scf::IfOp::create(kb, loc, nonzero, [&](OpBuilder &ib, Location loc) {
          scf::ForOp::create(
              ib, loc, zeroIndex, sampleSize, oneIndex, ValueRange(),
              [&](OpBuilder &jb, Location loc, Value j, ValueRange) {
                Value w =
                    memref::LoadOp::create(jb, loc, weights, ValueRange{k, j});
                Value d = memref::LoadOp::create(jb, loc, drive, j);
                Value next = math::FmaOp::create(jb, loc, p, w, d);
                memref::StoreOp::create(jb, loc, next, drive, j);
                scf::YieldOp::create(jb, loc);
              });
          scf::YieldOp::create(ib, loc);
        });
        scf::YieldOp::create(kb, loc);
      });
  int64_t numCarries = plan.numStates + plan.carriedReductions.size();
  scf::ForOp::create(
      cb, loc, zeroIndex, sampleSize, oneIndex, ValueRange(),
      [&](OpBuilder &jb, Location loc, Value j, ValueRange) {
        Value n = arith::AddIOp::create(jb, loc, c.start.back(), j);
        NeuronAccess a{jb, loc, pointAt(c, n), 0};
        SmallVector<Value> params = paramsAt(a);
        SmallVector<Value> current;
        for (int64_t k = 0; k < numCarries; ++k)
          current.push_back(memref::LoadOp::create(
              jb, loc, carries,
              ValueRange{arith::ConstantIndexOp::create(jb, loc, k), j}));
        Value driveHere = memref::LoadOp::create(jb, loc, drive, j);
        auto addAtStep = addAtStepOf(c, a.point, 0);
        auto at = [&](Value t) {
          SmallVector<Value> index(a.point);
          index[0] = t;
          return index;
        };
        auto loadInput = [&](unsigned k, Value t) {
          Value value = load(a, inputPresent[k], scan.getInputs()[k],
                             plan.inputMaps[k], at(t));
          if (k == coupling->input)
            value = arith::AddFOp::create(jb, loc, value, driveHere);
          return SmallVector<Value>{value};
        };
        auto storeOutput = [&](unsigned k, Value t, ValueRange lanes) {
          store(a, outputPresent[k], lanes.front(), scan.getOutputs()[k],
                plan.outputMaps[k], at(t));
          if (k == coupling->output)
            memref::StoreOp::create(jb, loc, lanes.front(), prev, j);
        };
        auto storeState = [&](unsigned s, Value t, ValueRange lanes) {
          store(a, statePresent[s], lanes.front(), scan.getStates()[s],
                plan.stateMaps[s], at(t));
        };
        auto addStep = [&](unsigned r, Value t, ValueRange lanes) {
          addAtStep(jb, loc, r, t, lanes.front());
        };
        ScanGroupAccess access{1,          loadInput, storeOutput,
                               storeState, addStep,   0};
        SmallVector<Value> next =
            emitStep(jb, loc, scan, plan.neuron, step, current, {params},
                     plan.carriedReductions, access);
        for (auto [k, value] : llvm::enumerate(next))
          memref::StoreOp::create(
              jb, loc, value, carries,
              ValueRange{arith::ConstantIndexOp::create(jb, loc, k), j});
        scf::YieldOp::create(jb, loc);
      });
}

} // namespace

void mlir::flexsn::lowerScan(ScanOp scan, bool parallel, unsigned vectorWidth,
                             Value numThreads) {
  ScanPlan plan(scan, vectorWidth);
  ScanEmitter(plan, numThreads).emit(parallel);
}

void mlir::flexsn::lowerCoupledScan(ScanOp scan, const ScanCoupling &coupling,
                                    bool parallel, Value numThreads) {
  ScanPlan plan(scan, /*requestedWidth=*/0);
  ScanEmitter(plan, numThreads).emitCoupled(coupling, parallel);
}
