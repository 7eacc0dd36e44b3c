//===- FlexSNAttrs.cpp - FlexSN attributes --------------------------------===//
//
// Part of the FlexSN project: an MLIR compiler for spiking-neuron dynamics.
//
//===----------------------------------------------------------------------===//

#include "flexsn/Dialect/FlexSN/IR/FlexSNAttrs.h"
#include "flexsn/Dialect/FlexSN/IR/FlexSNDialect.h"
#include "flexsn/Dialect/FlexSN/IR/SurrogateFormulas.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/TypeUtilities.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/ADT/TypeSwitch.h"
#include "llvm/Support/Regex.h"

#include <charconv>

using namespace mlir;
using namespace mlir::flexsn;

#include "flexsn/Dialect/FlexSN/IR/FlexSNAttrInterfaces.cpp.inc"
#include "flexsn/Dialect/FlexSN/IR/FlexSNEnums.cpp.inc"

//===----------------------------------------------------------------------===//
// The IR backend of SurrogateFormulas.h (the generated buildDerivative
// methods instantiate the formulas with it)
//===----------------------------------------------------------------------===//

namespace mlir::flexsn::surrogate {
namespace {
/// A float value being built; the formulas' operators emit arith/math ops.
struct IRScalar {
  OpBuilder *builder;
  Location loc;
  Value value;

  IRScalar with(Value v) const { return {builder, loc, v}; }
  /// `c` in the value's type (splatted over its lanes, for a vector).
  IRScalar constant(double c) const {
    Type type = value.getType();
    TypedAttr attr = builder->getFloatAttr(getElementTypeOrSelf(type), c);
    if (auto lanes = dyn_cast<VectorType>(type))
      attr = DenseElementsAttr::get(lanes, attr);
    return with(arith::ConstantOp::create(*builder, loc, attr));
  }
  template <typename OpT>
  IRScalar emit(ValueRange operands) const {
    return with(OpT::create(*builder, loc, operands));
  }
};
/// An i1 value being built: the result of a comparison.
struct IRBool {
  Value value;
};

IRScalar splat(const IRScalar &like, double c) { return like.constant(c); }

#define FLEXSN_IR_BINARY(op, OpT)                                              \
  [[maybe_unused]] IRScalar operator op(const IRScalar &a,                     \
                                        const IRScalar &b) {                   \
    return a.emit<OpT>({a.value, b.value});                                    \
  }                                                                            \
  [[maybe_unused]] IRScalar operator op(const IRScalar &a, double b) {         \
    return a op a.constant(b);                                                 \
  }                                                                            \
  [[maybe_unused]] IRScalar operator op(double a, const IRScalar &b) {         \
    return b.constant(a) op b;                                                 \
  }
FLEXSN_IR_BINARY(+, arith::AddFOp)
FLEXSN_IR_BINARY(-, arith::SubFOp)
FLEXSN_IR_BINARY(*, arith::MulFOp)
FLEXSN_IR_BINARY(/, arith::DivFOp)
#undef FLEXSN_IR_BINARY

IRBool compare(const IRScalar &a, double b, arith::CmpFPredicate predicate) {
  return {arith::CmpFOp::create(*a.builder, a.loc, predicate, a.value,
                                a.constant(b).value)};
}
[[maybe_unused]] IRBool operator<(const IRScalar &a, double b) {
  return compare(a, b, arith::CmpFPredicate::OLT);
}
[[maybe_unused]] IRBool operator<=(const IRScalar &a, double b) {
  return compare(a, b, arith::CmpFPredicate::OLE);
}
[[maybe_unused]] IRBool operator>(const IRScalar &a, double b) {
  return compare(a, b, arith::CmpFPredicate::OGT);
}
[[maybe_unused]] IRBool operator>=(const IRScalar &a, double b) {
  return compare(a, b, arith::CmpFPredicate::OGE);
}

[[maybe_unused]] IRScalar select(IRBool cond, const IRScalar &a,
                                 const IRScalar &b) {
  return a.emit<arith::SelectOp>({cond.value, a.value, b.value});
}
[[maybe_unused]] IRScalar abs(const IRScalar &x) {
  return x.emit<math::AbsFOp>({x.value});
}
[[maybe_unused]] IRScalar exp(const IRScalar &x) {
  return x.emit<math::ExpOp>({x.value});
}
[[maybe_unused]] IRScalar log(const IRScalar &x) {
  return x.emit<math::LogOp>({x.value});
}
[[maybe_unused]] IRScalar log1p(const IRScalar &x) {
  return x.emit<math::Log1pOp>({x.value});
}
[[maybe_unused]] IRScalar erf(const IRScalar &x) {
  return x.emit<math::ErfOp>({x.value});
}
[[maybe_unused]] IRScalar atan(const IRScalar &x) {
  return x.emit<math::AtanOp>({x.value});
}
[[maybe_unused]] IRScalar sin(const IRScalar &x) {
  return x.emit<math::SinOp>({x.value});
}
[[maybe_unused]] IRScalar cos(const IRScalar &x) {
  return x.emit<math::CosOp>({x.value});
}
[[maybe_unused]] IRScalar pow(const IRScalar &x, double y) {
  return x.emit<math::PowFOp>({x.value, x.constant(y).value});
}
[[maybe_unused]] IRScalar min(const IRScalar &a, double b) {
  return a.emit<arith::MinimumFOp>({a.value, a.constant(b).value});
}
[[maybe_unused]] IRScalar max(const IRScalar &a, double b) {
  return a.emit<arith::MaximumFOp>({a.value, a.constant(b).value});
}
[[maybe_unused]] IRScalar sigmoid(const IRScalar &x) {
  return 1.0 / (exp(x * -1.0) + 1.0);
}
} // namespace
} // namespace mlir::flexsn::surrogate

