//===- flexsn.cpp - flexsn-compile, -opt and -translate in one binary -----===//
//
// Part of the FlexSN project: an MLIR compiler for spiking-neuron dynamics.
//
//===----------------------------------------------------------------------===//
//
// `flexsn <tool> [options]` runs flexsn-<tool>; a link to this binary named
// flexsn-<tool> runs that tool with its arguments as they are. Linked
// statically, each tool holds nearly all of LLVM and MLIR: the wheel bundles
// this one binary instead of three of about the same size (docs/Wheel.md).
//
//===----------------------------------------------------------------------===//

#include "flexsn/Target/HostObject.h"
#include "flexsn/Tools/DeepStack.h"
#include "flexsn/Tools/Registration.h"
#include "flexsn/Tools/ToolMains.h"

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include <string>
#include <vector>

namespace {
struct Tool {
  llvm::StringLiteral name;
  int (*main)(int, char **);
  llvm::StringLiteral summary;
};

constexpr Tool tools[] = {
    {"compile", mlir::flexsn::compileMain,
     "a neuron file to its kernels, in one run"},
    {"opt", mlir::flexsn::optMain, "the optimizer driver (mlir-opt)"},
    {"translate", mlir::flexsn::translateMain,
     "the translation driver (mlir-translate)"},
};

/// The tool `name` ("opt" or "flexsn-opt") names, or null.
const Tool *findTool(llvm::StringRef name) {
  name.consume_front("flexsn-");
  for (const Tool &tool : tools)
    if (tool.name == name)
      return &tool;
  return nullptr;
}

void printUsage(llvm::raw_ostream &os) {
  os << "usage: flexsn <tool> [options]\n\nThe FlexSN tools in one binary "
        "(`flexsn <tool> --help` for a tool's options):\n";
  for (const Tool &tool : tools)
    os << "  " << llvm::left_justify(tool.name, 11) << tool.summary << "\n";
}
} // namespace

int main(int argc, char **argv) {
  llvm::StringRef self = llvm::sys::path::filename(argv[0]);
  if (self.starts_with("flexsn-"))
    if (const Tool *tool = findTool(self))
      return mlir::flexsn::runOnDeepStack(tool->main, argc, argv);
  if (argc < 2) {
    printUsage(llvm::errs());
    return 2;
  }
  llvm::StringRef command = argv[1];
  if (command == "--help" || command == "-help" || command == "-h") {
    printUsage(llvm::outs());
    return 0;
  }
  if (command == "--version" || command == "-version") {
    // The shared version printer (configureTool), which --version runs.
    mlir::flexsn::configureTool("flexsn", mlir::flexsn::printHostObjectTarget);
    char *versionArgs[] = {argv[0], argv[1], nullptr};
    llvm::cl::ParseCommandLineOptions(2, versionArgs);
    return 0;
  }
  const Tool *tool = findTool(command);
  if (!tool) {
    llvm::errs() << "flexsn: no tool '" << command << "' (the tools:";
    for (const Tool &known : tools)
      llvm::errs() << " " << known.name;
    llvm::errs() << ")\n";
    return 2;
  }
  // The tool runs as flexsn-<tool>: its messages and --help name it so.
  std::string name = ("flexsn-" + tool->name).str();
  std::vector<char *> args = {name.data()};
  args.insert(args.end(), argv + 2, argv + argc);
  args.push_back(nullptr);
  return mlir::flexsn::runOnDeepStack(tool->main, argc - 1, args.data());
}
