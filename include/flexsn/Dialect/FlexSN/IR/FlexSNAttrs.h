//===- FlexSNAttrs.h - FlexSN attributes ------------------------*- C++ -*-===//
//
// Part of the FlexSN project: an MLIR compiler for spiking-neuron dynamics.
//
//===----------------------------------------------------------------------===//

#ifndef FLEXSN_DIALECT_FLEXSN_IR_FLEXSNATTRS_H
#define FLEXSN_DIALECT_FLEXSN_IR_FLEXSNATTRS_H

#include "mlir/IR/Attributes.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/APFloat.h"

#include <optional>
#include <string>

#include "flexsn/Dialect/FlexSN/IR/SurrogateFormulas.h"

#include "flexsn/Dialect/FlexSN/IR/FlexSNEnums.h.inc"

#include "flexsn/Dialect/FlexSN/IR/FlexSNAttrInterfaces.h.inc"

namespace mlir::flexsn {
class BindingAttr;
class KernelBufferAttr;
/// Parses a surrogate parameter: any float or integer literal, kept in double.
FailureOr<llvm::APFloat> parseSurrogateParam(AsmParser &parser);
/// Prints a surrogate parameter in its shortest round-trip form ("4.0").
void printSurrogateParam(AsmPrinter &printer, const llvm::APFloat &value);
/// What a surrogate parameter must satisfy: a real is finite and possibly
/// positive or above one; an integer lies in [minimum, maximum].
enum class SurrogateParamRange { Finite, Positive, GreaterThanOne, Interval };
/// One surrogate parameter as ODS declares it (`SurrogateParam` and
/// `SurrogateIntParam` in FlexSNAttrs.td). The verifiers, the docs and the
/// Python layer's surrogate classes are all made from these.
struct SurrogateParamSpec {
  const char *name;
  bool isInteger;
  double defaultValue;
  SurrogateParamRange range;
  int64_t minimum, maximum; // for SurrogateParamRange::Interval
  const char *description;
};
/// Checks `values` (in the attribute's order) against `specs`, with the
/// diagnostics the Python layer repeats word for word.
LogicalResult
verifySurrogateParams(function_ref<InFlightDiagnostic()> emitError,
                      StringRef mnemonic, ArrayRef<SurrogateParamSpec> specs,
                      ArrayRef<double> values);
namespace surrogate {
/// A stored surrogate parameter as the formulas take it.
inline double toScalar(const llvm::APFloat &value) {
  return value.convertToDouble();
}
inline int64_t toScalar(int64_t value) { return value; }
} // namespace surrogate
/// The shortest decimal text that reads back to `value` ("4.0", "0.01").
std::string formatShortest(double value);
/// Same, for a value that lives in f32.
std::string formatShortest(float value);
/// Why `name` cannot name a neuron, input, state, output, parameter or
/// kernel buffer, if it cannot: such names reach C host stubs, the manifest
/// and Python keyword arguments, so they must be C identifiers, not
/// C/C++/Python keywords, and not names the host stubs or their headers
/// declare (`T`, `N`, `ld`, `stream`, reserved identifiers, `flexsn_*`,
/// macros such as `NULL`, the stdint types; docs/Semantics.md). A name that
/// is only ever a prefix of longer names (a neuron's: its stubs are
/// `<neuron>_<variant>`) need only be an identifier.
std::optional<std::string> checkExportedName(StringRef name,
                                             bool isPrefix = false);
/// Whether a buffer of `role` lives in the training workspace rather than
/// being an argument of the kernel's C function.
bool isWorkspaceRole(BufferRole role);
/// Whether a kernel only reads a buffer of `role`.
bool isReadRole(BufferRole role);
/// Whether a caller may pass a null buffer of `role`.
bool isOptionalRole(BufferRole role);
/// The shape class of a buffer of `role`.
BufferShape getShapeOfRole(BufferRole role);
/// Whether a buffer of `role` holds a shaped parameter's values.
bool isParamRole(BufferRole role);
/// Whether a buffer of `role` receives a parameter's gradient.
bool isParamGradientRole(BufferRole role);
/// The role of a buffer holding `binds` in a kernel of `variant`: what the
/// kernel does with it (a backward kernel writes an input's gradient,
/// reads an output's).
BufferRole getRoleOfBinding(BindingAttr binds, KernelVariant variant);
/// The name of the buffer holding `binds`, where `valueName` names the
/// input, output or state (ignored for the others): `x`, `v_init`, `v_seq`,
/// `v_final`, the parameter's name, `saved<k>`, `reduction_scratch`, and
/// for a gradient the value's buffer name followed by `_grad`.
std::string getBufferName(BindingAttr binds, StringRef valueName);
/// The ABI builder: the buffer of a kernel of `variant` holding `binds` as
/// `elementType`, its role and shape class from the binding and its name
/// from getBufferName. Every generated kernel's buffers are made here.
KernelBufferAttr getKernelBuffer(BindingAttr binds, KernelVariant variant,
                                 Type elementType, StringRef valueName);
/// The buffer of a kernel of `variant` holding the gradient of what `of`
/// holds, as `elementType`: named after `of`, with `_grad`.
KernelBufferAttr getGradientBuffer(KernelBufferAttr of, KernelVariant variant,
                                   Type elementType);
/// The custom directive `custom<BindingBody>` of `#flexsn.buffer`.
ParseResult parseBindingBody(AsmParser &parser, BindingAttr &binds);
void printBindingBody(AsmPrinter &printer, BindingAttr binds);
/// The element type sequences of `storage` are stored in.
Type getStorageElementType(MLIRContext *ctx, StorageType storage);

/// Where the parts of a kernel's training workspace lie, in bytes. A saved
/// sequence starts at `savedOffsets[i] * T * ld` (for the kernel's buffer
/// `i`; -1 for a buffer outside the workspace), all of them take
/// `savedBytes * T * ld`, and the deterministic reduction scratch of
/// `reductionSlots` gradients follows, 4-byte aligned: at
/// `scratchOffset(T * ld)`.
struct WorkspaceLayout {
  SmallVector<int64_t> savedOffsets;
  int64_t savedBytes = 0;
  int64_t reductionSlots = 0;

  int64_t scratchOffset(int64_t sequenceElements) const {
    return (savedBytes * sequenceElements + 3) / 4 * 4;
  }
};

/// Parses `[a, b, ...]` (possibly empty) of attributes of kind `AttrT`, each
/// in its short form `<...>` or in full.
template <typename AttrT>
FailureOr<SmallVector<AttrT>> parseBracketedAttrList(AsmParser &parser) {
  SmallVector<AttrT> elements;
  if (failed(parser.parseCommaSeparatedList(
          AsmParser::Delimiter::Square, [&]() -> ParseResult {
            AttrT element;
            if (failed(parser.parseCustomAttributeWithFallback(element)))
              return failure();
            elements.push_back(element);
            return success();
          })))
    return failure();
  return elements;
}

/// Prints `[<...>, <...>]`: the inverse of parseBracketedAttrList.
template <typename AttrT>
void printBracketedAttrList(AsmPrinter &printer, ArrayRef<AttrT> elements) {
  printer << '[';
  llvm::interleaveComma(elements, printer, [&](AttrT element) {
    printer.printStrippedAttrOrType(element);
  });
  printer << ']';
}
} // namespace mlir::flexsn

#define GET_ATTRDEF_CLASSES
#include "flexsn/Dialect/FlexSN/IR/FlexSNAttrs.h.inc"

#endif // FLEXSN_DIALECT_FLEXSN_IR_FLEXSNATTRS_H
