//===- NpyTest.cpp - Reading and writing NumPy .npy files -----------------===//
//
// Part of the FlexSN project: an MLIR compiler for spiking-neuron dynamics.
//
//===----------------------------------------------------------------------===//
//
// Round trips through writeNpy and readNpy; the writer's bytes checked against
// the NPY format specification (numpy.lib.format); files built byte by byte
// here from that specification, independently of the writer, read back; and
// every kind of bad file rejected with a message naming the file and the
// problem, without crashing on truncated or corrupted input.
//
//===----------------------------------------------------------------------===//

#include "flexsn/Runner/Npy.h"

#include "llvm/ADT/SmallString.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include "gtest/gtest.h"

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

using namespace llvm;
using namespace mlir::flexsn;

namespace {

//===----------------------------------------------------------------------===//
// Helpers
//===----------------------------------------------------------------------===//

constexpr StringLiteral kMagic("\x93NUMPY");

/// Builds a .npy file from the specification: magic string, version,
/// little-endian header length (2 bytes in 1.0, 4 in 2.0 and 3.0), header,
/// data. With `pad`, the header gets spaces and a '\n' so that the data
/// starts at a multiple of 64 bytes; otherwise it is used as given.
std::string makeNpy(StringRef header, StringRef data, unsigned major = 1,
                    bool pad = true, unsigned minor = 0) {
  size_t lengthBytes = major == 1 ? 2 : 4;
  std::string padded = header.str();
  if (pad) {
    size_t used = kMagic.size() + 2 + lengthBytes + padded.size() + 1;
    padded.append((64 - used % 64) % 64, ' ');
    padded += '\n';
  }
  std::string file = kMagic.str();
  file += static_cast<char>(major);
  file += static_cast<char>(minor);
  uint64_t length = padded.size();
  for (size_t i = 0; i < lengthBytes; ++i)
    file += static_cast<char>((length >> (8 * i)) & 0xff);
  return file + padded + data.str();
}

/// Little-endian bytes of IEEE single-precision values.
std::string floatBytes(std::initializer_list<float> values) {
  std::string result;
  for (float value : values) {
    uint32_t bits;
    std::memcpy(&bits, &value, sizeof(bits));
    for (int i = 0; i < 4; ++i)
      result += static_cast<char>((bits >> (8 * i)) & 0xff);
  }
  return result;
}

/// Bytes of a deterministic, non-repeating-looking pattern.
std::vector<uint8_t> patternBytes(size_t size) {
  std::vector<uint8_t> bytes(size);
  for (size_t i = 0; i < size; ++i)
    bytes[i] = static_cast<uint8_t>(i * 37 + 11);
  return bytes;
}

std::vector<uint8_t> toBytes(StringRef text) {
  return std::vector<uint8_t>(text.bytes_begin(), text.bytes_end());
}

/// A fresh directory per test, removed afterwards.
class NpyTest : public ::testing::Test {
protected:
  void SetUp() override {
    std::error_code ec = sys::fs::createUniqueDirectory("flexsn-npy-test", dir);
    ASSERT_FALSE(ec) << ec.message();
  }

  void TearDown() override {
    if (!dir.empty()) {
      EXPECT_FALSE(sys::fs::remove_directories(dir));
    }
  }

  std::string pathFor(StringRef name) const {
    SmallString<128> path(dir);
    sys::path::append(path, name);
    return std::string(path);
  }

  /// Writes `contents` verbatim to a file `name` in the test directory.
  std::string writeFile(StringRef name, StringRef contents) {
    std::string path = pathFor(name);
    std::error_code ec;
    raw_fd_ostream os(path, ec);
    EXPECT_FALSE(ec) << ec.message();
    os << contents;
    os.close();
    EXPECT_FALSE(os.has_error());
    return path;
  }

  static std::string readFile(StringRef path) {
    ErrorOr<std::unique_ptr<MemoryBuffer>> buffer =
        MemoryBuffer::getFile(path, /*IsText=*/false,
                              /*RequiresNullTerminator=*/false);
    EXPECT_TRUE(static_cast<bool>(buffer)) << path.str();
    return buffer ? (*buffer)->getBuffer().str() : std::string();
  }

  /// Names of the entries in the test directory.
  std::vector<std::string> listDirectory() const {
    std::vector<std::string> names;
    std::error_code ec;
    for (sys::fs::directory_iterator it(dir, ec), end; it != end && !ec;
         it.increment(ec))
      names.push_back(sys::path::filename(it->path()).str());
    EXPECT_FALSE(ec);
    return names;
  }

