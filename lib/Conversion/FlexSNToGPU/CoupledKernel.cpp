//===- CoupledKernel.cpp - A coupled (recurrent) kernel's thread ----------===//
//
// Part of the FlexSN project: an MLIR compiler for spiking-neuron dynamics.
//
//===----------------------------------------------------------------------===//
//
// KernelEmitter::emitCoupledNeurons: one block per sample of H neurons,
// all of them stepping together. At each step every thread computes the
// coupled drive of its neurons, sum over k of y[k] * M[k, j], from the
// sample's previous coupled outputs y (in workgroup memory, shared by the
// block) and the weights' rows (read coalesced: consecutive threads read
// consecutive j), then steps its neurons, writes their coupled outputs
// for the next step and waits for the block. The outputs alternate
// between two slots, so one barrier per step suffices: a step reads one
// slot and writes the other.
//
//===----------------------------------------------------------------------===//

#include "KernelEmitter.h"

#include "flexsn/Dialect/FlexSN/Utils/StepBuilder.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"

using namespace mlir;
using namespace mlir::flexsn;

namespace mlir::flexsn {

KernelEmitter::CoupledLanes KernelEmitter::coupledLanes(unsigned lanes) {
  // The lanes' neurons: j below H is active; an inactive lane reads the
  // sample's last neuron (every load stays in bounds) and stores nothing.
  Type i64 = b.getI64Type();
  Value thread = arith::IndexCastUIOp::create(
      b, loc, i64, gpu::ThreadIdOp::create(b, loc, gpu::Dimension::x));
  Value sample = arith::IndexCastUIOp::create(
      b, loc, i64, gpu::BlockIdOp::create(b, loc, gpu::Dimension::x));
  Value first = arith::MulIOp::create(b, loc, sample, sampleSize);
  Value lastIndex = arith::SubIOp::create(b, loc, sampleSize, constant(1));
  CoupledLanes l;
  for (unsigned k = 0; k < lanes; ++k) {
    Value lane =
        arith::AddIOp::create(b, loc, thread, constant(k * kBlockSize));
    l.lane.push_back(lane);
    l.active.push_back(arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult,
                                             lane, sampleSize));
    Value clamped = arith::MinUIOp::create(b, loc, lane, lastIndex);
    l.clamped.push_back(clamped);
    l.neuron.push_back(arith::AddIOp::create(b, loc, first, clamped));
  }
  return l;
}

SmallVector<Value> KernelEmitter::coupledDrive(const CoupledLanes &thread,
                                               Value previous, Value readBase) {
  unsigned lanes = thread.lane.size();
  ArrayRef<Value> clamped = thread.clamped;
  Type index = b.getIndexType();
  auto toIndex = [&](Value value) {
    return arith::IndexCastUIOp::create(b, loc, index, value).getResult();
  };
  auto driveLoop =
      scf::ForOp::create(b, loc, constant(0), sampleSize, constant(1),
                         SmallVector<Value>(lanes, zeroF32()));
  {
    OpBuilder::InsertionGuard inner(b);
    b.setInsertionPointToStart(driveLoop.getBody());
    Value k = driveLoop.getInductionVar();
    ValueRange drives = driveLoop.getRegionIterArgs();
    Value y = memref::LoadOp::create(
        b, loc, previous, toIndex(arith::AddIOp::create(b, loc, readBase, k)));
    // Most coupled outputs are spikes, most of them zero: their row of
    // weights is skipped (the whole block takes the same branch).
    Value nonzero =
        arith::CmpFOp::create(b, loc, arith::CmpFPredicate::UNE, y, zeroF32());
    auto branch = scf::IfOp::create(
        b, loc, nonzero,
        [&](OpBuilder &nested, Location) {
          OpBuilder::InsertionGuard then(b);
          b.setInsertionPointToStart(nested.getInsertionBlock());
          Value row = arith::MulIOp::create(b, loc, k, sampleSize);
          SmallVector<Value> next;
          for (unsigned l = 0; l < lanes; ++l) {
            Value at = arith::AddIOp::create(b, loc, row, clamped[l]);
            Value ptr = LLVM::GEPOp::create(b, loc, ptrType, f32,
                                            couplingWeights, ValueRange{at});
            Value w = LLVM::LoadOp::create(b, loc, f32, ptr, 4);
            next.push_back(
                math::FmaOp::create(b, loc, y, w, drives[l]).getResult());
          }
          scf::YieldOp::create(b, loc, next);
        },
        [&](OpBuilder &nested, Location) {
          OpBuilder::InsertionGuard otherwise(b);
          b.setInsertionPointToStart(nested.getInsertionBlock());
          scf::YieldOp::create(b, loc, drives);
        });
    scf::YieldOp::create(b, loc, branch.getResults());
  }
  return SmallVector<Value>(driveLoop.getResults());
}

