//===- TranslationRegistration.cpp - Translations of flexsn-translate -----===//
//
// Part of the FlexSN project: an MLIR compiler for spiking-neuron dynamics.
//
//===----------------------------------------------------------------------===//

#include "flexsn/Target/GPUBinary.h"
#include "flexsn/Target/HostObject.h"
#include "flexsn/Target/Manifest.h"
#include "flexsn/Tools/Registration.h"

#include "mlir/InitAllTranslations.h"

void mlir::flexsn::registerAllTranslations() {
  mlir::registerAllTranslations();
  registerToManifestTranslation();
  registerGPUBinaryTranslations();
  registerHostObjectTranslation();
}
