//===- EnumOptions.h - Pass options over the dialect's enums ----*- C++ -*-===//
//
// Part of the FlexSN project: an MLIR compiler for spiking-neuron dynamics.
//
//===----------------------------------------------------------------------===//
//
// Pass and pipeline options whose values are cases of an ODS enum (those
// FlexSN_OptionEnums lists in FlexSNAttrs.td): the option parser accepts
// exactly the enum's spellings, the passes receive enum values, and the
// list of valid values lives only in FlexSNAttrs.td.
//
// The parser is a `basic_parser` that symbolizes the enum itself rather
// than a `generic_parser_base` filled by `cl::values`: MLIR's ListOption
// parses each element with a second parser that `cl::values` never reaches.
//
//===----------------------------------------------------------------------===//

#ifndef FLEXSN_DIALECT_FLEXSN_IR_ENUMOPTIONS_H
#define FLEXSN_DIALECT_FLEXSN_IR_ENUMOPTIONS_H

#include "flexsn/Dialect/FlexSN/IR/FlexSNAttrs.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/raw_ostream.h"

namespace mlir::flexsn {

/// Parses the ODS spellings of `EnumT`, whose cases are 0 to `MaxValue`.
template <typename EnumT, unsigned MaxValue>
class EnumOptionParser : public llvm::cl::basic_parser<EnumT> {
public:
  using llvm::cl::basic_parser<EnumT>::basic_parser;

  bool parse(llvm::cl::Option &option, StringRef, StringRef arg, EnumT &value) {
    if (std::optional<EnumT> parsed = symbolizeEnum<EnumT>(arg)) {
      value = *parsed;
      return false;
    }
    return option.error("'" + arg + "' is not one of " + spellings());
  }

  /// "inference, final-state, forward or backward".
  static std::string spellings() {
    std::string text;
    for (unsigned value = 0; value <= MaxValue; ++value) {
      if (value)
        text += value == MaxValue ? " or " : ", ";
      text += stringifyEnum(static_cast<EnumT>(value));
    }
    return text;
  }

  StringRef getValueName() const override { return "value"; }

  /// How MLIR prints the value back into a pipeline string.
  static void print(llvm::raw_ostream &os, const EnumT &value) {
    os << stringifyEnum(value);
  }

  void printOptionDiff(const llvm::cl::Option &option,
                       const llvm::cl::OptionValue<EnumT> &value,
                       const llvm::cl::OptionValue<EnumT> &,
                       size_t width) const {
    this->printOptionName(option, width);
    llvm::outs() << "= "
                 << (value.hasValue() ? stringifyEnum(value.getValue())
                                      : StringRef("*no value*"))
                 << "\n";
  }
};

} // namespace mlir::flexsn

// The parser of each enum FlexSN_OptionEnums lists (FlexSNAttrs.td).
#include "flexsn/Dialect/FlexSN/IR/FlexSNEnumOptions.h.inc"

#endif // FLEXSN_DIALECT_FLEXSN_IR_ENUMOPTIONS_H
