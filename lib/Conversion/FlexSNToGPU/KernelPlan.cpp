//===- KernelPlan.cpp - How a GPU kernel walks a kernel function ----------===//
//
// Part of the FlexSN project: an MLIR compiler for spiking-neuron dynamics.
//
//===----------------------------------------------------------------------===//
//
// Plans a kernel function's GPU kernel (KernelPlan.h): the step body and
// its states, which reductions are summed across neurons, the element type
// of each buffer and the vector width.
//
//===----------------------------------------------------------------------===//

#include "KernelPlan.h"

using namespace mlir;
using namespace mlir::flexsn;

namespace mlir::flexsn {

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
  plan.channels = plan.signature().hasChannels();
  unsigned firstReduction =
      plan.kernel.operandBuffers.size() - plan.numReductions();
  for (auto [r, reduction] : llvm::enumerate(scan.getReductionsMutable())) {
    BufferShape shape =
        plan.signature()
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
  // Workgroup memory holds the warps' sums of each scalar reduction and,
  // for each per-channel one, a slot per channel a block's neurons may
  // touch (kBlockSize * width + 2): many per-channel gradients take fewer
  // lanes per thread, so that the kernel fits.
  auto workgroupBytes = [&](unsigned width) {
    return 4 * (plan.scalarReductions.size() * kWarpsPerBlock + 1 +
                plan.channelReductions.size() * (kBlockSize * width + 2));
  };
  unsigned fewest = plan.packsBits ? 8 : 1;
  while (plan.width > fewest && workgroupBytes(plan.width) > kMaxWorkgroupBytes)
    plan.width /= 2;
  if (workgroupBytes(plan.packsBits ? plan.width : 1) > kMaxWorkgroupBytes)
    return plan.scan().emitError()
           << "a GPU kernel holds at most " << kMaxWorkgroupBytes
           << " bytes of per-channel and scalar gradient sums per block; "
           << plan.channelReductions.size() << " per-channel and "
           << plan.scalarReductions.size()
           << " scalar parameter gradients need more";
  return plan;
}

} // namespace mlir::flexsn
