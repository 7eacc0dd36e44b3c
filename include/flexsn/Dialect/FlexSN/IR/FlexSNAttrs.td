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

def FlexSN_ParamShape : I32EnumAttr<"ParamShape",
    "how many values a neuron parameter has", [
    I32EnumAttrCase<"Scalar", 0, "scalar">,
    I32EnumAttrCase<"PerNeuron", 1, "per_neuron">,
    I32EnumAttrCase<"PerChannel", 2, "per_channel">
  ]> {
  let cppNamespace = "::mlir::flexsn";
  let genSpecializedAttr = 0;
  let description = [{
    * `scalar`: one value for every neuron (the default);
    * `per_neuron`: one `f32` value per neuron, passed as an `[N]` buffer
      (`runtime` or `trainable` only). The body still sees one scalar: its
      neuron's value. A trainable one gets one gradient per neuron, summed
      over time steps only.
    * `per_channel`: one `f32` value per channel, passed as a `[C]` buffer
      (`runtime` or `trainable` only), shared by the neurons of that
      channel: the kernels of such a neuron see the neurons as
      `[B, C, S]` (batch, channel, the rest), and every neuron of channel
      `c` reads value `c`. A trainable one gets one gradient per channel,
      summed over time steps, the batch and the rest.
  }];
}

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
    Its shape is `scalar` (left out when printed), `per_neuron` or
    `per_channel`: then the default value is every neuron's (channel's)
    initial value.

    The neuron op prints its parameters inline, so this attribute appears
    spelled out only in the generic form:

    ```mlir
    #flexsn.param<"tau", 2.000000e+00 : f32, const>
    #flexsn.param<"v_threshold", 1.000000e+00 : f32, trainable, per_neuron>
    #flexsn.param<"w", 0.000000e+00 : f32, trainable, per_channel>
    ```
  }];
  let parameters = (ins "::mlir::StringAttr":$name,
                        "::mlir::TypedAttr":$default_value,
                        "::mlir::flexsn::ParamKind":$kind,
                        DefaultValuedParameter<"::mlir::flexsn::ParamShape",
                            "::mlir::flexsn::ParamShape::Scalar",
                            "scalar, per-neuron or per-channel">:$shape);
  let assemblyFormat =
      "`<` $name `,` $default_value `,` $kind (`,` $shape^)? `>`";
  let genVerifyDecl = 1;
  let builders = [
    AttrBuilder<(ins "::mlir::StringAttr":$name,
                     "::mlir::TypedAttr":$default_value,
                     "::mlir::flexsn::ParamKind":$kind), [{
      return $_get($_ctxt, name, default_value, kind,
                   ::mlir::flexsn::ParamShape::Scalar);
    }]>
  ];
  let extraClassDeclaration = [{
    /// The parameter's type: the type of its default value.
    ::mlir::Type getType() const { return getDefaultValue().getType(); }
    /// Whether the parameter is a kernel argument (runtime or trainable).
    bool isRuntime() const { return getKind() != ParamKind::Const; }
    /// Whether the parameter has one value per neuron (an `[N]` buffer).
    bool isPerNeuron() const { return getShape() == ParamShape::PerNeuron; }
    /// Whether the parameter has one value per channel (a `[C]` buffer).
    bool isPerChannel() const { return getShape() == ParamShape::PerChannel; }
    /// Whether the parameter is a buffer of a kernel (not a scalar).
    bool isShaped() const { return getShape() != ParamShape::Scalar; }
    /// The same parameter with another kind (its shape kept).
    ParamAttr withKind(ParamKind kind) const {
      return get(getContext(), getName(), getDefaultValue(), kind, getShape());
    }
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

// What a surrogate parameter must satisfy (`SurrogateParamRange` in C++),
// and how the constraints read in the docs.
class SurrogateRange<string cppCase, string docText> {
  string range = cppCase;
  string doc = docText;
}
def SurrogateFinite : SurrogateRange<"Finite", " finite">;
def SurrogatePositive : SurrogateRange<"Positive", " > 0">;
def SurrogateAboveOne : SurrogateRange<"GreaterThanOne", " > 1">;
// Integers: [minimum, maximum], which the parameter itself gives.
def SurrogateInterval : SurrogateRange<"Interval", "">;

// What the registry knows of a surrogate parameter beyond its C++ type: it
// becomes a `SurrogateParamSpec`, which the verifier checks and the Python
// layer's classes are made from.
class SurrogateParamSpec<bit integer, string value, SurrogateRange r, int lo,
                         int hi, string desc> {
  bit isInteger = integer;
  string defaultText = value;
  SurrogateRange paramRange = r;
  int minimum = lo;
  int maximum = hi;
  string descriptionText = desc;
}

// A real-valued surrogate parameter with a default. Printed shortest
// round-trip ("4.0"), parsed from any float or integer literal.
class SurrogateParam<string value, string desc,
                     SurrogateRange r = SurrogatePositive>
    : AttrOrTypeParameter<"::llvm::APFloat", desc # " (default " # value # ")">,
      SurrogateParamSpec<0, value, r, 0, 0, desc> {
  let comparator = "$_lhs.bitwiseIsEqual($_rhs)";
  let syntax = "float";
  let defaultValue = "::llvm::APFloat(double(" # value # "))";
  let parser = "::mlir::flexsn::parseSurrogateParam($_parser)";
  let printer = "::mlir::flexsn::printSurrogateParam($_printer, $_self)";
}

// An integer surrogate parameter in [lo, hi], with a default.
class SurrogateIntParam<string value, int lo, int hi, string desc>
    : DefaultValuedParameter<"int64_t", value,
                             desc # " (default " # value # ")">,
      SurrogateParamSpec<1, value, SurrogateInterval, lo, hi, desc>;

// The text of a parameter's constraint: "alpha > 0", "1 <= n <= 64".
class SurrogateParamConstraint<string name, SurrogateParamSpec spec> {
  string text = !if(spec.isInteger,
      !cast<string>(spec.minimum) # " <= " # name # " <= "
          # !cast<string>(spec.maximum),
      name # spec.paramRange.doc);
}

// One surrogate: its parameters, its g(x) (for the docs), and the templates
// of SurrogateFormulas.h that compute it (`formula` names them:
// `<formula>Grad` and `<formula>Primitive`). Everything else is generated:
// the verifier, evaluation and IR emission, the docs, and the Python
// layer's class (`pyName`, SpikingJelly's name, with `pyAliases`
// accepted by `flexsn.surrogate.by_name`).
class FlexSN_Surrogate<string name, string attrMnemonic, dag params,
                       string gFormula, string formula,
                       string pyName = name, list<string> pyAliases = []>
    : FlexSN_Attr<name, attrMnemonic,
                  [DeclareAttrInterfaceMethods<FlexSN_SurrogateAttrInterface>]> {
  list<int> indices = !range(!size(params));
  list<string> paramNames = !foreach(i, indices, !getdagname(params, i));
  list<SurrogateParamSpec> paramSpecs =
      !foreach(i, indices, !getdagarg<SurrogateParamSpec>(params, i));
  string rangeDoc = !if(!empty(params), "none", !interleave(!foreach(i, indices,
      SurrogateParamConstraint<!getdagname(params, i),
          !getdagarg<SurrogateParamSpec>(params, i)>.text), ", "));

  let summary = "Surrogate gradient `" # attrMnemonic # "`: g(x) = " # gFormula;
  let description = "Backward of `flexsn.spike` multiplies the incoming "
      # "gradient by `g(x) = " # gFormula # "`.\n\nParameter constraints: "
      # rangeDoc # ". Omitted parameters take their defaults, and the "
      # "whole `<...>` may be omitted:\n\n```mlir\n#flexsn." # attrMnemonic
      # "\n```";
  let parameters = params;
  // A surrogate without parameters parses itself, to reject a stray `<...>`.
  let assemblyFormat = !if(!empty(params), ?, "(`<` struct(params)^ `>`)?");
  let hasCustomAssemblyFormat = !empty(params);
  let genVerifyDecl = !not(!empty(params));

  // The parameters as the formulas take them (double or int64_t), read from
  // the storage, after `x`.
  string formulaArgs = !foldl("", paramNames, acc, p,
      acc # ", ::mlir::flexsn::surrogate::toScalar(getImpl()->" # p # ")");
  string specEntries = !interleave(!foreach(i, indices,
      "{\"" # !getdagname(params, i) # "\", "
      # !if(paramSpecs[i].isInteger, "true", "false") # ", "
      # paramSpecs[i].defaultText # ", "
      # "::mlir::flexsn::SurrogateParamRange::" # paramSpecs[i].paramRange.range
      # ", " # !cast<string>(paramSpecs[i].minimum)
      # ", " # !cast<string>(paramSpecs[i].maximum)
      # ", \"" # paramSpecs[i].descriptionText # "\"}"), ",\n      ");
  string aliasEntries = !interleave(!foreach(a, pyAliases, "\"" # a # "\""),
                                    ", ");

  let extraClassDeclaration = [{
    /// The parameters, in the attribute's order, as ODS declares them.
    static ::llvm::ArrayRef<::mlir::flexsn::SurrogateParamSpec> getParamSpecs();
    /// The Python (SpikingJelly) class name, and the other names the
    /// Python layer looks this surrogate up by.
    static ::llvm::StringRef getPythonName() { return "}] # pyName # [{"; }
    /// The attribute's name in ODS (its C++ class without `Attr`).
    static ::llvm::StringRef getSurrogateName() { return "}] # name # [{"; }
    static ::llvm::ArrayRef<::llvm::StringRef> getPythonAliases();
    /// g(x) as the docs write it.
    static ::llvm::StringRef getFormulaText() { return "}] # gFormula # [{"; }
    /// g(x) over any scalar type `V` (SurrogateFormulas.h's contract), with
    /// the parameters as values of any type `P` (in the attribute's order):
    /// how tools print the formula in another language.
    template <typename V, typename P>
    static V derivativeOf(V x, ::llvm::ArrayRef<P> params) {
      (void)params;
      return ::mlir::flexsn::surrogate::}] # formula # [{Grad(x}]
      # !foldl("", indices, acc, i, acc # ", params[" # !cast<string>(i) # "]")
      # [{);
    }
  }];
  let extraClassDefinition = [{
    ::llvm::ArrayRef<::mlir::flexsn::SurrogateParamSpec>
    $cppClass::getParamSpecs() {
  }] # !if(!empty(params), "  return {};", [{
      static const ::mlir::flexsn::SurrogateParamSpec specs[] = {
      }] # specEntries # [{};
      return specs;
  }]) # [{
    }
    ::llvm::ArrayRef<::llvm::StringRef> $cppClass::getPythonAliases() {
  }] # !if(!empty(pyAliases), "  return {};", [{
      static const ::llvm::StringRef aliases[] = {}] # aliasEntries # [{};
      return aliases;
  }]) # [{
    }
    double $cppClass::evalDerivative(double x) const {
      return ::mlir::flexsn::surrogate::}] # formula # [{Grad(x}]
      # formulaArgs # [{);
    }
    double $cppClass::evalPrimitive(double x) const {
      return ::mlir::flexsn::surrogate::}] # formula # [{Primitive(x}]
      # formulaArgs # [{);
    }
    ::mlir::Value $cppClass::buildDerivative(::mlir::OpBuilder &builder,
                                             ::mlir::Location loc,
                                             ::mlir::Value x) const {
      return ::mlir::flexsn::surrogate::}] # formula # [{Grad(
          ::mlir::flexsn::surrogate::IRScalar{&builder, loc, x} }]
      # formulaArgs # [{).value;
    }
  }] # !if(!empty(params), "", [{
    ::llvm::LogicalResult $cppClass::verify(
        ::llvm::function_ref<::mlir::InFlightDiagnostic()> emitError}]
      # !foldl("", indices, acc, i, acc # ", "
               # !getdagarg<AttrOrTypeParameter>(params, i).cppType # " "
               # !getdagname(params, i)) # [{) {
      return ::mlir::flexsn::verifySurrogateParams(emitError, getMnemonic(),
          getParamSpecs(), {}] # !interleave(!foreach(p, paramNames,
              "double(::mlir::flexsn::surrogate::toScalar(" # p # "))"), ", ")
      # [{});
    }
  }]);
}

