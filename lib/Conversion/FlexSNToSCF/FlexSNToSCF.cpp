//===- FlexSNToSCF.cpp - Lower flexsn.scan to SCF loops -------------------===//
//
// Part of the FlexSN project: an MLIR compiler for spiking-neuron dynamics.
//
//===----------------------------------------------------------------------===//

#include "flexsn/Conversion/Passes.h"
#include "flexsn/Dialect/FlexSN/IR/FlexSNOps.h"
#include "flexsn/Dialect/FlexSN/Utils/KernelFunctions.h"
#include "flexsn/Dialect/FlexSN/Utils/StepBuilder.h"

#include "mlir/Dialect/SCF/Utils/Utils.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/SymbolTable.h"

namespace mlir::flexsn {
#define GEN_PASS_DEF_CONVERTFLEXSNTOSCF
#include "flexsn/Conversion/Passes.h.inc"
} // namespace mlir::flexsn

using namespace mlir;
using namespace mlir::flexsn;

namespace {

/// Loads `buffer[indices]` as f32.
Value loadAsF32(OpBuilder &b, Location loc, Value buffer, ValueRange indices) {
  Value value = memref::LoadOp::create(b, loc, buffer, indices);
  if (!value.getType().isF32())
    value = arith::ExtFOp::create(b, loc, b.getF32Type(), value);
  return value;
}

/// Stores the f32 `value` into `buffer[indices]`, converting to its storage.
void storeFromF32(OpBuilder &b, Location loc, Value value, Value buffer,
                  ValueRange indices) {
  Type elementType = cast<MemRefType>(buffer.getType()).getElementType();
  if (isa<IntegerType>(elementType))
    value = arith::FPToUIOp::create(b, loc, elementType, value);
  else if (elementType != value.getType())
    value = arith::TruncFOp::create(b, loc, elementType, value);
  memref::StoreOp::create(b, loc, value, buffer, indices);
}

/// An absent buffer is one whose base pointer is null.
Value isPresent(OpBuilder &b, Location loc, Value buffer) {
  Value pointer =
      memref::ExtractAlignedPointerAsIndexOp::create(b, loc, buffer);
  Value null = arith::ConstantIndexOp::create(b, loc, 0);
  return arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ne, pointer, null);
}

Value f32Constant(OpBuilder &b, Location loc, double value) {
  return arith::ConstantOp::create(b, loc, b.getF32FloatAttr(value));
}

/// Loads `buffer[indices]` as f32 when `present` holds, else zero.
Value loadIfPresent(OpBuilder &b, Location loc, Value present, Value buffer,
                    ValueRange indices) {
  auto load = scf::IfOp::create(
      b, loc, present,
      [&](OpBuilder &then, Location loc) {
        scf::YieldOp::create(then, loc, loadAsF32(then, loc, buffer, indices));
      },
      [&](OpBuilder &otherwise, Location loc) {
        scf::YieldOp::create(otherwise, loc, f32Constant(otherwise, loc, 0.0));
      });
  return load.getResult(0);
}

