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
include "mlir/Interfaces/DestinationStyleOpInterface.td"
include "mlir/Interfaces/IndexingMapOpInterface.td"
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
    An integer division or remainder (`arith.divsi`, `arith.remui`, ...)
    needs a constant divisor other than 0, and other than -1 when signed:
    dividing by 0, or the minimum integer by -1, has no defined result
    (the same holds in a `flexsn.scan`'s inline body).

    A neuron is callable (`CallableOpInterface`): `flexsn.apply` calls it,
    and MLIR's inliner inlines those calls.

    Parameters are named and typed (`f32`, `i1` or `i32`), have a default
    value, and are `const` (specialized at compile time; the default),
    `runtime` (a kernel argument) or `trainable` (a runtime `f32` argument
    that gets a gradient). Flags such as `soft_reset` are `i1` parameters:
    once specialized, the selects they drive fold away. A runtime or
    trainable `f32` parameter may also be `per_neuron`: one value per
    neuron, passed as an `[N]` buffer, while the body sees its neuron's
    value (`%v_threshold: f32 = 1.0 trainable per_neuron`).

    Names of inputs, states, outputs and parameters are C identifiers: host
    stubs, the manifest and the Python layer expose them. They may not be
    names a host stub declares itself (`T`, `N`, `ld`, `stream`, ...) or
    its headers may define (macros such as `NULL`, reserved identifiers,
    `flexsn_*`, the stdint types), nor make two kernel buffers share a
    name: a parameter `v_final` next to a state `v`, whose final-state
    buffer is `v_final` (`docs/Semantics.md` lists the rules).

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
    /// Whether output `index` is a spike output, always 0 or 1: a
    /// `flexsn.spike` result, possibly detached, or a spike output of an
    /// applied neuron. Kernels may store these as bytes.
    bool isSpikeOutput(unsigned index);
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

// Scan operands are all tensors (the value form, for transformations) or all
// memrefs (the buffer form, which the lowerings consume). Rank 0 holds a
// scalar broadcast to every step and neuron.
class FlexSN_ScanShaped<list<Type> elementTypes> : AnyTypeOf<[
    TensorRankOf<elementTypes, [0, 1, 2, 3, 4, 5]>,
    MemRefRankOf<elementTypes, [0, 1, 2, 3, 4, 5]>]>;
def FlexSN_ScanInput : FlexSN_ScanShaped<[F32, F16, BF16]>;
// Outputs may also be bytes or bits (0/1 spikes).
def FlexSN_ScanOutput : FlexSN_ScanShaped<[F32, F16, BF16, I8, I1]>;
def FlexSN_ScanReduction : FlexSN_ScanShaped<[F32]>;

def FlexSN_ScanOp : FlexSN_Op<"scan", [
    AttrSizedOperandSegments,
    InferTypeOpAdaptor,
    DeclareOpInterfaceMethods<DestinationStyleOpInterface>,
    DeclareOpInterfaceMethods<IndexingMapOpInterface, ["getStaticLoopRanges"]>,
    DeclareOpInterfaceMethods<MemoryEffectsOpInterface>,
    DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "Runs a neuron (or an inline body) over time sequences";
  let description = [{
    Runs a per-step body over the iteration domain `(t, n...)`: for every
    neuron index `n` (in parallel) and every step `t` (in order, or in
    reverse with `reverse`), it reads its inputs, carries the states, and
    writes its outputs. `T` and `N...` are run-time values: one compiled
    kernel serves every shape.

    The body is either the neuron named by `@callee`, or the op's own
    region. The region's block takes `(inputs..., states..., params...)`
    as `f32`-computed scalars and yields `(outputs..., new_states...,
    reductions...)`; a neuron yields no reductions.

    Operands, in groups:
    * `ins`: one operand per body input;
    * `inits` (optional): one operand per state holding the initial states;
      when the group is absent, every state starts at zero;
    * `params`: the body's run-time parameters (for a neuron: its
      `runtime` and `trainable` parameters, in order), each a scalar value,
      or a tensor or buffer indexed through its map, which must not depend
      on `t` (a neuron's `per_neuron` parameter: `[N...]`);
    * `outs`: one sequence per output (absent when there are no outputs);
    * `states` (optional): one operand per state receiving either the
      sequence of states after each step, or the final state (after the
      last step; when `T = 0`, the initial one);
    * `reductions` (inline bodies only): `f32` operands receiving the sum of
      the matching yielded value over the dimensions their map drops.

    **Indexing maps.** `indexing_maps` holds one affine map per operand,
    from the domain `(t, n...)` to the operand's indices, as in
    `linalg.generic`. A map keeps a subset of the domain's dimensions, in
    order:
    * `(t, n0, n1) -> (t, n0, n1)`: a sequence `[T, N...]`;
    * `(t, n0, n1) -> (n0, n1)`: one value per neuron, the same at every
      step (an input), or the final state (a state);
    * `(t, c, hw) -> (c)`: one value per channel, broadcast along the other
      dimensions (an input), or a per-channel sum (a reduction);
    * `(t, n0, n1) -> ()`: a scalar (a parameter, or a total).
    Outputs are sequences; states are sequences or final states, chosen per
    state; initial states do not depend on `t`; a reduction drops at least
    one dimension. The maps may be left out where the operands' ranks imply
    them: inputs and outputs are then sequences over the first input's
    domain, initial states per neuron, params and reductions scalars or,
    one rank less than the domain, per neuron, and each state a sequence
    or, one rank less, the final state. A broadcast input, or a param or
    reduction that keeps other dimensions, needs `indexing_maps`.

    **Value and buffer forms.** On tensors, the scan is in
    destination-passing style: `outs`, `states` and `reductions` are its
    inits (`DestinationStyleOpInterface`) and it returns one tensor per
    init, holding the values the buffer form would write. Its operands are
    only read for their shape (every element is overwritten), so
    `tensor.empty` is the usual destination. One-shot bufferization turns it
    into the buffer form, on memrefs, with no results.

    In the buffer form, a buffer whose base pointer is null is *absent*: an
    absent initial state reads as zeros, and an absent output or state
    result is not written. Callers that want only spikes pass null state
    buffers. Inputs are required, except those listed in `optional_inputs`
    (positions in `ins`), which read as zeros when absent — incoming
    gradients of a backward scan, for instance.

    Operands are stored as `f32`, `f16` or `bf16` (outputs also as `i8` or
    `i1`, for 0/1 spikes; an `i1` buffer packs them 8 per byte, in the
    layout `#flexsn.buffer` documents); values convert to and from `f32` at
    the boundary only.
    Buffers may have any layout, so a strided time dimension needs no copy.

    The maps are exposed through upstream's `IndexingMapOpInterface`, as
    linalg's are, and `getLoopIteratorTypes()` gives each domain dimension
    an iterator type: `t` is `reduction`, since upstream's iterator types
    have no "sequential" and `reduction` is the one that forbids splitting
    a dimension across independent iterations (states carry from step to
    step, even where outputs keep `t`); a neuron dimension is `reduction`
    where a reduction sums over it, else `parallel`.

    The neuron dimensions are parallel: the scan implements
    `TilingInterface`, and tiles over every neuron dimension its reductions
    keep. Time is sequential and never tiled.

    ```mlir
    // The buffer form: spikes as bytes, the final membrane potential.
    flexsn.scan @lif ins(%x : memref<?x?xf16>) inits(%v0 : memref<?xf32>)
        outs(%s : memref<?x?xi8>) states(%v : memref<?xf32>)
    // The value form, with a per-channel input over [T, C, HW].
    %y, %h = flexsn.scan ins(%x, %w : tensor<?x?x?xf32>, tensor<?xf32>)
        outs(%e0 : tensor<?x?x?xf32>) reductions(%e1 : tensor<?xf32>)
        indexing_maps = [affine_map<(t, c, hw) -> (t, c, hw)>,
                         affine_map<(t, c, hw) -> (c)>,
                         affine_map<(t, c, hw) -> (t, c, hw)>,
                         affine_map<(t, c, hw) -> (c)>] {
    ^bb0(%xi: f32, %wi: f32):
      %p = arith.mulf %xi, %wi : f32
      flexsn.yield %p, %p : f32, f32
    }
    ```
  }];
  let arguments = (ins OptionalAttr<FlatSymbolRefAttr>:$callee,
                       Variadic<FlexSN_ScanInput>:$inputs,
                       Variadic<FlexSN_ScanInput>:$inits,
                       Variadic<AnyTypeOf<[F32, I1, I32, FlexSN_ScanInput]>>:$params,
                       Variadic<FlexSN_ScanOutput>:$outputs,
                       Variadic<FlexSN_ScanInput>:$states,
                       Variadic<FlexSN_ScanReduction>:$reductions,
                       AffineMapArrayAttr:$indexing_maps,
                       UnitAttr:$reverse,
                       OptionalAttr<DenseI64ArrayAttr>:$optional_inputs);
  let results = (outs Variadic<AnyRankedTensor>:$results);
  let regions = (region AnyRegion:$body);
  let assemblyFormat = [{
    (`reverse` $reverse^)? ($callee^)?
    `ins` `(` $inputs `:` type($inputs) `)`
    (`inits` `(` $inits^ `:` type($inits) `)`)?
    (`params` `(` $params^ `:` type($params) `)`)?
    (`outs` `(` $outputs^ `:` type($outputs) `)`)?
    (`states` `(` $states^ `:` type($states) `)`)?
    (`reductions` `(` $reductions^ `:` type($reductions) `)`)?
    `` custom<IndexingMaps>($indexing_maps, ref(type($inputs)),
                         ref(type($inits)), ref(type($params)),
                         ref(type($outputs)), ref(type($states)),
                         ref(type($reductions)))
    ($body^)? attr-dict-with-keyword
  }];
  let builders = [
    // Every map the one its operand's rank implies.
    OpBuilder<(ins "::mlir::FlatSymbolRefAttr":$callee,
                   "::mlir::ValueRange":$inputs, "::mlir::ValueRange":$inits,
                   "::mlir::ValueRange":$params, "::mlir::ValueRange":$outputs,
                   "::mlir::ValueRange":$states,
                   "::mlir::ValueRange":$reductions, "bool":$reverse,
                   "::mlir::DenseI64ArrayAttr":$optionalInputs)>
  ];
  let hasVerifier = 1;
  let hasRegionVerifier = 1;
  let extraClassDeclaration = [{
    /// This scan on other operands (one per operand, in order), with the
    /// given result types: its attributes, a copy of its body.
    ScanOp cloneWithOperands(::mlir::OpBuilder &builder,
                             ::mlir::ValueRange operands,
                             ::mlir::TypeRange resultTypes);
    /// The domain's rank: 1 (time) + the neuron rank.
    unsigned getDomainRank();
    /// The operand's static shape; none for a scalar. What
    /// `IndexingMapOpInterface`'s shape queries read, as for linalg ops.
    ::llvm::ArrayRef<int64_t> getShape(::mlir::OpOperand *operand) {
      if (auto shaped =
              ::llvm::dyn_cast<::mlir::ShapedType>(operand->get().getType()))
        return shaped.getShape();
      return {};
    }
    /// Per domain dimension `(t, n...)`: `reduction` for `t`, which carries
    /// the states from step to step, and for every neuron dimension a
    /// reduction sums over; `parallel` for the others.
    ::llvm::SmallVector<::mlir::utils::IteratorType> getLoopIteratorTypes();
    /// Whether state result `index` is the final state (else a sequence).
    bool isFinalState(unsigned index);
    /// An operand spanning the whole domain (an input or output sequence):
    /// T and N... are its dims.
    ::mlir::Value getDomainOperand();
    bool hasTensorSemantics() {
      return !getResults().empty() ||
             ::llvm::isa<::mlir::RankedTensorType>(getInputs().front().getType());
    }
    /// The maps the operands' ranks imply, given each group's operand
    /// types (inputs, inits, params, outputs, states, reductions): inputs
    /// and outputs are sequences over the first input's domain, initial
    /// states per neuron, params and reductions scalars or (one rank less)
    /// per neuron, and each state a sequence or (one rank less) the final
    /// state. Fails, through
    /// `emitError` when given, where an operand's rank implies no map.
    static ::mlir::FailureOr<::llvm::SmallVector<::mlir::AffineMap>>
    getDefaultIndexingMaps(
        ::llvm::ArrayRef<::mlir::TypeRange> groups,
        ::llvm::function_ref<::mlir::InFlightDiagnostic()> emitError = {});
  }];
}

//===----------------------------------------------------------------------===//
// Per-step ops
//===----------------------------------------------------------------------===//

// A step body computes on f32 scalars; lowered for the CPU, a step runs on
// vectors of neurons, so the per-step ops map over vector lanes as arith's
// ops do (ElementwiseMappable) until flexsn-expand-surrogates expands them.
def FlexSN_F32OrLanes : AnyTypeOf<[F32, VectorOfRankAndType<[1], [F32]>],
                                  "f32 or a vector of f32">;

def FlexSN_SpikeOp : FlexSN_Op<"spike",
    [Pure, SameOperandsAndResultType] # ElementwiseMappable.traits> {
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
  let arguments = (ins FlexSN_F32OrLanes:$input,
                       FlexSN_SurrogateAttr:$surrogate);
  let results = (outs FlexSN_F32OrLanes:$result);
  let assemblyFormat = "$input `surrogate` `(` $surrogate `)` attr-dict `:` type($result)";
  let hasFolder = 1;
}

