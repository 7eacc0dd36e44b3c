//===- ParserHazards.h - Input that upstream parsers crash on ----*- C++
//-*-===//
//
// Part of the FlexSN project: an MLIR compiler for spiking-neuron dynamics.
//
//===----------------------------------------------------------------------===//
//
// A few custom-op parsers of MLIR 22 dereference a null attribute instead of
// reporting malformed input: linalg.reduce and linalg.broadcast after
// `dimensions =`, linalg.transpose after `permutation =`, when what follows
// is not a list of integers in square brackets. Parsing such text kills the
// process. The tools check their input for it first and report an error at
// its location instead (docs/Testing.md, "Upstream parser hazards").
//
//===----------------------------------------------------------------------===//

#ifndef FLEXSN_TOOLS_PARSERHAZARDS_H
#define FLEXSN_TOOLS_PARSERHAZARDS_H

#include "mlir/Support/LLVM.h"

#include "llvm/Support/SourceMgr.h"

#include <string>
#include <vector>

namespace mlir {
class MLIRContext;

namespace flexsn {

/// A place in a text that an upstream parser crashes on: its byte offset
/// and what is wrong there.
struct ParserHazard {
  size_t offset;
  std::string message;
};

/// Every hazard in `text`, in order (none for text the parsers can take).
std::vector<ParserHazard> findParserHazards(StringRef text);

/// Checks the main buffer of `sourceMgr` for text that an upstream parser
/// crashes on. Emits an error through `context` (at its file, line and
/// column) for each such place and fails if there is one; else succeeds
/// without a diagnostic.
LogicalResult checkParserHazards(const llvm::SourceMgr &sourceMgr,
                                 MLIRContext *context);

} // namespace flexsn
} // namespace mlir

#endif // FLEXSN_TOOLS_PARSERHAZARDS_H
