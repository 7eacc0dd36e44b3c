//===- ParserHazards.cpp - Input that upstream parsers crash on -----------===//
//
// Part of the FlexSN project: an MLIR compiler for spiking-neuron dynamics.
//
//===----------------------------------------------------------------------===//
//
// The check lexes the text as MLIR's lexer would (comments, strings, sigiled
// names, numbers, punctuation) and looks at each bare `dimensions` or
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
  enum Kind { BareIdentifier, Number, Punctuation, Other };
  Kind kind;
  StringRef text;

  bool is(char c) const {
    return kind == Punctuation && text.size() == 1 && text[0] == c;
  }
};

bool isBareIdentifierChar(char c) {
  return llvm::isAlnum(c) || c == '_' || c == '$' || c == '.';
}

/// MLIR's tokens, as far as the check needs them: bare identifiers,
/// numbers, and one-character punctuation; sigiled names (%x, @f, #a, !t,
/// ^bb) and strings are opaque, comments and whitespace are skipped.
std::vector<Token> lex(StringRef text) {
  std::vector<Token> tokens;
  size_t pos = 0, size = text.size();
  auto take = [&](size_t begin, Token::Kind kind) {
    tokens.push_back({kind, text.slice(begin, pos)});
  };
  while (pos < size) {
    char c = text[pos];
    size_t begin = pos;
    if (llvm::isSpace(c)) {
      ++pos;
    } else if (text.substr(pos).starts_with("//")) {
      pos = text.find('\n', pos);
      if (pos == StringRef::npos)
        pos = size;
    } else if (c == '"') {
      // A string ends at its unescaped quote (or, malformed, a line's end).
      for (++pos; pos < size && text[pos] != '"' && text[pos] != '\n'; ++pos)
        if (text[pos] == '\\')
          ++pos;
      pos = std::min(pos + 1, size);
      take(begin, Token::Other);
    } else if (llvm::isAlpha(c) || c == '_') {
      while (pos < size && isBareIdentifierChar(text[pos]))
        ++pos;
      take(begin, Token::BareIdentifier);
    } else if (llvm::isDigit(c)) {
      while (pos < size && (llvm::isAlnum(text[pos]) || text[pos] == '.'))
        ++pos;
      take(begin, Token::Number);
    } else if (StringRef("%@#!^").contains(c)) {
      for (++pos;
           pos < size && (isBareIdentifierChar(text[pos]) || text[pos] == '-');
           ++pos)
        ;
      take(begin, Token::Other);
    } else {
      ++pos;
      take(begin, Token::Punctuation);
    }
  }
  return tokens;
}

/// Whether `-`? `number` reads as an int64_t, as MLIR's parseInteger does:
/// decimal or 0x-hexadecimal digits.
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
    if (!at(i) || at(i)->kind != Token::Number ||
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

LogicalResult mlir::flexsn::checkParserHazards(const llvm::SourceMgr &sourceMgr,
                                               MLIRContext *context) {
  unsigned bufferId = sourceMgr.getMainFileID();
  const llvm::MemoryBuffer *buffer = sourceMgr.getMemoryBuffer(bufferId);
  StringRef text = buffer->getBuffer();
  std::vector<Token> tokens = lex(text);

  bool found = false;
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
    auto [line, column] = sourceMgr.getLineAndColumn(
        llvm::SMLoc::getFromPointer(where), bufferId);
    Location loc = FileLineColLoc::get(context, buffer->getBufferIdentifier(),
                                       line, column);
    emitError(loc) << "expected a list of 64-bit integers in square brackets "
                      "after '"
                   << keyword.text << " =', as in '" << keyword.text
                   << " = [0, 1]'";
    found = true;
  }
  return failure(found);
}
