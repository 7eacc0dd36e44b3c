//===- NpyFuzzer.cpp - Fuzz target: the .npy reader -----------------------===//
//
// Part of the FlexSN project: an MLIR compiler for spiking-neuron dynamics.
//
//===----------------------------------------------------------------------===//
//
// Feeds arbitrary bytes to the .npy reader. Properties:
//   - it returns an array or an error, never crashes, and its messages name
//     the file;
//   - an array it returns is consistent (verifyNpyArray);
//   - what it returns survives a round trip: written as writeNpy writes it
//     and read back, it is the same array, and writing that again gives the
//     same bytes.
//
//===----------------------------------------------------------------------===//

#include "FuzzerSupport.h"

#include "flexsn/Runner/Npy.h"

#include "llvm/ADT/StringRef.h"

using namespace mlir::flexsn;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  llvm::StringRef contents(reinterpret_cast<const char *>(data), size);
  llvm::Expected<NpyArray> array = parseNpy("input.npy", contents);
  if (!array) {
    std::string message = llvm::toString(array.takeError());
    FLEXSN_FUZZ_CHECK(llvm::StringRef(message).starts_with("input.npy: "),
                      "an error message does not name the file");
    return 0;
  }
  FLEXSN_FUZZ_CHECK(!llvm::errorToBool(verifyNpyArray(*array)),
                    "the reader returned an inconsistent array");

  llvm::Expected<std::string> written = serializeNpy(*array);
  FLEXSN_FUZZ_CHECK(bool(written), "an array read cannot be written");
  llvm::Expected<NpyArray> reread = parseNpy("written.npy", *written);
  FLEXSN_FUZZ_CHECK(bool(reread), "a written array cannot be read back");
  FLEXSN_FUZZ_CHECK(reread->dtype == array->dtype &&
                        reread->shape == array->shape &&
                        reread->bytes == array->bytes,
                    "the round trip changed the array");
  llvm::Expected<std::string> rewritten = serializeNpy(*reread);
  FLEXSN_FUZZ_CHECK(rewritten && *rewritten == *written,
                    "writing is not deterministic");
  return 0;
}