def FlexSN_SigmoidAttr : FlexSN_Surrogate<"Sigmoid", "sigmoid",
    (ins SurrogateParam<"4.0", "steepness">:$alpha),
    "a·σ(ax)·(1−σ(ax))", "sigmoid">;

def FlexSN_ATanAttr : FlexSN_Surrogate<"ATan", "atan",
    (ins SurrogateParam<"2.0", "steepness">:$alpha),
    "(a/2) / (1 + (π/2·a·x)²)", "atan">;

def FlexSN_PiecewiseQuadraticAttr : FlexSN_Surrogate<"PiecewiseQuadratic",
    "piecewise_quadratic",
    (ins SurrogateParam<"1.0", "inverse half-width">:$alpha),
    "max(0, a − a²·|x|)", "piecewiseQuadratic">;

def FlexSN_PiecewiseExpAttr : FlexSN_Surrogate<"PiecewiseExp", "piecewise_exp",
    (ins SurrogateParam<"1.0", "decay rate">:$alpha),
    "(a/2)·exp(−a·|x|)", "piecewiseExp">;

def FlexSN_SoftSignAttr : FlexSN_Surrogate<"SoftSign", "soft_sign",
    (ins SurrogateParam<"2.0", "steepness">:$alpha),
    "1 / (2a·(1/a + |x|)²)", "softSign">;

