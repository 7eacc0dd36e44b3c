//===- FlexSNAttrs.td - FlexSN attributes and enums --------*- tablegen -*-===//
//
// Part of the FlexSN project: an MLIR compiler for spiking-neuron dynamics.
//
//===----------------------------------------------------------------------===//

#ifndef FLEXSN_DIALECT_FLEXSN_IR_FLEXSNATTRS_TD
#define FLEXSN_DIALECT_FLEXSN_IR_FLEXSNATTRS_TD

include "flexsn/Dialect/FlexSN/IR/FlexSNDialect.td"
include "mlir/IR/AttrTypeBase.td"
include "mlir/IR/EnumAttr.td"

//===----------------------------------------------------------------------===//
// Neuron parameters
//===----------------------------------------------------------------------===//

def FlexSN_ParamKind : I32EnumAttr<"ParamKind", "how a neuron parameter is bound", [
    I32EnumAttrCase<"Const", 0, "const">,
    I32EnumAttrCase<"Runtime", 1, "runtime">,
    I32EnumAttrCase<"Trainable", 2, "trainable">
  ]> {
  let cppNamespace = "::mlir::flexsn";
  let genSpecializedAttr = 0;
  let description = [{
    * `const`: specialized into the kernel at compile time (the default);
    * `runtime`: a scalar kernel argument, so one binary serves every value;
    * `trainable`: a runtime argument that also gets a gradient, reduced over
      time steps and neurons.
  }];
}

def FlexSN_ParamKindAttr : EnumAttr<FlexSN_Dialect, FlexSN_ParamKind, "param_kind">;

class FlexSN_Attr<string name, string attrMnemonic, list<Trait> traits = []>
    : AttrDef<FlexSN_Dialect, name, traits> {
  let mnemonic = attrMnemonic;
}

