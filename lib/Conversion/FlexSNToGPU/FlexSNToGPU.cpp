//===- FlexSNToGPU.cpp - Kernel functions to GPU kernels ------------------===//
//
// Part of the FlexSN project: an MLIR compiler for spiking-neuron dynamics.
//
//===----------------------------------------------------------------------===//

#include "flexsn/Conversion/Passes.h"
#include "flexsn/Dialect/FlexSN/IR/FlexSNOps.h"
#include "flexsn/Dialect/FlexSN/Transforms/KernelInterface.h"
#include "flexsn/Dialect/FlexSN/Transforms/StepBuilder.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/SymbolTable.h"

namespace mlir::flexsn {
#define GEN_PASS_DEF_CONVERTFLEXSNTOGPU
#include "flexsn/Conversion/Passes.h.inc"
} // namespace mlir::flexsn

using namespace mlir;
using namespace mlir::flexsn;

namespace {

constexpr unsigned kAccessBytes = 16;
constexpr unsigned kBlockSize = 256;
constexpr unsigned kWarpSize = 32;
constexpr unsigned kWarpsPerBlock = kBlockSize / kWarpSize;

/// A kernel function (its interface and scan, checked in KernelInterface)
/// and how the GPU kernel walks it. The GPU kernel takes the function's
/// buffers in the function's order; the emitter indexes them by scan
/// operand.
struct KernelPlan {
  // Op handles are cheap values; their accessors are not const.
  mutable KernelFunction kernel;
  SmallVector<Type> elementTypes; // by buffer operand of the scan
  Block *body;                    // the step body (neuron's or scan's)
  unsigned numStates;             // carried states
  unsigned width;                 // neurons per thread in the vector kernel
  /// The reductions summed across neurons: scalar ones, and per-channel
  /// ones (summed over the neurons of each channel). The others keep the
  /// neuron dimensions, so each thread stores its own neurons' sums.
  SmallVector<unsigned> scalarReductions, channelReductions;
  /// Whether the kernel sees its neurons as [B, C, S]: it then takes C and
  /// S after ld, and neuron n is in channel (n / S) mod C.
  bool channels = false;
  /// Whether an output holds bit-packed spikes (i1): the vector kernel then
  /// gives each thread whole bytes (a multiple of 8 neurons).
  bool packsBits = false;

  func::FuncOp func() const { return kernel.func; }
  ScanOp scan() const { return kernel.scan; }
  NeuronOp neuron() const { return kernel.neuron; }
  KernelInterfaceAttr interface() const { return kernel.interface; }

  unsigned numInputs() const { return kernel.scan.getInputs().size(); }
  unsigned numInits() const { return kernel.scan.getInits().size(); }
  unsigned numOutputs() const { return kernel.scan.getOutputs().size(); }
  unsigned numStateResults() const { return kernel.scan.getStates().size(); }
  unsigned numReductions() const { return kernel.scan.getReductions().size(); }
  unsigned numBuffers() const { return kernel.interface.getBuffers().size(); }
  /// The params passed as buffers (per neuron).
  unsigned numParamBuffers() const {
    return llvm::count_if(kernel.scan.getParams(), [](Value v) {
      return isa<MemRefType>(v.getType());
    });
  }
};

/// Emits one thread's work over a contiguous group of neurons.
class KernelEmitter {
public:
  /// A kernel with a reduction scratch takes one more pointer after the
  /// buffers.
  KernelEmitter(OpBuilder &b, Location loc, const KernelPlan &plan,
                gpu::GPUFuncOp kernel, bool hasScratch, unsigned width)
      : b(b), loc(loc), plan(plan), kernelWidth(width) {
    unsigned numBuffers = plan.numBuffers();
    ValueRange args = kernel.getArguments();
    for (unsigned index : plan.kernel.operandBuffers)
      buffers.push_back(args[index]);
    if (hasScratch)
      scratch = args[numBuffers++];
    numSteps = args[numBuffers];
    numNeurons = args[numBuffers + 1];
    timeStride = args[numBuffers + 2];
    unsigned firstParam = numBuffers + 3;
    if (plan.channels) {
      numChannels = args[firstParam++];
      channelSize = args[firstParam++];
    }
    params.assign(args.begin() + firstParam, args.end());
    ptrType = LLVM::LLVMPointerType::get(b.getContext());
    f32 = b.getF32Type();
    for (int64_t i :
         plan.scan().getOptionalInputs().value_or(ArrayRef<int64_t>()))
      optionalInputs.insert(i);
  }

  Value constant(int64_t value) {
    return arith::ConstantOp::create(b, loc, b.getI64IntegerAttr(value));
  }
  Value zeroF32() {
    return arith::ConstantOp::create(b, loc, b.getF32FloatAttr(0.0));
  }
  /// A thread's partial sums of the scalar reductions, all zero.
  SmallVector<Value> zeroPartials() {
    return SmallVector<Value>(plan.scalarReductions.size(), zeroF32());
  }
  /// A thread's (channel, sum) pair of each per-channel reduction when it
  /// has nothing left to add: channel -1.
  SmallVector<Value> noChannelPartials() {
    SmallVector<Value> pairs;
    for (unsigned r = 0; r < plan.channelReductions.size(); ++r)
      pairs.append({constant(-1), zeroF32()});
    return pairs;
  }
  Value getNumNeurons() const { return numNeurons; }

  /// The linear thread index as i64.
  Value threadIndex() {
    Value block = gpu::BlockIdOp::create(b, loc, gpu::Dimension::x);
    Value blockDim = gpu::BlockDimOp::create(b, loc, gpu::Dimension::x);
    Value thread = gpu::ThreadIdOp::create(b, loc, gpu::Dimension::x);
    Value linear = arith::AddIOp::create(
        b, loc, arith::MulIOp::create(b, loc, block, blockDim), thread);
    return arith::IndexCastUIOp::create(b, loc, b.getI64Type(), linear);
  }

