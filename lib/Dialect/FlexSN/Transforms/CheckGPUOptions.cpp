//===- CheckGPUOptions.cpp - Fail early on a broken GPU setup ------------===//
//
// Part of the FlexSN project: an MLIR compiler for spiking-neuron dynamics.
//
//===----------------------------------------------------------------------===//

#include "flexsn/Dialect/FlexSN/Transforms/Passes.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"

namespace mlir::flexsn {
#define GEN_PASS_DEF_FLEXSNCHECKGPUOPTIONS
#include "flexsn/Dialect/FlexSN/Transforms/Passes.h.inc"
} // namespace mlir::flexsn

using namespace mlir;

namespace {
/// The chips `ptxas --help` of CUDA 13 lists (docs/Reference.md).
constexpr StringLiteral kKnownChips[] = {
    "sm_70",   "sm_75",   "sm_80",   "sm_86",   "sm_87",   "sm_88",
    "sm_89",   "sm_90",   "sm_90a",  "sm_100",  "sm_100a", "sm_100f",
    "sm_103",  "sm_103a", "sm_103f", "sm_110",  "sm_110a", "sm_110f",
    "sm_120",  "sm_120a", "sm_120f", "sm_121",  "sm_121a", "sm_121f"};

struct CheckGPUOptionsPass
    : flexsn::impl::FlexSNCheckGPUOptionsBase<CheckGPUOptionsPass> {
  using Base::Base;

  void runOnOperation() override {
    if (format != "bin" && format != "fatbin" && format != "isa") {
      getOperation().emitError() << "unknown GPU object format '" << format
                                 << "'; expected bin, fatbin or isa";
      return signalPassFailure();
    }
    for (const std::string &chip : chips) {
      if (llvm::is_contained(kKnownChips, chip))
        continue;
      getOperation().emitError()
          << "unknown chip '" << chip << "'; CUDA 13's ptxas targets "
          << llvm::join(ArrayRef<StringLiteral>(kKnownChips), ", ");
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