SmallVector<Value> KernelEmitter::finishCoupled(const CoupledLanes &thread,
                                                ValueRange finals) {
  unsigned lanes = thread.lane.size(), numStates = plan.numStates;
  unsigned stateBase = plan.numInputs() + plan.numInits() +
                       plan.numParamBuffers() + plan.numOutputs();
  unsigned reductionBase = stateBase + plan.numStateResults();
  ArrayRef<Value> active = thread.active, neuron = thread.neuron;

  for (unsigned s = 0; s < plan.numStateResults(); ++s)
    if (plan.scan().isFinalState(s))
      for (unsigned l = 0; l < lanes; ++l)
        emitIf(active[l], [&] {
          storeIfPresent(stateBase + s, neuron[l], finals[s * lanes + l]);
        });
  auto sums = [&](unsigned r) {
    return finals.slice((numStates + r) * lanes, lanes);
  };
  for (unsigned r = 0; r < plan.numReductions(); ++r)
    if (!llvm::is_contained(plan.scalarReductions, r))
      for (unsigned l = 0; l < lanes; ++l)
        emitIf(active[l],
               [&] { store(reductionBase + r, neuron[l], sums(r)[l]); });
  SmallVector<Value> partials;
  for (unsigned r : plan.scalarReductions) {
    Value total = zeroF32();
    for (unsigned l = 0; l < lanes; ++l)
      total = arith::AddFOp::create(
          b, loc, total,
          arith::SelectOp::create(b, loc, active[l], sums(r)[l], zeroF32()));
    partials.push_back(total);
  }
  return partials;
}

