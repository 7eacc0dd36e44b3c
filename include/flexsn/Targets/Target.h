//===- Target.h - What flexsn-compile builds kernels for --------*- C++ -*-===//
//
// Part of the FlexSN project: an MLIR compiler for spiking-neuron dynamics.
//
//===----------------------------------------------------------------------===//
//
// A target is one folder under lib/Targets that registers a `Target`: its
// name (the request's `targets.<name>`, the manifest's `targets.<name>`),
// how its options are read (pass-option text after its flag, or its
// request section), the pipeline that lowers a configured module for it,
// the files it writes from the lowered module, and the extra entries of its
// manifest section. flexsn-compile and the manifest know targets only
// through this registry (docs/Contributing.md, "A target"), and flexsn-pygen
// copies its names and files into the Python layer (_dialect.TARGETS).
//
//===----------------------------------------------------------------------===//

#ifndef FLEXSN_TARGETS_TARGET_H
#define FLEXSN_TARGETS_TARGET_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Support/LLVM.h"

#include "llvm/Support/CommandLine.h"
#include "llvm/Support/JSON.h"

#include <memory>
#include <string>

namespace mlir {
class OpPassManager;

namespace flexsn {

/// Reports one error (its message names what is wrong) and fails.
using TargetErrorFn = function_ref<LogicalResult(const Twine &)>;

/// Where a target writes its files: the compile's output directory. A
/// failed compile removes every file written or claimed through it.
class ArtifactWriter {
public:
  virtual ~ArtifactWriter() = default;
  /// Writes `name` with `write`; fails with an error naming the file.
  virtual LogicalResult
  write(StringRef name, function_ref<LogicalResult(raw_ostream &)> write) = 0;
  /// The path of `name`, for a file another program writes.
  virtual std::string claim(StringRef name) = 0;
};

/// One target's options in one compile: what it lowers and writes.
class TargetJob {
public:
  virtual ~TargetJob() = default;
  /// Adds the passes lowering a configured module for the target.
  virtual void buildPipeline(OpPassManager &pm) const = 0;
  /// Writes the target's kernel files from the lowered module.
  virtual LogicalResult writeArtifacts(ModuleOp lowered,
                                       ArtifactWriter &out) const = 0;
};

/// A target flexsn-compile builds kernels for.
class Target {
public:
  virtual ~Target() = default;

  /// The request's and the manifest's name of the target ("cpu", "cuda").
  virtual StringRef getName() const = 0;
  /// What its kernels are, for --help and the request schema.
  virtual StringRef getDescription() const = 0;
  /// flexsn-compile's flag taking the target's pipeline options as
  /// pass-option text (--<flag>=<options>).
  virtual StringRef getFlag() const { return getName(); }
  /// The manifest its lowering writes ("cpu.json").
  virtual StringRef getManifestFile() const = 0;
  /// The files that may hold its kernels, one of which its lowering writes
  /// (a runtime loads the first present).
  virtual SmallVector<StringRef> getKernelFiles() const = 0;
  /// The module attribute that lists its compiled kernels once lowered
  /// (the manifest section's "kernels").
  virtual StringRef getKernelsAttrName() const = 0;
  /// A target of FlexSN's own tests: left out of the request schema, and
  /// out of the manifests flexsn-translate writes.
  virtual bool isForTesting() const { return false; }
  /// Whether its lowering is slow enough to run in a context and thread
  /// of its own, beside the other targets' (CUDA: NVPTX, then ptxas).
  virtual bool lowersInOwnThread() const { return false; }

  /// Registers flexsn-compile flags of its own (its tool paths, say) in
  /// `category`; flexsn-compile calls it once, before parsing its flags.
  virtual void registerToolOptions(llvm::cl::OptionCategory &category) {}
  /// Registers the LLVM backends its lowering uses (once a process, before
  /// any lowering runs).
  virtual void initializeLLVMBackends() const {}

  /// The job of the pipeline options `text` (what follows its flag).
  virtual FailureOr<std::unique_ptr<TargetJob>>
  parseFlags(StringRef text, TargetErrorFn error) const = 0;
  /// The job of its request section `section` (checked against the
  /// request's fields), with the request's `kernels` object (may be null).
  virtual FailureOr<std::unique_ptr<TargetJob>>
  readRequest(const llvm::json::Object &section,
              const llvm::json::Object *kernels, TargetErrorFn error) const = 0;
  /// Its flags that a request also sets: each is an error beside one.
  virtual SmallVector<const llvm::cl::Option *> getRequestedFlags() const {
    return {};
  }

  /// Writes its manifest section's entries besides "kernels" (CUDA: the
  /// chips of the module's binaries).
  virtual void writeManifestEntries(ModuleOp lowered,
                                    llvm::json::OStream &json) const {}
};

/// Adds `target` to the registry (a name taken twice is a fatal error).
void registerTarget(std::unique_ptr<Target> target);

/// Registers every target the build has (lib/Targets/CMakeLists.txt lists
/// them); a second call does nothing.
void registerAllTargets();

/// The registered targets, in registration order.
SmallVector<Target *> getTargets();

/// The registered target `name`, or null.
Target *lookupTarget(StringRef name);

} // namespace flexsn
} // namespace mlir

/// Defines mlir::flexsn::register<Folder>Target(), registering a
/// `TargetClass`: what flexsn_add_target(<Folder>) has registerAllTargets()
/// call. A target's folder uses it once, at namespace scope.
#define FLEXSN_REGISTER_TARGET(Folder, TargetClass)                            \
  namespace mlir::flexsn {                                                     \
  void register##Folder##Target();                                             \
  }                                                                            \
  void mlir::flexsn::register##Folder##Target() {                              \
    registerTarget(std::make_unique<TargetClass>());                           \
  }

#endif // FLEXSN_TARGETS_TARGET_H