#define GET_ATTRDEF_CLASSES
#include "flexsn/Dialect/FlexSN/IR/FlexSNAttrs.cpp.inc"

void FlexSNDialect::registerAttributes() {
  addAttributes<
#define GET_ATTRDEF_LIST
#include "flexsn/Dialect/FlexSN/IR/FlexSNAttrs.cpp.inc"
      >();
}

/// The mnemonics of the surrogate attributes among `Attrs`.
template <typename... Attrs>
static SmallVector<StringRef> surrogateMnemonics() {
  SmallVector<StringRef> names;
  (
      [&] {
        if constexpr (std::is_base_of_v<SurrogateAttrInterface::Trait<Attrs>,
                                        Attrs>)
          names.push_back(Attrs::getMnemonic());
      }(),
      ...);
  return names;
}

Attribute FlexSNDialect::parseAttribute(DialectAsmParser &parser,
                                        Type type) const {
  SMLoc loc = parser.getCurrentLocation();
  StringRef mnemonic;
  Attribute attr;
  // MLIR parses a dialect attribute's body in place, so a mnemonic without
  // `<...>` has its optional `<` check lex the token after the attribute: a
  // lexer error there (`#flexsn.sigmoid@`) is reported, yet the parse would
  // go on and succeed. Any error reported while parsing fails the attribute.
  bool reportedError = false;
  OptionalParseResult result = [&] {
    ScopedDiagnosticHandler seeErrors(
        parser.getContext(), [&](Diagnostic &diagnostic) {
          if (diagnostic.getSeverity() == DiagnosticSeverity::Error)
            reportedError = true;
          return failure(); // still reported by the enclosing handler
        });
    return generatedAttributeParser(parser, &mnemonic, type, attr);
  }();
  if (result.has_value())
    return succeeded(*result) && !reportedError ? attr : Attribute();
  static const SmallVector<StringRef> surrogates = surrogateMnemonics<
#define GET_ATTRDEF_LIST
#include "flexsn/Dialect/FlexSN/IR/FlexSNAttrs.cpp.inc"
      >();
  parser.emitError(loc) << "unknown attribute `" << mnemonic
                        << "` in dialect `flexsn`; the surrogates are "
                        << llvm::join(surrogates, ", ");
  return {};
}

