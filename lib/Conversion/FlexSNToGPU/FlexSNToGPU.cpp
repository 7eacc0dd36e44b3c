//===- FlexSNToGPU.cpp - Kernel functions to GPU kernels ------------------===//
//
// Part of the FlexSN project: an MLIR compiler for spiking-neuron dynamics.
//
//===----------------------------------------------------------------------===//
//
// The conversion of kernel functions to GPU kernels: each function's
// vector and scalar entry points (and their deterministic mode), built
// from its plan (KernelPlan.cpp) by the KernelEmitter (KernelEmitter.cpp).
//
//===----------------------------------------------------------------------===//

#include "KernelEmitter.h"

#include "flexsn/Conversion/Passes.h"
#include "flexsn/Dialect/FlexSN/IR/FlexSNOps.h"
#include "flexsn/Dialect/FlexSN/Utils/KernelFunctions.h"
#include "flexsn/Dialect/FlexSN/Utils/StepBuilder.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/SymbolTable.h"

namespace mlir::flexsn {
#define GEN_PASS_DEF_CONVERTFLEXSNTOGPU
#include "flexsn/Conversion/Passes.h.inc"
} // namespace mlir::flexsn

using namespace mlir;
using namespace mlir::flexsn;

namespace {

/// A kernel's arguments: `numPointers` buffer pointers, `numExtents` i64
/// extents (T, N, ld, ...), then the plan's scalar params.
SmallVector<Type> kernelArgTypes(const KernelPlan &plan, unsigned numPointers,
                                 unsigned numExtents) {
  MLIRContext *ctx = plan.func().getContext();
  SmallVector<Type> argTypes(numPointers, LLVM::LLVMPointerType::get(ctx));
  argTypes.append(numExtents, IntegerType::get(ctx, 64));
  for (Value param : plan.scan().getParams())
    if (!isa<MemRefType>(param.getType()))
      argTypes.push_back(param.getType());
  return argTypes;
}

/// A workgroup (shared memory) buffer of `size` elements.
MemRefType workgroupBuffer(int64_t size, Type elementType) {
  auto space = gpu::AddressSpaceAttr::get(elementType.getContext(),
                                          gpu::AddressSpace::Workgroup);
  return MemRefType::get({size}, elementType, MemRefLayoutAttrInterface(),
                         space);
}

/// The kernel `name` with those arguments and workgroup buffers, launched
/// with 256 threads per block (the runtime's choice).
gpu::GPUFuncOp createKernel(OpBuilder &moduleBuilder, Location loc,
                            StringRef name, ArrayRef<Type> argTypes,
                            ArrayRef<Type> workgroup) {
  MLIRContext *ctx = moduleBuilder.getContext();
  auto kernel =
      gpu::GPUFuncOp::create(moduleBuilder, loc, name,
                             FunctionType::get(ctx, argTypes, {}), workgroup);
  kernel->setAttr(gpu::GPUDialect::getKernelFuncAttrName(), UnitAttr::get(ctx));
  kernel.setKnownBlockSizeAttr(
      DenseI32ArrayAttr::get(ctx, {int32_t(kBlockSize), 1, 1}));
  return kernel;
}

/// Builds the entry point `name`: the vector kernel (width > 1) or the
/// scalar one (width == 1); with `deterministic`, one that sums the scalar
/// reductions in a fixed order through the reduction scratch, taken after
/// the buffers (the plan of a deterministic kernel has no per-channel
/// reductions: it stores them per neuron).
void buildKernel(OpBuilder &moduleBuilder, const KernelPlan &plan,
                 unsigned width, bool deterministic, StringRef name) {
  assert((!deterministic || plan.channelReductions.empty()) &&
         "per-channel sums are atomic");
  bool hasScratch = deterministic && !plan.scalarReductions.empty();
  Location loc = plan.func().getLoc();
  MLIRContext *ctx = moduleBuilder.getContext();
  // T, N, ld, and with channels their count and size.
  SmallVector<Type> argTypes = kernelArgTypes(
      plan, plan.numBuffers() + hasScratch, plan.channels ? 5 : 3);

  // Workgroup memory: the warps' sums of each reduction, and the
  // deterministic mode's last-block flag.
  auto f32 = Float32Type::get(ctx);
  SmallVector<Type> workgroup;
  if (!plan.scalarReductions.empty())
    workgroup.push_back(workgroupBuffer(
        int64_t(plan.scalarReductions.size() * kWarpsPerBlock), f32));
  if (hasScratch)
    workgroup.push_back(workgroupBuffer(1, IntegerType::get(ctx, 32)));
  // The per-channel reductions' slots: one per channel a block can touch.
  if (!plan.channelReductions.empty())
    workgroup.push_back(workgroupBuffer(
        int64_t(plan.channelReductions.size() * (kBlockSize * width + 2)),
        f32));
  auto kernel = createKernel(moduleBuilder, loc, name, argTypes, workgroup);

  OpBuilder b = OpBuilder::atBlockBegin(&kernel.getBody().front());
  KernelEmitter emitter(b, loc, plan, kernel, hasScratch, width);
  if (!plan.channelReductions.empty())
    emitter.beginChannelSlots(kernel.getWorkgroupAttributions().back(), width);
  Value first = arith::MulIOp::create(b, loc, emitter.threadIndex(),
                                      emitter.constant(width));
  Value numNeurons = emitter.getNumNeurons();
  Value active = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::slt, first,
                                       numNeurons);
  // Every thread (active or not) reaches the reductions' warp shuffles.
  auto activeBranch = scf::IfOp::create(
      b, loc, active,
      [&](OpBuilder &nested, Location) {
        OpBuilder::InsertionGuard guard(b);
        b.setInsertionPointToStart(nested.getInsertionBlock());
        if (width == 1) {
          scf::YieldOp::create(b, loc, emitter.emitNeurons(first, 1, true));
          return;
        }
        // A full group takes the vector path; the last, partial group walks
        // its neurons one at a time.
        Value end =
            arith::AddIOp::create(b, loc, first, emitter.constant(width));
        Value full = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::sle,
                                           end, numNeurons);
        auto fullBranch = scf::IfOp::create(
            b, loc, full,
            [&](OpBuilder &thenBuilder, Location) {
              OpBuilder::InsertionGuard inner(b);
              b.setInsertionPointToStart(thenBuilder.getInsertionBlock());
              scf::YieldOp::create(b, loc,
                                   emitter.emitNeurons(first, width, true));
            },
            [&](OpBuilder &elseBuilder, Location) {
              OpBuilder::InsertionGuard inner(b);
              b.setInsertionPointToStart(elseBuilder.getInsertionBlock());
              auto tail = scf::ForOp::create(
                  b, loc, first, numNeurons, emitter.constant(1),
                  emitter.zeroPartials(),
                  [&](OpBuilder &loopBuilder, Location, Value neuron,
                      ValueRange sums) {
                    OpBuilder::InsertionGuard innermost(b);
                    b.setInsertionPointToStart(loopBuilder.getInsertionBlock());
                    SmallVector<Value> partials =
                        emitter.emitNeurons(neuron, 1, false);
                    for (auto [p, sum] : llvm::zip_equal(partials, sums))
                      p = arith::AddFOp::create(b, loc, sum, p);
                    scf::YieldOp::create(b, loc, partials);
                  });
              SmallVector<Value> results(tail.getResults());
              llvm::append_range(results, emitter.noChannelPartials());
              scf::YieldOp::create(b, loc, results);
            });
        scf::YieldOp::create(b, loc, fullBranch.getResults());
      },
      [&](OpBuilder &nested, Location) {
        OpBuilder::InsertionGuard guard(b);
        b.setInsertionPointToStart(nested.getInsertionBlock());
        SmallVector<Value> partials = emitter.zeroPartials();
        llvm::append_range(partials, emitter.noChannelPartials());
        scf::YieldOp::create(b, loc, partials);
      });
  ValueRange results = activeBranch.getResults();
  ValueRange scalarPartials = results.take_front(plan.scalarReductions.size());
  if (hasScratch)
    emitter.emitDeterministicReductions(scalarPartials,
                                        kernel.getWorkgroupAttributions()[0],
                                        kernel.getWorkgroupAttributions()[1]);
  else if (!plan.scalarReductions.empty())
    emitter.emitAtomicReductions(scalarPartials,
                                 kernel.getWorkgroupAttributions()[0]);
  emitter.emitChannelReductions(
      results.drop_front(plan.scalarReductions.size()));
  gpu::ReturnOp::create(b, loc);
}

