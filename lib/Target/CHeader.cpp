//===- CHeader.cpp - Pieces shared by the generated C headers -------------===//
//
// Part of the FlexSN project: an MLIR compiler for spiking-neuron dynamics.
//
//===----------------------------------------------------------------------===//

#include "CHeader.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;
using namespace mlir::flexsn;

std::string cheader::elementType(Type type) {
  if (type.isInteger(8) || type.isInteger(1))
    return "uint8_t"; // 0/1 spikes: bytes, or bits 8 per byte
  return type.isF32() ? "float" : "uint16_t";
}

std::string cheader::scalarType(Type type) {
  if (type.isF32())
    return "float";
  if (type.isInteger(1))
    return "bool";
  return "int32_t";
}

const char *cheader::roleComment(BufferRole role, KernelVariant variant) {
  if (role == BufferRole::PerNeuronParam)
    return "[N] float: the parameter's value for each neuron (required)";
  if (role == BufferRole::PerNeuronParamGradient)
    return "[N] float: the parameter's gradient for each neuron, summed over "
           "T (required)";
  if (role == BufferRole::PerChannelParam)
    return "[C] float: the parameter's value for each channel (required)";
  if (role == BufferRole::PerChannelParamGradient)
    return "[C] float: the parameter's gradient for each channel, summed "
           "over T and the channel's neurons (required)";
  if (role == BufferRole::CouplingWeights)
    return "[H, H] float: the coupling weights, row k from neuron k "
           "(required)";
  // A backward kernel's buffers are gradients (and the re-read inputs).
  if (variant == KernelVariant::Backward) {
    switch (role) {
    case BufferRole::OptionalInputSequence:
      return "[T, N] incoming gradient (NULL: zeros)";
    case BufferRole::InputSequence:
      return "[T, N] the input the forward call read (required)";
    case BufferRole::InitialState:
      return "[N] gradient of the final state (NULL: zeros)";
    case BufferRole::OutputSequence:
      return "[T, N] gradient of the input (NULL: not written)";
    case BufferRole::FinalState:
      return "[N] gradient of the initial state (NULL: not written)";
    case BufferRole::ParamGradient:
      return "one float: the parameter's gradient, summed over T and N";
    default:
      return "";
    }
  }
  switch (role) {
  case BufferRole::InputSequence:
    return "[T, N] input sequence (required)";
  case BufferRole::InitialState:
    return "[N] initial state (NULL: zeros)";
  case BufferRole::OutputSequence:
    return "[T, N] output (NULL: not written)";
  case BufferRole::StateSequence:
    return "[T, N] state after each step (NULL: not written)";
  case BufferRole::FinalState:
    return "[N] state after the last step (NULL: not written)";
  default:
    return "";
  }
}

FailureOr<SmallVector<CompiledKernelAttr>>
cheader::readKernels(ModuleOp module, StringRef attrName, StringRef pipeline) {
  auto kernels = module->getAttrOfType<ArrayAttr>(attrName);
  if (!kernels)
    return module.emitError("no ")
           << attrName << " attribute: run " << pipeline << " first";
  // The dialect verified the list's entries.
  return llvm::to_vector(kernels.getAsRange<CompiledKernelAttr>());
}

std::string cheader::neuronStem(ArrayRef<CompiledKernelAttr> kernels) {
  SmallVector<std::string> names;
  for (CompiledKernelAttr k : kernels) {
    StringRef neuron = k.getSignature().getNeuron().getValue();
    if (!llvm::is_contained(names, neuron))
      names.push_back(neuron.str());
  }
  return llvm::join(names, "_");
}

bool cheader::hasWorkspace(CompiledKernelAttr kernel) {
  return kernel.getSignature().getWorkspaceSequences() > 0 ||
         kernel.getWorkspaceLayout().reductionSlots > 0;
}

bool cheader::writesWorkspace(CompiledKernelAttr kernel) {
  KernelSignatureAttr signature = kernel.getSignature();
  return signature.count(BufferRole::SavedOutput) ||
         signature.count(BufferRole::ReductionScratch);
}

