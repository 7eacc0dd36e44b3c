//===- CUDATarget.cpp - Kernels for NVIDIA GPUs ---------------------------===//
//
// Part of the FlexSN project: an MLIR compiler for spiking-neuron dynamics.
//
//===----------------------------------------------------------------------===//
//
// The CUDA target: flexsn-lower-to-nvvm lowers the kernels to NVVM and
// ptxas assembles one cubin per chip; one chip's is written as
// kernels.cubin, several are bundled into kernels.fatbin by the toolkit's
// fatbinary. The runtime (flexsn_runtime.h) loads either.
//
//===----------------------------------------------------------------------===//

#include "flexsn/Pipelines/CompileRequest.h"
#include "flexsn/Pipelines/Pipelines.h"
#include "flexsn/Target/GPUBinary.h"
#include "flexsn/Targets/Target.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"

#include "llvm/Support/TargetSelect.h"

using namespace mlir;
using namespace mlir::flexsn;
namespace cl = llvm::cl;

namespace {
class CUDAJob : public TargetJob {
public:
  CUDAJob(std::unique_ptr<LowerToNVVMOptions> options, bool fatbin,
          std::string fatbinToolkit)
      : options(std::move(options)), fatbin(fatbin),
        fatbinToolkit(std::move(fatbinToolkit)) {}

  void buildPipeline(OpPassManager &pm) const override {
    buildLowerToNVVMPipeline(pm, *options);
  }

  /// A cubin, or a fatbin of every chip's.
  LogicalResult writeArtifacts(ModuleOp lowered,
                               ArtifactWriter &out) const override {
    return out.write(fatbin ? "kernels.fatbin" : "kernels.cubin",
                     [&](raw_ostream &os) {
                       if (!fatbin)
                         return translateToCubin(lowered, os);
                       if (fatbinToolkit.empty())
                         return translateToFatbin(lowered, os);
                       return translateToFatbin(lowered, os, fatbinToolkit);
                     });
  }

private:
  std::unique_ptr<LowerToNVVMOptions> options;
  bool fatbin;
  /// The toolkit whose fatbinary bundles a fatbin (a request's); empty:
  /// --flexsn-toolkit's.
  std::string fatbinToolkit;
};

class CUDATarget : public Target {
public:
  StringRef getName() const override { return "cuda"; }
  StringRef getDescription() const override {
    return "CUDA kernels (gpu.json, kernels.cubin or kernels.fatbin)";
  }
  StringRef getFlag() const override { return "gpu"; }
  StringRef getManifestFile() const override { return "gpu.json"; }
  SmallVector<StringRef> getKernelFiles() const override {
    return {"kernels.cubin", "kernels.fatbin"};
  }
  StringRef getKernelsAttrName() const override { return "flexsn.gpu_kernels"; }
  bool lowersInOwnThread() const override { return true; }

  void registerToolOptions(cl::OptionCategory &category) override {
    fatbin = std::make_unique<cl::opt<bool>>(
        "fatbin",
        cl::desc("Write the GPU kernels as kernels.fatbin (for several "
                 "chips), bundled by the fatbinary of --flexsn-toolkit"),
        cl::cat(category));
  }
  void initializeLLVMBackends() const override {
    LLVMInitializeNVPTXTargetInfo();
    LLVMInitializeNVPTXTarget();
    LLVMInitializeNVPTXTargetMC();
    LLVMInitializeNVPTXAsmPrinter();
  }

  FailureOr<std::unique_ptr<TargetJob>>
  parseFlags(StringRef text, TargetErrorFn error) const override {
    auto options = std::make_unique<LowerToNVVMOptions>();
    if (failed(options->parseFromString(text)) ||
        failed(checkLowerToNVVMOptions(*options, error)))
      return failure();
    return std::unique_ptr<TargetJob>(std::make_unique<CUDAJob>(
        std::move(options), fatbin && *fatbin, /*fatbinToolkit=*/""));
  }
  FailureOr<std::unique_ptr<TargetJob>>
  readRequest(const llvm::json::Object &section,
              const llvm::json::Object *kernels,
              TargetErrorFn error) const override {
    FailureOr<std::unique_ptr<LowerToNVVMOptions>> options =
        readLowerToNVVMOptions(
            section, kernels ? *kernels : llvm::json::Object(), error);
    if (failed(options))
      return failure();
    bool bundled = section.getBoolean("fatbin").value_or(false);
    if ((*options)->chips.size() > 1 && !bundled)
      return error(
          "request.targets.cuda.chips: " + Twine((*options)->chips.size()) +
          " chips make one cubin each, which only a fatbin holds: "
          "set request.targets.cuda.fatbin");
    std::string toolkit = (*options)->toolkit;
    return std::unique_ptr<TargetJob>(
        std::make_unique<CUDAJob>(std::move(*options), bundled, toolkit));
  }
  SmallVector<const cl::Option *> getRequestedFlags() const override {
    if (!fatbin)
      return {};
    return {fatbin.get()};
  }

  /// "chips": the chip of each of the module's cubins.
  void writeManifestEntries(ModuleOp lowered,
                            llvm::json::OStream &json) const override {
    json.attributeArray("chips", [&] {
      for (auto binary : lowered.getOps<gpu::BinaryOp>())
        for (auto object : binary.getObjects().getAsRange<gpu::ObjectAttr>())
          if (auto nvvm = dyn_cast<NVVM::NVVMTargetAttr>(object.getTarget()))
            json.value(nvvm.getChip());
    });
  }

private:
  std::unique_ptr<cl::opt<bool>> fatbin;
};
} // namespace

FLEXSN_REGISTER_TARGET(CUDA, CUDATarget)