void FlexSNDialect::printAttribute(Attribute attr,
                                   DialectAsmPrinter &printer) const {
  (void)generatedAttributePrinter(attr, printer);
}

//===----------------------------------------------------------------------===//
// Shortest round-trip float text
//===----------------------------------------------------------------------===//

// MLIR's float literal grammar needs a '.', so "4" becomes "4.0" and "1e+20"
// becomes "1.0e+20". Verified attributes hold finite values only, so the
// spellings of non-finite values only ever appear in diagnostics.
template <typename FloatT>
static std::string formatShortestImpl(FloatT value) {
  if (std::isnan(value))
    return "nan";
  if (std::isinf(value))
    return value < 0 ? "-inf" : "inf";
  char buffer[64];
  auto [end, ec] = std::to_chars(buffer, buffer + sizeof(buffer), value);
  (void)ec;
  std::string text(buffer, end);
  if (text.find('.') == std::string::npos) {
    size_t exponent = text.find('e');
    text.insert(exponent == std::string::npos ? text.size() : exponent, ".0");
  }
  return text;
}

std::string mlir::flexsn::formatShortest(double value) {
  return formatShortestImpl(value);
}

std::string mlir::flexsn::formatShortest(float value) {
  return formatShortestImpl(value);
}

FailureOr<llvm::APFloat> mlir::flexsn::parseSurrogateParam(AsmParser &parser) {
  // Integers are welcome too: `alpha = 4` means 4.0.
  bool negative = succeeded(parser.parseOptionalMinus());
  int64_t integer = 0;
  OptionalParseResult parsedInteger = parser.parseOptionalInteger(integer);
  double value;
  if (parsedInteger.has_value()) {
    if (failed(*parsedInteger))
      return failure();
    value = static_cast<double>(integer);
  } else if (parser.parseFloat(value)) {
    return failure();
  }
  return llvm::APFloat(negative ? -value : value);
}

void mlir::flexsn::printSurrogateParam(AsmPrinter &printer,
                                       const llvm::APFloat &value) {
  printer << formatShortest(value.convertToDouble());
}

//===----------------------------------------------------------------------===//
// ParamAttr
//===----------------------------------------------------------------------===//

/// Whether `name` is an object-like macro a host stub would see: one of the
/// headers it includes (stddef.h, stdint.h) or that a program calling it
/// includes too (cuda.h and the stdlib.h that cuda.h includes, with glibc's
/// additions in GNU modes), GCC's and Clang's predefined ones, or the C
/// library's that a caller may include first (errno.h, complex.h,
/// stdnoreturn.h, math.h).
static bool isHeaderMacro(StringRef name) {
  static const llvm::StringSet<> macros = {
      "NULL",       "EXIT_FAILURE",    "EXIT_SUCCESS",  "RAND_MAX",
      "MB_CUR_MAX", "BIG_ENDIAN",      "LITTLE_ENDIAN", "PDP_ENDIAN",
      "BYTE_ORDER", "FD_SETSIZE",      "NFDBITS",       "WNOHANG",
      "WUNTRACED",  "WSTOPPED",        "WEXITED",       "WCONTINUED",
      "WNOWAIT",    "CUDAAPI",         "linux",         "unix",
      "errno",      "complex",         "imaginary",     "I",
      "noreturn",   "math_errhandling"};
  if (macros.contains(name))
    return true;
  // cuda.h's constants.
  if (name.starts_with("CU_") || name.starts_with("CUDA_") ||
      name.starts_with("RESOURCE_ABI_"))
    return true;
  // stdint.h's limits: INT8_MAX, UINT_LEAST16_WIDTH, SIZE_MAX, ...
  static const llvm::Regex limits(
      "^(U?INT(_LEAST|_FAST)?(8|16|32|64)|U?INTPTR|U?INTMAX|PTRDIFF|"
      "SIG_ATOMIC|SIZE|WCHAR|WINT)_(MAX|MIN|WIDTH)$");
  return limits.match(name);
}

