//===- CheckGPUOptions.cpp - Fail early on a broken GPU setup ------------===//
//
// Part of the FlexSN project: an MLIR compiler for spiking-neuron dynamics.
//
//===----------------------------------------------------------------------===//

#include "flexsn/Pipelines/Passes.h"

#include "flexsn/Dialect/FlexSN/Transforms/Passes.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/MC/MCSubtargetInfo.h"
#include "llvm/MC/TargetRegistry.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/TargetSelect.h"

#include <mutex>

namespace mlir::flexsn {
#define GEN_PASS_DEF_FLEXSNCHECKGPUOPTIONS
#include "flexsn/Pipelines/Passes.h.inc"
} // namespace mlir::flexsn

using namespace mlir;

namespace {
/// The chips `ptxas --help` of CUDA 13 lists (docs/Reference.md).
constexpr StringLiteral kKnownChips[] = {
    "sm_70",  "sm_75",   "sm_80",   "sm_86",  "sm_87",   "sm_88",
    "sm_89",  "sm_90",   "sm_90a",  "sm_100", "sm_100a", "sm_100f",
    "sm_103", "sm_103a", "sm_103f", "sm_110", "sm_110a", "sm_110f",
    "sm_120", "sm_120a", "sm_120f", "sm_121", "sm_121a", "sm_121f"};

/// The features LLVM's NVPTX target knows (ptx32 ... and the sm_* ones),
/// or none if LLVM was built without it.
SmallVector<std::string> getNVPTXFeatures() {
  static std::once_flag init;
  std::call_once(init, [] {
    LLVMInitializeNVPTXTargetInfo();
    LLVMInitializeNVPTXTargetMC();
  });
  llvm::Triple triple("nvptx64-nvidia-cuda");
  std::string error;
  const llvm::Target *target =
      llvm::TargetRegistry::lookupTarget(triple, error);
  if (!target)
    return {};
  std::unique_ptr<llvm::MCSubtargetInfo> info(
      target->createMCSubtargetInfo(triple, "sm_90", ""));
  if (!info)
    return {};
  return llvm::map_to_vector(info->getAllProcessorFeatures(),
                             [](const llvm::SubtargetFeatureKV &feature) {
                               return std::string(feature.Key);
                             });
}

struct CheckGPUOptionsPass
    : flexsn::impl::FlexSNCheckGPUOptionsBase<CheckGPUOptionsPass> {
  using Base::Base;

  LogicalResult initializeOptions(
      StringRef options,
      function_ref<LogicalResult(const Twine &)> errorHandler) override {
    if (failed(Base::initializeOptions(options, errorHandler)))
      return failure();
    return flexsn::checkListOptions(getArgument(), errorHandler, chips);
  }

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
    // LLVM ignores an unknown feature with a warning (and reads a feature
    // without a sign as disabled).
    SmallVector<std::string> known = getNVPTXFeatures();
    SmallVector<StringRef> items;
    StringRef(features).split(items, ',', /*MaxSplit=*/-1, /*KeepEmpty=*/false);
    for (StringRef item : items) {
      StringRef name = item.trim().drop_front();
      if ((item.trim().starts_with("+") || item.trim().starts_with("-")) &&
          (known.empty() || llvm::is_contained(known, name)))
        continue;
      SmallVector<std::string> ptx = llvm::filter_to_vector(
          known, [](StringRef f) { return f.starts_with("ptx"); });
      InFlightDiagnostic diag = getOperation().emitError()
                                << "unknown PTX feature '" << item
                                << "' in features=" << features
                                << "; expected +<feature> or -<feature>, "
                                   "such as +ptx80";
      if (!ptx.empty())
        diag << " (LLVM's NVPTX target knows " << ptx.front() << " to "
             << ptx.back() << ")";
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
