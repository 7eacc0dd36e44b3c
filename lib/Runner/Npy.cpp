//===- Npy.cpp - Reading and writing NumPy .npy files ---------------------===//
//
// Part of the FlexSN project: an MLIR compiler for spiking-neuron dynamics.
//
//===----------------------------------------------------------------------===//
//
// The format, as numpy.lib.format defines it:
//
//   "\x93NUMPY"  major  minor  HEADER_LEN  header  data
//
// HEADER_LEN is a little-endian uint16 in version 1.0 and a uint32 in 2.0 and
// 3.0. The header is a Python dictionary literal with exactly the keys
// 'descr', 'fortran_order' and 'shape', padded with spaces and ended by '\n'
// (writers align the data to 64 bytes; readers must not rely on it). The
// dictionary is parsed here as a small subset of Python literal syntax, so the
// keys may come in any order, with either quote, any whitespace and trailing
// commas, as ast.literal_eval would accept them.
//
//===----------------------------------------------------------------------===//

#include "flexsn/Runner/Npy.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallString.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringSwitch.h"
#include "llvm/ADT/Twine.h"
#include "llvm/ADT/bit.h"
#include "llvm/Support/ErrorHandling.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MathExtras.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/raw_ostream.h"

#include <limits>
#include <string>
#include <system_error>
#include <utility>

using namespace llvm;

namespace mlir::flexsn {

namespace {

constexpr StringLiteral kMagic("\x93NUMPY");
constexpr size_t kPreambleV1 = 10; // magic, version, uint16 length
constexpr size_t kPreambleV2 = 12; // magic, version, uint32 length
constexpr size_t kAlignment = 64;
constexpr unsigned kMaxNesting = 32;
constexpr StringLiteral
    kSupported("expected float32 '<f4', float16 '<f2' or uint8 '|u1'");

constexpr bool kLittleEndianHost =
    llvm::endianness::native == llvm::endianness::little;

Error makeError(StringRef path, const Twine &message,
                std::errc code = std::errc::invalid_argument) {
  return createStringError(std::make_error_code(code), path + ": " + message);
}

/// Quotes `text` for a message, escaping what is not printable and shortening
/// it, so a corrupt header cannot flood or garble the terminal.
std::string quoteForMessage(StringRef text, size_t limit = 80,
                            char quote = '"') {
  std::string result(1, quote);
  raw_string_ostream os(result);
  os.write_escaped(text.take_front(limit));
  if (text.size() > limit)
    os << "...";
  os << quote;
  return result;
}

/// Quotes a short Python string as Python prints one: '<f8'.
std::string quoteShort(StringRef text) {
  return quoteForMessage(text, 40, '\'');
}

//===----------------------------------------------------------------------===//
// Header dictionary parsing
//===----------------------------------------------------------------------===//

/// A Python literal of the kinds a .npy header holds.
struct PyValue {
  enum class Kind { String, Integer, Bool, None, Tuple, List };
  Kind kind = Kind::None;
  /// String: the contents. Integer: the digits, with '-' if negative.
  std::string text;
  bool boolean = false;
  std::vector<PyValue> elements; // Tuple and List
};

/// Parses the header's dictionary literal. Positions in errors are byte
/// offsets into the header.
class HeaderParser {
public:
  explicit HeaderParser(StringRef header) : text(header) {}

  /// Parses `{key: value, ...}` followed only by whitespace.
  bool parseDict(SmallVectorImpl<std::pair<std::string, PyValue>> &entries);

  /// What went wrong, once a parse method has returned false.
  const std::string &getError() const { return error; }

private:
  bool atEnd() const { return pos >= text.size(); }
  char peek() const { return atEnd() ? '\0' : text[pos]; }
  void skipWhitespace();
  bool consume(char c);
  bool fail(const Twine &message);
  bool parseValue(PyValue &value, unsigned depth);
  bool parseString(std::string &result);
  bool parseInteger(std::string &result);
  bool parseSequence(char close, PyValue &value, unsigned depth);

