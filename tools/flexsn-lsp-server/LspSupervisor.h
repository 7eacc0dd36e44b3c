//===- LspSupervisor.h - Keep the language server alive ---------*- C++ -*-===//
//
// Part of the FlexSN project: an MLIR compiler for spiking-neuron dynamics.
//
//===----------------------------------------------------------------------===//
//
// An editor must never lose its language server to a half-typed line. MLIR's
// server parses each document in its own process, and upstream parsers can
// crash on malformed text (ParserHazards.h) or recurse past any stack. So
// flexsn-lsp-server is two processes: this supervisor speaks LSP to the
// editor and runs MLIR's server as a backend child. The supervisor
//   - reads the editor's messages robustly (LF or CRLF headers, spaces
//     around values, a size limit, a nesting limit, a JSON object check),
//     answering what it rejects with an error instead of exiting;
//   - keeps every open document's text (it asks for full-text sync), and
//     never sends the backend a text with a parser hazard: it publishes the
//     hazard's diagnostic itself;
//   - restarts the backend when it dies anyway, answering the requests it
//     had in flight with an error, reopening the documents, and marking the
//     document it died on with a diagnostic until that document changes.
//
//===----------------------------------------------------------------------===//

#ifndef FLEXSN_TOOLS_LSPSUPERVISOR_H
#define FLEXSN_TOOLS_LSPSUPERVISOR_H

#include <string>
#include <vector>

namespace mlir::flexsn::lsp {

/// Runs the supervisor: `backend` is the command line of the backend
/// (program first); `litTest` reads and writes messages as MLIR's
/// `-lit-test` transport does (messages between `// -----` lines, pretty
/// JSON). Returns the exit code.
int runSupervisor(const std::vector<std::string> &backend, bool litTest);

} // namespace mlir::flexsn::lsp

#endif // FLEXSN_TOOLS_LSPSUPERVISOR_H