  /// Runs neurons [first, first + width) through every step, stores their
  /// sums of the reductions that keep the neuron dimensions, and returns
  /// the thread's partial sums of the scalar reductions. With
  /// `deferChannels`, a (channel, sum) pair per per-channel reduction
  /// follows them: the sum of its neurons when they share one channel (the
  /// warp combines these), else channel -1 once it added each neuron's sum
  /// itself; without, it adds them itself.
  SmallVector<Value> emitNeurons(Value first, unsigned width,
                                 bool deferChannels) {
    unsigned numInputs = plan.numInputs(), numStates = plan.numStates;
    unsigned initBase = numInputs, paramBase = initBase + plan.numInits();
    unsigned outputBase = paramBase + plan.numParamBuffers();
    unsigned stateBase = outputBase + plan.numOutputs();
    unsigned reductionBase = stateBase + plan.numStateResults();

    // Each lane's params: scalars are kernel arguments, per-neuron ones are
    // read once (they do not change over time), per-channel ones at each
    // lane's channel.
    SmallVector<Value> channels;
    if (plan.channels)
      channels = laneChannels(first, width);
    SmallVector<SmallVector<Value>> laneParams(width);
    unsigned scalar = 0, buffer = paramBase;
    for (Value param : plan.scan().getParams()) {
      SmallVector<Value> lanes;
      if (!isa<MemRefType>(param.getType())) {
        lanes.assign(width, params[scalar++]);
      } else if (isPerChannel(buffer)) {
        for (Value channel : channels)
          lanes.push_back(load(buffer, channel, 1).front());
        ++buffer;
      } else {
        lanes = load(buffer++, first, width);
      }
      for (unsigned lane = 0; lane < width; ++lane)
        laneParams[lane].push_back(lanes[lane]);
    }

    SmallVector<Value> initialStates; // [state][lane]
    for (unsigned s = 0; s < numStates; ++s) {
      SmallVector<Value> lanes = plan.numInits()
                                     ? loadIfPresent(initBase + s, first, width)
                                     : SmallVector<Value>(width, zeroF32());
      initialStates.append(lanes);
    }

    // The buffers at step t: the lanes' elements t * ld + first...
    auto at = [&](Value step) {
      return arith::AddIOp::create(
          b, loc, arith::MulIOp::create(b, loc, step, timeStride), first);
    };
    auto loadInput = [&](unsigned k, Value step) {
      return optionalInputs.contains(k) ? loadIfPresent(k, at(step), width)
                                        : load(k, at(step), width);
    };
    auto storeOutput = [&](unsigned k, Value step, ValueRange lanes) {
      if (isBits(outputBase + k))
        storeBitsIfPresent(outputBase + k, step, first, lanes);
      else
        storeIfPresent(outputBase + k, at(step), lanes);
    };
    auto storeState = [&](unsigned s, Value step, ValueRange lanes) {
      storeIfPresent(stateBase + s, at(step), lanes);
    };
    auto addAtStep = [](unsigned, Value, ValueRange) {
      llvm_unreachable("a GPU kernel's reductions are summed over time");
    };
    ScanGroupAccess access{width, loadInput, storeOutput, storeState,
                           addAtStep};
    ValueRange finals = emitTimeLoop(
        b, loc, plan.scan(), plan.neuron(), numSteps, initialStates, laneParams,
        llvm::to_vector(llvm::seq(plan.numReductions())), access);
    for (unsigned s = 0; s < plan.numStateResults(); ++s)
      if (plan.scan().isFinalState(s))
        storeIfPresent(stateBase + s, first, finals.slice(s * width, width));
    auto sums = [&](unsigned r) {
      return finals.slice((numStates + r) * width, width);
    };
    for (unsigned r = 0; r < plan.numReductions(); ++r)
      if (!llvm::is_contained(plan.scalarReductions, r) &&
          !llvm::is_contained(plan.channelReductions, r))
        store(reductionBase + r, first, sums(r));
    auto total = [&](ValueRange lanes) {
      Value sum = lanes.front();
      for (Value lane : lanes.drop_front())
        sum = arith::AddFOp::create(b, loc, sum, lane);
      return sum;
    };
    SmallVector<Value> partials;
    for (unsigned r : plan.scalarReductions)
      partials.push_back(total(sums(r)));
    for (auto [k, r] : llvm::enumerate(plan.channelReductions)) {
      if (!deferChannels) {
        for (auto [channel, sum] : llvm::zip_equal(channels, sums(r)))
          addToChannelSlot(k, channel, sum);
        continue;
      }
      // The lanes share a channel unless the group crosses a boundary.
      Value shared = arith::ConstantOp::create(b, loc, b.getBoolAttr(true));
      for (Value channel : ArrayRef(channels).drop_front())
        shared = arith::AndIOp::create(
            b, loc, shared,
            arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, channel,
                                  channels.front()));
      auto branch = scf::IfOp::create(
          b, loc, shared,
          [&](OpBuilder &nested, Location) {
            OpBuilder::InsertionGuard guard(b);
            b.setInsertionPointToStart(nested.getInsertionBlock());
            scf::YieldOp::create(b, loc,
                                 ValueRange{channels.front(), total(sums(r))});
          },
          [&](OpBuilder &nested, Location) {
            OpBuilder::InsertionGuard guard(b);
            b.setInsertionPointToStart(nested.getInsertionBlock());
            for (auto [channel, sum] : llvm::zip_equal(channels, sums(r)))
              addToChannelSlot(k, channel, sum);
            scf::YieldOp::create(b, loc, ValueRange{constant(-1), zeroF32()});
          });
      llvm::append_range(partials, branch.getResults());
    }
    return partials;
  }

  /// Zeroes the block's per-channel slots (see addToChannelSlot) and
  /// computes the block's first channel; every thread, before any adds.
  void beginChannelSlots(Value slots, unsigned width) {
    if (plan.channelReductions.empty())
      return;
    channelSlots = slots;
    slotsPerReduction = kBlockSize * width + 2;
    Value blockStart = arith::MulIOp::create(
        b, loc,
        arith::IndexCastUIOp::create(
            b, loc, b.getI64Type(),
            gpu::BlockIdOp::create(b, loc, gpu::Dimension::x)),
        constant(kBlockSize * width));
    blockChannel = arith::RemUIOp::create(
        b, loc, arith::DivUIOp::create(b, loc, blockStart, channelSize),
        numChannels);
    forEachSlot([&](Value slot) {
      memref::StoreOp::create(b, loc, zeroF32(), channelSlots,
                              ValueRange{slot});
    });
    gpu::BarrierOp::create(b, loc);
  }