  StringRef text;
  size_t pos = 0;
  std::string error;
};

void HeaderParser::skipWhitespace() {
  while (!atEnd() && StringRef(" \t\n\r\f\v").contains(text[pos]))
    ++pos;
}

bool HeaderParser::consume(char c) {
  if (atEnd() || text[pos] != c)
    return false;
  ++pos;
  return true;
}

bool HeaderParser::fail(const Twine &message) {
  if (error.empty())
    error = (message + " at offset " + Twine(pos)).str();
  return false;
}

bool HeaderParser::parseDict(
    SmallVectorImpl<std::pair<std::string, PyValue>> &entries) {
  skipWhitespace();
  if (!consume('{'))
    return fail("expected '{'");
  skipWhitespace();
  if (!consume('}')) {
    while (true) {
      skipWhitespace();
      if (peek() != '\'' && peek() != '"')
        return fail("expected a quoted key");
      std::string key;
      if (!parseString(key))
        return false;
      skipWhitespace();
      if (!consume(':'))
        return fail("expected ':' after key " + quoteShort(key));
      PyValue value;
      if (!parseValue(value, /*depth=*/1))
        return false;
      entries.emplace_back(std::move(key), std::move(value));
      skipWhitespace();
      if (consume('}'))
        break;
      if (!consume(','))
        return fail("expected ',' or '}'");
      skipWhitespace();
      if (consume('}'))
        break;
    }
  }
  skipWhitespace();
  if (!atEnd())
    return fail("unexpected text after the dictionary");
  return true;
}

bool HeaderParser::parseValue(PyValue &value, unsigned depth) {
  if (depth > kMaxNesting)
    return fail("values nested too deeply");
  skipWhitespace();
  if (atEnd())
    return fail("unexpected end of header");
  char c = peek();
  if (c == '\'' || c == '"') {
    value.kind = PyValue::Kind::String;
    return parseString(value.text);
  }
  if (c == '(' || c == '[') {
    ++pos;
    return parseSequence(c == '(' ? ')' : ']', value, depth);
  }
  if (isDigit(c) || c == '-' || c == '+') {
    value.kind = PyValue::Kind::Integer;
    return parseInteger(value.text);
  }
  if (isAlpha(c) || c == '_') {
    size_t start = pos;
    while (!atEnd() && (isAlnum(text[pos]) || text[pos] == '_'))
      ++pos;
    StringRef word = text.slice(start, pos);
    if (word == "True" || word == "False") {
      value.kind = PyValue::Kind::Bool;
      value.boolean = word == "True";
      return true;
    }
    if (word == "None") {
      value.kind = PyValue::Kind::None;
      return true;
    }
    pos = start;
    return fail("unexpected name " + quoteShort(word));
  }
  return fail("unexpected character " + quoteShort(StringRef(&c, 1)));
}

bool HeaderParser::parseString(std::string &result) {
  char quote = text[pos++];
  while (true) {
    if (atEnd() || text[pos] == '\n')
      return fail("unterminated string");
    char c = text[pos++];
    if (c == quote)
      return true;
    if (c != '\\') {
      result += c;
      continue;
    }
    if (atEnd())
      return fail("unterminated string");
    char escaped = text[pos++];
    switch (escaped) {
    case '\\':
    case '\'':
    case '"':
      result += escaped;
      break;
    case 'n':
      result += '\n';
      break;
    case 't':
      result += '\t';
      break;
    default: // Python keeps unknown escapes as written.
      result += '\\';
      result += escaped;
      break;
    }
  }
}

bool HeaderParser::parseInteger(std::string &result) {
  bool negative = false;
  while (peek() == '-' || peek() == '+') {
    negative ^= peek() == '-';
    ++pos;
    skipWhitespace();
  }
  size_t start = pos;
  while (!atEnd() && isDigit(text[pos]))
    ++pos;
  if (pos == start)
    return fail("expected digits");
  StringRef digits = text.slice(start, pos);
  // Python 2 wrote long integers with an 'L' suffix, as in (3L,).
  if (peek() == 'L' || peek() == 'l')
    ++pos;
  if (isAlnum(peek()) || peek() == '.' || peek() == '_')
    return fail("expected an integer");
  result = ((negative ? "-" : "") + digits).str();
  return true;
}

bool HeaderParser::parseSequence(char close, PyValue &value, unsigned depth) {
  bool isTuple = close == ')';
  bool sawComma = false;
  std::vector<PyValue> elements;
  skipWhitespace();
  if (!consume(close)) {
    while (true) {
      PyValue element;
      if (!parseValue(element, depth + 1))
        return false;
      elements.push_back(std::move(element));
      skipWhitespace();
      if (consume(close))
        break;
      if (!consume(','))
        return fail(Twine("expected ',' or '") + Twine(close) + "'");
      sawComma = true;
      skipWhitespace();
      if (consume(close))
        break;
    }
  }
  // Without a comma, parentheses only group: (3) is the integer 3.
  if (isTuple && elements.size() == 1 && !sawComma) {
    value = std::move(elements.front());
    return true;
  }
  value.kind = isTuple ? PyValue::Kind::Tuple : PyValue::Kind::List;
  value.elements = std::move(elements);
  return true;
}

//===----------------------------------------------------------------------===//
// Interpreting the header
//===----------------------------------------------------------------------===//

StringRef getDescr(NpyDType dtype) {
  switch (dtype) {
  case NpyDType::F32:
    return "<f4";
  case NpyDType::F16:
    return "<f2";
  case NpyDType::U8:
    return "|u1";
  }
  llvm_unreachable("unknown NpyDType");
}

/// Formats a parsed shape the way Python prints a tuple.
std::string formatShape(ArrayRef<std::string> dims) {
  std::string result = "(";
  for (size_t i = 0; i < dims.size(); ++i) {
    if (i)
      result += ", ";
    result += dims[i];
  }
  if (dims.size() == 1)
    result += ",";
  return result + ")";
}

std::string formatShape(ArrayRef<int64_t> shape) {
  SmallVector<std::string> dims;
  for (int64_t dim : shape)
    dims.push_back(std::to_string(dim));
  return formatShape(dims);
}

/// Maps a descr string to a dtype, or says why it cannot.
Expected<NpyDType> parseDescr(StringRef path, StringRef descr) {
  char order = '=';
  StringRef code = descr;
  if (!code.empty() && StringRef("<>=|").contains(code.front())) {
    order = code.front();
    code = code.drop_front();
  }
  NpyDType dtype;
  if (code == "f4") {
    dtype = NpyDType::F32;
  } else if (code == "f2") {
    dtype = NpyDType::F16;
  } else if (code == "u1") {
    return NpyDType::U8; // a single byte has no byte order
  } else {
    return makeError(path, "unsupported dtype " + quoteShort(descr) + " (" +
                               kSupported + ")");
  }
  // '|' (not applicable) and no prefix mean native order, as in numpy.
  bool bigEndian = order == '>' || (order != '<' && !kLittleEndianHost);
  if (bigEndian)
    return makeError(path, "big-endian data " + quoteShort(descr) +
                               " is not supported (expected little-endian " +
                               getDTypeName(dtype) + " '" + getDescr(dtype) +
                               "'; convert with array.astype('" +
                               getDescr(dtype) + "'))");
  return dtype;
}

/// Checks that `shape` describes a valid array of `dtype` and returns its size
/// in bytes. `shapeText` is how the shape is shown in messages.
Expected<int64_t> getByteSize(ArrayRef<int64_t> shape, NpyDType dtype,
                              StringRef shapeText) {
  int64_t numElements = 1;
  bool empty = false;
  for (int64_t dim : shape) {
    if (dim < 0)
      return createStringError(
          std::make_error_code(std::errc::invalid_argument),
          "negative dimension " + Twine(dim) + " in shape " + shapeText);
    empty |= dim == 0;
  }
  if (empty)
    return 0;
  for (int64_t dim : shape)
    if (MulOverflow(numElements, dim, numElements))
      return createStringError(std::make_error_code(std::errc::value_too_large),
                               "shape " + shapeText +
                                   " has too many elements (overflow)");
  int64_t numBytes;
  if (MulOverflow(numElements, static_cast<int64_t>(getElementSize(dtype)),
                  numBytes))
    return createStringError(std::make_error_code(std::errc::value_too_large),
                             "shape " + shapeText + " of " +
                                 getDTypeName(dtype) +
                                 " is too large (size in bytes overflows)");
  return numBytes;
}

/// Reads the .npy contents in `data`; `path` is only used in messages.
Expected<NpyArray> parseNpyContents(StringRef path, StringRef data) {
  // Preamble: magic string, version, header length.
  if (data.empty())
    return makeError(path, "not a .npy file (the file is empty)");
  if (!kMagic.starts_with(data.take_front(kMagic.size())))
    return makeError(path, "not a .npy file (it does not start with the "
                           "\"\\x93NUMPY\" magic string)");
  if (data.size() < kMagic.size() + 2)
    return makeError(path, "truncated header (the file ends after " +
                               Twine(data.size()) +
                               " bytes, inside the magic string and version)");
  unsigned major = static_cast<uint8_t>(data[6]);
  unsigned minor = static_cast<uint8_t>(data[7]);
  if (major < 1 || major > 3 || minor != 0)
    return makeError(path, "unsupported .npy format version " + Twine(major) +
                               "." + Twine(minor) +
                               " (expected 1.0, 2.0 or 3.0)");
  size_t preamble = major == 1 ? kPreambleV1 : kPreambleV2;
  if (data.size() < preamble)
    return makeError(path, "truncated header (the file ends after " +
                               Twine(data.size()) +
                               " bytes, inside the header length)");
  uint64_t headerLength = 0;
  for (size_t i = preamble; i > kMagic.size() + 2; --i)
    headerLength = (headerLength << 8) | static_cast<uint8_t>(data[i - 1]);
  if (data.size() - preamble < headerLength)
    return makeError(path, "truncated header (the header should be " +
                               Twine(headerLength) + " bytes but only " +
                               Twine(data.size() - preamble) + " follow)");
  StringRef header = data.substr(preamble, headerLength);
  uint64_t dataOffset = preamble + headerLength;

  // The header dictionary.
  auto malformed = [&](const Twine &problem) {
    return makeError(path, "malformed header dictionary: " + problem +
                               " in header " + quoteForMessage(header));
  };
  SmallVector<std::pair<std::string, PyValue>> entries;
  HeaderParser parser(header);
  if (!parser.parseDict(entries))
    return malformed(parser.getError());

  const PyValue *descr = nullptr;
  const PyValue *fortranOrder = nullptr;
  const PyValue *shapeValue = nullptr;
  for (const auto &[key, value] : entries) {
    const PyValue **slot = StringSwitch<const PyValue **>(key)
                               .Case("descr", &descr)
                               .Case("fortran_order", &fortranOrder)
                               .Case("shape", &shapeValue)
                               .Default(nullptr);
    if (!slot)
      return malformed("unexpected key " + quoteShort(key) +
                       " (expected 'descr', 'fortran_order' and 'shape')");
    if (*slot)
      return malformed("duplicate key " + quoteShort(key));
    *slot = &value;
  }
  for (auto [name, value] :
       {std::pair(StringRef("descr"), descr),
        std::pair(StringRef("fortran_order"), fortranOrder),
        std::pair(StringRef("shape"), shapeValue)})
    if (!value)
      return malformed("missing key '" + name + "'");

  // 'descr': a type string; a list would be a structured dtype.
  if (descr->kind == PyValue::Kind::List)
    return makeError(path, "unsupported dtype: structured (record) arrays are "
                           "not supported (" +
                               kSupported + ")");
  if (descr->kind != PyValue::Kind::String)
    return malformed("'descr' is not a string");
  Expected<NpyDType> dtype = parseDescr(path, descr->text);
  if (!dtype)
    return dtype.takeError();

  if (fortranOrder->kind != PyValue::Kind::Bool)
    return malformed("'fortran_order' is not True or False");

  // 'shape': a tuple of non-negative integers.
  if (shapeValue->kind != PyValue::Kind::Tuple)
    return malformed("'shape' is not a tuple");
  SmallVector<std::string> dimTexts;
  for (const PyValue &dim : shapeValue->elements) {
    if (dim.kind != PyValue::Kind::Integer)
      return malformed("'shape' holds something other than integers");
    dimTexts.push_back(dim.text);
  }
  std::string shapeText = formatShape(dimTexts);
  NpyArray array;
  array.dtype = *dtype;
  for (StringRef dimText : dimTexts) {
    int64_t dim;
    if (dimText.getAsInteger(10, dim)) {
      if (dimText.starts_with("-"))
        return makeError(path, "negative dimension " + dimText + " in shape " +
                                   shapeText);
      return makeError(path,
                       "dimension " + dimText + " in shape " + shapeText +
                           " is too large (overflow)",
                       std::errc::value_too_large);
    }
    array.shape.push_back(dim);
  }
  Expected<int64_t> numBytes = getByteSize(array.shape, *dtype, shapeText);
  if (!numBytes)
    return makeError(path, toString(numBytes.takeError()));

  if (fortranOrder->boolean && *numBytes != 0 &&
      llvm::count_if(array.shape, [](int64_t dim) { return dim > 1; }) > 1)
    return makeError(path, "fortran_order True arrays are not supported "
                           "(expected C order; save "
                           "numpy.ascontiguousarray(array))");

  // The data.
  uint64_t available = data.size() - dataOffset;
  uint64_t expected = static_cast<uint64_t>(*numBytes);
  if (available < expected)
    return makeError(path, "truncated data (shape " + shapeText + " of " +
                               getDTypeName(*dtype) + " needs " +
                               Twine(expected) + " bytes but only " +
                               Twine(available) + " follow the header)");
  if (available > expected)
    return makeError(path, Twine(available - expected) +
                               " unexpected bytes after the data (shape " +
                               shapeText + " of " + getDTypeName(*dtype) +
                               " needs " + Twine(expected) + " bytes)");
  StringRef elements = data.substr(dataOffset);
  array.bytes.assign(elements.bytes_begin(), elements.bytes_end());
  return array;
}

} // namespace

//===----------------------------------------------------------------------===//
// Public API
//===----------------------------------------------------------------------===//

int64_t NpyArray::getNumElements() const {
  int64_t result = 1;
  bool empty = false;
  for (int64_t dim : shape) {
    if (dim < 0)
      return -1;
    empty |= dim == 0;
  }
  if (empty)
    return 0;
  for (int64_t dim : shape)
    if (MulOverflow(result, dim, result))
      return -1;
  return result;
}

size_t getElementSize(NpyDType dtype) {
  switch (dtype) {
  case NpyDType::F32:
    return 4;
  case NpyDType::F16:
    return 2;
  case NpyDType::U8:
    return 1;
  }
  llvm_unreachable("unknown NpyDType");
}

StringRef getDTypeName(NpyDType dtype) {
  switch (dtype) {
  case NpyDType::F32:
    return "float32";
  case NpyDType::F16:
    return "float16";
  case NpyDType::U8:
    return "uint8";
  }
  llvm_unreachable("unknown NpyDType");
}

Expected<NpyArray> readNpy(StringRef path) {
  ErrorOr<std::unique_ptr<MemoryBuffer>> buffer =
      MemoryBuffer::getFile(path, /*IsText=*/false,
                            /*RequiresNullTerminator=*/false);
  if (std::error_code ec = buffer.getError())
    return createStringError(ec, path + ": cannot read file: " + ec.message());
  return parseNpy(path, (*buffer)->getBuffer());
}

Expected<NpyArray> parseNpy(StringRef name, StringRef data) {
  return parseNpyContents(name, data);
}

Error verifyNpyArray(const NpyArray &array) {
  std::string shapeText = formatShape(array.shape);
  Expected<int64_t> numBytes = getByteSize(array.shape, array.dtype, shapeText);
  if (!numBytes)
    return numBytes.takeError();
  if (array.bytes.size() != static_cast<uint64_t>(*numBytes))
    return createStringError(std::make_error_code(std::errc::invalid_argument),
                             "array data holds " + Twine(array.bytes.size()) +
                                 " bytes but shape " + shapeText + " of " +
                                 getDTypeName(array.dtype) + " needs " +
                                 Twine(*numBytes));
  return Error::success();
}

Expected<std::string> serializeNpy(const NpyArray &array) {
  if (Error error = verifyNpyArray(array))
    return std::move(error);

  // The dictionary exactly as numpy writes it, keys sorted, then padded with
  // spaces and a final '\n' so that the data starts at a multiple of 64.
  std::string header =
      "{'descr': '" + getDescr(array.dtype).str() +
      "', 'fortran_order': False, 'shape': " + formatShape(array.shape) + ", }";
  size_t preamble = kPreambleV1;
  uint64_t length = header.size() + 1;
  length += kAlignment - (preamble + length) % kAlignment;
  if (length > std::numeric_limits<uint16_t>::max()) {
    preamble = kPreambleV2;
    length = header.size() + 1;
    length += kAlignment - (preamble + length) % kAlignment;
    if (length > std::numeric_limits<uint32_t>::max())
      return createStringError(
          std::make_error_code(std::errc::invalid_argument),
          "the header is too long");
  }
  header.resize(length - 1, ' ');
  header += '\n';

  std::string contents = kMagic.str();
  contents += static_cast<char>(preamble == kPreambleV1 ? 1 : 2);
  contents += '\0';
  for (size_t i = kMagic.size() + 2; i < preamble; ++i, length >>= 8)
    contents += static_cast<char>(length & 0xff);
  contents += header;
  contents.append(reinterpret_cast<const char *>(array.bytes.data()),
                  array.bytes.size());
  return contents;
}

Error writeNpy(StringRef path, const NpyArray &array) {
  Expected<std::string> contents = serializeNpy(array);
  if (!contents)
    return makeError(path, "cannot write: " + toString(contents.takeError()));

  // Write beside the destination, then rename over it, so readers never see
  // a partial file.
  int fd;
  SmallString<128> tempPath;
  if (std::error_code ec =
          sys::fs::createUniqueFile(path + "-%%%%%%%%.tmp", fd, tempPath))
    return createStringError(ec, path +
                                     ": cannot create a temporary file "
                                     "beside it: " +
                                     ec.message());
  std::error_code ec;
  {
    raw_fd_ostream os(fd, /*shouldClose=*/true);
    os << *contents;
    os.close();
    ec = os.error();
    os.clear_error();
  }
  if (!ec)
    ec = sys::fs::rename(tempPath, path);
  if (ec) {
    (void)sys::fs::remove(tempPath);
    return createStringError(ec, path + ": cannot write file: " + ec.message());
  }
  return Error::success();
}

} // namespace mlir::flexsn