def FlexSN_SurrogateGradOp : FlexSN_Op<"surrogate_grad",
    [Pure, SameOperandsAndResultType] # ElementwiseMappable.traits> {
  let summary = "The surrogate derivative g(x) of a spike";
  let description = [{
    Evaluates the surrogate's `g(x)`. Produced by autodiff from
    `flexsn.spike`, and expanded to `arith`/`math` ops before lowering.

    ```mlir
    %g = flexsn.surrogate_grad %d surrogate(#flexsn.sigmoid<alpha = 4.0>) : f32
    ```
  }];
  let arguments = (ins FlexSN_F32OrLanes:$input,
                       FlexSN_SurrogateAttr:$surrogate);
  let results = (outs FlexSN_F32OrLanes:$result);
  let assemblyFormat = "$input `surrogate` `(` $surrogate `)` attr-dict `:` type($result)";
  let hasFolder = 1;
}

def FlexSN_DetachOp : FlexSN_Op<"detach",
    [Pure, SameOperandsAndResultType] # ElementwiseMappable.traits> {
  let summary = "Stop-gradient: the identity forward, zero derivative";
  let description = [{
    Forward it returns its operand; its derivative is zero. Used for
    `detach_reset`, where the reset must not carry gradient.

    ```mlir
    %sd = flexsn.detach %s : f32
    ```
  }];
  let arguments = (ins FlexSN_F32OrLanes:$input);
  let results = (outs FlexSN_F32OrLanes:$result);
  let assemblyFormat = "$input attr-dict `:` type($result)";
}