  /// Adds `sum` into the block's slot of `channel` for per-channel
  /// reduction k (workgroup memory). A block's neurons are contiguous, so
  /// its channels are blockChannel, blockChannel + 1, ... (mod C): channel
  /// c has slot (c - blockChannel) mod C, which is below the block's
  /// number of channel runs, at most kBlockSize * width + 1.
  void addToChannelSlot(unsigned k, Value channel, Value sum) {
    Value diff = arith::SubIOp::create(b, loc, channel, blockChannel);
    Value negative = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::slt,
                                           diff, constant(0));
    Value slot = arith::SelectOp::create(
        b, loc, negative, arith::AddIOp::create(b, loc, diff, numChannels),
        diff);
    Value index = arith::IndexCastUIOp::create(
        b, loc, b.getIndexType(),
        arith::AddIOp::create(b, loc, slot, constant(k * slotsPerReduction)));
    memref::AtomicRMWOp::create(b, loc, arith::AtomicRMWKind::addf, sum,
                                channelSlots, ValueRange{index});
  }

  /// Calls `body` with each slot index (index type) of every per-channel
  /// reduction, strided over the block's threads.
  void forEachSlot(llvm::function_ref<void(Value)> body) {
    Value total = arith::ConstantIndexOp::create(
        b, loc, plan.channelReductions.size() * slotsPerReduction);
    scf::ForOp::create(
        b, loc, threadId(), total,
        arith::ConstantIndexOp::create(b, loc, kBlockSize), ValueRange{},
        [&](OpBuilder &nested, Location, Value slot, ValueRange) {
          OpBuilder::InsertionGuard guard(b);
          b.setInsertionPointToStart(nested.getInsertionBlock());
          body(slot);
          scf::YieldOp::create(b, loc);
        });
  }

  /// Adds each thread's (channel, sum) pairs into the block's slots (a
  /// warp whose threads all hold one channel, or none, adds its sum once;
  /// otherwise each thread adds its own), then adds every nonzero slot to
  /// its channel's gradient: one global atomic per channel the block
  /// touches, not one per warp or thread.
  void emitChannelReductions(ValueRange pairs) {
    if (pairs.empty())
      return;
    unsigned reductionBase = plan.numBuffers() - plan.numReductions();
    Value lane = arith::RemUIOp::create(
        b, loc, threadId(), arith::ConstantIndexOp::create(b, loc, kWarpSize));
    Value i32Zero = arith::ConstantOp::create(b, loc, b.getI32IntegerAttr(0));
    Value warpWidth =
        arith::ConstantOp::create(b, loc, b.getI32IntegerAttr(kWarpSize));
    for (unsigned k = 0; k < plan.channelReductions.size(); ++k) {
      Value channel = pairs[2 * k], sum = pairs[2 * k + 1];
      Value none = constant(-1);
      // Channels fit in i32 (the runtime checks C), as shuffles want.
      Value narrow = arith::TruncIOp::create(b, loc, b.getI32Type(), channel);
      Value leaderChannel = arith::ExtSIOp::create(
          b, loc, b.getI64Type(),
          gpu::ShuffleOp::create(b, loc, narrow, i32Zero, warpWidth,
                                 gpu::ShuffleMode::IDX)
              .getShuffleResult());
      Value differs = arith::AndIOp::create(
          b, loc,
          arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ne, channel,
                                none),
          arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ne, channel,
                                leaderChannel));
      Value mismatches = warpSum(arith::UIToFPOp::create(b, loc, f32, differs));
      Value shared = arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OEQ,
                                           mismatches, zeroF32());
      // Warp-uniform: every lane computes the same count.
      scf::IfOp::create(
          b, loc, shared,
          [&](OpBuilder &nested, Location) {
            OpBuilder::InsertionGuard guard(b);
            b.setInsertionPointToStart(nested.getInsertionBlock());
            Value warpTotal = warpSum(sum);
            Value leads = arith::AndIOp::create(
                b, loc, isZero(lane),
                arith::CmpIOp::create(b, loc, arith::CmpIPredicate::sge,
                                      leaderChannel, constant(0)));
            emitIf(leads,
                   [&] { addToChannelSlot(k, leaderChannel, warpTotal); });
            scf::YieldOp::create(b, loc);
          },
          [&](OpBuilder &nested, Location) {
            OpBuilder::InsertionGuard guard(b);
            b.setInsertionPointToStart(nested.getInsertionBlock());
            Value has = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::sge,
                                              channel, constant(0));
            emitIf(has, [&] { addToChannelSlot(k, channel, sum); });
            scf::YieldOp::create(b, loc);
          });
    }
    gpu::BarrierOp::create(b, loc);
    Value slotCount = arith::ConstantIndexOp::create(b, loc, slotsPerReduction);
    forEachSlot([&](Value slot) {
      Value value =
          memref::LoadOp::create(b, loc, channelSlots, ValueRange{slot});
      // Unordered: a NaN sum is added too.
      Value nonzero = arith::CmpFOp::create(b, loc, arith::CmpFPredicate::UNE,
                                            value, zeroF32());
      emitIf(nonzero, [&] {
        Value k = arith::DivUIOp::create(b, loc, slot, slotCount);
        Value offset = arith::IndexCastUIOp::create(
            b, loc, b.getI64Type(),
            arith::RemUIOp::create(b, loc, slot, slotCount));
        Value channel = arith::RemUIOp::create(
            b, loc, arith::AddIOp::create(b, loc, blockChannel, offset),
            numChannels);
        // The reduction's buffer, chosen by k (few reductions: a chain of
        // selects).
        Value target = buffers[reductionBase + plan.channelReductions[0]];
        for (unsigned j = 1; j < plan.channelReductions.size(); ++j)
          target = arith::SelectOp::create(
              b, loc,
              arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, k,
                                    arith::ConstantIndexOp::create(b, loc, j)),
              buffers[reductionBase + plan.channelReductions[j]], target);
        atomicAdd(target, channel, value);
      });
    });
  }

  /// Adds every thread's partial sums into the reduction buffers: each
  /// block adds its threads' sums (a warp shuffle tree, then its warps in
  /// workgroup memory), then one atomic add per block.
  void emitAtomicReductions(ValueRange partials, Value warpSums) {
    storeWarpSums(partials, warpSums);
    emitIf(isZero(threadId()), [&] {
      for (unsigned r = 0; r < partials.size(); ++r)
        LLVM::AtomicRMWOp::create(b, loc, LLVM::AtomicBinOp::fadd,
                                  reductionBuffer(r), blockSum(r, warpSums),
                                  LLVM::AtomicOrdering::monotonic);
    });
  }

  /// Adds every thread's partial sums into the reduction buffers in an order
  /// that depends only on the launch shape, so reruns give the same bits.
  /// Each block adds its threads' sums (as above) into its own slot of the
  /// scratch: [ticket counter (i32, zeroed by the runtime)][reduction]
  /// [block]. The block that draws the last ticket adds the slots of every
  /// block, strided over its threads in a fixed order, and stores the totals.
  /// `lastFlag` is one workgroup i32.
  void emitDeterministicReductions(ValueRange partials, Value warpSums,
                                   Value lastFlag) {
    Value zero = arith::ConstantIndexOp::create(b, loc, 0);
    Value firstThread = isZero(threadId());
    Value i32One = arith::ConstantOp::create(b, loc, b.getI32IntegerAttr(1));
    Value numBlocks = arith::IndexCastUIOp::create(
        b, loc, b.getI64Type(),
        gpu::GridDimOp::create(b, loc, gpu::Dimension::x));
    Value block = arith::IndexCastUIOp::create(
        b, loc, b.getI64Type(),
        gpu::BlockIdOp::create(b, loc, gpu::Dimension::x));
    // Slot (r, block) of the scratch, after the 4-byte counter.
    auto slot = [&](unsigned r, Value blockIndex) {
      Value offset = arith::AddIOp::create(
          b, loc,
          arith::AddIOp::create(
              b, loc, constant(1),
              arith::MulIOp::create(b, loc, constant(r), numBlocks)),
          blockIndex);
      return LLVM::GEPOp::create(b, loc, ptrType, f32, scratch,
                                 ValueRange{offset});
    };

    storeWarpSums(partials, warpSums);
    emitIf(firstThread, [&] {
      for (unsigned r = 0; r < partials.size(); ++r)
        LLVM::StoreOp::create(b, loc, blockSum(r, warpSums), slot(r, block), 4);
      // Publish the slots before drawing a ticket (__threadfence()).
      NVVM::MembarOp::create(b, loc, NVVM::MemScopeKind::GPU);
      Value ticket =
          LLVM::AtomicRMWOp::create(b, loc, LLVM::AtomicBinOp::add, scratch,
                                    i32One, LLVM::AtomicOrdering::monotonic);
      Value lastTicket = arith::TruncIOp::create(
          b, loc, b.getI32Type(),
          arith::SubIOp::create(b, loc, numBlocks, constant(1)));
      Value last = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq,
                                         ticket, lastTicket);
      memref::StoreOp::create(
          b, loc, arith::ExtUIOp::create(b, loc, b.getI32Type(), last),
          lastFlag, ValueRange{zero});
    });
    gpu::BarrierOp::create(b, loc);
    Value isLast = arith::CmpIOp::create(
        b, loc, arith::CmpIPredicate::ne,
        memref::LoadOp::create(b, loc, lastFlag, ValueRange{zero}),
        arith::ConstantOp::create(b, loc, b.getI32IntegerAttr(0)));
    // Block-uniform: the whole last block enters, so its barriers are safe.
    emitIf(isLast, [&] {
      NVVM::MembarOp::create(b, loc, NVVM::MemScopeKind::GPU);
      Value first =
          arith::IndexCastUIOp::create(b, loc, b.getI64Type(), threadId());
      SmallVector<Value> sums;
      for (unsigned r = 0; r < partials.size(); ++r) {
        // Volatile: the slots were written by other blocks, past this SM's
        // L1.
        auto loop = scf::ForOp::create(
            b, loc, first, numBlocks, constant(kBlockSize),
            ValueRange{zeroF32()},
            [&](OpBuilder &nested, Location, Value i, ValueRange acc) {
              OpBuilder::InsertionGuard guard(b);
              b.setInsertionPointToStart(nested.getInsertionBlock());
              Value value = LLVM::LoadOp::create(b, loc, f32, slot(r, i), 4,
                                                 /*isVolatile=*/true);
              scf::YieldOp::create(
                  b, loc,
                  ValueRange{arith::AddFOp::create(b, loc, acc[0], value)});
            });
        sums.push_back(loop.getResult(0));
      }
      storeWarpSums(sums, warpSums);
      emitIf(firstThread, [&] {
        for (unsigned r = 0; r < partials.size(); ++r)
          LLVM::StoreOp::create(b, loc, blockSum(r, warpSums),
                                reductionBuffer(r), 4);
      });
    });
  }