  /// Reads `path`, expecting an error that starts with the path and contains
  /// every fragment; returns the message.
  static std::string expectReadError(StringRef path,
                                     ArrayRef<StringRef> fragments) {
    Expected<NpyArray> array = readNpy(path);
    if (array) {
      ADD_FAILURE() << "reading " << path.str() << " succeeded";
      return "";
    }
    std::string message = toString(array.takeError());
    EXPECT_TRUE(StringRef(message).starts_with(path.str() + ": ")) << message;
    for (StringRef fragment : fragments)
      EXPECT_NE(message.find(fragment.str()), std::string::npos)
          << "missing '" << fragment.str() << "' in: " << message;
    return message;
  }

  /// Writes `contents` to `name` and expects reading it to fail.
  std::string expectBadFile(StringRef name, StringRef contents,
                            ArrayRef<StringRef> fragments) {
    return expectReadError(writeFile(name, contents), fragments);
  }

  SmallString<128> dir;
};

//===----------------------------------------------------------------------===//
// Basics
//===----------------------------------------------------------------------===//

TEST(NpyDTypeTest, SizesAndNames) {
  EXPECT_EQ(getElementSize(NpyDType::F32), 4u);
  EXPECT_EQ(getElementSize(NpyDType::F16), 2u);
  EXPECT_EQ(getElementSize(NpyDType::U8), 1u);
  EXPECT_EQ(getDTypeName(NpyDType::F32), "float32");
  EXPECT_EQ(getDTypeName(NpyDType::F16), "float16");
  EXPECT_EQ(getDTypeName(NpyDType::U8), "uint8");
}

TEST(NpyArrayTest, NumElements) {
  NpyArray array;
  EXPECT_EQ(array.getNumElements(), 1);
  array.shape = {0};
  EXPECT_EQ(array.getNumElements(), 0);
  array.shape = {2, 3};
  EXPECT_EQ(array.getNumElements(), 6);
  array.shape = {0, 4};
  EXPECT_EQ(array.getNumElements(), 0);
  array.shape = {7, 1, 3};
  EXPECT_EQ(array.getNumElements(), 21);
  array.shape = {2, -3};
  EXPECT_EQ(array.getNumElements(), -1);
  array.shape = {int64_t(1) << 32, int64_t(1) << 32};
  EXPECT_EQ(array.getNumElements(), -1);
}

TEST(NpyArrayTest, Verify) {
  NpyArray array;
  array.dtype = NpyDType::F16;
  array.shape = {2, 3};
  array.bytes.resize(12);
  EXPECT_FALSE(errorToBool(verifyNpyArray(array)));

  array.bytes.resize(11);
  std::string message = toString(verifyNpyArray(array));
  EXPECT_NE(message.find("11 bytes"), std::string::npos) << message;
  EXPECT_NE(message.find("(2, 3)"), std::string::npos) << message;
  EXPECT_NE(message.find("float16"), std::string::npos) << message;
  EXPECT_NE(message.find("12"), std::string::npos) << message;

  array.shape = {2, -1};
  message = toString(verifyNpyArray(array));
  EXPECT_NE(message.find("negative dimension -1"), std::string::npos)
      << message;

  array.dtype = NpyDType::F32;
  array.shape = {int64_t(1) << 62};
  message = toString(verifyNpyArray(array));
  EXPECT_NE(message.find("too large"), std::string::npos) << message;

  array.shape = {int64_t(1) << 40, int64_t(1) << 40};
  message = toString(verifyNpyArray(array));
  EXPECT_NE(message.find("too many elements"), std::string::npos) << message;
}

//===----------------------------------------------------------------------===//
// Writing and round trips
//===----------------------------------------------------------------------===//

struct ShapeCase {
  SmallVector<int64_t> shape;
  const char *pythonText; // how numpy prints the shape tuple
};

struct DTypeCase {
  NpyDType dtype;
  const char *descr;
};

TEST_F(NpyTest, RoundTripEveryDTypeAndShape) {
  const ShapeCase shapes[] = {{{}, "()"},         {{0}, "(0,)"},
                              {{5}, "(5,)"},      {{2, 3}, "(2, 3)"},
                              {{0, 4}, "(0, 4)"}, {{7, 1, 3}, "(7, 1, 3)"}};
  const DTypeCase dtypes[] = {
      {NpyDType::F32, "<f4"}, {NpyDType::F16, "<f2"}, {NpyDType::U8, "|u1"}};
  for (const DTypeCase &dtype : dtypes) {
    for (const ShapeCase &shape : shapes) {
      SCOPED_TRACE(std::string(dtype.descr) + " " + shape.pythonText);
      NpyArray array;
      array.dtype = dtype.dtype;
      array.shape = shape.shape;
      array.bytes =
          patternBytes(array.getNumElements() * getElementSize(dtype.dtype));
      std::string path = pathFor("round-trip.npy");
      ASSERT_FALSE(errorToBool(writeNpy(path, array)));

      // The file as the specification lays it out.
      std::string file = readFile(path);
      ASSERT_GE(file.size(), 10u);
      EXPECT_EQ(file.substr(0, 6), kMagic.str());
      EXPECT_EQ(file[6], 1); // version 1.0
      EXPECT_EQ(file[7], 0);
      size_t headerLength =
          static_cast<uint8_t>(file[8]) | static_cast<uint8_t>(file[9]) << 8;
      size_t dataOffset = 10 + headerLength;
      EXPECT_EQ(dataOffset % 64, 0u);
      ASSERT_EQ(file.size(), dataOffset + array.bytes.size());
      StringRef header = StringRef(file).slice(10, dataOffset);
      // A Python dict literal, then spaces, then a single '\n'.
      std::string dict =
          std::string("{'descr': '") + dtype.descr +
          "', 'fortran_order': False, 'shape': " + shape.pythonText + ", }";
      EXPECT_TRUE(header.starts_with(dict)) << header.str();
      EXPECT_TRUE(header.ends_with("\n"));
      StringRef padding = header.drop_front(dict.size()).drop_back();
      EXPECT_EQ(padding.find_first_not_of(' '), StringRef::npos);
      for (char c : header.drop_back())
        EXPECT_TRUE(c >= 0x20 && c < 0x7f) << "byte " << int(c);
      EXPECT_EQ(StringRef(file).drop_front(dataOffset),
                StringRef(reinterpret_cast<const char *>(array.bytes.data()),
                          array.bytes.size()));

      Expected<NpyArray> read = readNpy(path);
      ASSERT_TRUE(static_cast<bool>(read)) << toString(read.takeError());
      EXPECT_EQ(read->dtype, array.dtype);
      EXPECT_EQ(read->shape, array.shape);
      EXPECT_EQ(read->bytes, array.bytes);
    }
  }
  EXPECT_EQ(listDirectory(), std::vector<std::string>{"round-trip.npy"});
}

TEST_F(NpyTest, RoundTripKeepsFloatBitsExactly) {
  NpyArray array;
  array.shape = {7};
  array.bytes =
      toBytes(floatBytes({0.0f, -0.0f, 1.5f, -3.25e-38f, 1e38f, 0.1f}) +
              std::string("\x01\x00\xc0\x7f", 4)); // a NaN payload
  std::string path = pathFor("bits.npy");
  ASSERT_FALSE(errorToBool(writeNpy(path, array)));
  Expected<NpyArray> read = readNpy(path);
  ASSERT_TRUE(static_cast<bool>(read)) << toString(read.takeError());
  EXPECT_EQ(read->bytes, array.bytes);
}

TEST_F(NpyTest, WriteReplacesExistingFileAndLeavesNoTemporaries) {
  std::string path = pathFor("out.npy");
  NpyArray large;
  large.dtype = NpyDType::U8;
  large.shape = {1000};
  large.bytes = patternBytes(1000);
  ASSERT_FALSE(errorToBool(writeNpy(path, large)));
  NpyArray small;
  small.dtype = NpyDType::F16;
  small.shape = {2};
  small.bytes = {0x00, 0x3c, 0x00, 0xc0}; // 1.0, -2.0
  ASSERT_FALSE(errorToBool(writeNpy(path, small)));
  Expected<NpyArray> read = readNpy(path);
  ASSERT_TRUE(static_cast<bool>(read)) << toString(read.takeError());
  EXPECT_EQ(read->dtype, NpyDType::F16);
  EXPECT_EQ(read->bytes, small.bytes);
  EXPECT_EQ(readFile(path).size(), 128u + 4u);
  EXPECT_EQ(listDirectory(), std::vector<std::string>{"out.npy"});
}

TEST_F(NpyTest, WriteErrorsNameTheFile) {
  NpyArray array;
  array.shape = {2, 3};
  array.bytes.resize(20);
  std::string path = pathFor("bad-size.npy");
  std::string message = toString(writeNpy(path, array));
  EXPECT_TRUE(StringRef(message).starts_with(path + ": ")) << message;
  EXPECT_NE(message.find("20 bytes"), std::string::npos) << message;
  EXPECT_NE(message.find("24"), std::string::npos) << message;

  array.shape = {-1};
  message = toString(writeNpy(path, array));
  EXPECT_TRUE(StringRef(message).starts_with(path + ": ")) << message;
  EXPECT_NE(message.find("negative dimension"), std::string::npos) << message;
  EXPECT_FALSE(sys::fs::exists(path));

  array.shape = {5};
  path = pathFor("no-such-dir/out.npy");
  message = toString(writeNpy(path, array));
  EXPECT_TRUE(StringRef(message).starts_with(path + ": ")) << message;
  EXPECT_NE(message.find("temporary file"), std::string::npos) << message;

  // Renaming over a directory fails; the temporary file is removed.
  path = pathFor("subdir");
  ASSERT_FALSE(sys::fs::create_directory(path));
  message = toString(writeNpy(path, array));
  EXPECT_TRUE(StringRef(message).starts_with(path + ": ")) << message;
  std::vector<std::string> names = listDirectory();
  EXPECT_EQ(names, std::vector<std::string>{"subdir"});
}

//===----------------------------------------------------------------------===//
// Reading files built from the specification
//===----------------------------------------------------------------------===//

struct HandBuiltCase {
  const char *name;
  std::string file;
  NpyDType dtype;
  SmallVector<int64_t> shape;
  std::string data;
};

TEST_F(NpyTest, ReadsHandBuiltFiles) {
  std::string six = floatBytes({1, 2, 3, 4, 5, 6});
  std::string three = floatBytes({-1, 0.5, 7});
  const HandBuiltCase cases[] = {
      {"version 1.0, (3,)",
       makeNpy("{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }",
               three),
       NpyDType::F32,
       {3},
       three},
      {"version 2.0",
       makeNpy("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }",
               six, /*major=*/2),
       NpyDType::F32,
       {2, 3},
       six},
      {"version 3.0",
       makeNpy("{'descr': '|u1', 'fortran_order': False, 'shape': (4,), }",
               "abcd", /*major=*/3),
       NpyDType::U8,
       {4},
       "abcd"},
      {"double quotes, no trailing comma",
       makeNpy("{\"descr\": \"<f2\", \"fortran_order\": False, "
               "\"shape\": (2, 1)}",
               std::string("\x00\x3c\x00\xc0", 4)),
       NpyDType::F16,
       {2, 1},
       std::string("\x00\x3c\x00\xc0", 4)},
      {"keys in another order",
       makeNpy("{'shape': (2,), 'fortran_order': False, 'descr': '|u1'}",
               "\xff\x01"),
       NpyDType::U8,
       {2},
       "\xff\x01"},
      {"extra whitespace",
       makeNpy("  {  'descr'  :\t'<f4' ,\n 'fortran_order' :  False ,"
               "  'shape' : ( 2 ,  3 , ) ,\r\n }  ",
               six),
       NpyDType::F32,
       {2, 3},
       six},
      {"header aligned to 16 bytes, as old numpy wrote",
       makeNpy("{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }  \n",
               three, /*major=*/1, /*pad=*/false),
       NpyDType::F32,
       {3},
       three},
      {"header without final newline",
       makeNpy("{'descr': '<f4', 'fortran_order': False, 'shape': (3,)}", three,
               /*major=*/1, /*pad=*/false),
       NpyDType::F32,
       {3},
       three},
      {"native byte order '=f4'",
       makeNpy("{'descr': '=f4', 'fortran_order': False, 'shape': (3,)}",
               three),
       NpyDType::F32,
       {3},
       three},
      {"uint8 written '<u1'",
       makeNpy("{'descr': '<u1', 'fortran_order': False, 'shape': (1,)}", "z"),
       NpyDType::U8,
       {1},
       "z"},
      {"Python 2 long integers",
       makeNpy("{'descr': '<f4', 'fortran_order': False, 'shape': (2L, 3L), }",
               six),
       NpyDType::F32,
       {2, 3},
       six},
      {"0-d",
       makeNpy("{'descr': '<f4', 'fortran_order': False, 'shape': (), }",
               floatBytes({42})),
       NpyDType::F32,
       {},
       floatBytes({42})},
      {"empty, (0, 4)",
       makeNpy("{'descr': '<f2', 'fortran_order': False, 'shape': (0, 4), }",
               ""),
       NpyDType::F16,
       {0, 4},
       ""},
      {"fortran_order True where it is the same as C order",
       makeNpy("{'descr': '<f4', 'fortran_order': True, 'shape': (1, 3, 1), }",
               three),
       NpyDType::F32,
       {1, 3, 1},
       three},
  };
  for (const HandBuiltCase &c : cases) {
    SCOPED_TRACE(c.name);
    std::string path = writeFile("hand-built.npy", c.file);
    Expected<NpyArray> array = readNpy(path);
    ASSERT_TRUE(static_cast<bool>(array)) << toString(array.takeError());
    EXPECT_EQ(array->dtype, c.dtype);
    EXPECT_EQ(array->shape, c.shape);
    EXPECT_EQ(array->bytes, toBytes(c.data));
  }
}

//===----------------------------------------------------------------------===//
// Errors
//===----------------------------------------------------------------------===//

const char *const kF32Header =
    "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }";

TEST_F(NpyTest, MissingFile) {
  expectReadError(pathFor("missing.npy"),
                  {"cannot read file", "o such file or directory"});
}

TEST_F(NpyTest, DirectoryIsNotAFile) {
  expectReadError(std::string(dir), {"cannot read file"});
}

TEST_F(NpyTest, NotANpyFile) {
  expectBadFile("empty.npy", "", {"not a .npy file", "empty"});
  expectBadFile("text.npy", "hello, world\n", {"not a .npy file", "magic"});
  expectBadFile("zip.npy", std::string("PK\x03\x04\x14\x00\x00\x00", 8),
                {"not a .npy file"});
  expectBadFile("almost.npy", std::string("\x93NUMPX\x01\x00", 8),
                {"not a .npy file"});
}

TEST_F(NpyTest, UnsupportedVersion) {
  std::string file = makeNpy(kF32Header, floatBytes({1, 2, 3, 4, 5, 6}));
  file[6] = 4;
  expectBadFile(
      "v4.npy", file,
      {"unsupported .npy format version 4.0", "expected 1.0, 2.0 or 3.0"});
  file[6] = 1;
  file[7] = 1;
  expectBadFile("v11.npy", file, {"unsupported .npy format version 1.1"});
  file[6] = 0;
  file[7] = 0;
  expectBadFile("v0.npy", file, {"unsupported .npy format version 0.0"});
}

TEST_F(NpyTest, TruncatedHeader) {
  std::string file = makeNpy(kF32Header, floatBytes({1, 2, 3, 4, 5, 6}));
  expectBadFile("magic.npy", file.substr(0, 4), {"truncated header"});
  expectBadFile("version.npy", file.substr(0, 7), {"truncated header"});
  expectBadFile("length.npy", file.substr(0, 9), {"truncated header"});
  expectBadFile("header.npy", file.substr(0, 40),
                {"truncated header", "should be 118 bytes", "only 30"});
  std::string v2 = makeNpy(kF32Header, "", /*major=*/2);
  expectBadFile("length2.npy", v2.substr(0, 11), {"truncated header"});
  // A version 2.0 length of 4 GiB in a small file.
  v2[8] = v2[9] = v2[10] = v2[11] = '\xff';
  expectBadFile("huge.npy", v2, {"truncated header", "4294967295"});
}

TEST_F(NpyTest, TruncatedData) {
  std::string file = makeNpy(kF32Header, floatBytes({1, 2, 3, 4, 5}));
  expectBadFile("data.npy", file,
                {"truncated data", "(2, 3)", "float32", "24 bytes", "only 20"});
  file = makeNpy("{'descr': '<f4', 'fortran_order': False, 'shape': ()}", "");
  expectBadFile("scalar.npy", file, {"truncated data", "()", "4 bytes"});
}

TEST_F(NpyTest, TrailingData) {
  std::string file =
      makeNpy(kF32Header, floatBytes({1, 2, 3, 4, 5, 6}) + "xyz");
  expectBadFile("trailing.npy", file,
                {"3 unexpected bytes after the data", "24 bytes"});
}

TEST_F(NpyTest, UnsupportedDType) {
  std::string path = writeFile(
      "f8.npy",
      makeNpy("{'descr': '<f8', 'fortran_order': False, 'shape': (3,), }",
              std::string(24, '\0')));
  std::string message = expectReadError(path, {});
  EXPECT_EQ(message, path + ": unsupported dtype '<f8' (expected float32 "
                            "'<f4', float16 '<f2' or uint8 '|u1')");

  for (const char *descr :
       {"|b1", "<i4", "<i1", "|i1", "<c8", "<U3", "|O", "float32", "f8", ""}) {
    SCOPED_TRACE(descr);
    std::string header = std::string("{'descr': '") + descr +
                         "', 'fortran_order': False, 'shape': (1,)}";
    expectBadFile("dtype.npy", makeNpy(header, "1234"),
                  {"unsupported dtype '" + std::string(descr) + "'",
                   "expected float32 '<f4', float16 '<f2' or uint8 '|u1'"});
  }

  expectBadFile("structured.npy",
                makeNpy("{'descr': [('a', '<f4')], 'fortran_order': False, "
                        "'shape': (1,)}",
                        "1234"),
                {"unsupported dtype", "structured", "expected float32 '<f4'"});
}

TEST_F(NpyTest, BigEndian) {
  expectBadFile(
      "be4.npy",
      makeNpy("{'descr': '>f4', 'fortran_order': False, 'shape': (6,)}",
              floatBytes({1, 2, 3, 4, 5, 6})),
      {"big-endian data '>f4' is not supported", "float32 '<f4'"});
  expectBadFile(
      "be2.npy",
      makeNpy("{'descr': '>f2', 'fortran_order': False, 'shape': (2,)}",
              "abcd"),
      {"big-endian data '>f2'", "float16 '<f2'"});
}

TEST_F(NpyTest, FortranOrder) {
  expectBadFile(
      "fortran.npy",
      makeNpy("{'descr': '<f4', 'fortran_order': True, 'shape': (2, 3), }",
              floatBytes({1, 2, 3, 4, 5, 6})),
      {"fortran_order True", "not supported", "C order"});
}

TEST_F(NpyTest, MalformedHeaderDictionary) {
  struct MalformedCase {
    std::string header;
    const char *problem;
  };
  const MalformedCase cases[] = {
      {"", "expected '{'"},
      {"'descr': '<f4'", "expected '{'"},
      {"{'descr': '<f4', 'fortran_order': False}", "missing key 'shape'"},
      {"{'fortran_order': False, 'shape': (1,)}", "missing key 'descr'"},
      {"{'descr': '<f4', 'shape': (1,)}", "missing key 'fortran_order'"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (1,), 'x': 1}",
       "unexpected key 'x'"},
      {"{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, "
       "'shape': (1,)}",
       "duplicate key 'descr'"},
      {"{'descr': '<f4' 'fortran_order': False, 'shape': (1,)}",
       "expected ',' or '}'"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (1,)",
       "expected ',' or '}'"},
      {"{'descr' '<f4', 'fortran_order': False, 'shape': (1,)}",
       "expected ':' after key 'descr'"},
      {"{descr: '<f4', 'fortran_order': False, 'shape': (1,)}",
       "expected a quoted key"},
      {"{'descr': 4, 'fortran_order': False, 'shape': (1,)}",
       "'descr' is not a string"},
      {"{'descr': '<f4', 'fortran_order': 0, 'shape': (1,)}",
       "'fortran_order' is not True or False"},
      {"{'descr': '<f4', 'fortran_order': false, 'shape': (1,)}",
       "unexpected name 'false'"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': [1]}",
       "'shape' is not a tuple"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (1)}",
       "'shape' is not a tuple"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': 1}",
       "'shape' is not a tuple"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': ('1',)}",
       "'shape' holds something other than integers"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (None,)}",
       "'shape' holds something other than integers"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (1.5,)}",
       "expected an integer"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (0x1,)}",
       "expected an integer"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (,)}",
       "unexpected character ','"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (1,,)}",
       "unexpected character ','"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (1 2)}",
       "expected ',' or ')'"},
      {"{'descr': '<f4, 'fortran_order': False, 'shape': (1,)}",
       "expected ',' or '}'"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (1,)} x",
       "unexpected text after the dictionary"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (1,)}}",
       "unexpected text after the dictionary"},
      {"{'descr: '<f4'}", "expected ':' after key"},
      {"{'descr", "unterminated string"},
      {"{'descr\n': '<f4'}", "unterminated string"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (1,),,}",
       "expected a quoted key"},
      {std::string("{'descr': '<f4', 'fortran_order': False, 'shape': (1,)}") +
           '\0',
       "unexpected text after the dictionary"},
      {"{'descr': " + std::string(100000, '('), "nested too deeply"},
      {"{'descr': " + std::string(100000, '['), "nested too deeply"},
  };
  for (const MalformedCase &c : cases) {
    SCOPED_TRACE(c.header.substr(0, 80));
    std::string file = makeNpy(c.header, floatBytes({1}),
                               /*major=*/c.header.size() > 60000 ? 2 : 1);
    std::string message = expectBadFile(
        "malformed.npy", file, {"malformed header dictionary", c.problem});
    // The header is quoted, shortened and escaped in the message.
    EXPECT_LT(message.size(), 500u) << message;
    for (char ch : message)
      EXPECT_TRUE(ch >= 0x20 && ch < 0x7f) << "byte " << int(ch);
  }
}