SmallVector<Value> KernelEmitter::emitCoupledNeurons(unsigned lanes,
                                                     Value previous) {
  const KernelFunction::Coupling &coupling = *plan.kernel.coupling;
  unsigned numInputs = plan.numInputs(), numStates = plan.numStates;
  unsigned initBase = numInputs, paramBase = initBase + plan.numInits();
  unsigned outputBase = paramBase + plan.numParamBuffers();
  unsigned stateBase = outputBase + plan.numOutputs();
  Type index = b.getIndexType();
  auto toIndex = [&](Value value) {
    return arith::IndexCastUIOp::create(b, loc, index, value).getResult();
  };

  CoupledLanes thread = coupledLanes(lanes);
  ArrayRef<Value> lane = thread.lane, active = thread.active,
                  neuron = thread.neuron;
  auto perLane = [&](function_ref<Value(unsigned)> value) {
    SmallVector<Value> values;
    for (unsigned l = 0; l < lanes; ++l)
      values.push_back(value(l));
    return values;
  };

  SmallVector<SmallVector<Value>> laneParams(lanes);
  unsigned scalar = 0, buffer = paramBase;
  for (Value param : plan.scan().getParams()) {
    bool isBuffer = isa<MemRefType>(param.getType());
    for (unsigned l = 0; l < lanes; ++l)
      laneParams[l].push_back(isBuffer ? load(buffer, neuron[l], 1).front()
                                       : params[scalar]);
    isBuffer ? ++buffer : ++scalar;
  }
  SmallVector<Value> carries; // [state][lane], then [reduction][lane]
  for (unsigned s = 0; s < numStates; ++s)
    llvm::append_range(
        carries, perLane([&](unsigned l) {
          return plan.numInits()
                     ? loadIfPresent(initBase + s, neuron[l], 1).front()
                     : zeroF32();
        }));
  carries.append(plan.numReductions() * lanes, zeroF32());

  // No coupled output before the first step: both slots start at zero.
  int64_t slotSize = int64_t(kBlockSize) * lanes;
  for (unsigned l = 0; l < lanes; ++l)
    emitIf(active[l], [&] {
      for (int64_t slot = 0; slot < 2; ++slot)
        memref::StoreOp::create(
            b, loc, zeroF32(), previous,
            toIndex(arith::AddIOp::create(b, loc, lane[l],
                                          constant(slot * slotSize))));
    });
  gpu::BarrierOp::create(b, loc);

  auto loop =
      scf::ForOp::create(b, loc, constant(0), numSteps, constant(1), carries);
  {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(loop.getBody());
    Value step = loop.getInductionVar();
    if (plan.scan().getReverse())
      step = arith::SubIOp::create(
          b, loc, arith::SubIOp::create(b, loc, numSteps, constant(1)), step);
    // Step t reads the slot step t - 1 (forward) or t + 1 (reverse) wrote,
    // of the other parity, and writes its own.
    Value parity = arith::RemUIOp::create(b, loc, step, constant(2));
    Value writeBase = arith::MulIOp::create(b, loc, parity, constant(slotSize));
    Value readBase =
        arith::SubIOp::create(b, loc, constant(slotSize), writeBase);

    SmallVector<Value> drive = coupledDrive(thread, previous, readBase);

    auto at = [&](Value t, unsigned l) {
      return arith::AddIOp::create(
          b, loc, arith::MulIOp::create(b, loc, t, timeStride), neuron[l]);
    };
    auto loadInput = [&](unsigned k, Value t) {
      return perLane([&](unsigned l) {
        Value value = optionalInputs.contains(k)
                          ? loadIfPresent(k, at(t, l), 1).front()
                          : load(k, at(t, l), 1).front();
        if (k == coupling.input)
          value = arith::AddFOp::create(b, loc, value, drive[l]);
        return value;
      });
    };
    auto storeOutput = [&](unsigned k, Value t, ValueRange values) {
      for (unsigned l = 0; l < lanes; ++l)
        emitIf(active[l], [&] {
          storeIfPresent(outputBase + k, at(t, l), values[l]);
          if (k == coupling.output)
            memref::StoreOp::create(
                b, loc, values[l], previous,
                toIndex(arith::AddIOp::create(b, loc, writeBase, lane[l])));
        });
    };
    auto storeState = [&](unsigned s, Value t, ValueRange values) {
      for (unsigned l = 0; l < lanes; ++l)
        emitIf(active[l],
               [&] { storeIfPresent(stateBase + s, at(t, l), values[l]); });
    };
    auto addAtStep = [](unsigned, Value, ValueRange) {
      llvm_unreachable("a GPU kernel's reductions are summed over time");
    };
    ScanGroupAccess access{lanes, loadInput, storeOutput, storeState,
                           addAtStep};
    SmallVector<Value> next = emitStep(
        b, loc, plan.scan(), plan.neuron(), step, loop.getRegionIterArgs(),
        laneParams, llvm::to_vector(llvm::seq(plan.numReductions())), access);
    // The coupled outputs of this step are complete before the next reads
    // them, and no thread writes a slot another still reads.
    gpu::BarrierOp::create(b, loc);
    scf::YieldOp::create(b, loc, next);
  }
  return finishCoupled(thread, loop.getResults());
}

} // namespace mlir::flexsn