private:
  Type elementType(unsigned buffer) const { return plan.elementTypes[buffer]; }
  bool isBits(unsigned buffer) const {
    return elementType(buffer).isInteger(1);
  }

  bool isPerChannel(unsigned buffer) const {
    return plan.interface()
               .getBuffers()[plan.kernel.operandBuffers[buffer]]
               .getShape() == BufferShape::PerChannel;
  }

  /// The channels (i64) of neurons [first, first + width): (n / S) mod C,
  /// divided once and then stepped.
  SmallVector<Value> laneChannels(Value first, unsigned width) {
    Value offset = arith::RemUIOp::create(b, loc, first, channelSize);
    Value channel = arith::RemUIOp::create(
        b, loc, arith::DivUIOp::create(b, loc, first, channelSize),
        numChannels);
    SmallVector<Value> channels{channel};
    Value one = constant(1), zero = constant(0);
    for (unsigned lane = 1; lane < width; ++lane) {
      offset = arith::AddIOp::create(b, loc, offset, one);
      Value wraps = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq,
                                          offset, channelSize);
      offset = arith::SelectOp::create(b, loc, wraps, zero, offset);
      Value next = arith::AddIOp::create(b, loc, channel, one);
      next = arith::SelectOp::create(
          b, loc,
          arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, next,
                                numChannels),
          zero, next);
      channel = arith::SelectOp::create(b, loc, wraps, next, channel);
      channels.push_back(channel);
    }
    return channels;
  }

  /// Atomically adds the f32 `value` to `buffer[index]`.
  void atomicAdd(Value buffer, Value index, Value value) {
    Value ptr =
        LLVM::GEPOp::create(b, loc, ptrType, f32, buffer, ValueRange{index});
    LLVM::AtomicRMWOp::create(b, loc, LLVM::AtomicBinOp::fadd, ptr, value,
                              LLVM::AtomicOrdering::monotonic);
  }

  /// The buffer of the r-th scalar reduction.
  Value reductionBuffer(unsigned r) const {
    return buffers[plan.numBuffers() - plan.numReductions() +
                   plan.scalarReductions[r]];
  }

  Value threadId() {
    return gpu::ThreadIdOp::create(b, loc, gpu::Dimension::x);
  }

  /// Stores each warp's sums (reduction r of warp w at r * kWarpsPerBlock +
  /// w) into `warpSums`, workgroup memory of numReductions * kWarpsPerBlock
  /// f32, then waits for the block.
  void storeWarpSums(ValueRange sums, Value warpSums) {
    Value thread = threadId();
    Value lane = arith::RemUIOp::create(
        b, loc, thread, arith::ConstantIndexOp::create(b, loc, kWarpSize));
    Value warp = arith::DivUIOp::create(
        b, loc, thread, arith::ConstantIndexOp::create(b, loc, kWarpSize));
    Value leader = isZero(lane);
    for (auto [r, partial] : llvm::enumerate(sums)) {
      Value sum = warpSum(partial);
      Value position = arith::AddIOp::create(
          b, loc, arith::ConstantIndexOp::create(b, loc, r * kWarpsPerBlock),
          warp);
      emitIf(leader, [&] {
        memref::StoreOp::create(b, loc, sum, warpSums, ValueRange{position});
      });
    }
    gpu::BarrierOp::create(b, loc);
  }

  /// The block's sum of reduction r: its warps' sums in order.
  Value blockSum(unsigned r, Value warpSums) {
    Value sum;
    for (unsigned w = 0; w < kWarpsPerBlock; ++w) {
      Value position =
          arith::ConstantIndexOp::create(b, loc, r * kWarpsPerBlock + w);
      Value value =
          memref::LoadOp::create(b, loc, warpSums, ValueRange{position});
      sum = sum ? arith::AddFOp::create(b, loc, sum, value).getResult() : value;
    }
    return sum;
  }

  Value isZero(Value indexValue) {
    return arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, indexValue,
                                 arith::ConstantIndexOp::create(b, loc, 0));
  }

  /// The sum of `value` over the warp, in every lane (an XOR butterfly: the
  /// same order in every run).
  Value warpSum(Value value) {
    Value warpWidth =
        arith::ConstantOp::create(b, loc, b.getI32IntegerAttr(kWarpSize));
    for (unsigned offset = kWarpSize / 2; offset > 0; offset /= 2) {
      Value delta =
          arith::ConstantOp::create(b, loc, b.getI32IntegerAttr(offset));
      auto shuffle = gpu::ShuffleOp::create(b, loc, value, delta, warpWidth,
                                            gpu::ShuffleMode::XOR);
      value = arith::AddFOp::create(b, loc, value, shuffle.getShuffleResult());
    }
    return value;
  }

  /// `scf.if` without results around what `body` emits.
  void emitIf(Value condition, llvm::function_ref<void()> body) {
    scf::IfOp::create(b, loc, condition, [&](OpBuilder &nested, Location) {
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPointToStart(nested.getInsertionBlock());
      body();
      scf::YieldOp::create(b, loc);
    });
  }
  unsigned elementBytes(unsigned buffer) const {
    return elementType(buffer).getIntOrFloatBitWidth() / 8;
  }

  Value address(unsigned buffer, Value index) {
    return LLVM::GEPOp::create(b, loc, ptrType, elementType(buffer),
                               buffers[buffer], ValueRange{index});
  }

  /// Loads `width` consecutive elements at `index` as f32 lanes; vectors
  /// are 16-byte aligned (the runtime checks) and split by LLVM as needed.
  SmallVector<Value> load(unsigned buffer, Value index, unsigned width) {
    Value ptr = address(buffer, index);
    SmallVector<Value> lanes;
    if (width == 1) {
      lanes.push_back(toF32(LLVM::LoadOp::create(b, loc, elementType(buffer),
                                                 ptr, elementBytes(buffer))));
      return lanes;
    }
    auto vectorType = VectorType::get({width}, elementType(buffer));
    Value vector = LLVM::LoadOp::create(b, loc, vectorType, ptr, kAccessBytes);
    for (unsigned lane = 0; lane < width; ++lane) {
      Value position =
          arith::ConstantOp::create(b, loc, b.getI32IntegerAttr(lane));
      lanes.push_back(
          toF32(LLVM::ExtractElementOp::create(b, loc, vector, position)));
    }
    return lanes;
  }

  SmallVector<Value> loadIfPresent(unsigned buffer, Value index,
                                   unsigned width) {
    SmallVector<Value> zeros(width, zeroF32());
    auto branch = scf::IfOp::create(
        b, loc, present(buffer),
        [&](OpBuilder &nested, Location) {
          OpBuilder::InsertionGuard guard(b);
          b.setInsertionPointToStart(nested.getInsertionBlock());
          scf::YieldOp::create(b, loc, load(buffer, index, width));
        },
        [&](OpBuilder &nested, Location) {
          OpBuilder::InsertionGuard guard(b);
          b.setInsertionPointToStart(nested.getInsertionBlock());
          scf::YieldOp::create(b, loc, zeros);
        });
    return SmallVector<Value>(branch.getResults());
  }

  /// Stores f32 `lanes` as consecutive elements at `index`: a vector when
  /// there are several, as aligned as the group (16 bytes for the floats
  /// that set the width; width bytes for byte outputs).
  void store(unsigned buffer, Value index, ValueRange lanes) {
    Value ptr = address(buffer, index);
    Type type = elementType(buffer);
    if (lanes.size() == 1) {
      LLVM::StoreOp::create(b, loc, fromF32(lanes.front(), type), ptr,
                            elementBytes(buffer));
      return;
    }
    auto vectorType = VectorType::get({int64_t(lanes.size())}, type);
    Value vector = LLVM::PoisonOp::create(b, loc, vectorType);
    for (auto [lane, value] : llvm::enumerate(lanes)) {
      Value position =
          arith::ConstantOp::create(b, loc, b.getI32IntegerAttr(lane));
      vector = LLVM::InsertElementOp::create(b, loc, vector,
                                             fromF32(value, type), position);
    }
    unsigned groupBytes = lanes.size() * elementBytes(buffer);
    LLVM::StoreOp::create(b, loc, vector, ptr,
                          std::min(groupBytes, kAccessBytes));
  }

  /// Stores the 0/1 spikes `lanes` of neurons [first, first + lanes) at
  /// `step` into the bit-packed `buffer`: bit n mod 8 of byte
  /// step * ceil(ld / 8) + n / 8. A byte is written by one thread, whole:
  ///  - a vector group (a multiple of 8 neurons, 8-aligned) packs its bytes;
  ///  - the scalar kernel's warps hold 32 consecutive neurons (32-aligned):
  ///    a ballot gathers their bits and lanes 0-3 store its 4 bytes;
  ///  - the vector kernel's last, partial group walks its neurons one at a
  ///    time from a byte boundary: the first writes the byte (clearing the
  ///    bits past N), the others add their bit to it.
  void storeBits(unsigned buffer, Value step, Value first, ValueRange lanes) {
    Type i8 = b.getI8Type(), i32 = b.getI32Type();
    Value rowBytes = arith::DivUIOp::create(
        b, loc, arith::AddIOp::create(b, loc, timeStride, constant(7)),
        constant(8));
    Value rowStart = arith::MulIOp::create(b, loc, step, rowBytes);
    auto byteAddress = [&](Value neuron) {
      Value index = arith::AddIOp::create(
          b, loc, rowStart,
          arith::DivUIOp::create(b, loc, neuron, constant(8)));
      return LLVM::GEPOp::create(b, loc, ptrType, i8, buffers[buffer],
                                 ValueRange{index});
    };
    auto bit = [&](Value spike, Type type) {
      return arith::ExtUIOp::create(
          b, loc, type,
          arith::CmpFOp::create(b, loc, arith::CmpFPredicate::UNE, spike,
                                zeroF32()));
    };
    auto shiftLeft = [&](Value value, Value amount) {
      return arith::ShLIOp::create(b, loc, value, amount);
    };
    if (lanes.size() > 1) {
      assert(lanes.size() % 8 == 0 && "vector groups hold whole bytes");
      SmallVector<Value> bytes;
      for (unsigned j = 0; j < lanes.size(); j += 8) {
        Value byte = bit(lanes[j], i8);
        for (unsigned l = 1; l < 8; ++l)
          byte = arith::OrIOp::create(
              b, loc, byte,
              shiftLeft(
                  bit(lanes[j + l], i8),
                  arith::ConstantOp::create(b, loc, b.getI8IntegerAttr(l))));
        bytes.push_back(byte);
      }
      Value ptr = byteAddress(first);
      if (bytes.size() == 1) {
        LLVM::StoreOp::create(b, loc, bytes.front(), ptr, 1);
        return;
      }
      auto vectorType = VectorType::get({int64_t(bytes.size())}, i8);
      Value vector = LLVM::PoisonOp::create(b, loc, vectorType);
      for (auto [j, byte] : llvm::enumerate(bytes))
        vector = LLVM::InsertElementOp::create(
            b, loc, vector, byte,
            arith::ConstantOp::create(b, loc, b.getI32IntegerAttr(j)));
      LLVM::StoreOp::create(b, loc, vector, ptr, bytes.size());
      return;
    }
    Value spike = lanes.front();
    if (kernelWidth == 1) {
      // The warp's neurons [warpFirst, warpFirst + 32): lanes past N do not
      // run the steps, so the ballot names only the others.
      Value lane = arith::RemUIOp::create(b, loc, first, constant(kWarpSize));
      Value warpFirst = arith::SubIOp::create(b, loc, first, lane);
      Value count = arith::MinUIOp::create(
          b, loc, arith::SubIOp::create(b, loc, numNeurons, warpFirst),
          constant(kWarpSize));
      Value one64 = constant(1);
      Value mask = arith::TruncIOp::create(
          b, loc, i32,
          arith::SubIOp::create(b, loc, shiftLeft(one64, count), one64));
      Value ballot = NVVM::VoteSyncOp::create(
          b, loc, i32, mask,
          arith::CmpFOp::create(b, loc, arith::CmpFPredicate::UNE, spike,
                                zeroF32()),
          NVVM::VoteSyncKind::ballot);
      Value byteFirst = arith::AddIOp::create(
          b, loc, warpFirst, arith::MulIOp::create(b, loc, lane, constant(8)));
      Value stores = arith::AndIOp::create(
          b, loc,
          arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult, lane,
                                constant(4)),
          arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult, byteFirst,
                                numNeurons));
      emitIf(stores, [&] {
        Value shift = arith::TruncIOp::create(
            b, loc, i32, arith::MulIOp::create(b, loc, lane, constant(8)));
        Value byte = arith::TruncIOp::create(
            b, loc, i8, arith::ShRUIOp::create(b, loc, ballot, shift));
        LLVM::StoreOp::create(b, loc, byte, byteAddress(byteFirst), 1);
      });
      return;
    }
    Value ptr = byteAddress(first);
    Value position = arith::TruncIOp::create(
        b, loc, i8, arith::RemUIOp::create(b, loc, first, constant(8)));
    Value value = shiftLeft(bit(spike, i8), position);
    Value starts = arith::CmpIOp::create(
        b, loc, arith::CmpIPredicate::eq, position,
        arith::ConstantOp::create(b, loc, b.getI8IntegerAttr(0)));
    scf::IfOp::create(
        b, loc, starts,
        [&](OpBuilder &nested, Location) {
          OpBuilder::InsertionGuard guard(b);
          b.setInsertionPointToStart(nested.getInsertionBlock());
          LLVM::StoreOp::create(b, loc, value, ptr, 1);
          scf::YieldOp::create(b, loc);
        },
        [&](OpBuilder &nested, Location) {
          OpBuilder::InsertionGuard guard(b);
          b.setInsertionPointToStart(nested.getInsertionBlock());
          Value old = LLVM::LoadOp::create(b, loc, i8, ptr, 1);
          LLVM::StoreOp::create(
              b, loc, arith::OrIOp::create(b, loc, old, value), ptr, 1);
          scf::YieldOp::create(b, loc);
        });
  }

  void storeBitsIfPresent(unsigned buffer, Value step, Value first,
                          ValueRange lanes) {
    emitIf(present(buffer), [&] { storeBits(buffer, step, first, lanes); });
  }

  void storeIfPresent(unsigned buffer, Value index, ValueRange lanes) {
    scf::IfOp::create(
        b, loc, present(buffer), [&](OpBuilder &nested, Location) {
          OpBuilder::InsertionGuard guard(b);
          b.setInsertionPointToStart(nested.getInsertionBlock());
          store(buffer, index, lanes);
          scf::YieldOp::create(b, loc);
        });
  }

  /// The presence flag of a buffer: computed where first needed.
  Value present(unsigned buffer) {
    Value null = LLVM::ZeroOp::create(b, loc, ptrType);
    return LLVM::ICmpOp::create(b, loc, LLVM::ICmpPredicate::ne,
                                buffers[buffer], null);
  }

  Value toF32(Value v) {
    return v.getType() == f32 ? v : arith::ExtFOp::create(b, loc, f32, v);
  }
  /// The f32 `v` in `type`; a byte output holds 0/1 spikes, converted
  /// as unsigned.
  Value fromF32(Value v, Type type) {
    if (type == f32)
      return v;
    if (isa<IntegerType>(type))
      return arith::FPToUIOp::create(b, loc, type, v);
    return arith::TruncFOp::create(b, loc, type, v);
  }

  OpBuilder &b;
  Location loc;
  const KernelPlan &plan;
  SmallVector<Value> buffers, params;
  Value scratch; // deterministic kernels only
  llvm::DenseSet<int64_t> optionalInputs;
  Value numSteps, numNeurons, timeStride;
  Value numChannels, channelSize; // kernels with channels only
  // Kernels with per-channel reductions only: the block's slots
  // (workgroup memory), their count per reduction, the block's first
  // channel.
  Value channelSlots, blockChannel;
  unsigned slotsPerReduction = 0;
  unsigned kernelWidth; // neurons per thread of the kernel (1: scalar)
  Type ptrType, f32;
};