def FlexSN_SuperSpikeAttr : FlexSN_Surrogate<"SuperSpike", "super_spike",
    (ins SurrogateParam<"1.0", "scale">:$alpha),
    "a / (|x| + 1)²", "superSpike">;

def FlexSN_ErfAttr : FlexSN_Surrogate<"Erf", "erf",
    (ins SurrogateParam<"2.0", "steepness">:$alpha),
    "(a/√π)·exp(−(ax)²)", "erf">;

def FlexSN_NonzeroSignLogAbsAttr : FlexSN_Surrogate<"NonzeroSignLogAbs",
    "nonzero_sign_log_abs",
    (ins SurrogateParam<"1.0", "steepness">:$alpha),
    "1 / (1/a + |x|)", "nonzeroSignLogAbs">;

def FlexSN_PiecewiseLeakyReLUAttr : FlexSN_Surrogate<"PiecewiseLeakyReLU",
    "piecewise_leaky_relu",
    (ins SurrogateParam<"1.0", "half-width of the linear region">:$w,
         SurrogateParam<"0.01", "slope outside it", SurrogateFinite>:$c),
    "1/(2w) if |x| < w else c", "piecewiseLeakyReLU">;

// Beyond 64 terms the unrolled series stops being a sensible kernel.
def FlexSN_SquarewaveFourierSeriesAttr : FlexSN_Surrogate<
    "SquarewaveFourierSeries", "squarewave_fourier_series",
    (ins SurrogateIntParam<"2", 1, 64, "number of Fourier terms plus one">:$n,
         SurrogateParam<"8.0", "period">:$T_period),
    "(4/T)·Σ_{i=1}^{n−1} cos((2i−1)·(2π/T)·x)", "squarewaveFourierSeries">;

def FlexSN_S2NNAttr : FlexSN_Surrogate<"S2NN", "s2nn",
    (ins SurrogateParam<"4.0", "sigmoid steepness for x < 0">:$alpha,
         SurrogateParam<"1.0", "scale of the 1/(x+1) tail for x >= 0">:$beta),
    "a·σ(ax)(1−σ(ax)) if x < 0 else β/(x+1)", "s2nn">;

def FlexSN_QPseudoSpikeAttr : FlexSN_Surrogate<"QPseudoSpike", "q_pseudo_spike",
    (ins SurrogateParam<"2.0", "tail factor", SurrogateAboveOne>:$alpha),
    "(1 + 2·|x|/(a−1))^(−a)", "qPseudoSpike">;

def FlexSN_LeakyKReLUAttr : FlexSN_Surrogate<"LeakyKReLU", "leaky_k_relu",
    (ins SurrogateParam<"0.0", "slope for x < 0", SurrogateFinite>:$leak,
         SurrogateParam<"1.0", "slope for x >= 0", SurrogateFinite>:$k),
    "k if x >= 0 else leak", "leakyKReLU">;

def FlexSN_FakeNumericalGradientAttr : FlexSN_Surrogate<
    "FakeNumericalGradient", "fake_numerical_gradient",
    (ins SurrogateParam<"0.3", "upper bound">:$alpha),
    "min((2H(x)−1)/x, a), and a at x = 0", "fakeNumericalGradient">;

def FlexSN_LogTailedReLUAttr : FlexSN_Surrogate<"LogTailedReLU",
    "log_tailed_relu",
    (ins SurrogateParam<"0.0", "slope for x <= 0", SurrogateFinite>:$alpha),
    "a if x <= 0; 1 if 0 < x <= 1; 1/x if x > 1", "logTailedReLU">;

def FlexSN_RectAttr : FlexSN_Surrogate<"Rect", "rect",
    (ins SurrogateParam<"1.0", "height; the window is |x| < 0.5/a">:$alpha),
    "a if |x| < 0.5/a else 0", "rect">;

