//===- FlexSNToSCF.cpp - Lower flexsn.scan to SCF loops -------------------===//
//
// Part of the FlexSN project: an MLIR compiler for spiking-neuron dynamics.
//
//===----------------------------------------------------------------------===//

#include "ScanLowering.h"

#include "flexsn/Conversion/Passes.h"
#include "flexsn/Dialect/FlexSN/IR/FlexSNOps.h"
#include "flexsn/Dialect/FlexSN/Utils/KernelFunctions.h"
#include "flexsn/Dialect/FlexSN/Utils/StepBuilder.h"

#include "mlir/Dialect/OpenMP/OpenMPDialect.h"
#include "mlir/Dialect/SCF/Utils/Utils.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/SymbolTable.h"

namespace mlir::flexsn {
#define GEN_PASS_DEF_CONVERTFLEXSNTOSCF
#include "flexsn/Conversion/Passes.h.inc"
} // namespace mlir::flexsn

using namespace mlir;
using namespace mlir::flexsn;

namespace {

struct ConvertFlexSNToSCFPass
    : flexsn::impl::ConvertFlexSNToSCFBase<ConvertFlexSNToSCFPass> {
  using Base::Base;

  /// Appends the kernel function's `num_threads` argument (i32, last) and
  /// returns the thread count its parallel regions use: the argument, or
  /// OpenMP's default (`omp_get_max_threads()`) where it is not positive.
  Value appendThreadCount(func::FuncOp func) {
    MLIRContext *context = &getContext();
    Type i32 = IntegerType::get(context, 32);
    Location loc = func.getLoc();
    if (failed(func.insertArgument(func.getNumArguments(), i32, {}, loc)))
      return {};
    Value argument = func.getArguments().back();
    auto module = func->getParentOfType<ModuleOp>();
    // Calls in the module (a test's driver) keep OpenMP's default.
    if (std::optional<SymbolTable::UseRange> uses =
            SymbolTable::getSymbolUses(func, module))
      for (SymbolTable::SymbolUse use : *uses)
        if (auto call = dyn_cast<func::CallOp>(use.getUser())) {
          OpBuilder cb(call);
          call->insertOperands(
              call->getNumOperands(),
              arith::ConstantIntOp::create(cb, loc, i32, 0).getResult());
        }
    StringRef defaultName = "omp_get_max_threads";
    // An llvm.func: a func.func declaration would get a C-interface
    // wrapper name like the kernels.
    auto declaration = module.lookupSymbol<LLVM::LLVMFuncOp>(defaultName);
    if (!declaration) {
      OpBuilder mb = OpBuilder::atBlockBegin(module.getBody());
      declaration = LLVM::LLVMFuncOp::create(
          mb, loc, defaultName, LLVM::LLVMFunctionType::get(i32, {}));
    }
    OpBuilder b = OpBuilder::atBlockBegin(&func.getBody().front());
    Value zero = arith::ConstantIntOp::create(b, loc, i32, 0);
    Value given = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::sgt,
                                        argument, zero);
    auto ifDefault = scf::IfOp::create(
        b, loc, given,
        [&](OpBuilder &tb, Location loc) {
          scf::YieldOp::create(tb, loc, argument);
        },
        [&](OpBuilder &eb, Location loc) {
          scf::YieldOp::create(
              eb, loc,
              LLVM::CallOp::create(eb, loc, declaration, ValueRange())
                  .getResult());
        });
    return ifDefault.getResult(0);
  }

  void runOnOperation() override {
    ModuleOp module = getOperation();
    // Lanes past any SIMD register's only grow LLVM's code and compile time
    // (16384 lanes took a minute, 65536 exhausted LLVM): 64 f32 lanes are
    // four AVX-512 registers.
    constexpr unsigned maxVectorWidth = 64;
    if (vectorWidth > maxVectorWidth) {
      module.emitError() << "vector-width is at most " << maxVectorWidth
                         << " lanes, got " << vectorWidth.getValue();
      return signalPassFailure();
    }
    DenseMap<func::FuncOp, Value> threadCounts;
    DenseMap<func::FuncOp, ScanCoupling> couplings;
    // Steps are emitted from flat bodies.
    if (failed(checkBlocksCompiled(module)) ||
        failed(inlineApplications(module)))
      return signalPassFailure();
    // The kernels' signatures move to the module, for the manifest and the
    // runtimes that call the compiled functions.
    SmallVector<Attribute> kernels;
    for (func::FuncOp func : getKernelFunctions(module)) {
      FailureOr<KernelFunction> kernel = analyzeKernelFunction(func);
      if (failed(kernel))
        return signalPassFailure();
      if (kernel->coupling)
        couplings[func] = {kernel->coupling->input, kernel->coupling->output,
                           func.getArgument(kernel->coupling->weights)};
      kernels.push_back(CompiledKernelAttr::get(
          &getContext(), func.getSymNameAttr(), kernel->signature,
          /*vector_width=*/0, /*deterministic=*/false, StringAttr(),
          StringAttr()));
      func->removeAttr(KernelSignatureAttr::getAttrName());
      // Autodiff has read the training marks; LLVM IR has no place for
      // them (its translation would warn of each).
      for (unsigned i = 0, e = func.getNumArguments(); i < e; ++i)
        func.removeArgAttr(i, "flexsn.trainable");
      if (parallel)
        threadCounts[func] = appendThreadCount(func);
    }
    if (!kernels.empty())
      module->setAttr("flexsn.cpu_kernels",
                      ArrayAttr::get(&getContext(), kernels));

    SmallVector<ScanOp> scans;
    WalkResult walk = module.walk([&](ScanOp scan) {
      if (scan.hasTensorSemantics()) {
        scan.emitError("convert-flexsn-to-scf lowers the buffer form: "
                       "bufferize tensor scans first (one-shot-bufferize)");
        return WalkResult::interrupt();
      }
      scans.push_back(scan);
      return WalkResult::advance();
    });
    if (walk.wasInterrupted())
      return signalPassFailure();
    for (ScanOp scan : scans) {
      auto func = scan->getParentOfType<func::FuncOp>();
      auto coupled = couplings.find(func);
      if (coupled != couplings.end())
        lowerCoupledScan(scan, coupled->second, parallel,
                         threadCounts.lookup(func));
      else
        lowerScan(scan, parallel, vectorWidth, threadCounts.lookup(func));
    }
    // Neurons are only templates for scans: once inlined, they are dead.
    for (NeuronOp neuron :
         llvm::make_early_inc_range(module.getOps<NeuronOp>()))
      neuron.erase();
  }
};

} // namespace
