//===- KernelEmitter.cpp - Writes a GPU kernel's body ---------------------===//
//
// Part of the FlexSN project: an MLIR compiler for spiking-neuron dynamics.
//
//===----------------------------------------------------------------------===//
//
// The KernelEmitter (KernelEmitter.h): a thread's loads, steps and stores
// of its neurons, bit-packed spike stores, and the sums of the reductions
// across neurons.
//
//===----------------------------------------------------------------------===//

#include "KernelEmitter.h"

#include "flexsn/Dialect/FlexSN/Utils/StepBuilder.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"

using namespace mlir;
using namespace mlir::flexsn;

namespace mlir::flexsn {

KernelEmitter::KernelEmitter(OpBuilder &b, Location loc, const KernelPlan &plan,
                             gpu::GPUFuncOp kernel, bool hasScratch,
                             unsigned width)
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
  if (plan.kernel.coupling) {
    sampleSize = args[firstParam++];
    couplingWeights = args[plan.kernel.coupling->weights];
  }
  params.assign(args.begin() + firstParam, args.end());
  ptrType = LLVM::LLVMPointerType::get(b.getContext());
  f32 = b.getF32Type();
  for (int64_t i :
       plan.scan().getOptionalInputs().value_or(ArrayRef<int64_t>()))
    optionalInputs.insert(i);
}

Value KernelEmitter::constant(int64_t value) {
  return arith::ConstantOp::create(b, loc, b.getI64IntegerAttr(value));
}

Value KernelEmitter::zeroF32() {
  return arith::ConstantOp::create(b, loc, b.getF32FloatAttr(0.0));
}

SmallVector<Value> KernelEmitter::zeroPartials() {
  return SmallVector<Value>(plan.scalarReductions.size(), zeroF32());
}

SmallVector<Value> KernelEmitter::noChannelPartials() {
  SmallVector<Value> pairs;
  for (unsigned r = 0; r < plan.channelReductions.size(); ++r)
    pairs.append({constant(-1), zeroF32()});
  return pairs;
}

Value KernelEmitter::threadIndex() {
  Value block = gpu::BlockIdOp::create(b, loc, gpu::Dimension::x);
  Value blockDim = gpu::BlockDimOp::create(b, loc, gpu::Dimension::x);
  Value thread = gpu::ThreadIdOp::create(b, loc, gpu::Dimension::x);
  Value linear = arith::AddIOp::create(
      b, loc, arith::MulIOp::create(b, loc, block, blockDim), thread);
  return arith::IndexCastUIOp::create(b, loc, b.getI64Type(), linear);
}

SmallVector<Value> KernelEmitter::emitNeurons(Value first, unsigned width,
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
  ScanGroupAccess access{width, loadInput, storeOutput, storeState, addAtStep};
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

void KernelEmitter::beginChannelSlots(Value slots, unsigned width) {
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
    memref::StoreOp::create(b, loc, zeroF32(), channelSlots, ValueRange{slot});
  });
  gpu::BarrierOp::create(b, loc);
}

void KernelEmitter::addToChannelSlot(unsigned k, Value channel, Value sum) {
  Value diff = arith::SubIOp::create(b, loc, channel, blockChannel);
  Value negative = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::slt,
                                         diff, constant(0));
  Value slot = arith::SelectOp::create(
      b, loc, negative, arith::AddIOp::create(b, loc, diff, numChannels), diff);
  Value index = arith::IndexCastUIOp::create(
      b, loc, b.getIndexType(),
      arith::AddIOp::create(b, loc, slot, constant(k * slotsPerReduction)));
  memref::AtomicRMWOp::create(b, loc, arith::AtomicRMWKind::addf, sum,
                              channelSlots, ValueRange{index});
}

void KernelEmitter::forEachSlot(llvm::function_ref<void(Value)> body) {
  Value total = arith::ConstantIndexOp::create(
      b, loc, plan.channelReductions.size() * slotsPerReduction);
  scf::ForOp::create(b, loc, threadId(), total,
                     arith::ConstantIndexOp::create(b, loc, kBlockSize),
                     ValueRange{},
                     [&](OpBuilder &nested, Location, Value slot, ValueRange) {
                       OpBuilder::InsertionGuard guard(b);
                       b.setInsertionPointToStart(nested.getInsertionBlock());
                       body(slot);
                       scf::YieldOp::create(b, loc);
                     });
}