// Not in SpikingJelly: the multi-Gaussian of Yin, Corradi and Bohté,
// "Accurate and efficient time-domain classification with adaptive spiking
// recurrent neural networks" (Nature Machine Intelligence, 2021).
def FlexSN_MultiGaussianAttr : FlexSN_Surrogate<"MultiGaussian",
    "multi_gaussian",
    (ins SurrogateParam<"0.5", "width of the central Gaussian">:$sigma,
         SurrogateParam<"0.15", "weight of the side lobes", SurrogateFinite>:$h,
         SurrogateParam<"6.0", "width of the side lobes, in sigma">:$s),
    "(1+h)·N(x; 0, σ) − h·N(x; σ, sσ) − h·N(x; −σ, sσ)", "multiGaussian">;

// SpikingJelly calls the straight-through estimator `DeterministicPass`.
def FlexSN_StraightThroughAttr : FlexSN_Surrogate<"StraightThrough",
    "straight_through", (ins), "1", "straightThrough", "DeterministicPass",
    ["deterministic_pass"]>;

//===----------------------------------------------------------------------===//
// Kernel signatures
//===----------------------------------------------------------------------===//

def FlexSN_KernelVariant : I32EnumAttr<"KernelVariant",
    "what a generated kernel computes", [
    I32EnumAttrCase<"Inference", 0, "inference">,
    I32EnumAttrCase<"FinalState", 1, "final-state">,
    I32EnumAttrCase<"Forward", 2, "forward">,
    I32EnumAttrCase<"Backward", 3, "backward">
  ]> {
  let cppNamespace = "::mlir::flexsn";
  let genSpecializedAttr = 0;
  let description = [{
    * `inference`: outputs (and, optionally, state sequences) over T steps;
    * `final-state`: outputs and the states after the last step only;
    * `forward`: a training forward, which also saves what the backward
      reads (the workspace);
    * `backward`: the reverse scan giving input, initial-state and
      trainable-parameter gradients.

    Kernel generation makes the first two, `flexsn-autodiff` the others. The
    spelling is the one of pass options, kernel names (with `_` for `-`),
    the manifest and the Python layer.
  }];
}