def FlexSN_RoundOp : FlexSN_Op<"round",
    [Pure, SameOperandsAndResultType] # ElementwiseMappable.traits> {
  let summary = "An f32 rounded to a half-precision type, as an f32";
  let description = [{
    Returns `x` rounded to `narrow_type` (`f16` or `bf16`) to nearest,
    ties to even, as `arith.truncf` rounds, and widened back to `f32`: so a
    step body, which computes in `f32`, can choose how a value it stores in
    a half-precision sequence rounds. With `other`, it returns the other
    value of `narrow_type` around `x` instead: of the two consecutive
    values that `x` lies between, the one rounding to nearest did not
    choose (the largest finite value for an `x` that rounds to infinity).
    Both are `x` where `narrow_type` holds it exactly, and NaN stays NaN.
    `flexsn-autodiff` uses it to save values so that the backward's
    decisions stay the forward's; `flexsn-expand-surrogates` expands it.

    ```mlir
    %nearest = flexsn.round %h to f16 : f32
    %other = flexsn.round %h to f16 other : f32
    ```
  }];
  let arguments = (ins FlexSN_F32OrLanes:$input,
                       TypeAttrOf<AnyTypeOf<[F16, BF16]>>:$narrow_type,
                       UnitAttr:$other);
  let results = (outs FlexSN_F32OrLanes:$result);
  let assemblyFormat =
      "$input `to` $narrow_type (`other` $other^)? attr-dict `:` type($result)";
}

