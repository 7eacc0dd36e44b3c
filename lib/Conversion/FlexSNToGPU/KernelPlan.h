//===- KernelPlan.h - How a GPU kernel walks a kernel function --*- C++ -*-===//
//
// Part of the FlexSN project: an MLIR compiler for spiking-neuron dynamics.
//
//===----------------------------------------------------------------------===//
//
// The plan of a kernel function's GPU kernel, shared by the files of the
// FlexSN-to-GPU conversion: the launch constants, the scan, body and
// buffers of the function, and the vector width a thread takes. Private to
// the conversion.
//
//===----------------------------------------------------------------------===//

#ifndef FLEXSN_LIB_CONVERSION_FLEXSNTOGPU_KERNELPLAN_H
#define FLEXSN_LIB_CONVERSION_FLEXSNTOGPU_KERNELPLAN_H

#include "flexsn/Dialect/FlexSN/IR/FlexSNOps.h"
#include "flexsn/Dialect/FlexSN/Utils/KernelFunctions.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallVector.h"

namespace mlir::flexsn {

/// Bytes a thread loads or stores at once (one vector access).
constexpr unsigned kAccessBytes = 16;
/// Threads per block: every launch uses 256 (the runtime's choice).
constexpr unsigned kBlockSize = 256;
/// Threads per warp, and warps per block.
constexpr unsigned kWarpSize = 32;
constexpr unsigned kWarpsPerBlock = kBlockSize / kWarpSize;
/// Neurons per thread of a coupled kernel's vector entry: a block of
/// kBlockSize threads runs samples of up to kBlockSize * kCoupledLanes.
constexpr unsigned kCoupledLanes = 4;
/// Workgroup (shared) memory a kernel may declare statically: more needs an
/// opt-in at launch, and ptxas rejects the kernel.
constexpr unsigned kMaxWorkgroupBytes = 48 * 1024;

/// A kernel function (its signature and scan, checked in KernelFunctions.h)
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
  KernelSignatureAttr signature() const { return kernel.signature; }

  unsigned numInputs() const { return kernel.scan.getInputs().size(); }
  unsigned numInits() const { return kernel.scan.getInits().size(); }
  unsigned numOutputs() const { return kernel.scan.getOutputs().size(); }
  unsigned numStateResults() const { return kernel.scan.getStates().size(); }
  unsigned numReductions() const { return kernel.scan.getReductions().size(); }
  unsigned numBuffers() const { return kernel.signature.getBuffers().size(); }
  /// The params passed as buffers (per neuron).
  unsigned numParamBuffers() const {
    return llvm::count_if(kernel.scan.getParams(),
                          [](Value v) { return isa<MemRefType>(v.getType()); });
  }
};

/// Plans one kernel function: its scan, body and buffers.
FailureOr<KernelPlan> planKernel(func::FuncOp func);

} // namespace mlir::flexsn

#endif // FLEXSN_LIB_CONVERSION_FLEXSNTOGPU_KERNELPLAN_H
