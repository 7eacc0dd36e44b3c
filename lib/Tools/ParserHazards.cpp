//===- ParserHazards.cpp - Input that upstream parsers crash on -----------===//
//
// Part of the FlexSN project: an MLIR compiler for spiking-neuron dynamics.
//
//===----------------------------------------------------------------------===//
//
// The check lexes the text as MLIR's lexer does (the same whitespace, NUL
// bytes included, comments, strings, sigiled names, numbers, punctuation and
// errors) and looks at each bare `dimensions` or
// `permutation` followed by `=`. Where that is a custom-op keyword (not a key
// of an attribute dictionary, which comes after `{` or `,` and which MLIR's
// generic attribute parser reports properly), the list that follows must be
// what the upstream parser accepts: `[` 64-bit integers separated by `,` `]`.
//
//===----------------------------------------------------------------------===//

#include "flexsn/Tools/ParserHazards.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Location.h"
#include "mlir/IR/MLIRContext.h"

#include "llvm/ADT/StringExtras.h"

#include <cstdint>
#include <limits>
#include <vector>

using namespace mlir;

namespace {

struct Token {
  /// `Integer` is MLIR's integer literal (decimal or 0x-hexadecimal);
  /// `Error` stands where MLIR's lexer reports an error, which ends the
  /// parse of the text it is in before any op parser sees what follows.
  enum Kind { BareIdentifier, Integer, Punctuation, Other, Error };
  Kind kind;
  StringRef text;

  bool is(char c) const {
    return kind == Punctuation && text.size() == 1 && text[0] == c;
  }
};

bool isIdentifierChar(char c) {
  return llvm::isAlnum(c) || c == '_' || c == '$' || c == '.';
}

/// The tokens of a text as MLIR 22's lexer (mlir/lib/AsmParser/Lexer.cpp)
/// forms them: see lex.
class Lexer {
public:
  explicit Lexer(StringRef text) : text(text), size(text.size()) {}
  std::vector<Token> run();

private:
  char at(size_t k) const { return k < size ? text[k] : '\0'; }
  void take(size_t begin, Token::Kind kind) {
    tokens.push_back({kind, text.slice(begin, pos)});
  }
  template <typename Predicate>
  void skipWhile(Predicate predicate) {
    while (pos < size && predicate(text[pos]))
      ++pos;
  }
  void lexString(size_t begin);
  void lexSigiled(size_t begin, char sigil);
  void lexWord(size_t begin, char c);