TEST_F(NpyTest, NegativeShape) {
  expectBadFile(
      "negative.npy",
      makeNpy("{'descr': '<f4', 'fortran_order': False, 'shape': (2, -1), }",
              ""),
      {"negative dimension -1", "(2, -1)"});
  expectBadFile("very-negative.npy",
                makeNpy("{'descr': '<f4', 'fortran_order': False, "
                        "'shape': (-99999999999999999999,), }",
                        ""),
                {"negative dimension -99999999999999999999"});
}

TEST_F(NpyTest, OverflowingShape) {
  expectBadFile("dim.npy",
                makeNpy("{'descr': '<f4', 'fortran_order': False, "
                        "'shape': (99999999999999999999,), }",
                        ""),
                {"dimension 99999999999999999999", "too large"});
  expectBadFile("int64-max-plus-one.npy",
                makeNpy("{'descr': '|u1', 'fortran_order': False, "
                        "'shape': (9223372036854775808,), }",
                        ""),
                {"dimension 9223372036854775808", "too large"});
  expectBadFile("product.npy",
                makeNpy("{'descr': '|u1', 'fortran_order': False, "
                        "'shape': (4294967296, 4294967296), }",
                        ""),
                {"(4294967296, 4294967296)", "too many elements"});
  expectBadFile("bytes.npy",
                makeNpy("{'descr': '<f4', 'fortran_order': False, "
                        "'shape': (4611686018427387904,), }",
                        ""),
                {"(4611686018427387904,)", "float32", "too large"});
  // Large dimensions are fine when another one is zero.
  std::string path =
      writeFile("zero.npy", makeNpy("{'descr': '<f4', 'fortran_order': False, "
                                    "'shape': (0, 9223372036854775807), }",
                                    ""));
  Expected<NpyArray> array = readNpy(path);
  ASSERT_TRUE(static_cast<bool>(array)) << toString(array.takeError());
  EXPECT_EQ(array->getNumElements(), 0);
}

