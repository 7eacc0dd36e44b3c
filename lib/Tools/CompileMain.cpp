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
// and, generally, each registered target's manifest and files (lib/Targets:
// the driver knows targets only through the registry). The options come
// either as flags (--configure, and each target's flag taking its
// pipeline's pass-option text, as flexsn-opt does) or as one typed compile
// request, `--request=<file>` (CompileRequest.h), which is what the Python
// layer writes.
//
// Each tool process loads libMLIR and registers every dialect and pass; a
// compile used to pay that, and parse its module again, in about ten
// processes (docs/Python.md).
//
//===----------------------------------------------------------------------===//

#include "flexsn/Dialect/FlexSN/IR/FlexSNOps.h"
#include "flexsn/Pipelines/CompileRequest.h"
#include "flexsn/Target/HostObject.h"
#include "flexsn/Target/Manifest.h"
#include "flexsn/Target/TorchStep.h"
#include "flexsn/Targets/Target.h"
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
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Support/thread.h"

#include <deque>
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
  /// Each target's flag (--cpu, --gpu), in the registry's order.
  SmallVector<
      std::pair<flexsn::Target *, std::unique_ptr<cl::opt<std::string>>>>
      targetFlags;
  /// Their descriptions: an option keeps only a reference to its text.
  std::deque<std::string> flagDescriptions;

  CompileOptions() {
    for (flexsn::Target *target : flexsn::getTargets()) {
      target->registerToolOptions(category);
      const std::string &description = flagDescriptions.emplace_back(
          ("Build " + target->getDescription() +
           ", lowering with the pipeline options given")
              .str());
      targetFlags.emplace_back(
          target,
          std::make_unique<cl::opt<std::string>>(
              target->getFlag(), cl::desc(description),
              cl::value_desc("options"), cl::ValueOptional, cl::cat(category),
              target->isForTesting() ? cl::ReallyHidden : cl::NotHidden));
    }
  }
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
  /// The targets asked for, in the registry's order, with their jobs.
  SmallVector<
      std::pair<const flexsn::Target *, std::unique_ptr<flexsn::TargetJob>>>
      targets;
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

/// The path of `name` in the output directory, removed if the compile
/// fails.
std::string claimOutput(StringRef name) {
  SmallString<128> path(options->outputDir);
  llvm::sys::path::append(path, name);
  std::lock_guard<std::mutex> lock(writtenOutputsMutex);
  writtenOutputs.push_back(std::string(path));
  return std::string(path);
}