  StringRef text;
  size_t pos = 0, size;
  std::vector<Token> tokens;
};

std::vector<Token> Lexer::run() {
  while (pos < size) {
    size_t begin = pos;
    char c = text[pos++];
    switch (c) {
    case ' ':
    case '\t':
    case '\n':
    case '\r':
    case '\0':
      continue;
    case '/':
      if (at(pos) != '/') {
        take(begin, Token::Error);
        continue;
      }
      skipWhile([](char c) { return c != '\n' && c != '\r'; });
      continue;
    case '"':
      lexString(begin);
      continue;
    case '@':
      if (at(pos) == '"') {
        ++pos;
        lexString(begin);
      } else if (llvm::isAlpha(at(pos)) || at(pos) == '_') {
        skipWhile(isIdentifierChar);
        take(begin, Token::Other);
      } else {
        // The lexer has taken the character after `@` into its error.
        pos = std::min(pos + 1, size);
        take(begin, Token::Error);
      }
      continue;
    case '#':
    case '!':
    case '^':
    case '%':
      lexSigiled(begin, c);
      continue;
    case '.':
      if (at(pos) == '.' && at(pos + 1) == '.') {
        pos += 2;
        take(begin, Token::Punctuation);
      } else {
        take(begin, Token::Error);
      }
      continue;
    case '{':
      if (at(pos) == '-' && at(pos + 1) == '#')
        pos += 2;
      take(begin, Token::Punctuation);
      continue;
    case '-':
      if (at(pos) == '>')
        ++pos;
      take(begin, Token::Punctuation);
      continue;
    case ':':
    case ',':
    case '(':
    case ')':
    case '}':
    case '[':
    case ']':
    case '<':
    case '>':
    case '=':
    case '+':
    case '*':
    case '?':
    case '|':
      take(begin, Token::Punctuation);
      continue;
    default:
      lexWord(begin, c);
    }
  }
  return std::move(tokens);
}

/// After the opening quote: a string ends at its quote; LF, VT, FF or the
/// end of the input, and an unknown escape, are errors.
void Lexer::lexString(size_t begin) {
  while (true) {
    if (pos >= size)
      return take(begin, Token::Error);
    char c = text[pos++];
    if (c == '"')
      return take(begin, Token::Other);
    if (c == '\n' || c == '\v' || c == '\f')
      return take(begin, Token::Error);
    if (c != '\\')
      continue;
    char next = at(pos);
    if (next == '"' || next == '\\' || next == 'n' || next == 't')
      ++pos;
    else if (llvm::isHexDigit(next) && llvm::isHexDigit(at(pos + 1)))
      pos += 2;
    else
      return take(begin, Token::Error);
  }
}

/// After `#`, `!`, `^` or `%`: `#-}`, or a name (digits, or letters and
/// suffix punctuation).
void Lexer::lexSigiled(size_t begin, char sigil) {
  if (sigil == '#' && at(pos) == '-' && at(pos + 1) == '}') {
    pos += 2;
    return take(begin, Token::Punctuation);
  }
  auto isSuffixPunct = [](char c) {
    return c == '$' || c == '.' || c == '_' || c == '-';
  };
  if (llvm::isDigit(at(pos)))
    skipWhile(llvm::isDigit);
  else if (llvm::isAlpha(at(pos)) || isSuffixPunct(at(pos)))
    skipWhile([&](char c) { return llvm::isAlnum(c) || isSuffixPunct(c); });
  else
    return take(begin, Token::Error);
  take(begin, Token::Other);
}

/// An identifier or a number from `c` on; anything else is an error.
void Lexer::lexWord(size_t begin, char c) {
  if (llvm::isAlpha(c) || c == '_') {
    skipWhile(isIdentifierChar);
    return take(begin, Token::BareIdentifier);
  }
  if (!llvm::isDigit(c))
    return take(begin, Token::Error);
  // 0x with a hex digit after it; else digits, and a float when a `.`
  // follows them (then digits and an exponent that has digits).
  if (c == '0' && at(pos) == 'x' && llvm::isHexDigit(at(pos + 1))) {
    pos += 2;
    skipWhile(llvm::isHexDigit);
    return take(begin, Token::Integer);
  }
  skipWhile(llvm::isDigit);
  if (at(pos) != '.')
    return take(begin, Token::Integer);
  ++pos;
  skipWhile(llvm::isDigit);
  if ((at(pos) == 'e' || at(pos) == 'E') &&
      (llvm::isDigit(at(pos + 1)) ||
       ((at(pos + 1) == '-' || at(pos + 1) == '+') &&
        llvm::isDigit(at(pos + 2))))) {
    pos += 2;
    skipWhile(llvm::isDigit);
  }
  take(begin, Token::Other);
}

/// The tokens of `text` as MLIR 22's lexer (mlir/lib/AsmParser/Lexer.cpp)
/// forms them: the same whitespace (space, tab, LF, CR, and a NUL byte
/// anywhere but at the end, which that lexer skips), comments ending at LF
/// or CR, strings with its escapes and its errors, numbers, identifiers
/// with and without sigils, and its punctuation. Sigiled names, strings and
/// float literals are opaque. Where that lexer reports an error the token
/// is `Error` and lexing goes on after the same characters.
std::vector<Token> lex(StringRef text) { return Lexer(text).run(); }

/// Whether `-`? `digits` (an integer token) reads as an int64_t, as MLIR's
/// parseInteger does.
bool isInt64(bool negative, StringRef digits) {
  uint64_t value;
  unsigned radix = digits.consume_front("0x") ? 16 : 10;
  if (digits.empty() || digits.getAsInteger(radix, value))
    return false;
  uint64_t limit = std::numeric_limits<int64_t>::max();
  return value <= limit + (negative ? 1 : 0);
}

/// The index of the first token of `tokens[begin..]` that breaks
/// `[` (int (`,` int)*)? `]`, or none if the list is well formed.
std::optional<size_t> findListError(ArrayRef<Token> tokens, size_t begin) {
  size_t i = begin;
  auto at = [&](size_t k) -> const Token * {
    return k < tokens.size() ? &tokens[k] : nullptr;
  };
  if (!at(i) || !at(i)->is('['))
    return i;
  if (at(++i) && at(i)->is(']'))
    return std::nullopt;
  while (true) {
    bool negative = at(i) && at(i)->is('-');
    if (negative)
      ++i;
    if (!at(i) || at(i)->kind != Token::Integer ||
        !isInt64(negative, at(i)->text))
      return i;
    if (!at(++i))
      return i;
    if (at(i)->is(']'))
      return std::nullopt;
    if (!at(i)->is(','))
      return i;
    ++i;
  }
}

} // namespace

std::vector<flexsn::ParserHazard>
mlir::flexsn::findParserHazards(StringRef text) {
  std::vector<Token> tokens = lex(text);
  std::vector<ParserHazard> hazards;
  for (size_t i = 0; i + 1 < tokens.size(); ++i) {
    const Token &keyword = tokens[i];
    if (keyword.kind != Token::BareIdentifier ||
        (keyword.text != "dimensions" && keyword.text != "permutation") ||
        !tokens[i + 1].is('='))
      continue;
    if (i > 0 && (tokens[i - 1].is('{') || tokens[i - 1].is(',')))
      continue;
    std::optional<size_t> error = findListError(tokens, i + 2);
    if (!error)
      continue;
    // At the token that breaks the list, or right after the last one.
    const char *where = *error < tokens.size() ? tokens[*error].text.data()
                                               : tokens.back().text.end();
    hazards.push_back(
        {static_cast<size_t>(where - text.data()),
         ("expected a list of 64-bit integers in square brackets after '" +
          keyword.text + " =', as in '" + keyword.text + " = [0, 1]'")
             .str()});
  }
  return hazards;
}

LogicalResult mlir::flexsn::checkParserHazards(const llvm::SourceMgr &sourceMgr,
                                               MLIRContext *context) {
  unsigned bufferId = sourceMgr.getMainFileID();
  const llvm::MemoryBuffer *buffer = sourceMgr.getMemoryBuffer(bufferId);
  StringRef text = buffer->getBuffer();
  std::vector<ParserHazard> hazards = findParserHazards(text);
  for (const ParserHazard &hazard : hazards) {
    auto [line, column] = sourceMgr.getLineAndColumn(
        llvm::SMLoc::getFromPointer(text.data() + hazard.offset), bufferId);
    emitError(FileLineColLoc::get(context, buffer->getBufferIdentifier(), line,
                                  column))
        << hazard.message;
  }
  return failure(!hazards.empty());
}
