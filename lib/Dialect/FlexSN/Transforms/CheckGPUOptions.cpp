//===- CheckGPUOptions.cpp - Fail early on a broken GPU setup ------------===//
//
// Part of the FlexSN project: an MLIR compiler for spiking-neuron dynamics.
//
//===----------------------------------------------------------------------===//

#include "flexsn/Dialect/FlexSN/Transforms/Passes.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"

namespace mlir::flexsn {
#define GEN_PASS_DEF_FLEXSNCHECKGPUOPTIONS
#include "flexsn/Dialect/FlexSN/Transforms/Passes.h.inc"
} // namespace mlir::flexsn

using namespace mlir;

namespace {
struct CheckGPUOptionsPass
    : flexsn::impl::FlexSNCheckGPUOptionsBase<CheckGPUOptionsPass> {
  using Base::Base;

  void runOnOperation() override {
    if (format != "bin" && format != "fatbin" && format != "isa") {
      getOperation().emitError() << "unknown GPU object format '" << format
                                 << "'; expected bin, fatbin or isa";
      return signalPassFailure();
    }
    SmallString<128> ptxas(toolkit), libdevice(toolkit);
    llvm::sys::path::append(ptxas, "bin", "ptxas");
    llvm::sys::path::append(libdevice, "nvvm", "libdevice");
    if (!llvm::sys::fs::can_execute(ptxas)) {
      getOperation().emitError()
          << "no ptxas at '" << ptxas
          << "': pass the CUDA toolkit directory as toolkit=<path>";
      return signalPassFailure();
    }
    if (!llvm::sys::fs::is_directory(libdevice)) {
      getOperation().emitError()
          << "no libdevice under '" << libdevice
          << "': pass the CUDA toolkit directory as toolkit=<path>";
      return signalPassFailure();
    }
  }
};
} // namespace
