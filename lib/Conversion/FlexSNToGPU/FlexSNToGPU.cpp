//===- FlexSNToGPU.cpp - Kernel functions to GPU kernels ------------------===//
//
// Part of the FlexSN project: an MLIR compiler for spiking-neuron dynamics.
//
//===----------------------------------------------------------------------===//

#include "flexsn/Conversion/Passes.h"
#include "flexsn/Dialect/FlexSN/IR/FlexSNOps.h"
#include "flexsn/Dialect/FlexSN/Transforms/StepBuilder.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/SymbolTable.h"

namespace mlir::flexsn {
#define GEN_PASS_DEF_CONVERTFLEXSNTOGPU
#include "flexsn/Conversion/Passes.h.inc"
} // namespace mlir::flexsn

using namespace mlir;
using namespace mlir::flexsn;

namespace {

constexpr unsigned kAccessBytes = 16;

/// What a kernel function's scan reads and writes, in ABI order.
struct KernelPlan {
  // Op handles are cheap values; their accessors are not const.
  mutable func::FuncOp func;
  mutable ScanOp scan;
  mutable NeuronOp neuron;
  Type storage;
  unsigned numInputs, numStates, numOutputs;
  bool finalStates;
};

/// The roles of the buffers, as the runtime (flexsn_buffer_kind) names them.
SmallVector<StringRef> bufferRoles(const KernelPlan &plan) {
  SmallVector<StringRef> roles;
  roles.append(plan.numInputs, "input_sequence");
  roles.append(plan.scan.getInits().size(), "initial_state");
  roles.append(plan.numOutputs, "output_sequence");
  roles.append(plan.scan.getStates().size(),
               plan.finalStates ? "final_state" : "state_sequence");
  return roles;
}

/// Emits kernel code for one thread over a contiguous group of neurons.
class KernelEmitter {
public:
  KernelEmitter(OpBuilder &b, Location loc, const KernelPlan &plan,
                gpu::GPUFuncOp kernel)
      : b(b), loc(loc), plan(plan) {
    unsigned numBuffers =
        kernel.getNumArguments() - 3 - plan.scan.getParams().size();
    ValueRange args = kernel.getArguments();
    buffers.assign(args.begin(), args.begin() + numBuffers);
    numSteps = args[numBuffers];
    numNeurons = args[numBuffers + 1];
    timeStride = args[numBuffers + 2];
    params.assign(args.begin() + numBuffers + 3, args.end());
    ptrType = LLVM::LLVMPointerType::get(b.getContext());
    i64 = b.getI64Type();
    f32 = b.getF32Type();
  }

  /// The thread's first neuron: (blockIdx * blockDim + threadIdx) * width.
  Value firstNeuron(unsigned width) {
    Value block = gpu::BlockIdOp::create(b, loc, gpu::Dimension::x);
    Value blockDim = gpu::BlockDimOp::create(b, loc, gpu::Dimension::x);
    Value thread = gpu::ThreadIdOp::create(b, loc, gpu::Dimension::x);
    Value linear = arith::AddIOp::create(
        b, loc, arith::MulIOp::create(b, loc, block, blockDim), thread);
    Value id = arith::IndexCastUIOp::create(b, loc, i64, linear);
    return arith::MulIOp::create(b, loc, id, constant(width));
  }

  Value constant(int64_t value) {
    return arith::ConstantOp::create(b, loc, b.getI64IntegerAttr(value));
  }