void KernelEmitter::emitChannelReductions(ValueRange pairs) {
  if (pairs.empty())
    return;
  unsigned reductionBase = buffers.size() - plan.numReductions();
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
        arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ne, channel, none),
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
          emitIf(leads, [&] { addToChannelSlot(k, leaderChannel, warpTotal); });
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

void KernelEmitter::emitAtomicReductions(ValueRange partials, Value warpSums) {
  storeWarpSums(partials, warpSums);
  emitIf(isZero(threadId()), [&] {
    for (unsigned r = 0; r < partials.size(); ++r)
      LLVM::AtomicRMWOp::create(b, loc, LLVM::AtomicBinOp::fadd,
                                reductionBuffer(r), blockSum(r, warpSums),
                                LLVM::AtomicOrdering::monotonic);
  });
}

void KernelEmitter::emitDeterministicReductions(ValueRange partials,
                                                Value warpSums,
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
  // Operands are built one statement at a time: the order of a call's
  // arguments is the host compiler's choice, and the IR should not be.
  auto slot = [&](unsigned r, Value blockIndex) {
    Value one = constant(1);
    Value rowStart = arith::MulIOp::create(b, loc, constant(r), numBlocks);
    Value offset = arith::AddIOp::create(
        b, loc, arith::AddIOp::create(b, loc, one, rowStart), blockIndex);
    return LLVM::GEPOp::create(b, loc, ptrType, f32, scratch,
                               ValueRange{offset});
  };

  storeWarpSums(partials, warpSums);
  emitIf(firstThread, [&] {
    for (unsigned r = 0; r < partials.size(); ++r) {
      Value sum = blockSum(r, warpSums);
      LLVM::StoreOp::create(b, loc, sum, slot(r, block), 4);
    }
    // Publish the slots before drawing a ticket (__threadfence()).
    NVVM::MembarOp::create(b, loc, NVVM::MemScopeKind::GPU);
    Value ticket =
        LLVM::AtomicRMWOp::create(b, loc, LLVM::AtomicBinOp::add, scratch,
                                  i32One, LLVM::AtomicOrdering::monotonic);
    Value lastTicket = arith::TruncIOp::create(
        b, loc, b.getI32Type(),
        arith::SubIOp::create(b, loc, numBlocks, constant(1)));
    Value last = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, ticket,
                                       lastTicket);
    memref::StoreOp::create(
        b, loc, arith::ExtUIOp::create(b, loc, b.getI32Type(), last), lastFlag,
        ValueRange{zero});
  });
  gpu::BarrierOp::create(b, loc);
  Value flag = memref::LoadOp::create(b, loc, lastFlag, ValueRange{zero});
  Value isLast = arith::CmpIOp::create(
      b, loc, arith::CmpIPredicate::ne, flag,
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
          b, loc, first, numBlocks, constant(kBlockSize), ValueRange{zeroF32()},
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
      for (unsigned r = 0; r < partials.size(); ++r) {
        Value sum = blockSum(r, warpSums);
        LLVM::StoreOp::create(b, loc, sum, reductionBuffer(r), 4);
      }
    });
  });
}

bool KernelEmitter::isBits(unsigned buffer) const {
  return elementType(buffer).isInteger(1);
}

bool KernelEmitter::isPerChannel(unsigned buffer) const {
  return plan.signature()
             .getBuffers()[plan.kernel.operandBuffers[buffer]]
             .getShape() == BufferShape::PerChannel;
}

