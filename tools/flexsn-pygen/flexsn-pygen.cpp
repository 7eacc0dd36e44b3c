//===- flexsn-pygen.cpp - The Python layer's copy of the dialect's ODS ----===//
//
// Part of the FlexSN project: an MLIR compiler for spiking-neuron dynamics.
//
//===----------------------------------------------------------------------===//
//
// Prints `python/flexsn/_dialect.py`: the enums a Python caller names
// (variants, storage types, spike storage, parameter kinds and shapes) and
// every surrogate, with its parameters, defaults and ranges as ODS declares
// them, and its g(x) as a torch expression. The expression is printed by
// instantiating the templates of SurrogateFormulas.h with a scalar type
// whose operators write Python, so the eager formula is the compiled one.
//
//===----------------------------------------------------------------------===//

#include "flexsn/Dialect/FlexSN/IR/FlexSNAttrs.h"
#include "flexsn/Pipelines/CompileRequest.h"
#include "flexsn/Targets/Target.h"

#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Support/raw_ostream.h"

#include <string>
#include <vector>

using namespace mlir;
using namespace mlir::flexsn;

namespace pygen {
/// A Python expression: a torch tensor (it depends on `x`) or a number.
struct PyExpr {
  std::string text;
  bool isTensor = false;
};
/// A comparison's result, which only `select` consumes.
struct PyBool {
  std::string text;
  bool isTensor = false;
};

[[noreturn]] static void unsupported(const std::string &what) {
  llvm::report_fatal_error(llvm::Twine("flexsn-pygen: a surrogate formula ") +
                           what + " (see SurrogateFormulas.h's contract)");
}

static PyExpr number(double value) { return {formatShortest(value), false}; }

static PyExpr binary(const PyExpr &a, const char *op, const PyExpr &b) {
  return {"(" + a.text + " " + op + " " + b.text + ")",
          a.isTensor || b.isTensor};
}

#define FLEXSN_PY_BINARY(op)                                                   \
  [[maybe_unused]] static PyExpr operator op(const PyExpr &a,                  \
                                             const PyExpr &b) {                \
    return binary(a, #op, b);                                                  \
  }                                                                            \
  [[maybe_unused]] static PyExpr operator op(const PyExpr &a, double b) {      \
    return binary(a, #op, number(b));                                          \
  }                                                                            \
  [[maybe_unused]] static PyExpr operator op(double a, const PyExpr &b) {      \
    return binary(number(a), #op, b);                                          \
  }
FLEXSN_PY_BINARY(+)
FLEXSN_PY_BINARY(-)
FLEXSN_PY_BINARY(*)
FLEXSN_PY_BINARY(/)
#undef FLEXSN_PY_BINARY

[[maybe_unused]] static PyExpr operator-(const PyExpr &a) {
  return {"(-" + a.text + ")", a.isTensor};
}

#define FLEXSN_PY_COMPARE(op)                                                  \
  [[maybe_unused]] static PyBool operator op(const PyExpr &a,                  \
                                             const PyExpr &b) {                \
    PyExpr e = binary(a, #op, b);                                              \
    return {e.text, e.isTensor};                                               \
  }                                                                            \
  [[maybe_unused]] static PyBool operator op(const PyExpr &a, double b) {      \
    return a op number(b);                                                     \
  }
FLEXSN_PY_COMPARE(<)
FLEXSN_PY_COMPARE(<=)
FLEXSN_PY_COMPARE(>)
FLEXSN_PY_COMPARE(>=)
#undef FLEXSN_PY_COMPARE

/// A function of one value: `torch.<name>` on a tensor, `math.<name>` on a
/// number.
static PyExpr call(const char *name, const PyExpr &x) {
  return {std::string(x.isTensor ? "torch." : "math.") + name + "(" + x.text +
              ")",
          x.isTensor};
}

[[maybe_unused]] static PyExpr abs(const PyExpr &x) {
  return x.isTensor ? call("abs", x) : PyExpr{"abs(" + x.text + ")", false};
}
[[maybe_unused]] static PyExpr exp(const PyExpr &x) { return call("exp", x); }
[[maybe_unused]] static PyExpr log(const PyExpr &x) { return call("log", x); }
[[maybe_unused]] static PyExpr log1p(const PyExpr &x) {
  return call("log1p", x);
}
[[maybe_unused]] static PyExpr erf(const PyExpr &x) { return call("erf", x); }
[[maybe_unused]] static PyExpr atan(const PyExpr &x) { return call("atan", x); }
[[maybe_unused]] static PyExpr sin(const PyExpr &x) { return call("sin", x); }
[[maybe_unused]] static PyExpr cos(const PyExpr &x) { return call("cos", x); }
[[maybe_unused]] static PyExpr sigmoid(const PyExpr &x) {
  if (x.isTensor)
    return call("sigmoid", x);
  return 1.0 / (exp(-x) + 1.0);
}
[[maybe_unused]] static PyExpr pow(const PyExpr &x, const PyExpr &y) {
  if (y.isTensor)
    unsupported("raises to a power that depends on x");
  return x.isTensor ? PyExpr{"torch.pow(" + x.text + ", " + y.text + ")", true}
                    : binary(x, "**", y);
}
[[maybe_unused]] static PyExpr pow(const PyExpr &x, double y) {
  return pow(x, number(y));
}

/// min/max of a tensor and a number clamp it; of two numbers, Python's.
static PyExpr clampOrBuiltin(const PyExpr &a, const PyExpr &b,
                             const char *bound, const char *builtin) {
  if (b.isTensor)
    unsupported(std::string("takes the ") + builtin + " of two tensors");
  if (a.isTensor)
    return {"torch.clamp(" + a.text + ", " + bound + "=" + b.text + ")", true};
  return {std::string(builtin) + "(" + a.text + ", " + b.text + ")", false};
}
[[maybe_unused]] static PyExpr min(const PyExpr &a, const PyExpr &b) {
  return clampOrBuiltin(a, b, "max", "min");
}
[[maybe_unused]] static PyExpr min(const PyExpr &a, double b) {
  return min(a, number(b));
}
[[maybe_unused]] static PyExpr max(const PyExpr &a, const PyExpr &b) {
  return clampOrBuiltin(a, b, "min", "max");
}
[[maybe_unused]] static PyExpr max(const PyExpr &a, double b) {
  return max(a, number(b));
}

[[maybe_unused]] static PyExpr select(const PyBool &cond, const PyExpr &a,
                                      const PyExpr &b) {
  if (a.isTensor && b.isTensor)
    return {"torch.where(" + cond.text + ", " + a.text + ", " + b.text + ")",
            true};
  if (a.isTensor || b.isTensor || cond.isTensor)
    unsupported("selects between a tensor and a number; splat the number");
  return {"(" + a.text + " if " + cond.text + " else " + b.text + ")", false};
}
[[maybe_unused]] static PyExpr splat(const PyExpr &like, const PyExpr &value) {
  if (!like.isTensor || value.isTensor)
    unsupported("splats a value that is not a number");
  return {"torch.full_like(" + like.text + ", " + value.text + ")", true};
}
[[maybe_unused]] static PyExpr splat(const PyExpr &like, double value) {
  return splat(like, number(value));
}
/// The sum over `i` in [1, n) as a Python generator: `n` is a parameter.
template <typename F>
[[maybe_unused]] static PyExpr seriesSum(const PyExpr &zero, const PyExpr &n,
                                         F term) {
  PyExpr t = term(PyExpr{"i", false});
  return {"sum((" + t.text + " for i in range(1, " + n.text + ")), " +
              zero.text + ")",
          zero.isTensor || t.isTensor};
}
} // namespace pygen

using pygen::PyExpr;

/// `text` as a Python string literal.
static std::string pyString(llvm::StringRef text) {
  std::string out = "\"";
  for (char c : text) {
    if (c == '\\' || c == '"')
      out += '\\';
    out += c;
  }
  return out + "\"";
}

static std::string pyRange(const SurrogateParamSpec &spec) {
  switch (spec.range) {
  case SurrogateParamRange::Finite:
    return "\"finite\"";
  case SurrogateParamRange::Positive:
    return "\"positive\"";
  case SurrogateParamRange::GreaterThanOne:
    return "\"greater_than_one\"";
  case SurrogateParamRange::Interval:
    return "(" + std::to_string(spec.minimum) + ", " +
           std::to_string(spec.maximum) + ")";
  }
  llvm_unreachable("unknown surrogate parameter range");
}

/// The derivative function and the registry entry of surrogate `Attr`.
template <typename Attr>
static void printSurrogate(llvm::raw_ostream &functions,
                           llvm::raw_ostream &entries) {
  llvm::StringRef mnemonic = Attr::getMnemonic();
  std::vector<PyExpr> params;
  std::string signature = "x";
  std::string specs;
  for (const SurrogateParamSpec &spec : Attr::getParamSpecs()) {
    params.push_back({spec.name, false});
    signature += std::string(", ") + spec.name;
    std::string value = spec.isInteger
                            ? std::to_string(int64_t(spec.defaultValue))
                            : formatShortest(spec.defaultValue);
    specs += std::string(specs.empty() ? "" : "\n         ") +
             "SurrogateParam(" + pyString(spec.name) + ", " +
             (spec.isInteger ? "\"int\"" : "\"real\"") + ", " + value + ", " +
             pyRange(spec) + ", " + pyString(spec.description) + "),";
  }
  PyExpr g = Attr::derivativeOf(PyExpr{"x", true}, llvm::ArrayRef(params));
  std::string function = "_" + mnemonic.str() + "_derivative";
  functions << "\n\ndef " << function << "(" << signature
            << "):\n    import torch\n    return " << g.text << "\n";

  std::string aliases;
  for (llvm::StringRef alias : Attr::getPythonAliases())
    aliases += (aliases.empty() ? "" : " ") + pyString(alias) + ",";
  entries << "    SurrogateSpec(\n        " << pyString(Attr::getPythonName())
          << ", " << pyString(Attr::getSurrogateName()) << ", "
          << pyString(mnemonic) << ", (" << aliases << "),\n        (" << specs
          << "),\n        " << pyString(Attr::getFormulaText()) << ", "
          << function << "),\n";
}

template <typename... Attrs>
static void printSurrogates(llvm::raw_ostream &functions,
                            llvm::raw_ostream &entries) {
  (
      [&] {
        if constexpr (std::is_base_of_v<SurrogateAttrInterface::Trait<Attrs>,
                                        Attrs>)
          printSurrogate<Attrs>(functions, entries);
      }(),
      ...);
}

/// `NAME = ("case", ...)`: every case of an enum, in order.
template <typename Enum, typename Stringify>
static void printEnum(llvm::raw_ostream &os, llvm::StringRef name,
                      unsigned maxValue, Stringify stringify) {
  os << name << " = (";
  for (unsigned value = 0; value <= maxValue; ++value)
    os << (value ? ", " : "") << pyString(stringify(Enum(value)));
  os << (maxValue == 0 ? ",)\n" : ")\n");
}

/// Prints the ODS enum `Enum` as the tuple `name` of its spellings.
#define PRINT_ENUM(Enum, name)                                                 \
  printEnum<Enum>(os, name, getMaxEnumValFor##Enum(), stringify##Enum)

/// The compile request's schema, as JSON text the module parses.
static void printCompileRequest(llvm::raw_ostream &os) {
  // The targets a request may name are the registered ones.
  registerAllTargets();
  std::string schema = llvm::formatv("{0:4}", getCompileRequestSchema()).str();
  if (llvm::StringRef(schema).contains('\\') ||
      llvm::StringRef(schema).contains("\"\"\""))
    llvm::report_fatal_error("flexsn-pygen: the request schema's text holds "
                             "a backslash or triple quotes");
  os << R"py(
#: What `flexsn-compile --request` reads (CompileRequest.td declares it):
#: per object ("" is the request itself, "targets.cuda" the CUDA target's
#: object), each field's type, default, allowed values and description.
COMPILE_REQUEST = json.loads(""")py"
     << schema << "\"\"\")\n";
}

/// The registered targets (those of FlexSN's tests left out): each one's
/// manifest and kernel files, which the Python layer's target table reads.
static void printTargets(llvm::raw_ostream &os) {
  registerAllTargets();
  os << "\n#: The compiler's targets (lib/Targets): the manifest each one's "
        "lowering\n#: writes and the files that may hold its kernels.\n"
     << "TARGETS = {\n";
  for (Target *target : getTargets()) {
    if (target->isForTesting())
      continue;
    os << "    " << pyString(target->getName())
       << ": {\"manifest\": " << pyString(target->getManifestFile())
       << ", \"kernel_files\": (";
    for (StringRef file : target->getKernelFiles())
      os << pyString(file) << ", ";
    os << ")},\n";
  }
  os << "}\n";
}

static void printModule(llvm::raw_ostream &os) {
  os << R"py("""The flexsn dialect's enums and surrogates, as its ODS declares them.

Generated by flexsn-pygen from FlexSNAttrs.td and SurrogateFormulas.h: do not
edit. `ninja -C build update-flexsn-python` regenerates it, and a test fails
when it differs from what the compiler declares.
"""

import collections
import json
import math

)py";
  // The version has one source, CMake's project(); the tools' --version
  // prints it too.
  os << "#: FlexSN's version, the tools' (`flexsn-compile --version`).\n"
     << "VERSION = " << pyString(FLEXSN_VERSION) << "\n\n";
  PRINT_ENUM(KernelVariant, "KERNEL_VARIANTS");
  PRINT_ENUM(StorageType, "STORAGE_TYPES");
  PRINT_ENUM(SpikeStorage, "SPIKE_STORAGES");
  PRINT_ENUM(ParamKind, "PARAM_KINDS");
  PRINT_ENUM(ParamShape, "PARAM_SHAPES");
  PRINT_ENUM(BlockPre, "BLOCK_PRES");
  PRINT_ENUM(BlockConnection, "BLOCK_CONNECTIONS");
  PRINT_ENUM(BlockConnectionOperand, "BLOCK_CONNECTION_OPERANDS");
  PRINT_ENUM(BlockReadout, "BLOCK_READOUTS");
  printCompileRequest(os);
  printTargets(os);
  os << R"py(
SurrogateParam = collections.namedtuple(
    "SurrogateParam", ("name", "type", "default", "range", "description"))
# type: "real" (a float) or "int".
# range, for a real: "finite", "positive" or "greater_than_one";
#        for an int: a (minimum, maximum) tuple, both inclusive.

SurrogateSpec = collections.namedtuple(
    "SurrogateSpec", ("python_name", "cpp_name", "mnemonic", "aliases",
                      "params", "formula", "derivative"))
# python_name: the Python (SpikingJelly) class name;
# cpp_name: the attribute's name in ODS, its C++ class without "Attr";
# aliases: the other names flexsn.surrogate.by_name accepts;
# params: SurrogateParam tuples, in the attribute's order;
# formula: g(x) as the docs write it;
# derivative: (x, *parameter values) -> g(x) for a torch tensor x, computed
#   as the compiled kernels compute it.
)py";
  std::string functions, entries;
  llvm::raw_string_ostream functionStream(functions), entryStream(entries);
  printSurrogates<
#define GET_ATTRDEF_LIST
#include "flexsn/Dialect/FlexSN/IR/FlexSNAttrs.cpp.inc"
      >(functionStream, entryStream);
  os << functions << "\n\nSURROGATES = (\n" << entries << ")\n";
}

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  llvm::cl::opt<std::string> outputFilename(
      "o", llvm::cl::desc("Output file (default: standard output)"),
      llvm::cl::value_desc("filename"), llvm::cl::init("-"));
  llvm::cl::ParseCommandLineOptions(
      argc, argv,
      "Prints the Python layer's module of the flexsn dialect's enums and "
      "surrogates\n");
  std::error_code error;
  llvm::ToolOutputFile output(outputFilename, error, llvm::sys::fs::OF_Text);
  if (error) {
    llvm::errs() << "flexsn-pygen: cannot write " << outputFilename << ": "
                 << error.message() << "\n";
    return 1;
  }
  printModule(output.os());
  output.keep();
  return 0;
}
