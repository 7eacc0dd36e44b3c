//===- KernelEmitter.h - Writes a GPU kernel's body -------------*- C++ -*-===//
//
// Part of the FlexSN project: an MLIR compiler for spiking-neuron dynamics.
//
//===----------------------------------------------------------------------===//
//
// The emitter of one thread's work in a kernel function's GPU kernel:
// loading and storing a group of neurons' buffers, running their steps,
// and summing the reductions across warps, blocks and the grid (atomically
// or in a fixed order). Private to the FlexSN-to-GPU conversion.
//
//===----------------------------------------------------------------------===//

#ifndef FLEXSN_LIB_CONVERSION_FLEXSNTOGPU_KERNELEMITTER_H
#define FLEXSN_LIB_CONVERSION_FLEXSNTOGPU_KERNELEMITTER_H

#include "KernelPlan.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/STLFunctionalExtras.h"

namespace mlir::flexsn {

/// Emits one thread's work over a contiguous group of neurons.
class KernelEmitter {
public:
  /// A kernel with a reduction scratch takes one more pointer after the
  /// buffers.
  KernelEmitter(OpBuilder &b, Location loc, const KernelPlan &plan,
                gpu::GPUFuncOp kernel, bool hasScratch, unsigned width);

  Value constant(int64_t value);
  Value zeroF32();
  /// A thread's partial sums of the scalar reductions, all zero.
  SmallVector<Value> zeroPartials();
  /// A thread's (channel, sum) pair of each per-channel reduction when it
  /// has nothing left to add: channel -1.
  SmallVector<Value> noChannelPartials();
  Value getNumNeurons() const { return numNeurons; }

  /// The linear thread index as i64.
  Value threadIndex();

  /// Runs neurons [first, first + width) through every step, stores their
  /// sums of the reductions that keep the neuron dimensions, and returns
  /// the thread's partial sums of the scalar reductions. With
  /// `deferChannels`, a (channel, sum) pair per per-channel reduction
  /// follows them: the sum of its neurons when they share one channel (the
  /// warp combines these), else channel -1 once it added each neuron's sum
  /// itself; without, it adds them itself.
  SmallVector<Value> emitNeurons(Value first, unsigned width,
                                 bool deferChannels);
  /// A coupled kernel's thread (CoupledKernel.cpp): the block runs sample
  /// blockIdx.x, the thread its neurons j = threadIdx.x + l * kBlockSize
  /// for lanes l < `lanes` (those below H), through every step; each step
  /// computes the lanes' coupled drive from the previous step's coupled
  /// outputs in `previous` (workgroup memory, two slots of
  /// kBlockSize * lanes floats), then waits for the block. Returns the
  /// thread's partial sums of the scalar reductions.
  SmallVector<Value> emitCoupledNeurons(unsigned lanes, Value previous);

  /// Zeroes the block's per-channel slots (see addToChannelSlot) and
  /// computes the block's first channel; every thread, before any adds.
  void beginChannelSlots(Value slots, unsigned width);

  /// Adds `sum` into the block's slot of `channel` for per-channel
  /// reduction k (workgroup memory). A block's neurons are contiguous, so
  /// its channels are blockChannel, blockChannel + 1, ... (mod C): channel
  /// c has slot (c - blockChannel) mod C, which is below the block's
  /// number of channel runs, at most kBlockSize * width + 1.
  void addToChannelSlot(unsigned k, Value channel, Value sum);

  /// Calls `body` with each slot index (index type) of every per-channel
  /// reduction, strided over the block's threads.
  void forEachSlot(llvm::function_ref<void(Value)> body);

  /// Adds each thread's (channel, sum) pairs into the block's slots (a
  /// warp whose threads all hold one channel, or none, adds its sum once;
  /// otherwise each thread adds its own), then adds every nonzero slot to
  /// its channel's gradient: one global atomic per channel the block
  /// touches, not one per warp or thread.
  void emitChannelReductions(ValueRange pairs);

  /// Adds every thread's partial sums into the reduction buffers: each
  /// block adds its threads' sums (a warp shuffle tree, then its warps in
  /// workgroup memory), then one atomic add per block.
  void emitAtomicReductions(ValueRange partials, Value warpSums);