def FlexSN_StorageType : I32EnumAttr<"StorageType",
    "the element type a kernel stores its sequences in", [
    I32EnumAttrCase<"F32", 0, "f32">,
    I32EnumAttrCase<"F16", 1, "f16">,
    I32EnumAttrCase<"BF16", 2, "bf16">
  ]> {
  let cppNamespace = "::mlir::flexsn";
  let genSpecializedAttr = 0;
  let description = [{
    Bodies compute in `f32`; a kernel converts at the scan boundary.
    Parameter values and gradients are `f32` whatever the storage; saved
    training values are `f32` too unless the kernel saves them in its storage
    type (`flexsn-autodiff`'s `save-in-storage-type`).
  }];
}

def FlexSN_SpikeStorage : I32EnumAttr<"SpikeStorage",
    "how a kernel stores its spike outputs", [
    I32EnumAttrCase<"Dense", 0, "dense">,
    I32EnumAttrCase<"U8", 1, "u8">,
    I32EnumAttrCase<"Bits", 2, "bits">
  ]> {
  let cppNamespace = "::mlir::flexsn";
  let genSpecializedAttr = 0;
  let description = [{
    A spike output is a neuron output that is always 0 or 1: a
    `flexsn.spike` result (possibly detached, or a spike output of an
    applied neuron).

    * `dense`: spike outputs are sequences of the storage type, like every
      other output;
    * `u8`: spike outputs are sequences of bytes (`i8` buffers, read as
      unsigned: 0 or 1), a quarter of the f32 traffic;
    * `bits`: spike outputs are bit-packed (`i1` buffers, in the layout
      `#flexsn.buffer` documents), 8 neurons per byte: a thirty-second of
      the f32 traffic.

    `u8` and `bits` make inference and final-state kernels only: a training
    forward's outputs carry gradients.
  }];
}

/// The enums whose cases pass and pipeline options take: flexsn-tblgen
/// -gen-enum-option-parsers writes each one's command-line parser
/// (EnumOptions.h), which accepts exactly its spellings.
class FlexSN_OptionEnums<list<EnumAttrInfo> enums_> {
  list<EnumAttrInfo> enums = enums_;
}
def : FlexSN_OptionEnums<[FlexSN_KernelVariant, FlexSN_StorageType,
                          FlexSN_SpikeStorage]>;

//===----------------------------------------------------------------------===//
// Blocks
//===----------------------------------------------------------------------===//

def FlexSN_BlockPre : I32EnumAttr<"BlockPre",
    "the op a block applies to its input before the neuron", [
    I32EnumAttrCase<"None", 0, "none">,
    I32EnumAttrCase<"Affine", 1, "affine">,
    I32EnumAttrCase<"ChannelAffine", 2, "channel_affine">,
    I32EnumAttrCase<"Add", 3, "add">,
    I32EnumAttrCase<"AffineAdd", 4, "affine_add">,
    I32EnumAttrCase<"ChannelAffineAdd", 5, "channel_affine_add">
  ]> {
  let cppNamespace = "::mlir::flexsn";
  let genSpecializedAttr = 0;
  let description = [{
    * `none`: the neuron reads the block's input;
    * `affine`: `x·scale + shift`, with trainable scalars `scale` and `shift`
      (batch norm's apply step, folded to one scale and shift);
    * `channel_affine`: the same with `[C]` values, one per channel: the
      block's sequences are then `[T, B, C, S]`;
    * `add`, `affine_add`, `channel_affine_add`: `none`, `affine` or
      `channel_affine`, plus a second input `skip` of x's shape
      (Spiking-ResNet's `bn(x) + identity` before its neuron).
  }];
}

def FlexSN_BlockConnection : I32EnumAttr<"BlockConnection",
    "how a block joins its neuron's output s and its input x", [
    I32EnumAttrCase<"None", 0, "none">,
    I32EnumAttrCase<"Add", 1, "add">,
    I32EnumAttrCase<"And", 2, "and">,
    I32EnumAttrCase<"IAnd", 3, "iand">
  ]> {
  let cppNamespace = "::mlir::flexsn";
  let genSpecializedAttr = 0;
  let description = [{
    SEW-ResNet's connect functions of the neuron's output s and the
    connection's operand x (the block's input or `skip`): `add` (s + x),
    `and` (s·x), `iand` ((1 − s)·x); `none` returns s.
  }];
}

def FlexSN_BlockConnectionOperand : I32EnumAttr<"BlockConnectionOperand",
    "the second operand of a block's connection", [
    I32EnumAttrCase<"Input", 0, "input">,
    I32EnumAttrCase<"Skip", 1, "skip">
  ]> {
  let cppNamespace = "::mlir::flexsn";
  let genSpecializedAttr = 0;
  let description = [{
    * `input`: the block's input x (before the pre-op);
    * `skip`: a second input sequence `skip` of the output's shape, e.g.
      SEW-ResNet's identity path or its downsampled identity.
  }];
}

def FlexSN_BlockReadout : I32EnumAttr<"BlockReadout",
    "what a block returns of its output sequence", [
    I32EnumAttrCase<"None", 0, "none">,
    I32EnumAttrCase<"Sum", 1, "sum">
  ]> {
  let cppNamespace = "::mlir::flexsn";
  let genSpecializedAttr = 0;
  let description = [{
    * `none`: the sequence;
    * `sum`: its sum over time per neuron (a spike count without a
      connection); the sequence itself is never stored.
  }];
}

// The values are those of `flexsn_buffer_kind` in flexsn_runtime.h (a unit
// test checks it): the header emitter names the runtime's constants after
// these cases.
def FlexSN_BufferRole : I32EnumAttr<"BufferRole",
    "what a kernel does with one of its buffers", [
    I32EnumAttrCase<"InputSequence", 0, "input_sequence">,
    I32EnumAttrCase<"InitialState", 1, "initial_state">,
    I32EnumAttrCase<"OutputSequence", 2, "output_sequence">,
    I32EnumAttrCase<"StateSequence", 3, "state_sequence">,
    I32EnumAttrCase<"FinalState", 4, "final_state">,
    I32EnumAttrCase<"OptionalInputSequence", 5, "optional_input_sequence">,
    I32EnumAttrCase<"SavedOutput", 6, "saved_output">,
    I32EnumAttrCase<"SavedInput", 7, "saved_input">,
    I32EnumAttrCase<"ParamGradient", 8, "param_gradient">,
    I32EnumAttrCase<"ReductionScratch", 9, "reduction_scratch">,
    I32EnumAttrCase<"PerNeuronParam", 10, "per_neuron_param">,
    I32EnumAttrCase<"PerNeuronParamGradient", 11, "per_neuron_param_gradient">,
    I32EnumAttrCase<"PerChannelParam", 12, "per_channel_param">,
    I32EnumAttrCase<"PerChannelParamGradient", 13, "per_channel_param_gradient">,
    I32EnumAttrCase<"CouplingWeights", 14, "coupling_weights">
  ]> {
  let cppNamespace = "::mlir::flexsn";
  let genSpecializedAttr = 0;
  let description = [{
    * `input_sequence`: read, required;
    * `optional_input_sequence`: read, absent (null) reads as zeros (the
      incoming gradients of a backward kernel);
    * `initial_state`: read, absent reads as zeros;
    * `output_sequence`, `state_sequence`, `final_state`: written, absent is
      not written;
    * `saved_output`, `saved_input`: the training workspace, written by the
      forward kernel and read by the backward kernel, required; `f32` or the
      kernel's storage type;
    * `param_gradient`: one `f32`, zeroed then accumulated, required;
    * `reduction_scratch`: the deterministic reduction scratch, required
      (GPU only: the lowering adds it);
    * `per_neuron_param`: the `f32` values of a `per_neuron` parameter, read,
      required;
    * `per_neuron_param_gradient`: the `f32` gradient of a trainable
      `per_neuron` parameter (its sum over time steps), written, required;
    * `per_channel_param`: the `f32` values of a `per_channel` parameter,
      read, required;
    * `per_channel_param_gradient`: the `f32` gradient of a trainable
      `per_channel` parameter (its sum over time steps and the channel's
      neurons), zeroed then accumulated, required;
    * `coupling_weights`: the `f32` `[H, H]` matrix of a coupled (recurrent)
      kernel, read, required (see `#flexsn.kernel`'s coupling).

    The role implies the shape class: `per_neuron` for initial and final
    states and the per-neuron parameters' buffers, `per_channel` for the
    per-channel ones, `scalar` for parameter gradients, `scratch` for the
    scratch, `matrix` for coupling weights, `sequence` for the others.
  }];
}

def FlexSN_BufferShape : I32EnumAttr<"BufferShape",
    "the shape class of a kernel buffer", [
    I32EnumAttrCase<"Sequence", 0, "sequence">,
    I32EnumAttrCase<"PerNeuron", 1, "per_neuron">,
    I32EnumAttrCase<"Scalar", 2, "scalar">,
    I32EnumAttrCase<"Scratch", 3, "scratch">,
    I32EnumAttrCase<"PerChannel", 4, "per_channel">,
    I32EnumAttrCase<"Matrix", 5, "matrix">
  ]> {
  let cppNamespace = "::mlir::flexsn";
  let genSpecializedAttr = 0;
  let description = [{
    * `sequence`: `[T, N]` with time stride `ld` (a rank-2 memref);
    * `per_neuron`: `[N]` (rank 1);
    * `per_channel`: `[C]` (rank 1). A kernel with per-channel buffers sees
      its `N` neurons as `[B, C, S]`, so its function takes sequences as
      `[T, B, C, S]` memrefs (rank 4) and per-neuron buffers as `[B, C, S]`
      (rank 3); neuron `n` is in channel `(n / S) mod C`;
    * `scalar`: one element (rank 0);
    * `scratch`: the deterministic reduction scratch, `4 + 4·P·⌈N/256⌉`
      bytes for `P` reduction slots;
    * `matrix`: `[H, H]`, row-major and contiguous (rank 2), `H` the
      neurons of one sample of a coupled kernel.
  }];
}

def FlexSN_BoundValue : I32EnumAttr<"BoundValue",
    "the value of the neuron (or block) a kernel buffer holds", [
    I32EnumAttrCase<"Input", 0, "input">,
    I32EnumAttrCase<"StateInit", 1, "state_init">,
    I32EnumAttrCase<"StateSeq", 2, "state_seq">,
    I32EnumAttrCase<"StateFinal", 3, "state_final">,
    I32EnumAttrCase<"Output", 4, "output">,
    I32EnumAttrCase<"Param", 5, "param">,
    I32EnumAttrCase<"Saved", 6, "saved">,
    I32EnumAttrCase<"Scratch", 7, "scratch">,
    I32EnumAttrCase<"Coupling", 8, "coupling">
  ]> {
  let cppNamespace = "::mlir::flexsn";
  let genSpecializedAttr = 0;
  let description = [{
    * `input`, `output`: the sequence of input or output `k` of the neuron
      (or block), in its declaration order;
    * `state_init`, `state_seq`, `state_final`: state `k` before the first
      step, after every step, or after the last step;
    * `param`: a parameter, by name;
    * `saved`: slot `k` of the training workspace (what a forward kernel
      saves for the backward);
    * `scratch`: the deterministic reduction scratch;
    * `coupling`: the coupling weights of a coupled kernel.

    Each but `saved`, `scratch` and `coupling` may be taken as a gradient:
    the gradient of the loss with respect to that value (the coupling
    weights' gradient is a matrix product the caller computes).
  }];
}

def FlexSN_BindingAttr : FlexSN_Attr<"Binding", "binds"> {
  let summary = "What a kernel buffer holds";
  let description = [{
    A buffer's binding says which value it holds, so that a caller matches
    buffers to its tensors by meaning, never by name, suffix or position:
    input `k`, state `k` (initial, every step, or final), output `k`, a
    parameter (its name and shape), the gradient of one of these, a saved
    workspace slot or the reduction scratch. The buffer's role (what the
    kernel does with it) follows from its binding and the kernel's variant;
    `flexsn-to-manifest` exports both.

    ```mlir
    #flexsn.binds<input 0>
    #flexsn.binds<state_seq 1>
    #flexsn.binds<grad state_final 0>
    #flexsn.binds<grad param "w" per_channel>
    #flexsn.binds<saved 2>
    #flexsn.binds<scratch>
    #flexsn.binds<coupling>
    ```

    Inside `#flexsn.buffer`, the binding is written without `#flexsn.binds<`
    and `>`.
  }];
  let parameters = (ins
      "::mlir::flexsn::BoundValue":$value,
      DefaultValuedParameter<"int64_t", "0", "which input, state, output "
                             "or workspace slot">:$index,
      DefaultValuedParameter<"::mlir::StringAttr", "::mlir::StringAttr()",
                             "the parameter's name">:$param,
      DefaultValuedParameter<"::mlir::flexsn::ParamShape",
                             "::mlir::flexsn::ParamShape::Scalar",
                             "the parameter's shape">:$param_shape,
      DefaultValuedParameter<"bool", "false",
                             "the gradient of the value">:$gradient);
  let hasCustomAssemblyFormat = 1;
  let genVerifyDecl = 1;
  let builders = [
    // Input, state, output or workspace slot `index`.
    AttrBuilder<(ins "::mlir::flexsn::BoundValue":$value, "int64_t":$index), [{
      return $_get($_ctxt, value, index, ::mlir::StringAttr(),
                   ::mlir::flexsn::ParamShape::Scalar, false);
    }]>
  ];
  let extraClassDeclaration = [{
    /// The parameter `param`.
    static BindingAttr getParam(::mlir::flexsn::ParamAttr param);
    /// The gradient of this value.
    BindingAttr getGradientBinding() const;
    /// Prints and parses the binding without `<` and `>` (the form a
    /// `#flexsn.buffer` holds).
    void printBody(::mlir::AsmPrinter &printer) const;
    static BindingAttr parseBody(::mlir::AsmParser &parser);
  }];
}

def FlexSN_KernelBufferAttr : FlexSN_Attr<"KernelBuffer", "buffer"> {
  let summary = "One buffer of a kernel: its name, role, element type, shape "
                "and binding";
  let description = [{
    The name is a C identifier, exported as the argument name of the header
    stub and in the manifest; the element type is that of the memref the
    kernel function takes (`f32`, `f16` or `bf16`; for the spike outputs of
    a kernel storing spikes compactly, an `output_sequence`, `i8` for bytes
    (read as unsigned: 0 or 1) and `i1` for bits). An `i1` buffer packs 8
    neurons per byte: the spike of neuron `n` at step `t` is bit `n mod 8`
    (least significant first) of byte `t * ceil(ld / 8) + n / 8`; each step
    starts a new byte, and the bits past `N` in a row's last byte are zero
    (with `ld = N`, `numpy.packbits(spikes, axis=-1, bitorder="little")` of
    the `[T, N]` spikes). The last field is
    what the buffer holds (`#flexsn.binds`, written without its brackets),
    which must suit its role: an `input_sequence` holds an input, a backward
    kernel's `output_sequence` the gradient of an input, and so on.

    Kernel generation, `flexsn-autodiff` and the GPU lowering make every
    buffer with one builder (`getKernelBuffer`), which gives the role, the
    shape class and the name from the binding: `x`, `v_init`, `v_seq`,
    `v_final`, `spike`, `tau`, `saved0`, `reduction_scratch`, and `_grad`
    after the name of the value a gradient is of.

    ```mlir
    #flexsn.buffer<"v_seq", state_sequence, f16, sequence, state_seq 0>
    #flexsn.buffer<"x_grad", output_sequence, f32, sequence, grad input 0>
    ```
  }];
  let parameters = (ins "::mlir::StringAttr":$name,
                        "::mlir::flexsn::BufferRole":$role,
                        "::mlir::Type":$elementType,
                        "::mlir::flexsn::BufferShape":$shape,
                        "::mlir::flexsn::BindingAttr":$binds);
  let assemblyFormat = [{
    `<` $name `,` $role `,` $elementType `,` $shape `,` custom<BindingBody>($binds) `>`
  }];
  let genVerifyDecl = 1;
  let extraClassDeclaration = [{
    /// The same buffer with another role and shape class (the GPU lowering
    /// turns per-channel gradients into per-neuron sums).
    KernelBufferAttr withRole(BufferRole role) const;
  }];
}

// A list of attributes of one kind, spelled `[<...>, <...>]` (each element
// in its short form; `[]` when empty).
class BracketedAttrListParameter<string attrOf, string desc>
    : OptionalArrayRefParameter<attrOf, desc> {
  let parser = "::mlir::flexsn::parseBracketedAttrList<" # attrOf # ">($_parser)";
  let printer = "::mlir::flexsn::printBracketedAttrList($_printer, $_self)";
}

def FlexSN_KernelSignatureAttr : FlexSN_Attr<"KernelSignature", "kernel"> {
  let summary = "The typed signature of one kernel function";
  let description = [{
    Kernel generation and `flexsn-autodiff` attach this attribute, as
    `flexsn.kernel`, to every kernel function they build; it is the one
    description of the kernel that both lowerings, the header emitter, the
    manifest and the runtime read. It names the neuron (empty for a kernel
    written by hand), the variant and the storage type, and lists the
    kernel function's arguments in order: its buffers (one memref argument
    each), then its runtime parameters (one scalar argument each).

    The training workspace is `workspace_sequences` sequences (the
    `saved_output` buffers of a forward kernel, the `saved_input` buffers of
    a backward kernel, each `f32` or of the storage type), followed on the
    GPU by the deterministic reduction scratch of `reduction_slots`
    gradients (the neuron's trainable parameters: a forward kernel counts
    them too, so that every training kernel of a neuron needs the same
    workspace). `getWorkspaceLayout` says where each part lies.

    `options` holds the compile options, by their request names, that made
    this kernel differ from its variant's default kernel (left out: none),
    for example `options = {spike_storage = "u8"}`. Callers select kernels
    by them: the manifest writes them as the kernel's `options`, and no
    reader names one. Spike outputs stored compactly are `i8` (a byte per
    spike) or `i1` (bit-packed) buffers, in inference and final-state
    kernels only.

    **Coupling.** `coupled_input = i, coupled_output = o` make a coupled
    (recurrent) kernel, with one `coupling_weights` buffer `M` (`[H, H]`):
    its `N` neurons are `B = N / H` samples of `H` neurons (neuron
    `n = b·H + j`), coupled within a sample from one step to the next. In
    a kernel of any variant but `backward`, input `i` of neuron `(b, j)` at
    step `t` is the input sequence's value plus
    `Σ_k M[k, j] · y[t − 1, b·H + k]`, where `y` is output `o` (zero before
    the first step): `s[t] = f(x[t] + W s[t − 1])` with `M = Wᵀ`. A
    `backward` kernel runs the adjoint: the incoming gradient of output `o`
    at step `t` gains `Σ_k M[k, j] · g[t + 1, b·H + k]`, where `g` is the
    gradient of input `i` the kernel writes (zero after the last step); for
    `s[t] = f(x[t] + W s[t − 1])` it takes `M = W`. The kernel's buffers and
    scan are those of the uncoupled kernel; the coupling weights' gradient
    (`Σ_t gᵀ y[t − 1]`) is the caller's matrix product, and a backward
    kernel that reads input `i` reads the input the forward stepped on
    (`x[t] + Σ_k M_f[k, j] y[t − 1, k]`, which the caller rebuilds from
    the outputs). A coupled kernel has no per-channel buffers and no
    `options`.

    ```mlir
    func.func @lif_inference_f32(%x: memref<?x?xf32>, %v0: memref<?xf32>,
                                 %s: memref<?x?xf32>, %v: memref<?x?xf32>)
        attributes {flexsn.kernel = #flexsn.kernel<"lif", inference, f32,
          buffers = [#flexsn.buffer<"x", input_sequence, f32, sequence, input 0>,
                     #flexsn.buffer<"v_init", initial_state, f32, per_neuron, state_init 0>,
                     #flexsn.buffer<"spike", output_sequence, f32, sequence, output 0>,
                     #flexsn.buffer<"v_seq", state_sequence, f32, sequence, state_seq 0>]>}
    ```
  }];
  let parameters = (ins
      "::mlir::StringAttr":$neuron,
      "::mlir::flexsn::KernelVariant":$variant,
      "::mlir::flexsn::StorageType":$storage,
      BracketedAttrListParameter<"::mlir::flexsn::KernelBufferAttr",
                                 "buffers">:$buffers,
      BracketedAttrListParameter<"::mlir::flexsn::ParamAttr",
                                 "runtime parameters">:$params,
      DefaultValuedParameter<"int64_t", "0",
                             "saved sequences">:$workspace_sequences,
      DefaultValuedParameter<"int64_t", "0",
                             "gradients in the reduction scratch">:$reduction_slots,
      OptionalParameter<"::mlir::DictionaryAttr",
                        "the options that chose the kernel">:$options,
      DefaultValuedParameter<"int64_t", "-1",
                             "the coupled input (-1: none)">:$coupled_input,
      DefaultValuedParameter<"int64_t", "-1",
                             "the output feeding it (-1: none)">:$coupled_output);
  let assemblyFormat = [{
    `<` $neuron `,` $variant `,` $storage `,`
    struct($buffers, $params, $workspace_sequences, $reduction_slots,
           $options, $coupled_input, $coupled_output) `>`
  }];
  let builders = [
    // An uncoupled kernel.
    AttrBuilder<(ins "::mlir::StringAttr":$neuron,
                     "::mlir::flexsn::KernelVariant":$variant,
                     "::mlir::flexsn::StorageType":$storage,
                     "::llvm::ArrayRef<::mlir::flexsn::KernelBufferAttr>":$buffers,
                     "::llvm::ArrayRef<::mlir::flexsn::ParamAttr>":$params,
                     "int64_t":$workspace_sequences,
                     "int64_t":$reduction_slots,
                     CArg<"::mlir::DictionaryAttr", "{}">:$options), [{
      return $_get($_ctxt, neuron, variant, storage, buffers, params,
                   workspace_sequences, reduction_slots, options, -1, -1);
    }]>
  ];
  let genVerifyDecl = 1;
  let extraClassDeclaration = [{
    /// The name of the attribute holding it on a kernel function.
    static ::llvm::StringRef getAttrName() { return "flexsn.kernel"; }
    /// The element type sequences are stored in.
    ::mlir::Type getStorageType() const;
    /// Whether the kernel belongs to training (forward or backward).
    bool isTraining() const {
      return getVariant() == KernelVariant::Forward ||
             getVariant() == KernelVariant::Backward;
    }
    /// How many buffers have `role`.
    unsigned count(BufferRole role) const;
    /// Whether a buffer is per channel: the kernel then sees its neurons as
    /// `[B, C, S]` (sequences `[T, B, C, S]`).
    bool hasChannels() const;
    /// The same signature with one more buffer at the end.
    KernelSignatureAttr withBuffer(KernelBufferAttr buffer) const;
    /// The same signature with `buffers` in place of its own.
    KernelSignatureAttr
    withBuffers(::llvm::ArrayRef<KernelBufferAttr> buffers) const;
    /// Whether the kernel is coupled (a coupling_weights buffer, and
    /// coupled_input / coupled_output set).
    bool isCoupled() const { return getCoupledInput() >= 0; }
    /// The same signature coupled from output `output` into input `input`
    /// through a new coupling_weights buffer `weightsName`, appended to the
    /// buffers.
    KernelSignatureAttr withCoupling(int64_t input, int64_t output,
                                     ::llvm::StringRef weightsName) const;
    /// The bindings of the coupled values: (the input the coupling adds to,
    /// the output it reads at the previous step) as the kernel's buffers
    /// bind them (gradients in a backward kernel).
    std::pair<BindingAttr, BindingAttr> getCouplingBindings() const;
  }];
}

def FlexSN_CompiledKernelAttr : FlexSN_Attr<"CompiledKernel",
                                            "compiled_kernel"> {
  let summary = "A kernel as a lowering emitted it";
  let description = [{
    The lowerings list the kernels they emit on the module, in
    `flexsn.cpu_kernels` and `flexsn.gpu_kernels`: the kernel's name,
    its signature and, on the GPU, the vector kernel's neurons per thread
    and its two entry points: the vector kernel and the scalar kernel that
    takes the neurons a vector kernel cannot (`<name>_vec` and
    `<name>_scalar`). A CPU kernel's entry point is its name. A
    deterministic GPU kernel ends with a `reduction_scratch` buffer and its
    name with `_deterministic`. The GPU lowering names entry points here,
    once; the emitters and the manifest read them.

    ```mlir
    #flexsn.compiled_kernel<"plif_backward_f32_deterministic",
                            #flexsn.kernel<...>, vector_width = 4,
                            deterministic = true,
                            vector_entry = "plif_backward_f32_deterministic_vec",
                            scalar_entry = "plif_backward_f32_deterministic_scalar">
    ```
  }];
  let parameters = (ins
      "::mlir::StringAttr":$name,
      "::mlir::flexsn::KernelSignatureAttr":$signature,
      DefaultValuedParameter<"int64_t", "0",
                             "neurons per thread; 0 for a CPU kernel">:$vector_width,
      DefaultValuedParameter<"bool", "false",
                             "parameter gradients summed in a fixed order">:$deterministic,
      DefaultValuedParameter<"::mlir::StringAttr", "::mlir::StringAttr()",
                             "the GPU vector kernel's entry point">:$vector_entry,
      DefaultValuedParameter<"::mlir::StringAttr", "::mlir::StringAttr()",
                             "the GPU scalar kernel's entry point">:$scalar_entry);
  let assemblyFormat = [{
    `<` $name `,` $signature (`,` struct($vector_width, $deterministic,
                                         $vector_entry, $scalar_entry)^)? `>`
  }];
  let genVerifyDecl = 1;
  let extraClassDeclaration = [{
    bool isGPU() const { return getVectorWidth() > 0; }
    /// Reduction slots of the workspace: the CPU sums in order and has no
    /// scratch.
    int64_t getReductionSlots() const {
      return isGPU() ? getSignature().getReductionSlots() : 0;
    }
    /// Where the parts of the training workspace lie.
    WorkspaceLayout getWorkspaceLayout() const;
    /// The workspace size in bytes as a formula of T, N and ld ("0" for
    /// none), as the manifest spells it.
    std::string getWorkspaceBytesFormula() const;
    /// The byte offset of the workspace part `buffer` (an index into the
    /// signature's buffers) as a formula of T, N and ld.
    std::string getWorkspaceOffsetFormula(unsigned buffer) const;
  }];
}

#endif // FLEXSN_DIALECT_FLEXSN_IR_FLEXSNATTRS_TD