/// Writes `path` in the output directory with `write`; fails with an error
/// naming the file.
LogicalResult writeOutput(StringRef name,
                          function_ref<LogicalResult(raw_ostream &)> write) {
  std::string path = claimOutput(name);
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

/// A target's files, written into the output directory.
class OutputDirectory : public flexsn::ArtifactWriter {
public:
  LogicalResult
  write(StringRef name,
        function_ref<LogicalResult(raw_ostream &)> write) override {
    return writeOutput(name, write);
  }
  std::string claim(StringRef name) override { return claimOutput(name); }
};

/// Lowers a copy of `configured` for `target` with its job, then writes
/// the target's manifest and files.
LogicalResult lower(ModuleOp configured, const flexsn::Target &target,
                    const flexsn::TargetJob &targetJob) {
  OwningOpRef<ModuleOp> module = configured.clone();
  if (failed(runPipeline(*module,
                         [&](OpPassManager &pm) {
                           targetJob.buildPipeline(pm);
                           return success();
                         })) ||
      failed(writeOutput(target.getManifestFile(), [&](raw_ostream &os) {
        return flexsn::translateToManifest(*module, os, &target);
      })))
    return failure();
  OutputDirectory out;
  return targetJob.writeArtifacts(*module, out);
}

/// Lowers the configured module `text` (printed with its locations) for
/// `target` in a context of its own, so that a slow lowering (CUDA's: LLVM's
/// NVPTX backend, then ptxas) runs beside the others.
LogicalResult lowerInOwnContext(const DialectRegistry &registry,
                                const std::string &text,
                                const flexsn::Target &target,
                                const flexsn::TargetJob &targetJob) {
  MLIRContext context(registry);
  llvm::SourceMgr sourceMgr;
  sourceMgr.AddNewSourceBuffer(llvm::MemoryBuffer::getMemBuffer(text),
                               llvm::SMLoc());
  SourceMgrDiagnosticHandler handler(sourceMgr, &context);
  OwningOpRef<ModuleOp> module = parseSourceFile<ModuleOp>(sourceMgr, &context);
  if (!module)
    return failure();
  return lower(*module, target, targetJob);
}

/// Lowers `configured` for every target of the job: those that lower in
/// their own thread start first, the others run on this one.
LogicalResult lowerForTargets(const DialectRegistry &registry,
                              ModuleOp configured) {
  // The targets' LLVM backends are registered once, before the lowerings
  // run side by side.
  for (const auto &[target, targetJob] : job->targets)
    target->initializeLLVMBackends();
  SmallVector<LogicalResult> results(job->targets.size(), success());
  std::vector<llvm::thread> threads;
  std::string text;
  for (auto [i, entry] : llvm::enumerate(job->targets)) {
    const auto &[target, targetJob] = entry;
    if (!target->lowersInOwnThread())
      continue;
    if (text.empty()) {
      llvm::raw_string_ostream os(text);
      configured->print(os, OpPrintingFlags().enableDebugInfo());
    }
    // As deep a stack as the main thread's (DeepStack.h): the module is
    // parsed again there.
    threads.emplace_back(std::optional<unsigned>(1u << 30),
                         [&registry, &text, &results, i = i, target = target,
                          targetJob = targetJob.get()] {
                           results[i] = lowerInOwnContext(registry, text,
                                                          *target, *targetJob);
                         });
  }
  for (auto [i, entry] : llvm::enumerate(job->targets))
    if (!entry.first->lowersInOwnThread())
      results[i] = lower(configured, *entry.first, *entry.second);
  for (llvm::thread &thread : threads)
    thread.join();
  return success(llvm::all_of(results, succeeded));
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

  return lowerForTargets(registry, *module);
}

LogicalResult reportError(const Twine &message) {
  llvm::errs() << "flexsn-compile: " << message << "\n";
  return failure();
}

/// The job the flags describe: each target flag's pass-option text parsed
/// into its pipeline's options and checked as the pipeline checks them.
FailureOr<CompileJob> getJobFromFlags() {
  CompileJob flags;
  flags.configurePipeline = options->configure;
  flags.neuronManifest = options->neuronManifest;
  for (const auto &[target, flag] : options->targetFlags) {
    if (!flag->getNumOccurrences()) {
      // A target's own flags mean nothing without it.
      for (const cl::Option *own : target->getRequestedFlags())
        if (own->getNumOccurrences())
          return reportError("--" + own->ArgStr + " is an option of the " +
                             target->getName() + " target: it needs --" +
                             target->getFlag());
      continue;
    }
    FailureOr<std::unique_ptr<flexsn::TargetJob>> targetJob =
        target->parseFlags(*flag, reportError);
    if (failed(targetJob))
      return failure();
    flags.targets.emplace_back(target, std::move(*targetJob));
  }
  return flags;
}

/// The job of the request file `path`, which holds every option: a flag
/// that would also set one is an error.
FailureOr<CompileJob> getJobFromRequest(StringRef path) {
  SmallVector<const cl::Option *> requested = {&options->configure,
                                               &options->neuronManifest};
  for (const auto &[target, flag] : options->targetFlags) {
    requested.push_back(flag.get());
    llvm::append_range(requested, target->getRequestedFlags());
  }
  for (const cl::Option *option : requested)
    if (option->getNumOccurrences())
      return reportError("--request holds every option of the compile: "
                         "give --" +
                         option->ArgStr + " in the request, not beside it");
  std::string error;
  std::unique_ptr<llvm::MemoryBuffer> text = openInputFile(path, &error);
  if (!text)
    return reportError(error);
  auto requestError = [&](const Twine &message) {
    return reportError(path + ": " + message);
  };
  FailureOr<flexsn::CompileRequest> request =
      flexsn::parseCompileRequest(text->getBuffer(), [&](const Twine &message) {
        (void)requestError(message);
      });
  if (failed(request))
    return failure();
  CompileJob fromRequest;
  if (request->configure)
    fromRequest.setParams = std::move(request->configure);
  fromRequest.neuronManifest = request->neuronManifest;
  for (const auto &[name, section] : request->targets) {
    const flexsn::Target *target = flexsn::lookupTarget(name);
    FailureOr<std::unique_ptr<flexsn::TargetJob>> targetJob =
        target->readRequest(section, &request->kernels, requestError);
    if (failed(targetJob))
      return failure();
    fromRequest.targets.emplace_back(target, std::move(*targetJob));
  }
  return fromRequest;
}

} // namespace

int mlir::flexsn::compileMain(int argc, char **argv) {
  llvm::InitLLVM initLLVM(argc, argv);
  flexsn::configureTool("flexsn-compile", flexsn::printHostObjectTarget);
  DialectRegistry registry;
  flexsn::registerAllDialects(registry);
  flexsn::registerAllPasses();
  flexsn::registerAllTargets();
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
  SmallVector<const cl::Option *> onceOnly = {
      &options->outputDir, &options->configure, &options->request};
  for (const auto &[target, flag] : options->targetFlags)
    onceOnly.push_back(flag.get());
  for (const cl::Option *option : onceOnly) {
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