/// Builds the entry point `name`: the vector kernel (width > 1) or the
/// scalar one (width == 1); with `deterministic`, one that sums the scalar
/// reductions in a fixed order through the reduction scratch, taken after
/// the buffers (the plan of a deterministic kernel has no per-channel
/// reductions: it stores them per neuron).
void buildKernel(OpBuilder &moduleBuilder, const KernelPlan &plan,
                 unsigned width, bool deterministic, StringRef name) {
  assert((!deterministic || plan.channelReductions.empty()) &&
         "per-channel sums are atomic");
  bool hasScratch = deterministic && !plan.scalarReductions.empty();
  Location loc = plan.func().getLoc();
  MLIRContext *ctx = moduleBuilder.getContext();
  auto ptrType = LLVM::LLVMPointerType::get(ctx);
  auto i64 = IntegerType::get(ctx, 64);
  SmallVector<Type> argTypes(plan.numBuffers() + hasScratch, ptrType);
  argTypes.append({i64, i64, i64});
  if (plan.channels)
    argTypes.append({i64, i64});
  for (Value param : plan.scan().getParams())
    if (!isa<MemRefType>(param.getType()))
      argTypes.push_back(param.getType());

  // Workgroup memory: the warps' sums of each reduction, and the
  // deterministic mode's last-block flag.
  SmallVector<Type> workgroup;
  auto space = gpu::AddressSpaceAttr::get(ctx, gpu::AddressSpace::Workgroup);
  if (!plan.scalarReductions.empty())
    workgroup.push_back(MemRefType::get(
        {int64_t(plan.scalarReductions.size() * kWarpsPerBlock)},
        Float32Type::get(ctx),
        MemRefLayoutAttrInterface(), space));
  if (hasScratch)
    workgroup.push_back(MemRefType::get({1}, IntegerType::get(ctx, 32),
                                        MemRefLayoutAttrInterface(), space));
  // The per-channel reductions' slots: one per channel a block can touch.
  if (!plan.channelReductions.empty())
    workgroup.push_back(MemRefType::get(
        {int64_t(plan.channelReductions.size() * (kBlockSize * width + 2))},
        Float32Type::get(ctx), MemRefLayoutAttrInterface(), space));

  auto kernel =
      gpu::GPUFuncOp::create(moduleBuilder, loc, name,
                             FunctionType::get(ctx, argTypes, {}), workgroup);
  kernel->setAttr(gpu::GPUDialect::getKernelFuncAttrName(), UnitAttr::get(ctx));
  // Every launch uses 256 threads per block (the runtime's choice).
  kernel.setKnownBlockSizeAttr(
      DenseI32ArrayAttr::get(ctx, {int32_t(kBlockSize), 1, 1}));

  OpBuilder b = OpBuilder::atBlockBegin(&kernel.getBody().front());
  KernelEmitter emitter(b, loc, plan, kernel, hasScratch, width);
  if (!plan.channelReductions.empty())
    emitter.beginChannelSlots(kernel.getWorkgroupAttributions().back(), width);
  Value first = arith::MulIOp::create(b, loc, emitter.threadIndex(),
                                      emitter.constant(width));
  Value numNeurons = emitter.getNumNeurons();
  Value active = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::slt, first,
                                       numNeurons);
  // Every thread (active or not) reaches the reductions' warp shuffles.
  auto activeBranch = scf::IfOp::create(
      b, loc, active,
      [&](OpBuilder &nested, Location) {
        OpBuilder::InsertionGuard guard(b);
        b.setInsertionPointToStart(nested.getInsertionBlock());
        if (width == 1) {
          scf::YieldOp::create(b, loc, emitter.emitNeurons(first, 1, true));
          return;
        }
        // A full group takes the vector path; the last, partial group walks
        // its neurons one at a time.
        Value end =
            arith::AddIOp::create(b, loc, first, emitter.constant(width));
        Value full = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::sle,
                                           end, numNeurons);
        auto fullBranch = scf::IfOp::create(
            b, loc, full,
            [&](OpBuilder &thenBuilder, Location) {
              OpBuilder::InsertionGuard inner(b);
              b.setInsertionPointToStart(thenBuilder.getInsertionBlock());
              scf::YieldOp::create(b, loc,
                                   emitter.emitNeurons(first, width, true));
            },
            [&](OpBuilder &elseBuilder, Location) {
              OpBuilder::InsertionGuard inner(b);
              b.setInsertionPointToStart(elseBuilder.getInsertionBlock());
              auto tail = scf::ForOp::create(
                  b, loc, first, numNeurons, emitter.constant(1),
                  emitter.zeroPartials(),
                  [&](OpBuilder &loopBuilder, Location, Value neuron,
                      ValueRange sums) {
                    OpBuilder::InsertionGuard innermost(b);
                    b.setInsertionPointToStart(loopBuilder.getInsertionBlock());
                    SmallVector<Value> partials =
                        emitter.emitNeurons(neuron, 1, false);
                    for (auto [p, sum] : llvm::zip_equal(partials, sums))
                      p = arith::AddFOp::create(b, loc, sum, p);
                    scf::YieldOp::create(b, loc, partials);
                  });
              SmallVector<Value> results(tail.getResults());
              llvm::append_range(results, emitter.noChannelPartials());
              scf::YieldOp::create(b, loc, results);
            });
        scf::YieldOp::create(b, loc, fullBranch.getResults());
      },
      [&](OpBuilder &nested, Location) {
        OpBuilder::InsertionGuard guard(b);
        b.setInsertionPointToStart(nested.getInsertionBlock());
        SmallVector<Value> partials = emitter.zeroPartials();
        llvm::append_range(partials, emitter.noChannelPartials());
        scf::YieldOp::create(b, loc, partials);
      });
  ValueRange results = activeBranch.getResults();
  ValueRange scalarPartials = results.take_front(plan.scalarReductions.size());
  if (hasScratch)
    emitter.emitDeterministicReductions(scalarPartials,
                                        kernel.getWorkgroupAttributions()[0],
                                        kernel.getWorkgroupAttributions()[1]);
  else if (!plan.scalarReductions.empty())
    emitter.emitAtomicReductions(scalarPartials,
                                 kernel.getWorkgroupAttributions()[0]);
  emitter.emitChannelReductions(
      results.drop_front(plan.scalarReductions.size()));
  gpu::ReturnOp::create(b, loc);
}

