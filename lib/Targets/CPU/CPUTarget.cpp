//===- CPUTarget.cpp - Kernels for the host's CPU -------------------------===//
//
// Part of the FlexSN project: an MLIR compiler for spiking-neuron dynamics.
//
//===----------------------------------------------------------------------===//
//
// The CPU target: flexsn-lower-to-cpu lowers the kernels to LLVM IR for
// the host, which is compiled to an object and linked by the C compiler
// driver into kernels.so, with LLVM's OpenMP runtime.
//
//===----------------------------------------------------------------------===//

#include "flexsn/Pipelines/CompileRequest.h"
#include "flexsn/Pipelines/Pipelines.h"
#include "flexsn/Target/HostObject.h"
#include "flexsn/Targets/Target.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/TargetSelect.h"

using namespace mlir;
using namespace mlir::flexsn;
namespace cl = llvm::cl;

namespace {
/// The host tools that link the kernels (flexsn-compile's --cc and
/// --openmp-library).
struct HostLinker {
  std::string cCompiler;
  std::string openmpLibrary;

  /// Links `object` into the shared library `library`.
  LogicalResult link(StringRef object, StringRef library) const {
    llvm::ErrorOr<std::string> program =
        llvm::sys::path::is_absolute(cCompiler)
            ? std::string(cCompiler)
            : llvm::sys::findProgramByName(cCompiler);
    if (!program) {
      llvm::errs() << "flexsn-compile: no C compiler driver '" << cCompiler
                   << "' to link the CPU kernels (--cc)\n";
      return failure();
    }
    std::string rpath =
        ("-Wl,-rpath," + llvm::sys::path::parent_path(openmpLibrary)).str();
    SmallVector<StringRef> argv = {*program, "-shared",     "-o",  library,
                                   object,   openmpLibrary, rpath, "-lm"};
    std::string error;
    if (llvm::sys::ExecuteAndWait(*program, argv, /*Env=*/std::nullopt,
                                  /*Redirects=*/{}, /*SecondsToWait=*/0,
                                  /*MemoryLimit=*/0, &error) != 0) {
      llvm::errs() << "flexsn-compile: linking the CPU kernels failed"
                   << (error.empty() ? "" : ": " + error) << "\n";
      return failure();
    }
    return success();
  }
};

class CPUJob : public TargetJob {
public:
  CPUJob(std::unique_ptr<LowerToCPUOptions> options, HostLinker linker)
      : options(std::move(options)), linker(std::move(linker)) {}

  void buildPipeline(OpPassManager &pm) const override {
    buildLowerToCPUPipeline(pm, *options);
  }

  /// The host object, linked into kernels.so (the object is removed).
  LogicalResult writeArtifacts(ModuleOp lowered,
                               ArtifactWriter &out) const override {
    std::string object = out.claim("kernels.o");
    std::string library = out.claim("kernels.so");
    if (failed(out.write("kernels.o", [&](raw_ostream &os) {
          return translateToHostObject(lowered, os);
        })))
      return failure();
    LogicalResult linked = linker.link(object, library);
    (void)llvm::sys::fs::remove(object);
    return linked;
  }

private:
  std::unique_ptr<LowerToCPUOptions> options;
  HostLinker linker;
};

class CPUTarget : public Target {
public:
  StringRef getName() const override { return "cpu"; }
  StringRef getDescription() const override {
    return "CPU kernels (cpu.json, kernels.so)";
  }
  StringRef getManifestFile() const override { return "cpu.json"; }
  SmallVector<StringRef> getKernelFiles() const override {
    return {"kernels.so"};
  }
  StringRef getKernelsAttrName() const override { return "flexsn.cpu_kernels"; }

  void registerToolOptions(cl::OptionCategory &category) override {
    cCompiler = std::make_unique<cl::opt<std::string>>(
        "cc", cl::desc("The C compiler driver linking the CPU kernels"),
        cl::init("cc"), cl::cat(category));
    openmpLibrary = std::make_unique<cl::opt<std::string>>(
        "openmp-library",
        cl::desc("LLVM's OpenMP runtime (libomp), which the CPU kernels "
                 "link, and find at run time in its directory"),
        cl::init(FLEXSN_OPENMP_LIBRARY), cl::cat(category));
  }
  void initializeLLVMBackends() const override {
    llvm::InitializeNativeTarget();
    llvm::InitializeNativeTargetAsmPrinter();
  }

  FailureOr<std::unique_ptr<TargetJob>>
  parseFlags(StringRef text, TargetErrorFn error) const override {
    auto options = std::make_unique<LowerToCPUOptions>();
    if (failed(options->parseFromString(text)) ||
        failed(checkLowerToCPUOptions(*options, error)))
      return failure();
    return makeJob(std::move(options));
  }
  FailureOr<std::unique_ptr<TargetJob>>
  readRequest(const llvm::json::Object &section,
              const llvm::json::Object *kernels,
              TargetErrorFn error) const override {
    FailureOr<std::unique_ptr<LowerToCPUOptions>> options =
        readLowerToCPUOptions(section,
                              kernels ? *kernels : llvm::json::Object(), error);
    if (failed(options))
      return failure();
    return makeJob(std::move(*options));
  }

private:
  std::unique_ptr<TargetJob>
  makeJob(std::unique_ptr<LowerToCPUOptions> options) const {
    HostLinker linker{cCompiler ? cCompiler->getValue() : "cc",
                      openmpLibrary ? openmpLibrary->getValue()
                                    : FLEXSN_OPENMP_LIBRARY};
    return std::make_unique<CPUJob>(std::move(options), std::move(linker));
  }

  std::unique_ptr<cl::opt<std::string>> cCompiler, openmpLibrary;
};
} // namespace

FLEXSN_REGISTER_TARGET(CPU, CPUTarget)
