//===- KernelInterface.cpp - What a kernel function's arguments are -------===//
//
// Part of the FlexSN project: an MLIR compiler for spiking-neuron dynamics.
//
//===----------------------------------------------------------------------===//

#include "flexsn/Dialect/FlexSN/Transforms/KernelInterface.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/SymbolTable.h"

#include <numeric>

using namespace mlir;
using namespace mlir::flexsn;

FailureOr<KernelBuffers> mlir::flexsn::classifyKernelBuffers(func::FuncOp func) {
  auto scans = llvm::to_vector(func.getOps<ScanOp>());
  if (scans.size() != 1)
    return func.emitError("a kernel function must hold exactly one scan");
  auto variantAttr = func->getAttrOfType<StringAttr>("flexsn.variant");
  if (!variantAttr)
    return func.emitError("a kernel function needs a flexsn.variant");
  KernelBuffers buffers;
  buffers.func = func;
  buffers.scan = scans.front();
  ScanOp scan = buffers.scan;
  if (scan.getCallee())
    buffers.neuron = SymbolTable::lookupNearestSymbolFrom<NeuronOp>(
        scan, scan.getCalleeAttr());

  // Saved values (f32 sequences the forward kernel writes beyond the
  // neuron's outputs, which the backward kernel reads) are workspace.
  StringRef variant = variantAttr.getValue();
  auto savedAttr = func->getAttrOfType<IntegerAttr>("flexsn.saved");
  unsigned saved = savedAttr ? savedAttr.getInt() : 0;
  DenseSet<int64_t> optional;
  for (int64_t i : scan.getOptionalInputs().value_or(ArrayRef<int64_t>()))
    optional.insert(i);
  SmallVector<StringRef> &roles = buffers.roles;
  for (auto [i, v] : llvm::enumerate(scan.getInputs())) {
    bool isSaved = variant == "backward" && i >= optional.size() &&
                   i < optional.size() + saved;
    roles.push_back(optional.contains(i) ? "optional_input_sequence"
                    : isSaved            ? "saved_input"
                                         : "input_sequence");
  }
  roles.append(scan.getInits().size(), "initial_state");
  unsigned numOutputs = scan.getOutputs().size();
  for (unsigned k = 0; k < numOutputs; ++k)
    roles.push_back(variant == "forward" && k >= numOutputs - saved
                        ? "saved_output"
                        : "output_sequence");
  roles.append(scan.getStates().size(),
               scan.getFinalStates() ? "final_state" : "state_sequence");
  roles.append(scan.getReductions().size(), "param_gradient");

  for (Value v :
       llvm::concat<Value>(scan.getInputs(), scan.getInits(), scan.getOutputs(),
                           scan.getStates(), scan.getReductions()))
    buffers.elementTypes.push_back(
        cast<MemRefType>(v.getType()).getElementType());
  return buffers;
}