std::optional<std::string> mlir::flexsn::checkExportedName(StringRef name,
                                                           bool isPrefix) {
  if (name.empty() || (!llvm::isAlpha(name[0]) && name[0] != '_') ||
      !llvm::all_of(name, [](char c) { return llvm::isAlnum(c) || c == '_'; }))
    return std::string("is not a C identifier");
  if (isPrefix)
    return std::nullopt;
  static const llvm::StringSet<> keywords = {
      // C and C++ keywords a host stub could not use as a name.
      "alignas", "alignof", "and_eq", "asm", "auto", "bitand", "bitor", "bool",
      "break", "case", "catch", "char", "char8_t", "char16_t", "char32_t",
      "class", "co_await", "co_return", "co_yield", "compl", "concept", "const",
      "const_cast", "consteval", "constexpr", "constinit", "continue",
      "decltype", "default", "delete", "do", "double", "dynamic_cast", "else",
      "enum", "explicit", "export", "extern", "false", "float", "for", "friend",
      "goto", "if", "inline", "int", "long", "mutable", "namespace", "new",
      "noexcept", "not_eq", "nullptr", "operator", "or_eq", "private",
      "protected", "public", "register", "reinterpret_cast", "requires",
      "restrict", "return", "short", "signed", "sizeof", "static",
      "static_assert", "static_cast", "struct", "switch", "template", "this",
      "thread_local", "throw", "true", "typedef", "typeid", "typename",
      "typeof", "typeof_unqual", "union", "unsigned", "using", "virtual",
      "void", "volatile", "wchar_t", "while", "xor", "xor_eq",
      // Python keywords a keyword argument could not use.
      "and", "as", "assert", "async", "await", "def", "del", "elif", "except",
      "finally", "from", "global", "import", "in", "is", "lambda", "nonlocal",
      "not", "or", "pass", "raise", "try", "with", "yield", "None", "True",
      "False"};
  if (keywords.contains(name))
    return std::string("is a C, C++ or Python keyword");
  // Every name is an argument of the host stubs (lib/Target/GPUBinary.cpp),
  // next to these arguments and locals of their own.
  static const llvm::StringSet<> stubNames = {"stream",
                                              "T",
                                              "N",
                                              "ld",
                                              "C",
                                              "S",
                                              "workspace",
                                              "kinds",
                                              "element_sizes",
                                              "desc",
                                              "buffers",
                                              "saved_stride",
                                              "scalars",
                                              "workspace_bytes"};
  if (stubNames.contains(name))
    return std::string("is an argument or local variable of the generated "
                       "host stubs");
  if (name.starts_with("__") ||
      (name.size() > 1 && name[0] == '_' && llvm::isUpper(name[1])))
    return std::string("is reserved in C and C++ (it starts with '__' or "
                       "'_' and a capital letter)");
  if (name.starts_with_insensitive("flexsn"))
    return std::string("is reserved for the names FlexSN's headers define "
                       "(flexsn_*, FLEXSN_*)");
  // Types the stubs name after their arguments (a parameter of the type's
  // name would hide it); CUstream is what their callers pass.
  static const llvm::StringSet<> stubTypes = {
      "CUstream",      "size_t",         "ptrdiff_t",      "max_align_t",
      "intptr_t",      "uintptr_t",      "intmax_t",       "uintmax_t",
      "int8_t",        "int16_t",        "int32_t",        "int64_t",
      "uint8_t",       "uint16_t",       "uint32_t",       "uint64_t",
      "int_least8_t",  "int_least16_t",  "int_least32_t",  "int_least64_t",
      "uint_least8_t", "uint_least16_t", "uint_least32_t", "uint_least64_t",
      "int_fast8_t",   "int_fast16_t",   "int_fast32_t",   "int_fast64_t",
      "uint_fast8_t",  "uint_fast16_t",  "uint_fast32_t",  "uint_fast64_t"};
  if (stubTypes.contains(name))
    return std::string("names a C type of the host stubs' headers");
  if (isHeaderMacro(name))
    return std::string("is a macro C compilers, the C library or cuda.h "
                       "define");
  return std::nullopt;
}