  /// Runs neurons [first, first + width) through every step; `width` > 1
  /// uses one vector access per buffer and step.
  void emitNeurons(Value first, unsigned width) {
    unsigned numInputs = plan.numInputs, numStates = plan.numStates;
    bool hasInits = !plan.scan.getInits().empty();
    bool hasStates = !plan.scan.getStates().empty();
    unsigned initBase = numInputs;
    unsigned outputBase = initBase + (hasInits ? numStates : 0);
    unsigned stateBase = outputBase + plan.numOutputs;

    // Absent buffers are null: decided once per thread.
    SmallVector<Value> present(buffers.size());
    Value null = LLVM::ZeroOp::create(b, loc, ptrType);
    for (unsigned i = numInputs; i < buffers.size(); ++i)
      present[i] = LLVM::ICmpOp::create(b, loc, LLVM::ICmpPredicate::ne,
                                        buffers[i], null);

    SmallVector<Value> carries; // [state][lane]
    for (unsigned s = 0; s < numStates; ++s) {
      SmallVector<Value> lanes =
          hasInits ? loadIfPresent(buffers[initBase + s], present[initBase + s],
                                   first, width)
                   : splat(0.0, width);
      carries.append(lanes);
    }

    Value zero = constant(0), one = constant(1);
    auto loop = scf::ForOp::create(
        b, loc, zero, numSteps, one, carries,
        [&](OpBuilder &nested, Location, Value iteration, ValueRange iter) {
          OpBuilder::InsertionGuard guard(b);
          b.setInsertionPointToStart(nested.getInsertionBlock());
          Value step = iteration;
          if (plan.scan.getReverse())
            step = arith::SubIOp::create(
                b, loc, arith::SubIOp::create(b, loc, numSteps, one),
                iteration);
          Value rowStart = arith::MulIOp::create(b, loc, step, timeStride);
          Value index = arith::AddIOp::create(b, loc, rowStart, first);

          SmallVector<SmallVector<Value>> inputs; // [input][lane]
          for (unsigned k = 0; k < numInputs; ++k)
            inputs.push_back(load(buffers[k], index, width));

          SmallVector<SmallVector<Value>> results(plan.numOutputs +
                                                  numStates); // [result][lane]
          for (unsigned lane = 0; lane < width; ++lane) {
            SmallVector<Value> args;
            for (unsigned k = 0; k < numInputs; ++k)
              args.push_back(inputs[k][lane]);
            for (unsigned s = 0; s < numStates; ++s)
              args.push_back(iter[s * width + lane]);
            SmallVector<Value> stepResults =
                emitNeuronStep(b, loc, plan.neuron, args, ValueRange(params));
            for (auto [r, value] : llvm::enumerate(stepResults))
              results[r].push_back(value);
          }
          for (unsigned k = 0; k < plan.numOutputs; ++k)
            storeIfPresent(buffers[outputBase + k], present[outputBase + k],
                           index, results[k]);
          if (hasStates && !plan.finalStates)
            for (unsigned s = 0; s < numStates; ++s)
              storeIfPresent(buffers[stateBase + s], present[stateBase + s],
                             index, results[plan.numOutputs + s]);
          SmallVector<Value> next;
          for (unsigned s = 0; s < numStates; ++s)
            next.append(results[plan.numOutputs + s]);
          scf::YieldOp::create(b, loc, next);
        });
    if (hasStates && plan.finalStates)
      for (unsigned s = 0; s < numStates; ++s)
        storeIfPresent(buffers[stateBase + s], present[stateBase + s], first,
                       loop.getResults().slice(s * width, width));
  }

private:
  unsigned elementBytes() const {
    return plan.storage.getIntOrFloatBitWidth() / 8;
  }

  SmallVector<Value> splat(double value, unsigned width) {
    Value c = arith::ConstantOp::create(b, loc, b.getF32FloatAttr(value));
    return SmallVector<Value>(width, c);
  }

  Value address(Value base, Value index) {
    return LLVM::GEPOp::create(b, loc, ptrType, plan.storage, base,
                               ValueRange{index});
  }

  /// Loads `width` consecutive elements at `index` as f32 lanes.
  SmallVector<Value> load(Value base, Value index, unsigned width) {
    Value ptr = address(base, index);
    SmallVector<Value> lanes;
    if (width == 1) {
      Value v = LLVM::LoadOp::create(b, loc, plan.storage, ptr, elementBytes());
      lanes.push_back(toF32(v));
      return lanes;
    }
    auto vectorType = VectorType::get({width}, plan.storage);
    Value vector = LLVM::LoadOp::create(b, loc, vectorType, ptr, kAccessBytes);
    for (unsigned lane = 0; lane < width; ++lane) {
      Value position =
          arith::ConstantOp::create(b, loc, b.getI32IntegerAttr(lane));
      lanes.push_back(
          toF32(LLVM::ExtractElementOp::create(b, loc, vector, position)));
    }
    return lanes;
  }

  SmallVector<Value> loadIfPresent(Value base, Value present, Value index,
                                   unsigned width) {
    SmallVector<Type> types(width, f32);
    auto branch = scf::IfOp::create(
        b, loc, present,
        [&](OpBuilder &nested, Location) {
          OpBuilder::InsertionGuard guard(b);
          b.setInsertionPointToStart(nested.getInsertionBlock());
          scf::YieldOp::create(b, loc, load(base, index, width));
        },
        [&](OpBuilder &nested, Location) {
          OpBuilder::InsertionGuard guard(b);
          b.setInsertionPointToStart(nested.getInsertionBlock());
          scf::YieldOp::create(b, loc, splat(0.0, width));
        });
    return SmallVector<Value>(branch.getResults());
  }