def FlexSN_ApplyOp : FlexSN_Op<"apply", [
    DeclareOpInterfaceMethods<SymbolUserOpInterface>,
    DeclareOpInterfaceMethods<CallOpInterface>]> {
  let summary = "One step of a neuron, inside a neuron or scan body";
  let description = [{
    Applies the body of neuron `@callee` to scalars, so neurons compose
    (a two-compartment neuron can reuse a LIF step) and a scan's inline
    body can run a neuron among other ops (what `flexsn-fuse-producers`
    builds). It sits directly in a `flexsn.neuron` body or a `flexsn.scan`
    inline body. Operands are the callee's `(inputs..., states...,
    params...)`; results are its `(outputs..., new_states...)`. A neuron
    must not apply itself, directly or through others.

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


def FlexSN_BlockOp : FlexSN_Op<"block", [
    Symbol, HasParent<"::mlir::ModuleOp">,
    DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "A neuron between a pre-op and a connection, declared";
  let description = [{
    Declares a spiking block over sequences: `connection(neuron(pre(x)), o)`,
    where the operand o is the block's input x or, with `connection(op,
    skip)`, a second input `skip`; then a readout over time, stored as
    `storage`. A pre-op ending in `_add` (or `add`) adds the second input
    `skip` before the neuron instead: `neuron(pre(x) + skip)`, a block's
    one `skip` read by the pre-op or the connection, not both.
    `flexsn-expand-blocks`
    writes it as a `func.func` marked `flexsn.block` on tensors (linalg ops
    around a `flexsn.scan` of the neuron), which fusion makes one scan and
    `flexsn-generate-block-kernels` compiles into kernels with a neuron
    kernel's interface. The Python layer sends this declaration, not IR.

    The block function takes the input `x`, then `skip` if the pre-op or
    the connection reads it, then `scale` and `shift` with
    an affine pre-op, then the neuron's runtime parameters (scalars), and
    returns the output (`y` with a connection, the neuron's output name
    without, `readout` with a readout) and the neuron's final states.

    ```mlir
    flexsn.block @bn_lif_f16 neuron(@lif) pre(channel_affine)
        connection(add) readout(none) storage(f16)
    flexsn.block @sew_iand neuron(@lif) pre(channel_affine)
        connection(iand, skip) readout(none) storage(f32)
    flexsn.block @resnet_add neuron(@lif) pre(channel_affine_add)
        connection(none) readout(none) storage(f32)
    ```
  }];
  let arguments = (ins SymbolNameAttr:$sym_name,
                       FlatSymbolRefAttr:$neuron,
                       EnumProp<FlexSN_BlockPre>:$pre,
                       EnumProp<FlexSN_BlockConnection>:$connection,
                       DefaultValuedProp<EnumProp<FlexSN_BlockConnectionOperand>,
                           "::mlir::flexsn::BlockConnectionOperand::Input">:$connection_operand,
                       EnumProp<FlexSN_BlockReadout>:$readout,
                       EnumProp<FlexSN_StorageType>:$storage);
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// Whether the pre-op scales and shifts x (by scalars or per channel).
    bool hasAffinePre();
    /// Whether the pre-op's scale and shift are `[C]`, one per channel.
    bool hasChannelPre();
    /// Whether the pre-op adds the second input `skip`.
    bool preAddsSkip();
    /// Whether the block takes the second input `skip`.
    bool hasSkipInput() {
      return preAddsSkip() ||
             getConnectionOperand() == BlockConnectionOperand::Skip;
    }
  }];
  let assemblyFormat = [{
    $sym_name `neuron` `(` $neuron `)` `pre` `(` $pre `)`
    `connection` `(` $connection (`,` $connection_operand^)? `)` `readout` `(` $readout `)`
    `storage` `(` $storage `)` attr-dict
  }];
}

#endif // FLEXSN_DIALECT_FLEXSN_IR_FLEXSNOPS_TD