/// Plans one kernel function: its scan, body and buffers.
FailureOr<KernelPlan> planKernel(func::FuncOp func) {
  FailureOr<KernelFunction> kernel = analyzeKernelFunction(func);
  if (failed(kernel))
    return failure();
  KernelPlan plan;
  plan.kernel = std::move(*kernel);
  if (plan.neuron()) {
    plan.body = &plan.neuron().getBodyBlock();
    plan.numStates = plan.neuron().getNumStates();
  } else {
    plan.body = &plan.scan().getBody().front();
    plan.numStates = plan.body->getNumArguments() -
                     plan.scan().getInputs().size() -
                     plan.scan().getParams().size();
  }
  unsigned smallest = kAccessBytes;
  ScanOp scan = plan.scan();
  plan.channels = plan.interface().hasChannels();
  unsigned firstReduction = plan.numBuffers() - plan.numReductions();
  for (auto [r, reduction] : llvm::enumerate(scan.getReductionsMutable())) {
    BufferShape shape =
        plan.interface()
            .getBuffers()[plan.kernel.operandBuffers[firstReduction + r]]
            .getShape();
    if (shape == BufferShape::Scalar)
      plan.scalarReductions.push_back(r);
    else if (shape == BufferShape::PerChannel)
      plan.channelReductions.push_back(r);
  }
  for (Value value : scan->getOperands()) {
    auto type = dyn_cast<MemRefType>(value.getType());
    if (!type)
      continue; // a scalar param

    Type element = type.getElementType();
    bool isFloat = element.isF32() || element.isF16() || element.isBF16();
    bool isOutput = llvm::is_contained(scan.getOutputs(), value);
    bool isSpikes = element.isInteger(8) || element.isInteger(1);
    if (!isFloat && !(isSpikes && isOutput))
      return plan.scan().emitError("GPU kernels store f32, f16 or bf16 (and "
                                   "outputs as i8 or i1), got ")
             << element;
    plan.packsBits |= element.isInteger(1);
    // Byte and bit outputs do not set the width: a thread stores its width
    // bytes, or width / 8 bytes of bits.
    if (type.getRank() > 0 && isFloat)
      smallest = std::min(smallest, element.getIntOrFloatBitWidth() / 8);
    plan.elementTypes.push_back(element);
  }
  plan.width = kAccessBytes / smallest;
  if (plan.packsBits)
    plan.width = std::max(plan.width, 8u);
  return plan;
}