  void storeIfPresent(Value base, Value present, Value index,
                      ValueRange lanes) {
    scf::IfOp::create(b, loc, present, [&](OpBuilder &nested, Location) {
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPointToStart(nested.getInsertionBlock());
      Value ptr = address(base, index);
      if (lanes.size() == 1) {
        LLVM::StoreOp::create(b, loc, fromF32(lanes.front()), ptr,
                              elementBytes());
      } else {
        auto vectorType =
            VectorType::get({int64_t(lanes.size())}, plan.storage);
        Value vector = LLVM::PoisonOp::create(b, loc, vectorType);
        for (auto [lane, value] : llvm::enumerate(lanes)) {
          Value position =
              arith::ConstantOp::create(b, loc, b.getI32IntegerAttr(lane));
          vector = LLVM::InsertElementOp::create(b, loc, vector, fromF32(value),
                                                 position);
        }
        LLVM::StoreOp::create(b, loc, vector, ptr, kAccessBytes);
      }
      scf::YieldOp::create(b, loc);
    });
  }

  Value toF32(Value v) {
    return v.getType() == f32 ? v : arith::ExtFOp::create(b, loc, f32, v);
  }
  Value fromF32(Value v) {
    return plan.storage == f32
               ? v
               : arith::TruncFOp::create(b, loc, plan.storage, v);
  }

  OpBuilder &b;
  Location loc;
  const KernelPlan &plan;
  SmallVector<Value> buffers, params;
  Value numSteps, numNeurons, timeStride;
  Type ptrType, i64, f32;
};

/// Builds `<name>_vec` (width > 1) or `<name>_scalar` (width == 1).
void buildKernel(OpBuilder &moduleBuilder, const KernelPlan &plan,
                 unsigned width) {
  Location loc = plan.func.getLoc();
  MLIRContext *ctx = moduleBuilder.getContext();
  auto ptrType = LLVM::LLVMPointerType::get(ctx);
  auto i64 = IntegerType::get(ctx, 64);
  SmallVector<Type> argTypes(bufferRoles(plan).size(), ptrType);
  argTypes.append({i64, i64, i64});
  for (Value param : plan.scan.getParams())
    argTypes.push_back(param.getType());

  std::string name =
      (plan.func.getSymName() + (width > 1 ? "_vec" : "_scalar")).str();
  auto kernel = gpu::GPUFuncOp::create(moduleBuilder, loc, name,
                                       FunctionType::get(ctx, argTypes, {}));
  kernel->setAttr(gpu::GPUDialect::getKernelFuncAttrName(), UnitAttr::get(ctx));
  // Every launch uses 256 threads per block (the runtime's choice).
  kernel.setKnownBlockSizeAttr(DenseI32ArrayAttr::get(ctx, {256, 1, 1}));

  OpBuilder b = OpBuilder::atBlockBegin(&kernel.getBody().front());
  KernelEmitter emitter(b, loc, plan, kernel);
  Value first = emitter.firstNeuron(width);
  Value numNeurons = kernel.getArgument(argTypes.size() - 3 -
                                        plan.scan.getParams().size() + 1);
  Value active = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::slt, first,
                                       numNeurons);
  scf::IfOp::create(b, loc, active, [&](OpBuilder &nested, Location) {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(nested.getInsertionBlock());
    if (width == 1) {
      emitter.emitNeurons(first, 1);
    } else {
      // A full group takes the vector path; the last, partial group walks
      // its neurons one at a time.
      Value end = arith::AddIOp::create(b, loc, first, emitter.constant(width));
      Value full = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::sle, end,
                                         numNeurons);
      scf::IfOp::create(
          b, loc, full,
          [&](OpBuilder &thenBuilder, Location) {
            OpBuilder::InsertionGuard inner(b);
            b.setInsertionPointToStart(thenBuilder.getInsertionBlock());
            emitter.emitNeurons(first, width);
            scf::YieldOp::create(b, loc);
          },
          [&](OpBuilder &elseBuilder, Location) {
            OpBuilder::InsertionGuard inner(b);
            b.setInsertionPointToStart(elseBuilder.getInsertionBlock());
            scf::ForOp::create(
                b, loc, first, numNeurons, emitter.constant(1), ValueRange(),
                [&](OpBuilder &loopBuilder, Location, Value neuron,
                    ValueRange) {
                  OpBuilder::InsertionGuard innermost(b);
                  b.setInsertionPointToStart(loopBuilder.getInsertionBlock());
                  emitter.emitNeurons(neuron, 1);
                  scf::YieldOp::create(b, loc);
                });
            scf::YieldOp::create(b, loc);
          });
    }
    scf::YieldOp::create(b, loc);
  });
  gpu::ReturnOp::create(b, loc);
}

