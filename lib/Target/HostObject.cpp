//===- HostObject.cpp - CPU kernels as a relocatable object file ----------===//
//
// Part of the FlexSN project: an MLIR compiler for spiking-neuron dynamics.
//
//===----------------------------------------------------------------------===//

#include "flexsn/Target/HostObject.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/ExecutionEngine/OptUtils.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Target/LLVMIR/Export.h"
#include "llvm/IR/IRBuilder.h"
#include "llvm/IR/InstIterator.h"
#include "llvm/IR/Instructions.h"
#include "llvm/IR/LegacyPassManager.h"
#include "llvm/IR/Module.h"
#include "llvm/MC/MCSubtargetInfo.h"
#include "llvm/MC/TargetRegistry.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/Support/raw_ostream.h"
#include "llvm/Target/TargetMachine.h"
#include "llvm/Target/TargetOptions.h"
#include "llvm/TargetParser/Host.h"
#include "llvm/TargetParser/SubtargetFeature.h"

#include <memory>

using namespace mlir;

/// A target without native bf16 keeps a bfloat value that lives across
/// basic blocks widened to f32 and rounds it back for the store through
/// `__truncsfbf2`, which older compiler runtimes (libgcc 12) lack. The
/// pipeline only moves bf16 bits (the rounding is integer arithmetic), so
/// carrying those bits as i16 between blocks changes nothing but the
/// missing call: phis of bfloat become phis of i16, and a bfloat used in
/// another block crosses as i16 and is bitcast back where it is used.
static void carryBF16AsIntegers(llvm::Module &module) {
  auto isBF16 = [](llvm::Type *type) {
    return type->getScalarType()->isBFloatTy();
  };
  for (llvm::Function &function : module) {
    llvm::SmallVector<llvm::PHINode *> phis;
    for (llvm::Instruction &inst : llvm::instructions(function))
      if (auto *phi = llvm::dyn_cast<llvm::PHINode>(&inst))
        if (isBF16(phi->getType()))
          phis.push_back(phi);
    for (llvm::PHINode *phi : phis) {
      llvm::Type *bits = phi->getType()->getWithNewType(
          llvm::Type::getInt16Ty(module.getContext()));
      llvm::IRBuilder<> builder(phi);
      llvm::PHINode *bitsPhi =
          builder.CreatePHI(bits, phi->getNumIncomingValues());
      for (unsigned i = 0, e = phi->getNumIncomingValues(); i != e; ++i) {
        llvm::BasicBlock *from = phi->getIncomingBlock(i);
        builder.SetInsertPoint(from->getTerminator());
        bitsPhi->addIncoming(
            builder.CreateBitCast(phi->getIncomingValue(i), bits), from);
      }
      builder.SetInsertPoint(phi->getParent()->getFirstNonPHIIt());
      phi->replaceAllUsesWith(builder.CreateBitCast(bitsPhi, phi->getType()));
      phi->eraseFromParent();
    }

    llvm::SmallVector<llvm::Instruction *> crossing;
    for (llvm::Instruction &inst : llvm::instructions(function))
      if (isBF16(inst.getType()) && llvm::any_of(inst.users(), [&](auto *u) {
            return llvm::cast<llvm::Instruction>(u)->getParent() !=
                   inst.getParent();
          }))
        crossing.push_back(&inst);
    for (llvm::Instruction *inst : crossing) {
      llvm::IRBuilder<> builder(inst->getParent(),
                                std::next(inst->getIterator()));
      llvm::Value *bits = builder.CreateBitCast(
          inst, inst->getType()->getWithNewType(builder.getInt16Ty()));
      for (llvm::Use &use : llvm::make_early_inc_range(inst->uses())) {
        auto *user = llvm::cast<llvm::Instruction>(use.getUser());
        if (user == bits || user->getParent() == inst->getParent())
          continue;
        builder.SetInsertPoint(user);
        use.set(builder.CreateBitCast(bits, inst->getType()));
      }
    }
  }
}

static llvm::cl::opt<std::string> hostCPU(
    "flexsn-host-cpu",
    llvm::cl::desc(
        "The CPU the host object is for: an LLVM CPU name (x86-64-v3: "
        "AVX2 and FMA; generic: the architecture's baseline), or native "
        "(this machine's CPU and features). Default: x86-64-v3 on an x86-64 "
        "host that has its features, else generic"),
    llvm::cl::init(""));

