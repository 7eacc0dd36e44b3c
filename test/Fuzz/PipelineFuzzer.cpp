//===- PipelineFuzzer.cpp - Fuzz target: the CPU and GPU pipelines --------===//
//
// Part of the FlexSN project: an MLIR compiler for spiking-neuron dynamics.
//
//===----------------------------------------------------------------------===//
//
// Runs what `flexsn-opt --flexsn-lower-to-cpu` and `--flexsn-lower-to-nvvm`
// run on every input that parses: kernel generation and autodiff for all
// four variants, in f32 and a 16-bit storage type, then the CPU path to LLVM
// IR and the GPU path to PTX (format=isa: LLVM's NVPTX backend in process,
// no ptxas; skipped when the CUDA toolkit's libdevice is absent).
// Properties:
//   - a pipeline that fails emits at least one error diagnostic;
//   - one that succeeds leaves a module that verifies (the pass manager
//     checks after every pass); the CPU result translates to LLVM IR that
//     LLVM's verifier accepts, and the GPU result of a module with neurons
//     holds a gpu.binary.
//
//===----------------------------------------------------------------------===//

#include "FuzzerSupport.h"

#include "MlirFuzzing.h"

#include "flexsn/Dialect/FlexSN/IR/FlexSNOps.h"
#include "flexsn/Pipelines/Pipelines.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Target/LLVMIR/Export.h"

#include "llvm/IR/LLVMContext.h"
#include "llvm/IR/Module.h"
#include "llvm/IR/Verifier.h"
#include "llvm/Support/FileSystem.h"

using namespace mlir;
using namespace mlir::flexsn;
using namespace mlir::flexsn::fuzzing;

#ifndef FLEXSN_CUDA_TOOLKIT
#define FLEXSN_CUDA_TOOLKIT "/usr/local/cuda"
#endif

namespace {

bool haveLibdevice() {
  static bool found = llvm::sys::fs::exists(FLEXSN_CUDA_TOOLKIT
                                            "/nvvm/libdevice/libdevice.10.bc");
  return found;
}

/// Runs `build`'s pipeline on a copy of `module`; checks the failure
/// property and returns the result on success.
template <typename BuildFn>
OwningOpRef<ModuleOp> runPipeline(ModuleOp module, bool &emittedError,
                                  BuildFn build) {
  OwningOpRef<ModuleOp> copy = module.clone();
  PassManager pm(module.getContext());
  build(pm);
  emittedError = false;
  if (failed(pm.run(*copy))) {
    FLEXSN_FUZZ_CHECK(emittedError, "a pipeline failed without an error");
    return nullptr;
  }
  return copy;
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  FuzzContext fuzz;
  bool &emittedError = fuzz.emittedError;
  OwningOpRef<ModuleOp> module = fuzz.parse(toText(data, size));
  if (!module)
    return 0;

  OwningOpRef<ModuleOp> cpu =
      runPipeline(*module, emittedError, [](OpPassManager &pm) {
        LowerToCPUOptions options;
        options.variants = {KernelVariant::Inference, KernelVariant::FinalState,
                            KernelVariant::Forward, KernelVariant::Backward};
        options.storageTypes = {StorageType::F32, StorageType::F16};
        buildLowerToCPUPipeline(pm, options);
      });
  if (cpu) {
    llvm::LLVMContext llvmContext;
    emittedError = false;
    std::unique_ptr<llvm::Module> llvmModule =
        translateModuleToLLVMIR(*cpu, llvmContext, "fuzz");
    FLEXSN_FUZZ_CHECK(llvmModule || emittedError,
                      "translation to LLVM IR failed without an error");
    FLEXSN_FUZZ_CHECK(!llvmModule || !llvm::verifyModule(*llvmModule),
                      "the CPU pipeline produced invalid LLVM IR");
  }

  if (!haveLibdevice())
    return 0;
  OwningOpRef<ModuleOp> gpu =
      runPipeline(*module, emittedError, [](OpPassManager &pm) {
        LowerToNVVMOptions options;
        options.variants = {KernelVariant::Inference, KernelVariant::FinalState,
                            KernelVariant::Forward, KernelVariant::Backward};
        options.storageTypes = {StorageType::F32, StorageType::BF16};
        options.format = "isa";
        options.toolkit = FLEXSN_CUDA_TOOLKIT;
        buildLowerToNVVMPipeline(pm, options);
      });
  if (gpu) {
    bool haveNeuron = false, haveBinary = false;
    module->walk([&](NeuronOp) { haveNeuron = true; });
    gpu->walk([&](gpu::BinaryOp) { haveBinary = true; });
    FLEXSN_FUZZ_CHECK(haveBinary || !haveNeuron,
                      "the GPU pipeline compiled neurons to no binary");
  }
  return 0;
}
