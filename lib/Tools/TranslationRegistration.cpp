//===- TranslationRegistration.cpp - Translations of flexsn-translate -----===//
//
// Part of the FlexSN project: an MLIR compiler for spiking-neuron dynamics.
//
//===----------------------------------------------------------------------===//
//
// The names and descriptions of FlexSN's translations, around the emitters
// of lib/Target.
//
//===----------------------------------------------------------------------===//

#include "flexsn/Target/GPUBinary.h"
#include "flexsn/Target/HostObject.h"
#include "flexsn/Target/Manifest.h"
#include "flexsn/Target/TorchStep.h"
#include "flexsn/Targets/Target.h"
#include "flexsn/Tools/Registration.h"
#include "flexsn/Tools/Translation.h"

#include "mlir/InitAllTranslations.h"

void mlir::flexsn::registerAllTranslations() {
  mlir::registerAllTranslations();
  // The manifest has a section per registered target.
  registerAllTargets();
  registerModuleTranslation(
      "flexsn-to-manifest",
      "Describe a FlexSN module's neurons and kernels as JSON",
      [](ModuleOp module, raw_ostream &os) {
        return translateToManifest(module, os);
      });
  registerModuleTranslation(
      "flexsn-to-torch",
      "Write each neuron's step as a Python function over PyTorch tensors "
      "(what torch.compile fuses with its neighbours)",
      translateToTorchStep);
  registerModuleTranslation("flexsn-to-cubin",
                            "Write the cubin of a flexsn-lower-to-nvvm module",
                            translateToCubin);
  registerModuleTranslation(
      "flexsn-to-ptx",
      "Write the PTX of a module lowered with flexsn-lower-to-nvvm=format=isa",
      translateToPTX);
  registerModuleTranslation(
      "flexsn-to-fatbin",
      "Bundle the cubins of every target chip into one fatbin",
      [](ModuleOp module, raw_ostream &os) {
        return translateToFatbin(module, os);
      });
  registerModuleTranslation(
      "flexsn-to-header",
      "Write a C header: the embedded kernels and a typed launch function "
      "per kernel (includes flexsn_runtime.h and needs the runtime library; "
      "with --flexsn-header-single-file, holds the runtime itself)",
      translateToHeader);
  registerModuleTranslation(
      "flexsn-to-host-object",
      "Compile a flexsn-lower-to-cpu module to a position-independent "
      "object file for the host",
      translateToHostObject);
  registerModuleTranslation(
      "flexsn-to-host-header",
      "Write the C header of a flexsn-lower-to-cpu module's kernels: "
      "checked functions around the object file's (includes "
      "flexsn_status.h)",
      translateToHostHeader);
}