LogicalResult ParamAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                                StringAttr name, TypedAttr defaultValue,
                                ParamKind kind, ParamShape shape) {
  if (std::optional<std::string> problem = checkExportedName(name.getValue()))
    return emitError() << "parameter name '" << name.getValue() << "' "
                       << *problem;
  Type type = defaultValue.getType();
  bool isF32 = isa<FloatAttr>(defaultValue) && type.isF32();
  bool isInt = isa<IntegerAttr>(defaultValue) &&
               (type.isSignlessInteger(1) || type.isSignlessInteger(32));
  if (!isF32 && !isInt)
    return emitError() << "parameter '" << name.getValue()
                       << "' must have an f32, i1 or i32 default value, got "
                       << defaultValue;
  if (isF32 && !cast<FloatAttr>(defaultValue).getValue().isFinite())
    return emitError() << "parameter '" << name.getValue()
                       << "' must have a finite default value";
  if (kind == ParamKind::Trainable && !isF32)
    return emitError() << "trainable parameter '" << name.getValue()
                       << "' must be f32, got " << type;
  if (shape != ParamShape::Scalar && !isF32)
    return emitError() << stringifyParamShape(shape) << " parameter '"
                       << name.getValue() << "' must be f32, got " << type;
  if (shape != ParamShape::Scalar && kind == ParamKind::Const)
    return emitError() << stringifyParamShape(shape) << " parameter '"
                       << name.getValue()
                       << "' must be runtime or trainable: its values are a "
                          "kernel argument";
  return success();
}

//===----------------------------------------------------------------------===//
// Surrogate attributes
//===----------------------------------------------------------------------===//

LogicalResult mlir::flexsn::verifySurrogateParams(
    function_ref<InFlightDiagnostic()> emitError, StringRef mnemonic,
    ArrayRef<SurrogateParamSpec> specs, ArrayRef<double> values) {
  for (auto [spec, v] : llvm::zip_equal(specs, values)) {
    auto fail = [&, &spec = spec]() {
      return emitError() << "surrogate '" << mnemonic << "' needs ";
    };
    switch (spec.range) {
    case SurrogateParamRange::Interval:
      if (v < spec.minimum || v > spec.maximum)
        return fail() << spec.minimum << " <= " << spec.name
                      << " <= " << spec.maximum << ", got " << int64_t(v);
      continue;
    case SurrogateParamRange::Finite:
      if (!std::isfinite(v))
        return fail() << spec.name << " to be a finite value, got "
                      << formatShortest(v);
      continue;
    case SurrogateParamRange::Positive:
      if (!std::isfinite(v) || !(v > 0))
        return fail() << spec.name << " > 0, got " << formatShortest(v);
      continue;
    case SurrogateParamRange::GreaterThanOne:
      if (!std::isfinite(v) || !(v > 1))
        return fail() << spec.name << " > 1, got " << formatShortest(v);
      continue;
    }
  }
  return success();
}

Attribute StraightThroughAttr::parse(AsmParser &parser, Type) {
  if (succeeded(parser.parseOptionalLess()))
    return (
        parser.emitError(parser.getCurrentLocation(),
                         "surrogate 'straight_through' takes no parameters"),
        Attribute());
  return get(parser.getContext());
}

void StraightThroughAttr::print(AsmPrinter &) const {}