std::string cheader::savedBytesExpr(CompiledKernelAttr kernel,
                                    StringRef elements) {
  return ("(((size_t)" + Twine(kernel.getWorkspaceLayout().savedBytes) + " * " +
          elements + " + 3) / 4 * 4)")
      .str();
}

void cheader::writeKernelComment(raw_ostream &os, CompiledKernelAttr k,
                                 StringRef shapeNote) {
  KernelSignatureAttr signature = k.getSignature();
  ArrayRef<KernelBufferAttr> buffers = signature.getBuffers();
  KernelVariant variant = signature.getVariant();
  os << "/* " << signature.getNeuron().getValue() << ", "
     << stringifyKernelVariant(variant) << ", storage "
     << signature.getStorageType() << ". " << shapeNote << "\n";
  if (signature.isCoupled())
    os << " * Coupled: the neurons are N / H samples of H; input "
       << signature.getCoupledInput() << " of neuron j at step t gains\n"
       << " * sum over k of coupling[k * H + j] times output "
       << signature.getCoupledOutput()
       << " of neuron k of the sample at\n * the step before"
       << (signature.getVariant() == KernelVariant::Backward
               ? " (this backward kernel runs the adjoint: the incoming\n"
                 " * gradient of the output gains the weighted gradients of "
                 "the input one step\n * later)"
               : "")
       << ". N must be a multiple of H.\n";
  if (signature.hasChannels())
    os << " * The neurons are [B, C, S]: C channels of S neurons per sample "
          "(S = H * W for\n * [T, B, C, H, W] data); N must be a multiple of "
          "C * S.\n";
  if (k.getDeterministic())
    os << " * Deterministic mode: the parameter gradients are summed in an "
          "order that\n * depends only on the inputs and the launch shape, so "
          "reruns give the same\n * bits (the plain function adds them with "
          "atomics).\n";
  // Its per-channel parameters' gradients come per neuron.
  auto isChannelGradient = [&](KernelBufferAttr b) {
    return b.getRole() == BufferRole::PerNeuronParamGradient &&
           llvm::any_of(buffers, [&](KernelBufferAttr p) {
             return p.getRole() == BufferRole::PerChannelParam &&
                    b.getName().getValue() ==
                        (p.getName().getValue() + "_grad").str();
           });
  };
  if (k.getDeterministic() && llvm::any_of(buffers, isChannelGradient))
    os << " * A per-channel parameter's gradient comes per neuron ([N], each "
          "neuron's sum\n * over T): sum it over each channel's neurons (B "
          "and S) in an order of your own.\n";
  for (KernelBufferAttr b : buffers)
    if (!isWorkspaceRole(b.getRole()))
      os << " *   " << b.getName().getValue() << ": "
         << roleComment(b.getRole(), variant)
         << (b.getElementType().isInteger(8) ? ", spikes as bytes (0 or 1)"
             : b.getElementType().isInteger(1)
                 ? ", spikes as bits: neuron n of step t is bit n % 8 of "
                   "byte\n *     t * ((ld + 7) / 8) + n / 8"
                 : "")
         << "\n";
  if (hasWorkspace(k))
    os << " *   workspace: "
       << (signature.count(BufferRole::ReductionScratch)
               ? "as written by the forward kernel, and scratch space"
           : writesWorkspace(k) ? "written for the backward kernel"
                                : "as written by the forward kernel")
       << " (see _workspace_bytes)\n";
  for (ParamAttr p : signature.getParams())
    os << " *   " << p.getName().getValue() << ": runtime parameter ("
       << p.getType() << ")\n";
  os << " */\n";
}

void cheader::writeKernelParameters(raw_ostream &os, CompiledKernelAttr k) {
  KernelSignatureAttr signature = k.getSignature();
  for (KernelBufferAttr b : signature.getBuffers()) {
    if (isWorkspaceRole(b.getRole()))
      continue;
    os << ",\n    " << (isReadRole(b.getRole()) ? "const " : "")
       << elementType(b.getElementType()) << " *" << b.getName().getValue();
  }
  if (hasWorkspace(k))
    os << ",\n    " << (writesWorkspace(k) ? "" : "const ")
       << "float *workspace";
  for (ParamAttr p : signature.getParams())
    os << ",\n    " << scalarType(p.getType()) << " " << p.getName().getValue();
}
