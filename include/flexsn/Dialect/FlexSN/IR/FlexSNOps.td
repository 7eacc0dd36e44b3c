//===- FlexSNOps.td - FlexSN operations --------------------*- tablegen -*-===//
//
// Part of the FlexSN project: an MLIR compiler for spiking-neuron dynamics.
//
//===----------------------------------------------------------------------===//

#ifndef FLEXSN_DIALECT_FLEXSN_IR_FLEXSNOPS_TD
#define FLEXSN_DIALECT_FLEXSN_IR_FLEXSNOPS_TD

include "flexsn/Dialect/FlexSN/IR/FlexSNDialect.td"
include "flexsn/Dialect/FlexSN/IR/FlexSNAttrs.td"
include "mlir/IR/OpAsmInterface.td"
include "mlir/IR/SymbolInterfaces.td"
include "mlir/Interfaces/CallInterfaces.td"
include "mlir/Interfaces/ControlFlowInterfaces.td"
include "mlir/Interfaces/InferTypeOpInterface.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

def FlexSN_SurrogateAttr : Attr<
    CPred<"::llvm::isa<::mlir::flexsn::SurrogateAttrInterface>($_self)">,
    "surrogate gradient attribute"> {
  let storageType = "::mlir::flexsn::SurrogateAttrInterface";
  let returnType = "::mlir::flexsn::SurrogateAttrInterface";
  let convertFromStorage = "$_self";
}

def FlexSN_ParamArrayAttr : TypedArrayAttrBase<FlexSN_ParamAttr,
    "array of neuron parameters">;

//===----------------------------------------------------------------------===//
// NeuronOp
//===----------------------------------------------------------------------===//

def FlexSN_NeuronOp : FlexSN_Op<"neuron", [
    Symbol, IsolatedFromAbove, SingleBlock, HasParent<"::mlir::ModuleOp">,
    DeclareOpInterfaceMethods<OpAsmOpInterface, ["getAsmBlockArgumentNames"]>,
    DeclareOpInterfaceMethods<CallableOpInterface>]> {
  let summary = "A spiking neuron, defined by its per-time-step body";
  let description = [{
    Defines a neuron as a function computing **one neuron for one time step
    on `f32` scalars**:

        (inputs..., states..., params...) -> (outputs..., new_states...)

    The entry block's arguments are the inputs, the states and the
    parameters, in that order; `flexsn.yield` returns the outputs followed
    by the new states. The counts of inputs, states and outputs are explicit
    (the `inputs`, `states` and `outputs` lists) and verified against the
    body. The body computes on scalars, with `f32` as the only
    floating-point type, with ops free of memory effects and regions (the
    `arith`, `math` and `flexsn` per-step ops, or such ops of any dialect)
    and `flexsn.apply`. Training kernels need a derivative rule
    (`DifferentiableOpInterface`) on every op a gradient flows through.

    A neuron is callable (`CallableOpInterface`): `flexsn.apply` calls it,
    and MLIR's inliner inlines those calls.

    Parameters are named and typed (`f32`, `i1` or `i32`), have a default
    value, and are `const` (specialized at compile time; the default),
    `runtime` (a kernel argument) or `trainable` (a runtime `f32` argument
    that gets a gradient). Flags such as `soft_reset` are `i1` parameters:
    once specialized, the selects they drive fold away.

    Names of inputs, states, outputs and parameters are C identifiers: host
    stubs, the manifest and the Python layer expose them.

    Example (an integrate-and-fire neuron with a hard reset):

    ```mlir
    flexsn.neuron @if inputs(%x: f32) states(%v: f32) outputs(spike)
        params(%v_threshold: f32 = 1.0, %v_reset: f32 = 0.0) {
      %h = arith.addf %v, %x : f32
      %d = arith.subf %h, %v_threshold : f32
      %s = flexsn.spike %d surrogate(#flexsn.sigmoid<alpha = 4.0>) : f32
      %one = arith.constant 1.0 : f32
      %keep = arith.subf %one, %s : f32
      %a = arith.mulf %s, %v_reset : f32
      %b = arith.mulf %keep, %h : f32
      %v1 = arith.addf %a, %b : f32
      flexsn.yield %s, %v1 : f32, f32
    }
    ```
  }];
  let arguments = (ins SymbolNameAttr:$sym_name,
                       StrArrayAttr:$input_names,
                       StrArrayAttr:$state_names,
                       StrArrayAttr:$output_names,
                       FlexSN_ParamArrayAttr:$params,
                       OptionalAttr<DictArrayAttr>:$arg_attrs,
                       OptionalAttr<DictArrayAttr>:$res_attrs);
  let regions = (region SizedRegion<1>:$body);
  let hasCustomAssemblyFormat = 1;
  let hasVerifier = 1;
  let hasRegionVerifier = 1;
  let extraClassDeclaration = [{
    unsigned getNumInputs() { return getInputNames().size(); }
    unsigned getNumStates() { return getStateNames().size(); }
    unsigned getNumOutputs() { return getOutputNames().size(); }
    unsigned getNumParams() { return getParams().size(); }
    /// The parameters as typed attributes, in declaration order.
    ::llvm::SmallVector<ParamAttr> getParamAttrs();
    /// The parameters that are kernel arguments (runtime or trainable).
    ::llvm::SmallVector<ParamAttr> getRuntimeParamAttrs();

    /// The step as a function type: (inputs..., states..., params...) ->
    /// (outputs..., new_states...).
    ::mlir::FunctionType getStepType();

    ::mlir::Block &getBodyBlock() { return getBody().front(); }
    ::mlir::Block::BlockArgListType getInputArgs() {
      return getBodyBlock().getArguments().take_front(getNumInputs());
    }
    ::mlir::Block::BlockArgListType getStateArgs() {
      return getBodyBlock().getArguments().slice(getNumInputs(), getNumStates());
    }
    ::mlir::Block::BlockArgListType getParamArgs() {
      return getBodyBlock().getArguments().drop_front(getNumInputs() + getNumStates());
    }
  }];
}

