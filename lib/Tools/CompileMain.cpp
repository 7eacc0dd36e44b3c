//===- CompileMain.cpp - A neuron to kernels in one run ------------------===//
//
// Part of the FlexSN project: an MLIR compiler for spiking-neuron dynamics.
//
//===----------------------------------------------------------------------===//
//
// What flexsn-opt and flexsn-translate do for one compile, in one process:
// the source is parsed once, configured, and lowered for each target from
// the same module, and every output is written into one directory:
//
//   configured.mlir, neuron.json   the configured neurons and their manifest
//   torch_step.py                  with --neuron-manifest: their steps over
//                                  PyTorch tensors, where every op has a
//                                  PyTorch form (--flexsn-to-torch)
//   cpu.json, kernels.so           with --cpu: the CPU kernels, linked by cc
//   gpu.json, kernels.cubin        with --gpu (kernels.fatbin for several
//                                  chips)
//
// The options come either as flags (--configure, --cpu and --gpu taking
// pass-option text, as flexsn-opt does) or as one typed compile request,
// `--request=<file>` (CompileRequest.h), which is what the Python layer
// writes.
//
// Each tool process loads libMLIR and registers every dialect and pass; a
// compile used to pay that, and parse its module again, in about ten
// processes (docs/Python.md).
//
//===----------------------------------------------------------------------===//

#include "flexsn/Dialect/FlexSN/IR/FlexSNOps.h"
#include "flexsn/Pipelines/CompileRequest.h"
#include "flexsn/Target/GPUBinary.h"
#include "flexsn/Target/HostObject.h"
#include "flexsn/Target/Manifest.h"
#include "flexsn/Target/TorchStep.h"
#include "flexsn/Tools/ParserHazards.h"
#include "flexsn/Tools/Registration.h"
#include "flexsn/Tools/ToolMains.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Support/FileUtilities.h"

#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Support/thread.h"

#include <mutex>
#include <optional>
#include <vector>

using namespace mlir;
namespace cl = llvm::cl;