  /// Adds every thread's partial sums into the reduction buffers in an order
  /// that depends only on the launch shape, so reruns give the same bits.
  /// Each block adds its threads' sums (as above) into its own slot of the
  /// scratch: [ticket counter (i32, zeroed by the runtime)][reduction]
  /// [block]. The block that draws the last ticket adds the slots of every
  /// block, strided over its threads in a fixed order, and stores the totals.
  /// `lastFlag` is one workgroup i32.
  void emitDeterministicReductions(ValueRange partials, Value warpSums,
                                   Value lastFlag);

private:
  /// A coupled kernel thread's lanes: each one's index j in the sample,
  /// whether it is below H, j clamped to H - 1, and the neuron it reads
  /// (sample * H + the clamped j).
  struct CoupledLanes {
    SmallVector<Value> lane, active, clamped, neuron;
  };
  CoupledLanes coupledLanes(unsigned lanes);
  /// The lanes' coupled drive at a step: sum over k of previous[readBase +
  /// k] * M[k, j], skipping the zero outputs.
  SmallVector<Value> coupledDrive(const CoupledLanes &thread, Value previous,
                                  Value readBase);
  /// Stores the final states and per-neuron sums of the coupled time loop's
  /// `finals`; returns the thread's partials of the scalar reductions.
  SmallVector<Value> finishCoupled(const CoupledLanes &thread,
                                   ValueRange finals);
  Type elementType(unsigned buffer) const { return plan.elementTypes[buffer]; }
  bool isBits(unsigned buffer) const;

  bool isPerChannel(unsigned buffer) const;

  /// The channels (i64) of neurons [first, first + width): (n / S) mod C,
  /// divided once and then stepped.
  SmallVector<Value> laneChannels(Value first, unsigned width);

  /// Atomically adds the f32 `value` to `buffer[index]`.
  void atomicAdd(Value buffer, Value index, Value value);

  /// The buffer of the r-th scalar reduction.
  Value reductionBuffer(unsigned r) const;

  Value threadId();

  /// Stores each warp's sums (reduction r of warp w at r * kWarpsPerBlock +
  /// w) into `warpSums`, workgroup memory of numReductions * kWarpsPerBlock
  /// f32, then waits for the block.
  void storeWarpSums(ValueRange sums, Value warpSums);

  /// The block's sum of reduction r: its warps' sums in order.
  Value blockSum(unsigned r, Value warpSums);

  Value isZero(Value indexValue);

  /// The sum of `value` over the warp, in every lane (an XOR butterfly: the
  /// same order in every run).
  Value warpSum(Value value);

  /// `scf.if` without results around what `body` emits.
  void emitIf(Value condition, llvm::function_ref<void()> body);
  unsigned elementBytes(unsigned buffer) const;

  Value address(unsigned buffer, Value index);

  /// Loads `width` consecutive elements at `index` as f32 lanes; vectors
  /// are 16-byte aligned (the runtime checks) and split by LLVM as needed.
  SmallVector<Value> load(unsigned buffer, Value index, unsigned width);

  SmallVector<Value> loadIfPresent(unsigned buffer, Value index,
                                   unsigned width);

  /// Stores f32 `lanes` as consecutive elements at `index`: a vector when
  /// there are several, as aligned as the group (16 bytes for the floats
  /// that set the width; width bytes for byte outputs).
  void store(unsigned buffer, Value index, ValueRange lanes);

  /// Stores the 0/1 spikes `lanes` of neurons [first, first + lanes) at
  /// `step` into the bit-packed `buffer`: bit n mod 8 of byte
  /// step * ceil(ld / 8) + n / 8. A byte is written by one thread, whole:
  ///  - a vector group (a multiple of 8 neurons, 8-aligned) packs its bytes;
  ///  - the scalar kernel's warps hold 32 consecutive neurons (32-aligned):
  ///    a ballot gathers their bits and lanes 0-3 store its 4 bytes;
  ///  - the vector kernel's last, partial group walks its neurons one at a
  ///    time from a byte boundary: the first writes the byte (clearing the
  ///    bits past N), the others add their bit to it.
  void storeBits(unsigned buffer, Value step, Value first, ValueRange lanes);

  void storeBitsIfPresent(unsigned buffer, Value step, Value first,
                          ValueRange lanes);

  void storeIfPresent(unsigned buffer, Value index, ValueRange lanes);

  /// The presence flag of a buffer: computed where first needed.
  Value present(unsigned buffer);

  Value toF32(Value v);
  /// The f32 `v` in `type`; a byte output holds 0/1 spikes, converted
  /// as unsigned.
  Value fromF32(Value v, Type type);

  OpBuilder &b;
  Location loc;
  const KernelPlan &plan;
  SmallVector<Value> buffers, params;
  Value scratch; // deterministic kernels only
  llvm::DenseSet<int64_t> optionalInputs;
  Value numSteps, numNeurons, timeStride;
  Value numChannels, channelSize;    // kernels with channels only
  Value sampleSize, couplingWeights; // coupled kernels only: H, the weights
  // Kernels with per-channel reductions only: the block's slots
  // (workgroup memory), their count per reduction, the block's first
  // channel.
  Value channelSlots, blockChannel;
  unsigned slotsPerReduction = 0;
  unsigned kernelWidth; // neurons per thread of the kernel (1: scalar)
  Type ptrType, f32;
};

} // namespace mlir::flexsn

#endif // FLEXSN_LIB_CONVERSION_FLEXSNTOGPU_KERNELEMITTER_H