//===----------------------------------------------------------------------===//
// ScanOp
//===----------------------------------------------------------------------===//

def FlexSN_InputSequenceMemRef : MemRefRankOf<[F32, F16, BF16], [2, 3, 4, 5]>;
// Outputs may also be bytes (0/1 spikes).
def FlexSN_OutputSequenceMemRef : MemRefRankOf<[F32, F16, BF16, I8], [2, 3, 4, 5]>;
def FlexSN_StateMemRef : MemRefRankOf<[F32, F16, BF16], [1, 2, 3, 4, 5]>;
def FlexSN_ReductionMemRef : MemRefRankOf<[F32], [0]>;

def FlexSN_ScanOp : FlexSN_Op<"scan", [
    AttrSizedOperandSegments,
    DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "Runs a neuron (or an inline body) over time sequences";
  let description = [{
    Runs a per-step body over sequences laid out `[T, N...]`: for every
    neuron index `n` in `N...` and every step `t` (in order, or in reverse
    with `reverse`), it reads `inputs[t, n]`, carries the states, and writes
    `outputs[t, n]`. `T` and `N...` are run-time values: one compiled kernel
    serves every shape.

    The body is either the neuron named by `@callee`, or the op's own
    region. The region's block takes `(inputs..., states..., params...)`
    as `f32`-computed scalars and yields `(outputs..., new_states...,
    reductions...)`; a neuron yields no reductions.

    Operands, in groups:
    * `ins`: one sequence `[T, N...]` per neuron input;
    * `inits` (optional): one `[N...]` buffer per state holding the initial
      states; when the group is absent, every state starts at zero;
    * `params`: scalar values of the body's run-time parameters (for a
      neuron: its `runtime` and `trainable` parameters, in order);
    * `outs`: one sequence `[T, N...]` per output (absent when there are no
      outputs);
    * `states` (optional): one buffer per state, either a sequence
      `[T, N...]` of the state after each step, or, with `final_states`,
      the `[N...]` state after the last step (when `T = 0`, the initial one);
    * `reductions` (inline bodies only): rank-0 `f32` buffers receiving the
      sum over every step and neuron of the matching yielded value.

    A buffer whose base pointer is null is *absent*: an absent initial
    state reads as zeros, and an absent output or state result is not
    written. Callers that want only spikes pass null state buffers. Input
    sequences are required, except those listed in `optional_inputs`
    (positions in `ins`), which read as zeros when absent — incoming
    gradients of a backward scan, for instance.

    Sequences are stored as `f32`, `f16` or `bf16` (outputs also as `i8`,
    for 0/1 spikes); values convert to and from `f32` at the boundary only.
    Sequences may have any layout, so a strided time dimension needs no copy.

    ```mlir
    flexsn.scan @lif ins(%x : memref<?x?xf16>) inits(%v0 : memref<?xf32>)
        outs(%s : memref<?x?xi8>) states(%v : memref<?xf32>) final_states
    ```
  }];
  let arguments = (ins OptionalAttr<FlatSymbolRefAttr>:$callee,
                       Variadic<FlexSN_InputSequenceMemRef>:$inputs,
                       Variadic<FlexSN_StateMemRef>:$inits,
                       Variadic<AnyTypeOf<[F32, I1, I32]>>:$params,
                       Variadic<FlexSN_OutputSequenceMemRef>:$outputs,
                       Variadic<FlexSN_StateMemRef>:$states,
                       Variadic<FlexSN_ReductionMemRef>:$reductions,
                       UnitAttr:$final_states,
                       UnitAttr:$reverse,
                       OptionalAttr<DenseI64ArrayAttr>:$optional_inputs);
  let regions = (region AnyRegion:$body);
  let assemblyFormat = [{
    (`reverse` $reverse^)? ($callee^)?
    `ins` `(` $inputs `:` type($inputs) `)`
    (`inits` `(` $inits^ `:` type($inits) `)`)?
    (`params` `(` $params^ `:` type($params) `)`)?
    (`outs` `(` $outputs^ `:` type($outputs) `)`)?
    (`states` `(` $states^ `:` type($states) `)`)?
    (`final_states` $final_states^)?
    (`reductions` `(` $reductions^ `:` type($reductions) `)`)?
    ($body^)? attr-dict-with-keyword
  }];
  let hasVerifier = 1;
  let hasRegionVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Per-step ops
