//===- TestTarget.cpp - A target of FlexSN's own tests --------------------===//
//
// Part of the FlexSN project: an MLIR compiler for spiking-neuron dynamics.
//
//===----------------------------------------------------------------------===//
//
// The loops target: each neuron's f32 inference kernel as serial loops
// (kernels.loops.mlir), with its manifest (loops.json). It lives only to
// prove that a target is its folder and one registry line: it touches no
// other file (test/Targets/loops-target.test). It is no part of the
// request schema, so the Python layer never offers it.
//
//===----------------------------------------------------------------------===//

#include "flexsn/Conversion/Passes.h"
#include "flexsn/Dialect/FlexSN/Transforms/Passes.h"
#include "flexsn/Targets/Target.h"

#include "mlir/Pass/PassManager.h"

using namespace mlir;
using namespace mlir::flexsn;

namespace {
class LoopsJob : public TargetJob {
public:
  void buildPipeline(OpPassManager &pm) const override {
    FlexSNGenerateKernelsOptions kernels;
    kernels.variants.push_back(KernelVariant::Inference);
    kernels.storageTypes.push_back(StorageType::F32);
    pm.addPass(createFlexSNGenerateKernels(kernels));
    ConvertFlexSNToSCFOptions loops;
    loops.parallel = false;
    pm.addPass(createConvertFlexSNToSCF(loops));
  }

  LogicalResult writeArtifacts(ModuleOp lowered,
                               ArtifactWriter &out) const override {
    return out.write("kernels.loops.mlir", [&](raw_ostream &os) {
      lowered.print(os);
      os << "\n";
      return success();
    });
  }
};

class LoopsTarget : public Target {
public:
  StringRef getName() const override { return "loops"; }
  StringRef getDescription() const override {
    return "Serial f32 inference loops (loops.json, kernels.loops.mlir), "
           "for FlexSN's tests";
  }
  StringRef getManifestFile() const override { return "loops.json"; }
  SmallVector<StringRef> getKernelFiles() const override {
    return {"kernels.loops.mlir"};
  }
  StringRef getKernelsAttrName() const override { return "flexsn.cpu_kernels"; }
  bool isForTesting() const override { return true; }

  FailureOr<std::unique_ptr<TargetJob>>
  parseFlags(StringRef text, TargetErrorFn error) const override {
    if (!text.trim().empty())
      return error("the loops target takes no options, got '" + text + "'");
    return std::unique_ptr<TargetJob>(std::make_unique<LoopsJob>());
  }
  FailureOr<std::unique_ptr<TargetJob>>
  readRequest(const llvm::json::Object &, const llvm::json::Object *,
              TargetErrorFn) const override {
    // The request's reader refused any field: the target declares none.
    return std::unique_ptr<TargetJob>(std::make_unique<LoopsJob>());
  }
};
} // namespace

FLEXSN_REGISTER_TARGET(Test, LoopsTarget)