/// Stores the 0/1 spike `value` at `indices` into the bit-packed `buffer`
/// (i1, 8 per byte; `SpikeStorage` gives the layout): element e (its
/// linear index, in elements, from the buffer's offset and strides) lies in
/// row t = e / ld at column n = e mod ld, ld being the time stride, and is
/// bit n mod 8 of byte t * ceil(ld / 8) + n / 8. The loops visit a row's
/// neurons in order, so the first of each byte writes it whole (clearing
/// the bits past N) and the others add their bit to it.
void storeBits(OpBuilder &b, Location loc, Value value, Value buffer,
               ValueRange indices) {
  auto metadata = memref::ExtractStridedMetadataOp::create(b, loc, buffer);
  ValueRange strides = metadata.getStrides();
  Value element = metadata.getOffset();
  for (auto [index, stride] : llvm::zip_equal(indices, strides))
    element = arith::AddIOp::create(
        b, loc, element, arith::MulIOp::create(b, loc, index, stride));
  auto index = [&](int64_t v) {
    return arith::ConstantIndexOp::create(b, loc, v);
  };
  Value ld = strides[0];
  Value neuron = arith::RemUIOp::create(b, loc, element, ld);
  Value rowBytes = arith::CeilDivUIOp::create(b, loc, ld, index(8));
  Value offset = arith::AddIOp::create(
      b, loc,
      arith::MulIOp::create(b, loc, arith::DivUIOp::create(b, loc, element, ld),
                            rowBytes),
      arith::DivUIOp::create(b, loc, neuron, index(8)));
  Value base = memref::ExtractAlignedPointerAsIndexOp::create(b, loc, buffer);
  Type i8 = b.getI8Type(), i64 = b.getI64Type();
  Value integer = arith::IndexCastUIOp::create(
      b, loc, i64, arith::AddIOp::create(b, loc, base, offset));
  Value address = LLVM::IntToPtrOp::create(
      b, loc, LLVM::LLVMPointerType::get(b.getContext()), integer);
  Value position = arith::RemUIOp::create(b, loc, neuron, index(8));
  Value spike = arith::ExtUIOp::create(
      b, loc, i8,
      arith::CmpFOp::create(b, loc, arith::CmpFPredicate::UNE, value,
                            f32Constant(b, loc, 0.0)));
  Value bit = arith::ShLIOp::create(
      b, loc, spike, arith::IndexCastUIOp::create(b, loc, i8, position));
  Value starts = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq,
                                       position, index(0));
  scf::IfOp::create(
      b, loc, starts,
      [&](OpBuilder &then, Location loc) {
        LLVM::StoreOp::create(then, loc, bit, address, 1);
        scf::YieldOp::create(then, loc);
      },
      [&](OpBuilder &otherwise, Location loc) {
        Value old = LLVM::LoadOp::create(otherwise, loc, i8, address, 1);
        LLVM::StoreOp::create(otherwise, loc,
                              arith::OrIOp::create(otherwise, loc, old, bit),
                              address, 1);
        scf::YieldOp::create(otherwise, loc);
      });
}

/// Stores `value` only when `present` holds.
void storeIfPresent(OpBuilder &b, Location loc, Value present, Value value,
                    Value buffer, ValueRange indices) {
  bool bits = cast<MemRefType>(buffer.getType()).getElementType().isInteger(1);
  scf::IfOp::create(b, loc, present, [&](OpBuilder &then, Location loc) {
    if (bits)
      storeBits(then, loc, value, buffer, indices);
    else
      storeFromF32(then, loc, value, buffer, indices);
    scf::YieldOp::create(then, loc);
  });
}

/// The indices `map` selects from the domain point `point` = (t, n...).
SmallVector<Value> selectIndices(AffineMap map, ArrayRef<Value> point) {
  return llvm::map_to_vector(map.getResults(), [&](AffineExpr expr) {
    return point[cast<AffineDimExpr>(expr).getPosition()];
  });
}

bool usesTime(AffineMap map) {
  return map.getNumResults() != 0 && map.getDimPosition(0) == 0;
}

/// Stores zero into every element of `buffer` (a reduction's destination).
void zeroFill(OpBuilder &b, Location loc, Value buffer) {
  auto type = cast<MemRefType>(buffer.getType());
  Value zero = f32Constant(b, loc, 0.0);
  SmallVector<Value> lower, upper, steps;
  for (int64_t d = 0; d < type.getRank(); ++d) {
    lower.push_back(arith::ConstantIndexOp::create(b, loc, 0));
    upper.push_back(memref::DimOp::create(b, loc, buffer, d));
    steps.push_back(arith::ConstantIndexOp::create(b, loc, 1));
  }
  scf::buildLoopNest(b, loc, lower, upper, steps,
                     [&](OpBuilder &nb, Location loc, ValueRange indices) {
                       memref::StoreOp::create(nb, loc, zero, buffer, indices);
                     });
}