TEST_F(NpyTest, NeverCrashesOnTruncatedOrCorruptedFiles) {
  NpyArray array;
  array.shape = {2, 3};
  array.bytes = toBytes(floatBytes({1, 2, 3, 4, 5, 6}));
  std::string path = pathFor("valid.npy");
  ASSERT_FALSE(errorToBool(writeNpy(path, array)));
  std::string file = readFile(path);

  // Every proper prefix is an error.
  for (size_t size = 0; size < file.size(); ++size) {
    SCOPED_TRACE(size);
    expectBadFile("prefix.npy", file.substr(0, size), {});
  }

  // Corrupting any byte of the preamble and header either still reads or
  // fails cleanly.
  const char replacements[] = {'\0', '\xff', '(', ')', '[', '\'', '"', ',',
                               ':',  '-',    '9', '}', '{', '\n', ' ', 'L'};
  for (size_t i = 0; i < file.size() - array.bytes.size(); ++i) {
    for (char replacement : replacements) {
      std::string corrupt = file;
      corrupt[i] = replacement;
      Expected<NpyArray> result = readNpy(writeFile("corrupt.npy", corrupt));
      if (result) {
        EXPECT_FALSE(errorToBool(verifyNpyArray(*result)));
      } else {
        consumeError(result.takeError());
      }
    }
  }
}

} // namespace