SmallVector<Value> KernelEmitter::laneChannels(Value first, unsigned width) {
  Value offset = arith::RemUIOp::create(b, loc, first, channelSize);
  Value channel = arith::RemUIOp::create(
      b, loc, arith::DivUIOp::create(b, loc, first, channelSize), numChannels);
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

void KernelEmitter::atomicAdd(Value buffer, Value index, Value value) {
  Value ptr =
      LLVM::GEPOp::create(b, loc, ptrType, f32, buffer, ValueRange{index});
  LLVM::AtomicRMWOp::create(b, loc, LLVM::AtomicBinOp::fadd, ptr, value,
                            LLVM::AtomicOrdering::monotonic);
}

Value KernelEmitter::reductionBuffer(unsigned r) const {
  return buffers[buffers.size() - plan.numReductions() +
                 plan.scalarReductions[r]];
}

Value KernelEmitter::threadId() {
  return gpu::ThreadIdOp::create(b, loc, gpu::Dimension::x);
}

void KernelEmitter::storeWarpSums(ValueRange sums, Value warpSums) {
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

Value KernelEmitter::blockSum(unsigned r, Value warpSums) {
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

Value KernelEmitter::isZero(Value indexValue) {
  return arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, indexValue,
                               arith::ConstantIndexOp::create(b, loc, 0));
}

Value KernelEmitter::warpSum(Value value) {
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

void KernelEmitter::emitIf(Value condition, llvm::function_ref<void()> body) {
  scf::IfOp::create(b, loc, condition, [&](OpBuilder &nested, Location) {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(nested.getInsertionBlock());
    body();
    scf::YieldOp::create(b, loc);
  });
}

unsigned KernelEmitter::elementBytes(unsigned buffer) const {
  return elementType(buffer).getIntOrFloatBitWidth() / 8;
}

Value KernelEmitter::address(unsigned buffer, Value index) {
  return LLVM::GEPOp::create(b, loc, ptrType, elementType(buffer),
                             buffers[buffer], ValueRange{index});
}

SmallVector<Value> KernelEmitter::load(unsigned buffer, Value index,
                                       unsigned width) {
  Value ptr = address(buffer, index);
  SmallVector<Value> lanes;
  if (width == 1) {
    lanes.push_back(toF32(LLVM::LoadOp::create(b, loc, elementType(buffer), ptr,
                                               elementBytes(buffer))));
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

SmallVector<Value> KernelEmitter::loadIfPresent(unsigned buffer, Value index,
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

void KernelEmitter::store(unsigned buffer, Value index, ValueRange lanes) {
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
    vector = LLVM::InsertElementOp::create(b, loc, vector, fromF32(value, type),
                                           position);
  }
  unsigned groupBytes = lanes.size() * elementBytes(buffer);
  LLVM::StoreOp::create(b, loc, vector, ptr,
                        std::min(groupBytes, kAccessBytes));
}

void KernelEmitter::storeBits(unsigned buffer, Value step, Value first,
                              ValueRange lanes) {
  Type i8 = b.getI8Type(), i32 = b.getI32Type();
  Value rowBytes = arith::DivUIOp::create(
      b, loc, arith::AddIOp::create(b, loc, timeStride, constant(7)),
      constant(8));
  Value rowStart = arith::MulIOp::create(b, loc, step, rowBytes);
  auto byteAddress = [&](Value neuron) {
    Value index = arith::AddIOp::create(
        b, loc, rowStart, arith::DivUIOp::create(b, loc, neuron, constant(8)));
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
        byte =
            arith::OrIOp::create(b, loc, byte,
                                 shiftLeft(bit(lanes[j + l], i8),
                                           arith::ConstantOp::create(
                                               b, loc, b.getI8IntegerAttr(l))));
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
        LLVM::StoreOp::create(b, loc, arith::OrIOp::create(b, loc, old, value),
                              ptr, 1);
        scf::YieldOp::create(b, loc);
      });
}

void KernelEmitter::storeBitsIfPresent(unsigned buffer, Value step, Value first,
                                       ValueRange lanes) {
  emitIf(present(buffer), [&] { storeBits(buffer, step, first, lanes); });
}

void KernelEmitter::storeIfPresent(unsigned buffer, Value index,
                                   ValueRange lanes) {
  scf::IfOp::create(b, loc, present(buffer), [&](OpBuilder &nested, Location) {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(nested.getInsertionBlock());
    store(buffer, index, lanes);
    scf::YieldOp::create(b, loc);
  });
}

Value KernelEmitter::present(unsigned buffer) {
  Value null = LLVM::ZeroOp::create(b, loc, ptrType);
  return LLVM::ICmpOp::create(b, loc, LLVM::ICmpPredicate::ne, buffers[buffer],
                              null);
}

Value KernelEmitter::toF32(Value v) {
  return v.getType() == f32 ? v : arith::ExtFOp::create(b, loc, f32, v);
}

Value KernelEmitter::fromF32(Value v, Type type) {
  if (type == f32)
    return v;
  if (isa<IntegerType>(type))
    return arith::FPToUIOp::create(b, loc, type, v);
  return arith::TruncFOp::create(b, loc, type, v);
}

} // namespace mlir::flexsn
