//===- flexsn-lsp-server.cpp - Language server for FlexSN .mlir files -----===//
//
// Part of the FlexSN project: an MLIR compiler for spiking-neuron dynamics.
//
//===----------------------------------------------------------------------===//
//
// MLIR's language server with every dialect flexsn-opt knows, the flexsn
// dialect included: an editor gets diagnostics (the dialect's verifiers),
// hover and go-to-definition in neuron files (docs/Editors.md).
//
// The process the editor starts is a supervisor (LspSupervisor.h) that runs
// the server itself as a child (`--flexsn-lsp-backend`, on a deep stack), so
// that no document can take the editor's server down.
//
//===----------------------------------------------------------------------===//

#include "LspSupervisor.h"

#include "flexsn/Tools/DeepStack.h"
#include "flexsn/Tools/Registration.h"

#include "mlir/IR/DialectRegistry.h"
#include "mlir/Tools/mlir-lsp-server/MlirLspServerMain.h"

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/FileSystem.h"

#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include <unistd.h>

using namespace mlir;

static int serverMain(int argc, char **argv) {
  flexsn::configureTool("flexsn-lsp-server");
  DialectRegistry registry;
  flexsn::registerAllDialects(registry);
  return failed(MlirLspServerMain(argc, argv, registry));
}

static constexpr const char *kBackendFlag = "--flexsn-lsp-backend";

/// For tests of the supervisor: with $FLEXSN_LSP_TEST_CRASH set, the
/// backend dies (SIGABRT) on reading a message that holds its text, as it
/// would on a text some upstream parser crashes on.
static void crashOnMarker(std::string marker) {
  int real = ::dup(STDIN_FILENO), pipeFds[2];
  if (real < 0 || ::pipe(pipeFds) != 0)
    return;
  std::thread([real, out = pipeFds[1], marker] {
    std::string window;
    char buffer[4096];
    ssize_t n;
    while ((n = ::read(real, buffer, sizeof(buffer))) > 0) {
      window.append(buffer, n);
      if (window.find(marker) != std::string::npos)
        std::abort();
      if (::write(out, buffer, n) != n)
        break;
      if (window.size() > marker.size())
        window.erase(0, window.size() - marker.size());
    }
    ::close(out);
  }).detach();
  ::dup2(pipeFds[0], STDIN_FILENO);
  ::close(pipeFds[0]);
}

int main(int argc, char **argv) {
  std::vector<char *> args(argv, argv + argc);
  bool backend = argc > 1 && llvm::StringRef(argv[1]) == kBackendFlag;
  bool litTest = false, informational = false;
  for (llvm::StringRef arg : llvm::ArrayRef(argv + 1, argc - 1)) {
    litTest |= arg == "-lit-test" || arg == "--lit-test";
    informational |= arg.starts_with("-help") || arg.starts_with("--help") ||
                     arg == "-version" || arg == "--version";
  }
  if (backend) {
    args.erase(args.begin() + 1);
    if (const char *marker = std::getenv("FLEXSN_LSP_TEST_CRASH"))
      crashOnMarker(marker);
    return flexsn::runOnDeepStack(serverMain, args.size(), args.data());
  }
  if (informational)
    return serverMain(argc, argv);
  std::vector<std::string> command = {
      llvm::sys::fs::getMainExecutable(argv[0], (void *)&serverMain),
      kBackendFlag};
  command.insert(command.end(), argv + 1, argv + argc);
  return flexsn::lsp::runSupervisor(command, litTest);
}
