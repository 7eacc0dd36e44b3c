//===- OptMain.cpp - The FlexSN optimizer driver -------------------------===//
//
// Part of the FlexSN project: an MLIR compiler for spiking-neuron dynamics.
//
//===----------------------------------------------------------------------===//
//
// mlir-opt with the flexsn dialect and every FlexSN pass and pipeline. It
// reads its input itself, to check it for text that upstream parsers crash
// on (ParserHazards.h) before MlirOptMain parses it.
//
//===----------------------------------------------------------------------===//

#include "flexsn/Tools/ParserHazards.h"
#include "flexsn/Tools/Registration.h"
#include "flexsn/Tools/ToolMains.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Support/FileUtilities.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"

#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/ToolOutputFile.h"

using namespace mlir;

int mlir::flexsn::optMain(int argc, char **argv) {
  flexsn::configureTool("flexsn-opt");
  DialectRegistry registry;
  flexsn::registerAllDialects(registry);
  flexsn::registerAllPasses();
  auto [inputFilename, outputFilename] = registerAndParseCLIOptions(
      argc, argv, "FlexSN optimizer driver\n", registry);
  llvm::InitLLVM initLLVM(argc, argv);
  MlirOptMainConfig config = MlirOptMainConfig::createFromCLOptions();

  std::string errorMessage;
  std::unique_ptr<llvm::MemoryBuffer> input;
  if (config.shouldShowDialects() || config.shouldListPasses()) {
    // These print and exit; the input (maybe a terminal) is not read.
    input = llvm::MemoryBuffer::getMemBuffer("");
  } else {
    input = openInputFile(inputFilename, &errorMessage);
    if (!input) {
      llvm::errs() << errorMessage << "\n";
      return 1;
    }
    llvm::SourceMgr sourceMgr;
    sourceMgr.AddNewSourceBuffer(
        llvm::MemoryBuffer::getMemBuffer(input->getMemBufferRef(),
                                         /*RequiresNullTerminator=*/false),
        llvm::SMLoc());
    MLIRContext context(MLIRContext::Threading::DISABLED);
    SourceMgrDiagnosticHandler handler(sourceMgr, &context);
    if (failed(flexsn::checkParserHazards(sourceMgr, &context)))
      return 1;
  }
  std::unique_ptr<llvm::ToolOutputFile> output =
      openOutputFile(outputFilename, &errorMessage);
  if (!output) {
    llvm::errs() << errorMessage << "\n";
    return 1;
  }
  if (failed(MlirOptMain(output->os(), std::move(input), registry, config)))
    return 1;
  output->keep();
  return 0;
}