/// The CPU name and features `hostCPU` asks for on `triple`.
static std::pair<std::string, std::string>
selectHostCPU(const llvm::Triple &triple) {
  auto features = [] {
    llvm::SubtargetFeatures subtarget;
    for (const auto &[name, enabled] : llvm::sys::getHostCPUFeatures())
      subtarget.AddFeature(name, enabled);
    return subtarget.getString();
  };
  if (hostCPU == "native")
    return {llvm::sys::getHostCPUName().str(), features()};
  if (!hostCPU.empty())
    return {hostCPU, ""};
  // x86-64-v3's features, which the vectorized kernels use (8 f32 lanes
  // per register, fused multiply-add).
  if (triple.getArch() == llvm::Triple::x86_64) {
    llvm::StringMap<bool> host = llvm::sys::getHostCPUFeatures();
    if (llvm::all_of(std::initializer_list<StringRef>{"avx", "avx2", "bmi",
                                                      "bmi2", "f16c", "fma",
                                                      "lzcnt", "movbe"},
                     [&](StringRef f) { return host.lookup(f); }))
      return {"x86-64-v3", ""};
  }
  return {"generic", ""};
}

void mlir::flexsn::printHostObjectTarget(llvm::raw_ostream &os) {
  llvm::Triple triple(llvm::sys::getDefaultTargetTriple());
  auto [cpu, features] = selectHostCPU(triple);
  os << "  CPU kernels for " << triple.str() << ", CPU " << cpu << "\n";
}

/// Translates `module` (LLVM dialect) and writes a PIC object for the host
/// triple, for the CPU `--flexsn-host-cpu` names (see selectHostCPU): not
/// the build machine's own by default, so that a cached object runs on
/// other machines of its architecture and level.
LogicalResult mlir::flexsn::translateToHostObject(ModuleOp module,
                                                  llvm::raw_ostream &os) {
  llvm::InitializeNativeTarget();
  llvm::InitializeNativeTargetAsmPrinter();

  llvm::LLVMContext llvmContext;
  std::unique_ptr<llvm::Module> llvmModule =
      translateModuleToLLVMIR(module, llvmContext, "flexsn");
  if (!llvmModule)
    return module.emitError("could not translate the module to LLVM IR: "
                            "lower it with --flexsn-lower-to-cpu first");

  llvm::Triple triple(llvm::sys::getDefaultTargetTriple());
  std::string error;
  const llvm::Target *target =
      llvm::TargetRegistry::lookupTarget(triple, error);
  if (!target)
    return module.emitError("no LLVM target for the host triple ")
           << triple.str() << ": " << error;
  auto [cpu, features] = selectHostCPU(triple);
  // Checked with the default CPU: LLVM warns of an unknown one it is made
  // for.
  std::unique_ptr<llvm::MCSubtargetInfo> subtarget(
      target->createMCSubtargetInfo(triple, "", ""));
  if (!subtarget || !subtarget->isCPUStringValid(cpu))
    return mlir::emitError(module.getLoc(), "--flexsn-host-cpu: '")
           << cpu << "' is not a CPU of " << triple.str();
  std::unique_ptr<llvm::TargetMachine> machine(target->createTargetMachine(
      triple, cpu, features, llvm::TargetOptions(), llvm::Reloc::PIC_,
      std::nullopt, llvm::CodeGenOptLevel::Aggressive));
  if (!machine)
    return module.emitError("could not create a target machine for ")
           << triple.str();
  llvmModule->setTargetTriple(triple);
  llvmModule->setDataLayout(machine->createDataLayout());

  auto optimize =
      makeOptimizingTransformer(/*optLevel=*/3, /*sizeLevel=*/0, machine.get());
  if (llvm::Error err = optimize(llvmModule.get()))
    return module.emitError("optimizing the CPU kernels failed: ")
           << llvm::toString(std::move(err));
  carryBF16AsIntegers(*llvmModule);

  llvm::SmallString<0> object;
  llvm::raw_svector_ostream objectStream(object);
  llvm::legacy::PassManager codegen;
  if (machine->addPassesToEmitFile(codegen, objectStream, nullptr,
                                   llvm::CodeGenFileType::ObjectFile))
    return module.emitError("the host target cannot emit object files");
  codegen.run(*llvmModule);
  os << object;
  return success();
}