/// Builds the entry point `name` of a coupled kernel whose threads take
/// `lanes` neurons each (CoupledKernel.cpp): one block per sample of H
/// neurons, H at most kBlockSize * lanes. It takes H after T, N and ld.
void buildCoupledKernel(OpBuilder &moduleBuilder, const KernelPlan &plan,
                        unsigned lanes, StringRef name) {
  Location loc = plan.func().getLoc();
  // T, N, ld and H.
  SmallVector<Type> argTypes = kernelArgTypes(plan, plan.numBuffers(), 4);
  auto f32 = Float32Type::get(moduleBuilder.getContext());
  // The two slots of the sample's coupled outputs, then the warps' sums.
  SmallVector<Type> workgroup = {
      workgroupBuffer(2 * int64_t(kBlockSize) * lanes, f32)};
  if (!plan.scalarReductions.empty())
    workgroup.push_back(workgroupBuffer(
        int64_t(plan.scalarReductions.size() * kWarpsPerBlock), f32));
  auto kernel = createKernel(moduleBuilder, loc, name, argTypes, workgroup);
  OpBuilder b = OpBuilder::atBlockBegin(&kernel.getBody().front());
  KernelEmitter emitter(b, loc, plan, kernel, /*hasScratch=*/false, lanes);
  ArrayRef<BlockArgument> slots = kernel.getWorkgroupAttributions();
  SmallVector<Value> partials = emitter.emitCoupledNeurons(lanes, slots[0]);
  if (!plan.scalarReductions.empty())
    emitter.emitAtomicReductions(partials, slots[1]);
  gpu::ReturnOp::create(b, loc);
}