DictionaryAttr mlir::flexsn::describeKernel(Builder &b,
                                            const KernelBuffers &buffers,
                                            int64_t vectorWidth,
                                            bool deterministic) {
  func::FuncOp func = buffers.func;
  ScanOp scan = buffers.scan;
  SmallVector<Attribute> roles = llvm::map_to_vector(
      buffers.roles,
      [&](StringRef r) -> Attribute { return b.getStringAttr(r); });
  SmallVector<Attribute> dtypes =
      llvm::map_to_vector(buffers.elementTypes, [&](Type t) -> Attribute {
        return TypeAttr::get(t);
      });
  if (deterministic) {
    roles.push_back(b.getStringAttr("reduction_scratch"));
    dtypes.push_back(TypeAttr::get(b.getF32Type()));
  }
  // Buffer names come from the neuron (training kernels' inline bodies name
  // it in `flexsn.neuron`), suffixed by role; without one, by position.
  auto names = [&](ArrayAttr attr) {
    return llvm::to_vector(attr.getAsValueRange<StringAttr>());
  };
  SmallVector<std::string> bufferNames;
  auto neuronOf = func->getAttrOfType<StringAttr>("flexsn.neuron");
  StringRef variant =
      func->getAttrOfType<StringAttr>("flexsn.variant").getValue();
  NeuronOp named = buffers.neuron;
  if (!named && neuronOf)
    named = SymbolTable::lookupNearestSymbolFrom<NeuronOp>(
        func, StringAttr::get(b.getContext(), neuronOf.getValue()));
  auto numbered = [&](StringRef stem, unsigned count) {
    for (unsigned i = 0; i < count; ++i)
      bufferNames.push_back((stem + Twine(i)).str());
  };
  auto fromNeuron = [&](ArrayAttr attr, StringRef suffix) {
    for (StringRef n : names(attr))
      bufferNames.push_back((n + suffix).str());
  };
  unsigned numOutputs = scan.getOutputs().size();
  if (named && (variant == "inference" || variant == "final-state" ||
                variant == "forward")) {
    fromNeuron(named.getInputNames(), "");
    if (!scan.getInits().empty())
      fromNeuron(named.getStateNames(), "_init");
    fromNeuron(named.getOutputNames(), "");
    unsigned saved = numOutputs - named.getNumOutputs();
    numbered("saved", saved);
    if (!scan.getStates().empty())
      fromNeuron(named.getStateNames(),
                 scan.getFinalStates() ? "_final" : "_seq");
  } else if (named && variant == "backward") {
    fromNeuron(named.getOutputNames(), "_grad");
    fromNeuron(named.getStateNames(), "_seq_grad");
    auto saved = func->getAttrOfType<IntegerAttr>("flexsn.saved");
    numbered("saved", saved ? saved.getInt() : 0);
    auto reread = func->getAttrOfType<DenseI64ArrayAttr>("flexsn.reread");
    for (int64_t i : reread ? reread.asArrayRef() : ArrayRef<int64_t>())
      bufferNames.push_back(names(named.getInputNames())[i].str());
    fromNeuron(named.getStateNames(), "_final_grad");
    fromNeuron(named.getInputNames(), "_grad");
    fromNeuron(named.getStateNames(), "_init_grad");
    for (ParamAttr p : named.getRuntimeParamAttrs())
      if (p.getKind() == ParamKind::Trainable)
        bufferNames.push_back((p.getName().getValue() + "_grad").str());
  } else {
    numbered("buffer", buffers.size());
  }
  if (deterministic)
    bufferNames.push_back("reduction_scratch");
  SmallVector<Attribute> nameAttrs =
      llvm::map_to_vector(bufferNames, [&](const std::string &n) -> Attribute {
        return b.getStringAttr(n);
      });

  // A CPU kernel is called as its function: buffers in argument order (a
  // forward function takes its saved sequences last, its scan writes them
  // among the outputs). GPU kernels take them in the scan's order.
  if (vectorWidth == 0) {
    SmallVector<unsigned> order(buffers.size());
    std::iota(order.begin(), order.end(), 0);
    auto operands = llvm::to_vector(llvm::concat<Value>(
        scan.getInputs(), scan.getInits(), scan.getOutputs(),
        scan.getStates(), scan.getReductions()));
    auto argNumber = [&](unsigned i) -> unsigned {
      auto arg = dyn_cast<BlockArgument>(operands[i]);
      return arg && arg.getOwner()->getParentOp() == func
                 ? arg.getArgNumber()
                 : ~0u;
    };
    llvm::stable_sort(order, [&](unsigned a, unsigned c) {
      return argNumber(a) < argNumber(c);
    });
    auto permute = [&](SmallVector<Attribute> &attrs) {
      SmallVector<Attribute> sorted;
      for (unsigned i : order)
        sorted.push_back(attrs[i]);
      attrs = std::move(sorted);
    };
    permute(roles);
    permute(dtypes);
    permute(nameAttrs);
  }

  SmallVector<Attribute> params;
  SmallVector<ParamAttr> runtimeParams;
  if (named)
    runtimeParams = named.getRuntimeParamAttrs();
  for (auto [i, value] : llvm::enumerate(scan.getParams()))
    params.push_back(b.getDictionaryAttr(
        {b.getNamedAttr("name", i < runtimeParams.size()
                                    ? runtimeParams[i].getName()
                                    : b.getStringAttr("param" + Twine(i))),
         b.getNamedAttr("type", TypeAttr::get(value.getType()))}));
  std::string name =
      (func.getSymName() + (deterministic ? "_deterministic" : "")).str();
  auto saved = func->getAttrOfType<IntegerAttr>("flexsn.saved");
  // The training workspace of a neuron with trainable parameters ends with
  // the deterministic reduction scratch: its forward and backward kernels
  // report the same size, so one allocation serves every mode.
  // The CPU sums in order and has no scratch.
  int64_t reductionSlots = vectorWidth > 0 ? scan.getReductions().size() : 0;
  if (vectorWidth > 0 && named && variant == "forward")
    reductionSlots =
        llvm::count_if(named.getRuntimeParamAttrs(), [](ParamAttr p) {
          return p.getKind() == ParamKind::Trainable;
        });
  // The storage type: that of the first buffer (never a saved one).
  Type dtype = buffers.elementTypes.front();
  SmallVector<NamedAttribute> entries = {
      b.getNamedAttr("name", b.getStringAttr(name)),
      b.getNamedAttr("neuron", b.getStringAttr(neuronOf ? neuronOf.getValue()
                                                        : StringRef())),
      b.getNamedAttr("variant", b.getStringAttr(variant)),
      b.getNamedAttr("dtype", TypeAttr::get(dtype)),
      b.getNamedAttr("buffer_roles", b.getArrayAttr(roles)),
      b.getNamedAttr("buffer_names", b.getArrayAttr(nameAttrs)),
      b.getNamedAttr("buffer_dtypes", b.getArrayAttr(dtypes)),
      b.getNamedAttr("saved", b.getI64IntegerAttr(saved ? saved.getInt() : 0)),
      b.getNamedAttr("reduction_slots", b.getI64IntegerAttr(reductionSlots)),
      b.getNamedAttr("deterministic", b.getBoolAttr(deterministic)),
      b.getNamedAttr("params", b.getArrayAttr(params)),
  };
  if (vectorWidth > 0)
    entries.append({
        b.getNamedAttr("vector_kernel", b.getStringAttr(name + "_vec")),
        b.getNamedAttr("scalar_kernel", b.getStringAttr(name + "_scalar")),
        b.getNamedAttr("vector_width", b.getI64IntegerAttr(vectorWidth)),
    });
  return b.getDictionaryAttr(entries);
}