/// Adds `value` into `buffer[indices]`.
void accumulate(OpBuilder &b, Location loc, Value value, Value buffer,
                ValueRange indices) {
  Value total = memref::LoadOp::create(b, loc, buffer, indices);
  Value sum = arith::AddFOp::create(b, loc, total, value);
  memref::StoreOp::create(b, loc, sum, buffer, indices);
}

/// Rewrites one scan into loops: a sequential loop over time inside a loop
/// nest over the neurons. The step body comes from the callee neuron or the
/// scan's own region; each operand is indexed through its map.
void lowerScan(ScanOp scan) {
  OpBuilder b(scan);
  Location loc = scan.getLoc();
  NeuronOp neuron;
  if (scan.getCallee())
    neuron = SymbolTable::lookupNearestSymbolFrom<NeuronOp>(
        scan, scan.getCalleeAttr());
  Block &body = neuron ? neuron.getBodyBlock() : scan.getBody().front();
  unsigned numInputs = scan.getInputs().size();
  unsigned numStates =
      neuron ? neuron.getNumStates()
             : body.getNumArguments() - numInputs - scan.getParams().size();

  auto mapsOf = [&](MutableOperandRange range) {
    return llvm::map_to_vector(range, [&](OpOperand &operand) {
      return scan.getMatchingIndexingMap(&operand);
    });
  };
  SmallVector<AffineMap> inputMaps = mapsOf(scan.getInputsMutable());
  SmallVector<AffineMap> initMaps = mapsOf(scan.getInitsMutable());
  SmallVector<AffineMap> outputMaps = mapsOf(scan.getOutputsMutable());
  SmallVector<AffineMap> stateMaps = mapsOf(scan.getStatesMutable());
  SmallVector<AffineMap> reductionMaps = mapsOf(scan.getReductionsMutable());

  // T and N... are the dims of an operand spanning the domain.
  Value domainOperand = scan.getDomainOperand();
  unsigned rank = scan.getDomainRank();
  Value zeroIndex = arith::ConstantIndexOp::create(b, loc, 0);
  Value oneIndex = arith::ConstantIndexOp::create(b, loc, 1);
  Value numSteps = memref::DimOp::create(b, loc, domainOperand, 0);
  SmallVector<Value> neuronDims;
  for (unsigned d = 1; d < rank; ++d)
    neuronDims.push_back(memref::DimOp::create(b, loc, domainOperand, d));

  auto presence = [&](ValueRange buffers) {
    return llvm::map_to_vector(
        buffers, [&](Value buffer) { return isPresent(b, loc, buffer); });
  };
  SmallVector<Value> inputPresent(scan.getInputs().size());
  if (auto optional = scan.getOptionalInputs())
    for (int64_t i : *optional)
      inputPresent[i] = isPresent(b, loc, scan.getInputs()[i]);
  SmallVector<Value> initPresent = presence(scan.getInits());
  SmallVector<Value> outputPresent = presence(scan.getOutputs());
  SmallVector<Value> statePresent = presence(scan.getStates());

  // Reductions overwrite their destinations: zero them, then add into them.
  for (Value buffer : scan.getReductions())
    zeroFill(b, loc, buffer);
  // Sums over time are carried; those that keep t are added every step.
  SmallVector<unsigned> carriedReductions;
  for (auto [r, map] : llvm::enumerate(reductionMaps))
    if (!usesTime(map))
      carriedReductions.push_back(r);

  SmallVector<Value> lowerBounds(neuronDims.size(), zeroIndex);
  SmallVector<Value> steps(neuronDims.size(), oneIndex);
  scf::buildLoopNest(
      b, loc, lowerBounds, neuronDims, steps,
      [&](OpBuilder &nb, Location loc, ValueRange neuronIndex) {
        // The domain point (t, n...) with t still to be chosen.
        SmallVector<Value> point = {zeroIndex};
        llvm::append_range(point, neuronIndex);

        // Initial carries: states (zero when absent), then reduction sums.
        SmallVector<Value> carries;
        for (unsigned s = 0; s < numStates; ++s) {
          if (scan.getInits().empty()) {
            carries.push_back(f32Constant(nb, loc, 0.0));
            continue;
          }
          carries.push_back(
              loadIfPresent(nb, loc, initPresent[s], scan.getInits()[s],
                            selectIndices(initMaps[s], point)));
        }
        // Params: scalars as they are; shaped ones (time-invariant) read
        // once per neuron, through their maps.
        SmallVector<Value> params;
        for (OpOperand &param : scan.getParamsMutable())
          params.push_back(
              isa<MemRefType>(param.get().getType())
                  ? loadAsF32(nb, loc, param.get(),
                              selectIndices(scan.getMatchingIndexingMap(&param),
                                            point))
                  : param.get());

        // Each operand at the domain point (step, n...), through its map.
        auto at = [&](AffineMap map, Value step) {
          SmallVector<Value> index(point);
          index[0] = step;
          return selectIndices(map, index);
        };
        auto loadInput = [&](unsigned k, Value step) {
          Value input = scan.getInputs()[k];
          SmallVector<Value> indices = at(inputMaps[k], step);
          return SmallVector<Value>{
              inputPresent[k]
                  ? loadIfPresent(nb, loc, inputPresent[k], input, indices)
                  : loadAsF32(nb, loc, input, indices)};
        };
        auto storeOutput = [&](unsigned k, Value step, ValueRange lanes) {
          storeIfPresent(nb, loc, outputPresent[k], lanes.front(),
                         scan.getOutputs()[k], at(outputMaps[k], step));
        };
        auto storeState = [&](unsigned s, Value step, ValueRange lanes) {
          storeIfPresent(nb, loc, statePresent[s], lanes.front(),
                         scan.getStates()[s], at(stateMaps[s], step));
        };
        auto addAtStep = [&](unsigned r, Value step, ValueRange lanes) {
          accumulate(nb, loc, lanes.front(), scan.getReductions()[r],
                     at(reductionMaps[r], step));
        };
        ScanGroupAccess access{1, loadInput, storeOutput, storeState,
                               addAtStep};
        ValueRange finals =
            emitTimeLoop(nb, loc, scan, neuron, numSteps, carries, {params},
                         carriedReductions, access);
        for (auto [s, buffer] : llvm::enumerate(scan.getStates()))
          if (scan.isFinalState(s))
            storeIfPresent(nb, loc, statePresent[s], finals[s], buffer,
                           selectIndices(stateMaps[s], point));
        for (auto [c, r] : llvm::enumerate(carriedReductions))
          accumulate(nb, loc, finals[numStates + c], scan.getReductions()[r],
                     selectIndices(reductionMaps[r], point));
      });
  scan.erase();
}

struct ConvertFlexSNToSCFPass
    : flexsn::impl::ConvertFlexSNToSCFBase<ConvertFlexSNToSCFPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
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
      kernels.push_back(CompiledKernelAttr::get(
          &getContext(), func.getSymNameAttr(), kernel->signature,
          /*vectorWidth=*/0, /*deterministic=*/false, StringAttr(),
          StringAttr()));
      func->removeAttr(KernelSignatureAttr::getAttrName());
      // Autodiff has read the training marks; LLVM IR has no place for
      // them (its translation would warn of each).
      for (unsigned i = 0, e = func.getNumArguments(); i < e; ++i)
        func.removeArgAttr(i, "flexsn.trainable");
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
    for (ScanOp scan : scans)
      lowerScan(scan);
    // Neurons are only templates for scans: once inlined, they are dead.
    for (NeuronOp neuron :
         llvm::make_early_inc_range(module.getOps<NeuronOp>()))
      neuron.erase();
  }
};

} // namespace