/// The signature of `plan`'s kernel with the gradients of its per-channel
/// reductions `channelReductions` stored per neuron: [N] buffers of each
/// neuron's sum over time (role per_neuron_param_gradient).
KernelSignatureAttr
perNeuronChannelGradients(const KernelPlan &plan,
                          ArrayRef<unsigned> channelReductions) {
  SmallVector<KernelBufferAttr> buffers(plan.signature().getBuffers());
  unsigned firstReduction =
      plan.kernel.operandBuffers.size() - plan.numReductions();
  for (unsigned r : channelReductions) {
    KernelBufferAttr &buffer =
        buffers[plan.kernel.operandBuffers[firstReduction + r]];
    buffer = buffer.withRole(BufferRole::PerNeuronParamGradient);
  }
  return plan.signature().withBuffers(buffers);
}

struct ConvertFlexSNToGPUPass
    : flexsn::impl::ConvertFlexSNToGPUBase<ConvertFlexSNToGPUPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    // Steps are emitted from flat bodies.
    if (failed(checkBlocksCompiled(module)) ||
        failed(inlineApplications(module)))
      return signalPassFailure();
    std::vector<KernelPlan> plans;
    for (func::FuncOp func : getKernelFunctions(module)) {
      FailureOr<KernelPlan> plan = planKernel(func);
      if (failed(plan))
        return signalPassFailure();
      plans.push_back(std::move(*plan));
    }
    if (plans.empty())
      return;

    OpBuilder builder = OpBuilder::atBlockEnd(module.getBody());
    module->setAttr(gpu::GPUDialect::getContainerModuleAttrName(),
                    builder.getUnitAttr());
    auto gpuModule =
        gpu::GPUModuleOp::create(builder, module.getLoc(), "flexsn_kernels");
    OpBuilder kernelBuilder = OpBuilder::atBlockBegin(gpuModule.getBody());
    MLIRContext *ctx = &getContext();
    SmallVector<Attribute> kernels;
    // A kernel's two entry points, named here once: the compiled kernel
    // lists them for the emitters and the manifest.
    auto build = [&](const KernelPlan &plan, KernelSignatureAttr signature,
                     bool deterministic) {
      std::string name =
          (plan.func().getSymName() + (deterministic ? "_deterministic" : ""))
              .str();
      auto vectorEntry = StringAttr::get(ctx, name + "_vec");
      auto scalarEntry = StringAttr::get(ctx, name + "_scalar");
      buildKernel(kernelBuilder, plan, plan.width, deterministic, vectorEntry);
      buildKernel(kernelBuilder, plan, 1, deterministic, scalarEntry);
      kernels.push_back(CompiledKernelAttr::get(
          ctx, StringAttr::get(ctx, name), signature, plan.width, deterministic,
          vectorEntry, scalarEntry));
    };
    for (const KernelPlan &plan : plans) {
      if (plan.kernel.coupling) {
        // Threads of one or four neurons: samples of up to 256 or 1024.
        // The sums across neurons are atomic: no deterministic mode.
        std::string name = plan.func().getSymName().str();
        auto vectorEntry = StringAttr::get(ctx, name + "_vec");
        auto scalarEntry = StringAttr::get(ctx, name + "_scalar");
        buildCoupledKernel(kernelBuilder, plan, kCoupledLanes, vectorEntry);
        buildCoupledKernel(kernelBuilder, plan, 1, scalarEntry);
        kernels.push_back(CompiledKernelAttr::get(
            ctx, StringAttr::get(ctx, name), plan.signature(), kCoupledLanes,
            /*deterministic=*/false, vectorEntry, scalarEntry));
        continue;
      }
      build(plan, plan.signature(), /*deterministic=*/false);
      // Kernels with reductions across neurons (parameter gradients) also
      // come in a deterministic mode. Per-neuron sums are deterministic
      // anyway. Scalar ones are summed in a fixed order through the
      // reduction scratch, which the kernel takes last. Per-channel ones
      // are stored per neuron instead (their sums over time, [N]), which
      // the caller sums over each channel's neurons in an order of its
      // own: the grid cannot finish a channel's sum in one launch without
      // atomics.
      if (!plan.scalarReductions.empty() || !plan.channelReductions.empty()) {
        KernelPlan fixed = plan;
        KernelSignatureAttr signature =
            perNeuronChannelGradients(plan, fixed.channelReductions);
        fixed.channelReductions.clear();
        if (!plan.scalarReductions.empty())
          signature = signature.withBuffer(getKernelBuffer(
              BindingAttr::get(ctx, BoundValue::Scratch, 0),
              KernelVariant::Backward, Float32Type::get(ctx), ""));
        build(fixed, signature, /*deterministic=*/true);
      }
    }
    module->setAttr("flexsn.gpu_kernels", builder.getArrayAttr(kernels));

    // The host side is the C stubs' job. The neurons stay: the manifest
    // describes their signatures, and nothing translates the host module.
    for (const KernelPlan &plan : plans)
      plan.func().erase();
  }
};

} // namespace