namespace {
/// The options, registered when compileMain runs (ToolMains.h).
struct CompileOptions {
  cl::OptionCategory category{"flexsn-compile options"};
  cl::opt<std::string> inputFilename{cl::Positional, cl::desc("<neuron file>"),
                                     cl::init("-"), cl::cat(category)};
  cl::opt<std::string> outputDir{"o", cl::desc("Directory of the outputs"),
                                 cl::value_desc("directory"),
                                 cl::cat(category)};
  cl::opt<std::string> request{
      "request",
      cl::desc("A compile request: every option of the compile as one typed "
               "JSON object (docs/CompileRequest.md), instead of --configure, "
               "--neuron-manifest, --cpu, --gpu and --fatbin"),
      cl::value_desc("file"), cl::cat(category)};
  cl::opt<bool> printRequestSchema{
      "print-request-schema",
      cl::desc("Print the compile request's fields (types, defaults, "
               "values) as JSON and exit"),
      cl::cat(category)};
  cl::opt<std::string> configure{
      "configure",
      cl::desc(
          "Pass pipeline configuring the source before it is written "
          "as configured.mlir (e.g. 'flexsn-set-params{kinds=tau=runtime}')"),
      cl::cat(category)};
  cl::opt<bool> neuronManifest{
      "neuron-manifest",
      cl::desc("Write neuron.json, the manifest of the configured neurons"),
      cl::cat(category)};
  cl::opt<std::string> cpuOptions{
      "cpu",
      cl::desc("Lower with flexsn-lower-to-cpu{<options>}: cpu.json and "
               "kernels.so"),
      cl::value_desc("options"), cl::ValueOptional, cl::cat(category)};
  cl::opt<std::string> gpuOptions{
      "gpu",
      cl::desc("Lower with flexsn-lower-to-nvvm{<options>}: gpu.json and "
               "kernels.cubin (kernels.fatbin with --fatbin)"),
      cl::value_desc("options"), cl::ValueOptional, cl::cat(category)};
  cl::opt<bool> fatbin{"fatbin",
                       cl::desc("Write the GPU kernels as kernels.fatbin (for "
                                "several chips), bundled by the fatbinary of "
                                "--flexsn-toolkit"),
                       cl::cat(category)};
  cl::opt<std::string> cCompiler{
      "cc", cl::desc("The C compiler driver linking the CPU kernels"),
      cl::init("cc"), cl::cat(category)};
  cl::opt<std::string> openmpLibrary{
      "openmp-library",
      cl::desc("LLVM's OpenMP runtime (libomp), which the CPU kernels link, "
               "and find at run time in its directory"),
      cl::init(FLEXSN_OPENMP_LIBRARY), cl::cat(category)};
};

/// The options of the running compile (set by compileMain, which a process
/// runs once).
const CompileOptions *options = nullptr;

/// What the running compile builds, from the flags or from a request.
struct CompileJob {
  /// A pass pipeline configuring the source (--configure), or
  /// flexsn-set-params' options (a request); neither configures nothing.
  std::string configurePipeline;
  std::optional<flexsn::FlexSNSetParamsOptions> setParams;
  bool neuronManifest = false;
  std::unique_ptr<flexsn::LowerToCPUOptions> cpu;
  std::unique_ptr<flexsn::LowerToNVVMOptions> cuda;
  bool fatbin = false;
  /// The toolkit whose fatbinary bundles a fatbin (a request's CUDA
  /// toolkit); empty: --flexsn-toolkit's.
  std::string fatbinToolkit;
};
const CompileJob *job = nullptr;

/// The files this run wrote: a failed compile removes them, so that no
/// complete-looking set of outputs is left behind.
std::vector<std::string> writtenOutputs;
std::mutex writtenOutputsMutex;

void removeWrittenOutputs() {
  std::lock_guard<std::mutex> lock(writtenOutputsMutex);
  for (const std::string &path : writtenOutputs)
    (void)llvm::sys::fs::remove(path);
  writtenOutputs.clear();
}

/// Writes `path` in the output directory with `write`; fails with an error
/// naming the file.
LogicalResult writeOutput(StringRef name,
                          function_ref<LogicalResult(raw_ostream &)> write) {
  SmallString<128> path(options->outputDir);
  llvm::sys::path::append(path, name);
  {
    std::lock_guard<std::mutex> lock(writtenOutputsMutex);
    writtenOutputs.push_back(std::string(path));
  }
  std::string error;
  std::unique_ptr<llvm::ToolOutputFile> file = openOutputFile(path, &error);
  if (!file) {
    llvm::errs() << "flexsn-compile: " << error << "\n";
    return failure();
  }
  if (failed(write(file->os())))
    return failure();
  file->keep();
  return success();
}

/// Runs the pass pipeline that `build` adds to a pass manager on `module`.
LogicalResult runPipeline(ModuleOp module,
                          function_ref<LogicalResult(OpPassManager &)> build) {
  PassManager pm(module->getName());
  if (failed(build(pm)))
    return failure();
  return pm.run(module);
}

/// Runs the textual pass pipeline `pipeline` on `module`.
LogicalResult runPipeline(ModuleOp module, StringRef pipeline) {
  return runPipeline(module, [&](OpPassManager &pm) {
    std::string errors;
    llvm::raw_string_ostream errorStream(errors);
    if (failed(parsePassPipeline(pipeline, pm, errorStream))) {
      llvm::errs() << "flexsn-compile: " << errors << "\n";
      return failure();
    }
    return success();
  });
}

/// Links `object` into the shared library `library` with the C compiler.
LogicalResult linkSharedLibrary(StringRef object, StringRef library) {
  llvm::ErrorOr<std::string> program =
      llvm::sys::path::is_absolute(options->cCompiler)
          ? std::string(options->cCompiler)
          : llvm::sys::findProgramByName(options->cCompiler);
  if (!program) {
    llvm::errs() << "flexsn-compile: no C compiler driver '"
                 << options->cCompiler << "' to link the CPU kernels (--cc)\n";
    return failure();
  }
  std::string rpath =
      ("-Wl,-rpath," + llvm::sys::path::parent_path(options->openmpLibrary))
          .str();
  SmallVector<StringRef> argv = {*program, "-shared", "-o",
                                 library,  object,    options->openmpLibrary,
                                 rpath,    "-lm"};
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

/// Lowers a copy of `configured` with the pipeline `build` adds, then
/// writes its manifest and its kernels with `writeKernels`.
LogicalResult lower(ModuleOp configured,
                    function_ref<void(OpPassManager &)> build,
                    StringRef manifestName,
                    function_ref<LogicalResult(ModuleOp)> writeKernels) {
  OwningOpRef<ModuleOp> module = configured.clone();
  if (failed(runPipeline(*module,
                         [&](OpPassManager &pm) {
                           build(pm);
                           return success();
                         })) ||
      failed(writeOutput(manifestName, [&](raw_ostream &os) {
        return flexsn::translateToManifest(*module, os);
      })))
    return failure();
  return writeKernels(*module);
}

/// Writes the CPU kernels of `lowered`: the host object, linked into
/// kernels.so.
LogicalResult writeCPUKernels(ModuleOp lowered) {
  SmallString<128> object(options->outputDir), library(options->outputDir);
  llvm::sys::path::append(object, "kernels.o");
  llvm::sys::path::append(library, "kernels.so");
  if (failed(writeOutput("kernels.o", [&](raw_ostream &os) {
        return flexsn::translateToHostObject(lowered, os);
      })))
    return failure();
  {
    std::lock_guard<std::mutex> lock(writtenOutputsMutex);
    writtenOutputs.push_back(std::string(library));
  }
  LogicalResult linked = linkSharedLibrary(object, library);
  (void)llvm::sys::fs::remove(object);
  return linked;
}

/// Writes the GPU kernels of `lowered`: a cubin, or a fatbin.
LogicalResult writeGPUKernels(ModuleOp lowered) {
  return writeOutput(
      job->fatbin ? "kernels.fatbin" : "kernels.cubin", [&](raw_ostream &os) {
        if (!job->fatbin)
          return flexsn::translateToCubin(lowered, os);
        if (job->fatbinToolkit.empty())
          return flexsn::translateToFatbin(lowered, os);
        return flexsn::translateToFatbin(lowered, os, job->fatbinToolkit);
      });
}

/// Lowers the configured module `text` (printed with its locations) for
/// the GPU in a context of its own: the GPU lowering (LLVM's NVPTX backend,
/// then ptxas) takes longest, and runs beside the CPU's.
LogicalResult lowerForGPU(const DialectRegistry &registry,
                          const std::string &text) {
  MLIRContext context(registry);
  llvm::SourceMgr sourceMgr;
  sourceMgr.AddNewSourceBuffer(llvm::MemoryBuffer::getMemBuffer(text),
                               llvm::SMLoc());
  SourceMgrDiagnosticHandler handler(sourceMgr, &context);
  OwningOpRef<ModuleOp> module = parseSourceFile<ModuleOp>(sourceMgr, &context);
  if (!module)
    return failure();
  return lower(
      *module,
      [](OpPassManager &pm) {
        flexsn::buildLowerToNVVMPipeline(pm, *job->cuda);
      },
      "gpu.json", writeGPUKernels);
}

LogicalResult compile(const DialectRegistry &registry, MLIRContext &context,
                      llvm::SourceMgr &sourceMgr) {
  if (failed(flexsn::checkParserHazards(sourceMgr, &context)))
    return failure();
  OwningOpRef<ModuleOp> module = parseSourceFile<ModuleOp>(sourceMgr, &context);
  if (!module || failed(verify(*module)))
    return failure();
  if (module->getOps<flexsn::NeuronOp>().empty() &&
      module->getOps<func::FuncOp>().empty()) {
    emitError(module->getLoc())
        << "nothing to compile: the file defines no flexsn.neuron (and no "
           "kernel function)";
    return failure();
  }
  if (job->setParams && failed(runPipeline(*module, [](OpPassManager &pm) {
        pm.addPass(flexsn::createFlexSNSetParams(*job->setParams));
        return success();
      })))
    return failure();
  if (!job->configurePipeline.empty() &&
      failed(runPipeline(*module, job->configurePipeline)))
    return failure();
  if (failed(writeOutput("configured.mlir", [&](raw_ostream &os) {
        module->print(os);
        os << "\n";
        return success();
      })))
    return failure();
  if (job->neuronManifest &&
      failed(writeOutput("neuron.json", [&](raw_ostream &os) {
        return flexsn::translateToManifest(*module, os);
      })))
    return failure();
  if (job->neuronManifest) {
    // Optional: a neuron with an op that has no PyTorch form runs its
    // kernels under torch.compile too, so its error is no compile error.
    std::string step;
    llvm::raw_string_ostream os(step);
    LogicalResult translated = failure();
    {
      ScopedDiagnosticHandler quiet(&context,
                                    [](Diagnostic &) { return success(); });
      translated = flexsn::translateToTorchStep(*module, os);
    }
    if (succeeded(translated) &&
        failed(writeOutput("torch_step.py", [&](raw_ostream &out) {
          out << step;
          return success();
        })))
      return failure();
  }

  // The targets' LLVM backends are registered once, before the lowerings
  // run side by side.
  llvm::InitializeNativeTarget();
  llvm::InitializeNativeTargetAsmPrinter();
  LogicalResult gpu = success();
  std::optional<llvm::thread> gpuThread;
  if (job->cuda) {
    LLVMInitializeNVPTXTargetInfo();
    LLVMInitializeNVPTXTarget();
    LLVMInitializeNVPTXTargetMC();
    LLVMInitializeNVPTXAsmPrinter();
    std::string text;
    llvm::raw_string_ostream os(text);
    module->print(os, OpPrintingFlags().enableDebugInfo());
    // As deep a stack as the main thread's (DeepStack.h): the module is
    // parsed again there.
    gpuThread.emplace(std::optional<unsigned>(1u << 30),
                      [&registry, &gpu, text = std::move(text)] {
                        gpu = lowerForGPU(registry, text);
                      });
  }
  LogicalResult cpu = success();
  if (job->cpu)
    cpu = lower(
        *module,
        [](OpPassManager &pm) {
          flexsn::buildLowerToCPUPipeline(pm, *job->cpu);
        },
        "cpu.json", writeCPUKernels);
  if (gpuThread)
    gpuThread->join();
  return success(succeeded(cpu) && succeeded(gpu));
}

LogicalResult reportError(const Twine &message) {
  llvm::errs() << "flexsn-compile: " << message << "\n";
  return failure();
}

/// The job the flags describe: --cpu's and --gpu's pass-option text parsed
/// into the pipelines' options and checked as the pipelines check it.
FailureOr<CompileJob> getJobFromFlags() {
  CompileJob flags;
  flags.configurePipeline = options->configure;
  flags.neuronManifest = options->neuronManifest;
  flags.fatbin = options->fatbin;
  if (options->fatbin && !options->gpuOptions.getNumOccurrences())
    return reportError("--fatbin writes the GPU kernels: it needs --gpu");
  if (options->cpuOptions.getNumOccurrences()) {
    flags.cpu = std::make_unique<flexsn::LowerToCPUOptions>();
    if (failed(flags.cpu->parseFromString(options->cpuOptions)) ||
        failed(flexsn::checkLowerToCPUOptions(*flags.cpu, reportError)))
      return failure();
  }
  if (options->gpuOptions.getNumOccurrences()) {
    flags.cuda = std::make_unique<flexsn::LowerToNVVMOptions>();
    if (failed(flags.cuda->parseFromString(options->gpuOptions)) ||
        failed(flexsn::checkLowerToNVVMOptions(*flags.cuda, reportError)))
      return failure();
  }
  return flags;
}

/// The job of the request file `path`, which holds every option: a flag
/// that would also set one is an error.
FailureOr<CompileJob> getJobFromRequest(StringRef path) {
  for (const cl::Option *option :
       {static_cast<const cl::Option *>(&options->configure),
        static_cast<const cl::Option *>(&options->neuronManifest),
        static_cast<const cl::Option *>(&options->cpuOptions),
        static_cast<const cl::Option *>(&options->gpuOptions),
        static_cast<const cl::Option *>(&options->fatbin)})
    if (option->getNumOccurrences())
      return reportError("--request holds every option of the compile: "
                         "give --" +
                         option->ArgStr + " in the request, not beside it");
  std::string error;
  std::unique_ptr<llvm::MemoryBuffer> text = openInputFile(path, &error);
  if (!text)
    return reportError(error);
  FailureOr<flexsn::CompileRequest> request =
      flexsn::parseCompileRequest(text->getBuffer(), [&](const Twine &message) {
        (void)reportError(path + ": " + message);
      });
  if (failed(request))
    return failure();
  CompileJob fromRequest;
  if (request->configure)
    fromRequest.setParams = std::move(request->configure);
  fromRequest.neuronManifest = request->neuronManifest;
  fromRequest.cpu = std::move(request->cpu);
  fromRequest.cuda = std::move(request->cuda);
  fromRequest.fatbin = request->fatbin;
  if (fromRequest.cuda)
    fromRequest.fatbinToolkit = fromRequest.cuda->toolkit;
  return fromRequest;
}

} // namespace

int mlir::flexsn::compileMain(int argc, char **argv) {
  llvm::InitLLVM initLLVM(argc, argv);
  flexsn::configureTool("flexsn-compile", flexsn::printHostObjectTarget);
  DialectRegistry registry;
  flexsn::registerAllDialects(registry);
  flexsn::registerAllPasses();
  CompileOptions compileOptions;
  options = &compileOptions;
  cl::HideUnrelatedOptions(compileOptions.category);
  cl::ParseCommandLineOptions(
      argc, argv,
      "FlexSN compile driver: a neuron file to its kernels, in one run\n");

  if (options->printRequestSchema) {
    llvm::outs() << llvm::formatv("{0:2}", flexsn::getCompileRequestSchema())
                 << "\n";
    return 0;
  }
  if (!options->outputDir.getNumOccurrences()) {
    llvm::errs() << "flexsn-compile: for the -o option: must be specified at "
                    "least once!\n";
    return 1;
  }
  // Options that would be silently ignored or overridden are errors.
  for (const cl::Option *option :
       {static_cast<const cl::Option *>(&options->outputDir),
        static_cast<const cl::Option *>(&options->cpuOptions),
        static_cast<const cl::Option *>(&options->gpuOptions),
        static_cast<const cl::Option *>(&options->configure),
        static_cast<const cl::Option *>(&options->request)}) {
    if (option->getNumOccurrences() > 1) {
      llvm::errs() << "flexsn-compile: -" << option->ArgStr << " is given "
                   << option->getNumOccurrences() << " times; give it once\n";
      return 1;
    }
  }
  FailureOr<CompileJob> compileJob = options->request.getNumOccurrences()
                                         ? getJobFromRequest(options->request)
                                         : getJobFromFlags();
  if (failed(compileJob))
    return 1;
  job = &*compileJob;
  std::string error;
  std::unique_ptr<llvm::MemoryBuffer> input =
      openInputFile(options->inputFilename, &error);
  if (!input) {
    llvm::errs() << "flexsn-compile: " << error << "\n";
    return 1;
  }
  if (std::error_code ec =
          llvm::sys::fs::create_directories(options->outputDir)) {
    llvm::errs() << "flexsn-compile: cannot create '" << options->outputDir
                 << "': " << ec.message() << "\n";
    return 1;
  }
  llvm::SourceMgr sourceMgr;
  sourceMgr.AddNewSourceBuffer(std::move(input), llvm::SMLoc());
  MLIRContext context(registry);
  SourceMgrDiagnosticHandler handler(sourceMgr, &context);
  if (failed(compile(registry, context, sourceMgr))) {
    removeWrittenOutputs();
    return 1;
  }
  return 0;
}