/// Describes a kernel for the header and manifest emitters.
DictionaryAttr describeKernel(Builder &b, const KernelPlan &plan,
                              unsigned width) {
  SmallVector<Attribute> roles =
      llvm::map_to_vector(bufferRoles(plan), [&](StringRef r) -> Attribute {
        return b.getStringAttr(r);
      });
  SmallVector<Attribute> names;
  for (StringRef n : plan.neuron.getInputNames().getAsValueRange<StringAttr>())
    names.push_back(b.getStringAttr(n));
  if (!plan.scan.getInits().empty())
    for (StringRef n :
         plan.neuron.getStateNames().getAsValueRange<StringAttr>())
      names.push_back(b.getStringAttr(n + "_init"));
  for (StringRef n : plan.neuron.getOutputNames().getAsValueRange<StringAttr>())
    names.push_back(b.getStringAttr(n));
  if (!plan.scan.getStates().empty())
    for (StringRef n :
         plan.neuron.getStateNames().getAsValueRange<StringAttr>())
      names.push_back(
          b.getStringAttr(n + (plan.finalStates ? "_final" : "_seq")));
  SmallVector<Attribute> params;
  for (ParamAttr p : plan.neuron.getRuntimeParamAttrs())
    params.push_back(b.getDictionaryAttr(
        {b.getNamedAttr("name", p.getName()),
         b.getNamedAttr("type", TypeAttr::get(p.getType()))}));
  std::string name = plan.func.getSymName().str();
  return b.getDictionaryAttr({
      b.getNamedAttr("name", b.getStringAttr(name)),
      b.getNamedAttr("neuron", plan.neuron.getSymNameAttr()),
      b.getNamedAttr("variant", plan.func->getAttr("flexsn.variant")),
      b.getNamedAttr("dtype", TypeAttr::get(plan.storage)),
      b.getNamedAttr("vector_kernel", b.getStringAttr(name + "_vec")),
      b.getNamedAttr("scalar_kernel", b.getStringAttr(name + "_scalar")),
      b.getNamedAttr("vector_width", b.getI64IntegerAttr(width)),
      b.getNamedAttr("buffer_roles", b.getArrayAttr(roles)),
      b.getNamedAttr("buffer_names", b.getArrayAttr(names)),
      b.getNamedAttr("params", b.getArrayAttr(params)),
  });
}

struct ConvertFlexSNToGPUPass
    : flexsn::impl::ConvertFlexSNToGPUBase<ConvertFlexSNToGPUPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    SmallVector<KernelPlan> plans;
    for (auto func : module.getOps<func::FuncOp>()) {
      if (!func->hasAttr("flexsn.variant"))
        continue;
      auto scans = llvm::to_vector(func.getOps<ScanOp>());
      if (scans.size() != 1 || !scans.front().getCallee()) {
        func.emitError("a kernel function must hold exactly one scan of a "
                       "neuron");
        return signalPassFailure();
      }
      ScanOp scan = scans.front();
      if (!scan.getReductions().empty()) {
        scan.emitError("reductions are not supported on the GPU yet");
        return signalPassFailure();
      }
      auto neuron = module.lookupSymbol<NeuronOp>(*scan.getCallee());
      Type storage =
          cast<MemRefType>(scan.getInputs().front().getType()).getElementType();
      auto sameStorage = [&](Value v) {
        return cast<MemRefType>(v.getType()).getElementType() == storage;
      };
      if (!llvm::all_of(scan->getOperands().drop_back(scan.getParams().size() +
                                                      scan.getOutputs().size() +
                                                      scan.getStates().size()),
                        [&](Value v) {
                          return !isa<MemRefType>(v.getType()) ||
                                 sameStorage(v);
                        }) ||
          !llvm::all_of(scan.getOutputs(), sameStorage) ||
          !llvm::all_of(scan.getStates(), sameStorage)) {
        scan.emitError("GPU kernels need one storage type for every buffer");
        return signalPassFailure();
      }
      plans.push_back({func, scan, neuron, storage, neuron.getNumInputs(),
                       neuron.getNumStates(), neuron.getNumOutputs(),
                       scan.getFinalStates()});
    }
    if (plans.empty())
      return;

    OpBuilder builder = OpBuilder::atBlockEnd(module.getBody());
    module->setAttr(gpu::GPUDialect::getContainerModuleAttrName(),
                    builder.getUnitAttr());
    auto gpuModule =
        gpu::GPUModuleOp::create(builder, module.getLoc(), "flexsn_kernels");
    OpBuilder kernelBuilder = OpBuilder::atBlockBegin(gpuModule.getBody());
    SmallVector<Attribute> descriptions;
    for (const KernelPlan &plan : plans) {
      unsigned width =
          kAccessBytes / (plan.storage.getIntOrFloatBitWidth() / 8);
      buildKernel(kernelBuilder, plan, width);
      buildKernel(kernelBuilder, plan, 1);
      descriptions.push_back(describeKernel(builder, plan, width));
    }
    module->setAttr("flexsn.gpu_kernels", builder.getArrayAttr(descriptions));

    // The host side is the C stubs' job. The neurons stay: the manifest
    // describes their interfaces, and nothing translates the host module.
    for (const KernelPlan &plan : plans)
      plan.func.erase();
  }
};

} // namespace
