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
#include "llvm/MC/TargetRegistry.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/Support/raw_ostream.h"
#include "llvm/Target/TargetMachine.h"
#include "llvm/Target/TargetOptions.h"
#include "llvm/TargetParser/Host.h"

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

/// Translates `module` (LLVM dialect) and writes a PIC object for the host
/// triple. The CPU is the triple's generic one, not the build machine's, so
/// a cached object runs on any machine of the same architecture.
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
  std::unique_ptr<llvm::TargetMachine> machine(target->createTargetMachine(
      triple, "generic", "", llvm::TargetOptions(), llvm::Reloc::PIC_,
      std::nullopt, llvm::CodeGenOptLevel::Aggressive));
  if (!machine)
    return module.emitError("could not create a target machine for ")
           << triple.str();
  llvmModule->setTargetTriple(triple);
  llvmModule->setDataLayout(machine->createDataLayout());

  auto optimize = makeOptimizingTransformer(/*optLevel=*/3, /*sizeLevel=*/0,
                                            machine.get());
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