def FlexSN_ParamAttr : FlexSN_Attr<"Param", "param"> {
  let summary = "A named, typed neuron parameter with a default value";
  let description = [{
    Describes one parameter of a `flexsn.neuron`: its name (a C identifier,
    since host stubs and the manifest expose it), its default value (whose
    type is the parameter's type: `f32`, `i1` or `i32`) and how it is bound
    (`const`, `runtime` or `trainable`). Trainable parameters must be `f32`.

    The neuron op prints its parameters inline, so this attribute appears
    spelled out only in the generic form:

    ```mlir
    #flexsn.param<"tau", 2.000000e+00 : f32, const>
    ```
  }];
  let parameters = (ins "::mlir::StringAttr":$name,
                        "::mlir::TypedAttr":$default_value,
                        "::mlir::flexsn::ParamKind":$kind);
  let assemblyFormat = "`<` $name `,` $default_value `,` $kind `>`";
  let genVerifyDecl = 1;
  let extraClassDeclaration = [{
    /// The parameter's type: the type of its default value.
    ::mlir::Type getType() const { return getDefaultValue().getType(); }
    /// Whether the parameter is a kernel argument (runtime or trainable).
    bool isRuntime() const { return getKind() != ParamKind::Const; }
  }];
}

//===----------------------------------------------------------------------===//
// Surrogate gradients
//===----------------------------------------------------------------------===//

def FlexSN_SurrogateAttrInterface : AttrInterface<"SurrogateAttrInterface"> {
  let cppNamespace = "::mlir::flexsn";
  let description = [{
    A surrogate gradient for the Heaviside spike. The forward of a spike is
    always `H(x) = (x >= 0)`; backward multiplies the incoming gradient by
    the surrogate's `g(x)`. Each surrogate also has a smooth *primitive*
    (an antiderivative of `g`; for most surrogates it is the smooth function
    that SpikingJelly's surrogate module computes when not spiking), which
    lets tests check `g` against finite differences.

    Formulas are written once, in `SurrogateFormulas.h`, over a generic
    scalar type, so the same text evaluates doubles here and emits IR in
    surrogate expansion.
  }];
  let methods = [
    InterfaceMethod<"Evaluates g(x), the surrogate derivative, in double.",
      "double", "evalDerivative", (ins "double":$x)>,
    InterfaceMethod<"Evaluates the primitive (an antiderivative of g).",
      "double", "evalPrimitive", (ins "double":$x)>,
    InterfaceMethod<[{
        Emits `arith`/`math` ops computing g(x) for a float `x` at the
        builder's insertion point, and returns the result.
      }],
      "::mlir::Value", "buildDerivative",
      (ins "::mlir::OpBuilder &":$builder, "::mlir::Location":$loc,
           "::mlir::Value":$x)>,
  ];
}

// A real-valued surrogate parameter with a default. Printed shortest
// round-trip ("4.0"), parsed from any float or integer literal.
class SurrogateParam<string value, string desc>
    : AttrOrTypeParameter<"::llvm::APFloat", desc # " (default " # value # ")"> {
  let comparator = "$_lhs.bitwiseIsEqual($_rhs)";
  let syntax = "float";
  let defaultValue = "::llvm::APFloat(double(" # value # "))";
  let parser = "::mlir::flexsn::parseSurrogateParam($_parser)";
  let printer = "::mlir::flexsn::printSurrogateParam($_printer, $_self)";
}

// One surrogate: its parameters, its g(x) (for the docs), and a range check
// (implemented in C++, documented in `rangeDoc`).
class FlexSN_Surrogate<string name, string attrMnemonic, dag params,
                       string formula, string rangeDoc>
    : FlexSN_Attr<name, attrMnemonic,
                  [DeclareAttrInterfaceMethods<FlexSN_SurrogateAttrInterface>]> {
  let summary = "Surrogate gradient `" # attrMnemonic # "`: g(x) = " # formula;
  let description = "Backward of `flexsn.spike` multiplies the incoming "
      # "gradient by `g(x) = " # formula # "`.\n\nParameter constraints: "
      # rangeDoc # ". Omitted parameters take their defaults, and the "
      # "whole `<...>` may be omitted:\n\n```mlir\n#flexsn." # attrMnemonic
      # "\n```";
  let parameters = params;
  // A surrogate without parameters parses itself, to reject a stray `<...>`.
  let assemblyFormat = !if(!empty(params), ?, "(`<` struct(params)^ `>`)?");
  let hasCustomAssemblyFormat = !empty(params);
  let genVerifyDecl = !not(!empty(params));
}

def FlexSN_SigmoidAttr : FlexSN_Surrogate<"Sigmoid", "sigmoid",
    (ins SurrogateParam<"4.0", "steepness">:$alpha),
    "a·σ(ax)·(1−σ(ax))", "alpha > 0">;

def FlexSN_ATanAttr : FlexSN_Surrogate<"ATan", "atan",
    (ins SurrogateParam<"2.0", "steepness">:$alpha),
    "(a/2) / (1 + (π/2·a·x)²)", "alpha > 0">;

def FlexSN_PiecewiseQuadraticAttr : FlexSN_Surrogate<"PiecewiseQuadratic",
    "piecewise_quadratic",
    (ins SurrogateParam<"1.0", "inverse half-width">:$alpha),
    "max(0, a − a²·|x|)", "alpha > 0">;

def FlexSN_PiecewiseExpAttr : FlexSN_Surrogate<"PiecewiseExp", "piecewise_exp",
    (ins SurrogateParam<"1.0", "decay rate">:$alpha),
    "(a/2)·exp(−a·|x|)", "alpha > 0">;

def FlexSN_SoftSignAttr : FlexSN_Surrogate<"SoftSign", "soft_sign",
    (ins SurrogateParam<"2.0", "steepness">:$alpha),
    "1 / (2a·(1/a + |x|)²)", "alpha > 0">;

def FlexSN_SuperSpikeAttr : FlexSN_Surrogate<"SuperSpike", "super_spike",
    (ins SurrogateParam<"1.0", "scale">:$alpha),
    "a / (|x| + 1)²", "alpha > 0">;

def FlexSN_ErfAttr : FlexSN_Surrogate<"Erf", "erf",
    (ins SurrogateParam<"2.0", "steepness">:$alpha),
    "(a/√π)·exp(−(ax)²)", "alpha > 0">;

def FlexSN_NonzeroSignLogAbsAttr : FlexSN_Surrogate<"NonzeroSignLogAbs",
    "nonzero_sign_log_abs",
    (ins SurrogateParam<"1.0", "steepness">:$alpha),
    "1 / (1/a + |x|)", "alpha > 0">;

def FlexSN_PiecewiseLeakyReLUAttr : FlexSN_Surrogate<"PiecewiseLeakyReLU",
    "piecewise_leaky_relu",
    (ins SurrogateParam<"1.0", "half-width of the linear region">:$w,
         SurrogateParam<"0.01", "slope outside it">:$c),
    "1/(2w) if |x| < w else c", "w > 0, c finite">;

def FlexSN_SquarewaveFourierSeriesAttr : FlexSN_Surrogate<
    "SquarewaveFourierSeries", "squarewave_fourier_series",
    (ins DefaultValuedParameter<"int64_t", "2",
             "number of Fourier terms plus one (default 2)">:$n,
         SurrogateParam<"8.0", "period">:$T_period),
    "(4/T)·Σ_{i=1}^{n−1} cos((2i−1)·(2π/T)·x)", "1 <= n <= 64, T_period > 0">;

def FlexSN_S2NNAttr : FlexSN_Surrogate<"S2NN", "s2nn",
    (ins SurrogateParam<"4.0", "sigmoid steepness for x < 0">:$alpha,
         SurrogateParam<"1.0", "scale of the 1/(x+1) tail for x >= 0">:$beta),
    "a·σ(ax)(1−σ(ax)) if x < 0 else β/(x+1)", "alpha > 0, beta > 0">;

def FlexSN_QPseudoSpikeAttr : FlexSN_Surrogate<"QPseudoSpike", "q_pseudo_spike",
    (ins SurrogateParam<"2.0", "tail factor">:$alpha),
    "(1 + 2·|x|/(a−1))^(−a)", "alpha > 1">;

def FlexSN_LeakyKReLUAttr : FlexSN_Surrogate<"LeakyKReLU", "leaky_k_relu",
    (ins SurrogateParam<"0.0", "slope for x < 0">:$leak,
         SurrogateParam<"1.0", "slope for x >= 0">:$k),
    "k if x >= 0 else leak", "leak and k finite">;

def FlexSN_FakeNumericalGradientAttr : FlexSN_Surrogate<
    "FakeNumericalGradient", "fake_numerical_gradient",
    (ins SurrogateParam<"0.3", "upper bound">:$alpha),
    "min((2H(x)−1)/x, a), and a at x = 0", "alpha > 0">;

def FlexSN_LogTailedReLUAttr : FlexSN_Surrogate<"LogTailedReLU",
    "log_tailed_relu",
    (ins SurrogateParam<"0.0", "slope for x <= 0">:$alpha),
    "a if x <= 0; 1 if 0 < x <= 1; 1/x if x > 1", "alpha finite">;

def FlexSN_RectAttr : FlexSN_Surrogate<"Rect", "rect",
    (ins SurrogateParam<"1.0", "height; the window is |x| < 0.5/a">:$alpha),
    "a if |x| < 0.5/a else 0", "alpha > 0">;

def FlexSN_StraightThroughAttr : FlexSN_Surrogate<"StraightThrough",
    "straight_through", (ins), "1", "none">;

#endif // FLEXSN_DIALECT_FLEXSN_IR_FLEXSNATTRS_TD
