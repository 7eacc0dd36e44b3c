//===- Npy.h - Reading and writing NumPy .npy files -------------*- C++ -*-===//
//
// Part of the FlexSN project: an MLIR compiler for spiking-neuron dynamics.
//
//===----------------------------------------------------------------------===//
//
// flexsn-run exchanges tensors with Python through NumPy's .npy format
// (numpy.lib.format): a magic string, a format version, a Python dictionary
// literal naming the dtype, the memory order and the shape, then the raw
// element data. Only the dtypes the runner needs are supported, always in
// little-endian C order, so element data is kept as bytes and never converted.
//
//===----------------------------------------------------------------------===//

#ifndef FLEXSN_RUNNER_NPY_H
#define FLEXSN_RUNNER_NPY_H

#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace mlir::flexsn {

/// Element types flexsn-run reads and writes.
enum class NpyDType { F32, F16, U8 }; // '<f4', '<f2', '|u1'

struct NpyArray {
  NpyDType dtype = NpyDType::F32;
  llvm::SmallVector<int64_t> shape; // C order; empty = scalar (0-d)
  std::vector<uint8_t> bytes;       // little-endian element data, C order
  /// Product of shape (1 for 0-d); -1 if a dimension is negative or the
  /// product does not fit in int64_t.
  int64_t getNumElements() const;
};

/// Size in bytes of one element: 4, 2 or 1.
size_t getElementSize(NpyDType dtype);

/// NumPy's name for `dtype`: "float32", "float16" or "uint8".
llvm::StringRef getDTypeName(NpyDType dtype);

/// Reads a .npy file (format versions 1.0, 2.0 and 3.0). Errors name the file
/// and say what is wrong: missing file, not a .npy file, truncated header or
/// data, unsupported dtype (name it, say which are supported), big-endian data,
/// fortran_order True, malformed header dictionary, negative or overflowing
/// shape. Bytes after the data are an error too. fortran_order True is accepted
/// where the Fortran and C layouts coincide (at most one dimension with extent
/// above 1, or no elements).
llvm::Expected<NpyArray> readNpy(llvm::StringRef path);

/// Reads .npy contents held in memory, as readNpy does; `name` stands for the
/// file in messages.
llvm::Expected<NpyArray> parseNpy(llvm::StringRef name, llvm::StringRef data);

/// The contents writeNpy writes for `array` (an error if `array` is
/// inconsistent, see verifyNpyArray).
llvm::Expected<std::string> serializeNpy(const NpyArray &array);

/// Writes `array` as a version 1.0 .npy file (header padded so data starts at a
/// multiple of 64 bytes, header ending in '\n', as numpy does; version 2.0 only
/// if the header cannot fit in 1.0). Writes to `path` atomically: to a
/// temporary file beside it, then renamed.
llvm::Error writeNpy(llvm::StringRef path, const NpyArray &array);

/// Checks bytes.size() == getNumElements() * getElementSize(dtype), and that
/// the shape has no negative dimension and its sizes do not overflow.
llvm::Error verifyNpyArray(const NpyArray &array);

} // namespace mlir::flexsn

#endif // FLEXSN_RUNNER_NPY_H