//===----------------------------------------------------------------------===//

def FlexSN_SpikeOp : FlexSN_Op<"spike", [Pure, SameOperandsAndResultType]> {
  let summary = "Heaviside spike with a surrogate gradient";
  let description = [{
    Returns `1.0` if `x >= 0` and `0.0` otherwise (so `H(0) = 1`). Its
    derivative is taken to be the surrogate's `g(x)`: reverse-mode
    differentiation turns it into `flexsn.surrogate_grad` with the same
    attribute.

    ```mlir
    %s = flexsn.spike %d surrogate(#flexsn.atan<alpha = 2.0>) : f32
    ```
  }];
  let arguments = (ins F32:$input, FlexSN_SurrogateAttr:$surrogate);
  let results = (outs F32:$result);
  let assemblyFormat = "$input `surrogate` `(` $surrogate `)` attr-dict `:` type($result)";
  let hasFolder = 1;
}

def FlexSN_SurrogateGradOp : FlexSN_Op<"surrogate_grad",
    [Pure, SameOperandsAndResultType]> {
  let summary = "The surrogate derivative g(x) of a spike";
  let description = [{
    Evaluates the surrogate's `g(x)`. Produced by autodiff from
    `flexsn.spike`, and expanded to `arith`/`math` ops before lowering.

    ```mlir
    %g = flexsn.surrogate_grad %d surrogate(#flexsn.sigmoid<alpha = 4.0>) : f32
    ```
  }];
  let arguments = (ins F32:$input, FlexSN_SurrogateAttr:$surrogate);
  let results = (outs F32:$result);
  let assemblyFormat = "$input `surrogate` `(` $surrogate `)` attr-dict `:` type($result)";
  let hasFolder = 1;
}

def FlexSN_DetachOp : FlexSN_Op<"detach", [Pure, SameOperandsAndResultType]> {
  let summary = "Stop-gradient: the identity forward, zero derivative";
  let description = [{
    Forward it returns its operand; its derivative is zero. Used for
    `detach_reset`, where the reset must not carry gradient.

    ```mlir
    %sd = flexsn.detach %s : f32
    ```
  }];
  let arguments = (ins F32:$input);
  let results = (outs F32:$result);
  let assemblyFormat = "$input attr-dict `:` type($result)";
}

def FlexSN_ApplyOp : FlexSN_Op<"apply", [
    DeclareOpInterfaceMethods<SymbolUserOpInterface>,
    DeclareOpInterfaceMethods<CallOpInterface>]> {
  let summary = "One step of another neuron, inside a neuron body";
  let description = [{
    Applies the body of neuron `@callee` to scalars, so neurons compose
    (a two-compartment neuron can reuse a LIF step). Operands are the
    callee's `(inputs..., states..., params...)`; results are its
    `(outputs..., new_states...)`. A neuron must not apply itself, directly
    or through others.

    It is a call (`CallOpInterface`): MLIR's inliner (`--inline`) replaces
    it by the callee's body, and the passes that emit steps
    (`flexsn-autodiff`, `convert-flexsn-to-scf`, `convert-flexsn-to-gpu`)
    inline every application first.

    ```mlir
    %s, %v1 = flexsn.apply @lif(%x, %v, %tau) : (f32, f32, f32) -> (f32, f32)
    ```
  }];
  let arguments = (ins FlatSymbolRefAttr:$callee,
                       Variadic<AnyTypeOf<[F32, I1, I32]>>:$operands,
                       OptionalAttr<DictArrayAttr>:$arg_attrs,
                       OptionalAttr<DictArrayAttr>:$res_attrs);
  let results = (outs Variadic<F32>:$results);
  let assemblyFormat = [{
    $callee `(` $operands `)` attr-dict `:` functional-type($operands, $results)
  }];
}

def FlexSN_YieldOp : FlexSN_Op<"yield", [
    Pure, Terminator, ReturnLike,
    ParentOneOf<["NeuronOp", "ScanOp"]>]> {
  let summary = "Terminates a per-step body";
  let description = [{
    Returns a step's results: outputs, then new states (then, in a scan's
    inline body, reduction contributions).

    ```mlir
    flexsn.yield %s, %v1 : f32, f32
    ```
  }];
  let arguments = (ins Variadic<AnyType>:$values);
  let assemblyFormat = "attr-dict ($values^ `:` type($values))?";
}

#endif // FLEXSN_DIALECT_FLEXSN_IR_FLEXSNOPS_TD