/// The interface of `plan`'s kernel with the gradients of its per-channel
/// reductions `channelReductions` stored per neuron: [N] buffers of each
/// neuron's sum over time (role per_neuron_param_gradient).
KernelInterfaceAttr
perNeuronChannelGradients(const KernelPlan &plan,
                          ArrayRef<unsigned> channelReductions) {
  SmallVector<KernelBufferAttr> buffers(plan.interface().getBuffers());
  unsigned firstReduction = plan.numBuffers() - plan.numReductions();
  for (unsigned r : channelReductions) {
    KernelBufferAttr &buffer =
        buffers[plan.kernel.operandBuffers[firstReduction + r]];
    buffer = buffer.withRole(BufferRole::PerNeuronParamGradient);
  }
  return plan.interface().withBuffers(buffers);
}

struct ConvertFlexSNToGPUPass
    : flexsn::impl::ConvertFlexSNToGPUBase<ConvertFlexSNToGPUPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    // Steps are emitted from flat bodies.
    if (failed(checkBlocksCompiled(module)) ||
        failed(inlineApplications(module)))
      return signalPassFailure();
    std::vector<KernelPlan> plans;
    for (func::FuncOp func : getKernelFunctions(module)) {
      FailureOr<KernelPlan> plan = planKernel(func);
      if (failed(plan))
        return signalPassFailure();
      plans.push_back(std::move(*plan));
    }
    if (plans.empty())
      return;

    OpBuilder builder = OpBuilder::atBlockEnd(module.getBody());
    module->setAttr(gpu::GPUDialect::getContainerModuleAttrName(),
                    builder.getUnitAttr());
    auto gpuModule =
        gpu::GPUModuleOp::create(builder, module.getLoc(), "flexsn_kernels");
    OpBuilder kernelBuilder = OpBuilder::atBlockBegin(gpuModule.getBody());
    MLIRContext *ctx = &getContext();
    SmallVector<Attribute> kernels;
    // A kernel's two entry points, named here once: the compiled kernel
    // lists them for the emitters and the manifest.
    auto build = [&](const KernelPlan &plan, KernelInterfaceAttr interface,
                     bool deterministic) {
      std::string name = (plan.func().getSymName() +
                          (deterministic ? "_deterministic" : ""))
                             .str();
      auto vectorEntry = StringAttr::get(ctx, name + "_vec");
      auto scalarEntry = StringAttr::get(ctx, name + "_scalar");
      buildKernel(kernelBuilder, plan, plan.width, deterministic, vectorEntry);
      buildKernel(kernelBuilder, plan, 1, deterministic, scalarEntry);
      kernels.push_back(CompiledKernelAttr::get(
          ctx, StringAttr::get(ctx, name), interface, plan.width,
          deterministic, vectorEntry, scalarEntry));
    };
    for (const KernelPlan &plan : plans) {
      build(plan, plan.interface(), /*deterministic=*/false);
      // Kernels with reductions across neurons (parameter gradients) also
      // come in a deterministic mode. Per-neuron sums are deterministic
      // anyway. Scalar ones are summed in a fixed order through the
      // reduction scratch, which the kernel takes last. Per-channel ones
      // are stored per neuron instead (their sums over time, [N]), which
      // the caller sums over each channel's neurons in an order of its
      // own: the grid cannot finish a channel's sum in one launch without
      // atomics.
      if (!plan.scalarReductions.empty() || !plan.channelReductions.empty()) {
        KernelPlan fixed = plan;
        KernelInterfaceAttr interface =
            perNeuronChannelGradients(plan, fixed.channelReductions);
        fixed.channelReductions.clear();
        if (!plan.scalarReductions.empty())
          interface = interface.withBuffer(getKernelBuffer(
              BindingAttr::get(ctx, BoundValue::Scratch, 0),
              KernelVariant::Backward, Float32Type::get(ctx), ""));
        build(fixed, interface, /*deterministic=*/true);
      }
    }
    module->setAttr("flexsn.gpu_kernels", builder.getArrayAttr(kernels));

    // The host side is the C stubs' job. The neurons stay: the manifest
    // describes their interfaces, and nothing translates the host module.
    for (const KernelPlan &plan : plans)
      plan.func().erase();
  }
};

} // namespace
