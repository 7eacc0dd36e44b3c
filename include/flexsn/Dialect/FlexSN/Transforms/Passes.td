//===- Passes.td - FlexSN transformation passes ------------*- tablegen -*-===//
//
// Part of the FlexSN project: an MLIR compiler for spiking-neuron dynamics.
//
//===----------------------------------------------------------------------===//

#ifndef FLEXSN_DIALECT_FLEXSN_TRANSFORMS_PASSES_TD
#define FLEXSN_DIALECT_FLEXSN_TRANSFORMS_PASSES_TD

include "mlir/Pass/PassBase.td"

def FlexSNGenerateKernels : Pass<"flexsn-generate-kernels", "::mlir::ModuleOp"> {
  let summary = "Generate the kernel variants of each neuron as functions";
  let description = [{
    For every `flexsn.neuron` (or those named by `neurons`), every requested
    variant and every storage type, adds a `func.func` whose arguments are
    the kernel ABI and whose body is one `flexsn.scan` of the neuron:

    | variant | function | writes |
    | --- | --- | --- |
    | `inference` | `@<neuron>_inference_<dtype>` | output and state sequences `[T, N]` |
    | `final-state` | `@<neuron>_final_state_<dtype>` | output sequences, final states `[N]` |

    Arguments, in this order (the ABI shared by the CPU and GPU kernels; see
    `docs/ABI.md`): one `[T, N]` sequence per input, one `[N]` initial state
    per state, one `[T, N]` sequence per output, one state buffer per state
    (`[T, N]` or `[N]`), then one scalar per `runtime`/`trainable`
    parameter. Every buffer has the storage type; `N` flattens the neuron
    dimensions. A buffer with a null base pointer is absent (initial state:
    zeros; result: not written). `const` parameters are not arguments: the
    lowering specializes them.

    Each function carries its typed signature, `flexsn.kernel` (a
    `#flexsn.kernel`: the neuron, variant, storage type, each buffer's name,
    role, element type and shape class, and the parameters), which every
    later pass, the lowerings and the emitters read.

    `spike-storage=u8` also (or, listed alone, only) makes
    `@<neuron>_<variant>_<dtype>_spikes_u8`, whose spike outputs (outputs
    always 0 or 1: a `flexsn.spike` result, possibly detached) are `i8`
    sequences holding 0 or 1, a quarter of an f32 sequence's bytes; the
    other buffers keep the storage type. `spike-storage=bits` makes
    `@<neuron>_<variant>_<dtype>_spikes_bits`, whose spike outputs are `i1`
    sequences packed 8 per byte (the layout is `SpikeStorage`'s), a
    thirty-second of an f32 sequence's bytes. A neuron without a spike
    output has no such kernels (an error).

    Rationale:
    * Variants are IR, not templates: every later pass (autodiff, fusion,
      both lowerings) sees ordinary functions holding scans.
  }];
  let options = [
    ListOption<"variants", "variants", "::mlir::flexsn::KernelVariant",
               "Variants to generate: inference, final-state (default both)">,
    ListOption<"storageTypes", "storage-types", "::mlir::flexsn::StorageType",
               "Sequence storage types: f32 (the default), f16, bf16">,
    ListOption<"neurons", "neurons", "std::string",
               "Neurons to generate kernels for (default: all)">,
    ListOption<"spikeStorage", "spike-storage", "::mlir::flexsn::SpikeStorage",
               "How spike outputs are stored: dense (the storage type, the "
               "default), u8 (bytes), bits (8 per byte)">,
  ];
  let dependentDialects = ["::mlir::func::FuncDialect",
                           "::mlir::memref::MemRefDialect"];
}

def FlexSNExpandBlocks : Pass<"flexsn-expand-blocks", "::mlir::ModuleOp"> {
  let summary = "Write each declared block (flexsn.block) as a function on "
                "tensors";
  let description = [{
    Replaces every `flexsn.block` declaration by the `func.func` of the same
    name, marked `flexsn.block`, that computes it on tensors:

    1. the pre-op: a `linalg.generic` computing `x·scale + shift` in f32
       (scalar or per-channel `scale` and `shift`);
    2. a `flexsn.scan` whose inline body applies the neuron (as fusion
       would make it: autodiff differentiates inline bodies, and a block of
       the neuron alone fuses nothing);
    3. the connection: a `linalg.generic` of the neuron's output and `x`,
       stored back in the storage type;
    4. the readout: a `linalg.reduce` over time.

    The fusion passes then make it one scan, and
    `flexsn-generate-block-kernels` its kernels.

    Rationale:
    * A block is a description, expanded here with builders, so that each
      new block shape is one case in C++ tested in lit, not a text template
      in every client.
  }];
  let dependentDialects = ["::mlir::func::FuncDialect",
                           "::mlir::linalg::LinalgDialect",
                           "::mlir::tensor::TensorDialect"];
}

def FlexSNGenerateBlockKernels
    : Pass<"flexsn-generate-block-kernels", "::mlir::ModuleOp"> {
  let summary = "Compile each spiking block (a function marked flexsn.block) "
                "to kernel functions";
  let description = [{
    A `func.func` marked `flexsn.block`, on tensors, whose only work is one
    `flexsn.scan` (what the `flexsn-fuse-*` passes leave of a spiking block:
    normalization, neuron, residual in one scan) becomes
    `@<block>_<variant>_<dtype>` for each requested variant, and is replaced
    by them:

    | variant | writes |
    | --- | --- |
    | `inference` | the block's results: sequences, final states |
    | `forward` | the same; `flexsn-autodiff` then adds what it saves and `@<block>_backward_<dtype>` |

    The kernel takes a buffer per tensor the scan reads or writes, in a
    neuron kernel's order (the runtimes match buffers to tensors by it):
    inputs (`[T, N]` sequences, the block's arguments), initial states (the
    block's, or for a block whose states start at zero, optional
    `<state>_init` buffers, as a neuron kernel has: absent reads as zeros),
    outputs and states (sequences or final states, as the block returns
    them), param buffers (per neuron, or per channel over a `[T, B, C, S]`
    domain); each group in the scan's operand order; then its scalar
    params.
    Names come from `flexsn.name` on the block's arguments and results
    (else `argN`, `resultN`). A param marked `flexsn.trainable` is
    trainable: a scalar one's kind says so, a param buffer's kernel
    argument keeps the mark, which autodiff reads. `dtype` is the first
    input's element type; each buffer keeps its tensor's. The scan's body
    comes along as it is (with the constants it uses). A sum over t
    that the scan keeps per neuron (a spike count: a reduction dropping
    only t) becomes a state kept only at its end, starting at zero and
    adding the step's value (the same sum in the same order): a final-state
    buffer named by the result, with its optional `<name>_init`. A block
    whose scan sums over neurons, runs over another rank, or keeps other
    work (an unfused linalg op, a second scan) is an error naming what
    stays.

    ```mlir
    func.func @bn_lif(%x: tensor<?x?x?x?xf32> {flexsn.name = "x"},
                      %scale: tensor<?xf32> {flexsn.name = "scale",
                                             flexsn.trainable}, ...)
        -> (tensor<?x?x?x?xf32> {flexsn.name = "y"}, ...)
        attributes {flexsn.block} {
      ... one flexsn.scan ...
    }
    // becomes, with variants=inference
    func.func @bn_lif_inference_f32(%x: memref<?x?x?x?xf32>, ...,
                                    %scale: memref<?xf32> {flexsn.trainable},
                                    ...)
        attributes {flexsn.kernel = #flexsn.kernel<"bn_lif", inference,
          f32, buffers = [<"x", input_sequence, f32, sequence, input 0>,
                          <"v_init", initial_state, f32, per_neuron, state_init 0>,
                          <"y", output_sequence, f32, sequence, output 0>,
                          <"v", final_state, f32, per_neuron, state_final 0>,
                          <"scale", per_channel_param, f32, per_channel, param "scale" per_channel>, ...]>}
    ```

    Rationale:
    * A block is written on tensors, where fusion works, and its kernels
      have the same interface as a neuron's: autodiff, the lowerings, the
      header, the manifest and the runtime need nothing new.
    * Trainability of a param buffer is a mark on the argument, not a new
      buffer role: the inference kernel and the runtime are unchanged.
  }];
  let options = [
    ListOption<"variants", "variants", "::mlir::flexsn::KernelVariant",
               "Variants to generate: inference (the default), forward">,
  ];
  let dependentDialects = ["::mlir::func::FuncDialect",
                           "::mlir::memref::MemRefDialect"];
}

def FlexSNAutodiff : Pass<"flexsn-autodiff", "::mlir::ModuleOp"> {
  let summary = "Generate training kernels: forward with saves, reverse-time backward";
  let description = [{
    Autodiff differentiates scans, not neurons: its input is a forward
    kernel function (`flexsn.kernel` with variant `forward`, saving nothing
    yet) whose scan runs an inline body forward in time over state
    sequences (a state kept only at its end, as a block's, gets no per-step
    gradient in the backward: the backward reads what the forward saves,
    not the states). For every neuron (or those named by `neurons`) and
    storage type it first builds that kernel from the neuron's specialized step;
    forward kernels already in the module (written by hand, or by another
    pass) are differentiated too, unless their backward kernel exists. Their
    scalar parameters' kinds say which get gradients, and a parameter
    buffer gets one when its argument is marked `flexsn.trainable` (as
    `flexsn-generate-block-kernels` marks a block's). Each forward kernel is completed and gets its
    backward kernel, named with its last `forward` replaced by `backward`
    (or `_backward` appended), with buffers named after the forward's. For
    a neuron the kernels are:

    * `@<neuron>_forward_<dtype>(inputs [T,N]..., inits [N]..., outputs
      [T,N]..., state sequences [T,N]..., saved [T,N] f32..., runtime
      params...)`: the inference step, also writing the values the
      backward step reads (the workspace);
    * `@<neuron>_backward_<dtype>(grad outputs [T,N]..., grad state
      sequences [T,N]..., saved [T,N] f32..., re-read inputs [T,N]...,
      grad final states [N]..., grad inputs [T,N]..., grad initial states
      [N]..., grad trainable params (rank-0 f32)..., runtime params...)`: a
      reverse-time scan whose carries are the states' gradients, whose
      per-step outputs are the inputs' gradients and whose reductions are
      the trainable parameters' gradients, summed over T and N;
    * for a neuron with states, `@<neuron>_forward_final_state_<dtype>`:
      the forward keeping each state only at its end (`[N]` final-state
      buffers in place of the state sequences), for callers that do not
      keep the sequences. Its step and saves are the forward's, so the
      backward above serves it, with no state sequence gradients.

    The step body is first specialized (`const` parameters folded, applied
    neurons inlined, canonicalized) so that flags such as `soft_reset` are
    differentiated as the selected branch. Each op's derivative rule comes
    from its `DifferentiableOpInterface`, attached to `arith.addf`, `subf`,
    `mulf`, `divf`, `negf`, `select`, `maximumf`, `maxnumf`, `minimumf`,
    `minnumf` and `math.exp`, `log`, `log1p`, `sqrt`, `tanh`, `absf`, `sin`,
    `cos`, `atan`, `erf`, `powf`, `fma`; `flexsn.spike` differentiates through
    its surrogate (`flexsn.surrogate_grad`), `flexsn.detach` stops the
    gradient, and an op without a rule that a gradient flows through gets a
    diagnostic naming it (other dialects' ops gain a rule by an external
    model). Absent incoming gradients
    (null buffers) are zeros.

    Saving policy: the backward step needs the forward values its derivative
    rules read. It saves the cheapest set of values from which all of those
    can be recomputed — a minimum vertex cut between the step's inputs and
    states and the needed values, where saving a value costs a write and a
    read of a `[T, N]` f32 sequence, re-reading an input costs one read, and
    parameters and constants are free — and recomputes the rest. LIF saves
    its charge `h` alone. `store-all` saves every needed value instead.

    Both functions carry `flexsn.kernel`, their typed signature: the
    forward kernel takes its saved sequences (`saved_output`) after its
    state sequences, the backward kernel reads them (`saved_input`) and the
    re-read inputs (`input_sequence`, named after the inputs), and
    `workspace_sequences` counts them: the workspace is
    `workspace_sequences * T * N * 4` bytes.

    Saved values have the storage type (`save-in-storage-type`, the
    default): an f16 or bf16 kernel moves 2 bytes per saved value and step,
    twice (the forward's write, the backward's read), and its backward
    evaluates its derivatives at values rounded to the storage type. The
    workspace is `workspace_sequences * T * N * 2` bytes, rounded up to
    whole floats. `save-in-storage-type=false` saves them in `f32` instead,
    so that the backward reads the forward's values exactly, at 4 bytes
    each. The saving policy's costs stay those of f32 values.

    Rounding keeps the forward's decisions: the forward step also makes,
    from the rounded values, the decisions the backward step recomputes
    from them (each `flexsn.spike` and `i1` value its rules read, such as
    LIF's spike in its reset's derivative), and where one differs from its
    own, it saves each inexact value's other neighbour in the storage type,
    on the exact value's side of the rounding.
    Rationale:
    * Rounded to nearest, a charge within half a rounding step below the
      threshold would be saved on or above it: the backward would see a
      spike the forward did not fire and differentiate the other branch
      (an error of the order of the gradient itself, not of the rounding).
      A decision monotonic in one saved value (every shipped neuron's
      spike) always agrees after the fix; the cost is a few scalar ops per
      step in the forward.
  }];
  let options = [
    ListOption<"storageTypes", "storage-types", "::mlir::flexsn::StorageType",
               "Sequence storage types: f32, f16, bf16 (default f32)">,
    ListOption<"neurons", "neurons", "std::string",
               "Neurons to differentiate (default: all)">,
    Option<"storeAll", "store-all", "bool", "false",
           "Save every value the backward step reads (debugging)">,
    Option<"saveInStorageType", "save-in-storage-type", "bool", "true",
           "Save values in the storage type (f16/bf16: half the bytes of "
           "f32, a backward at rounded values); false: in f32">,
  ];
  let dependentDialects = ["::mlir::func::FuncDialect",
                           "::mlir::memref::MemRefDialect"];
}

def FlexSNCoupleKernels : Pass<"flexsn-couple-kernels", "::mlir::ModuleOp"> {
  let summary = "Add a coupled (recurrent) kernel beside each neuron kernel";
  let description = [{
    For every kernel function of a neuron (the inference, final-state,
    forward and backward kernels that kernel generation and autodiff made;
    dense spikes, no per-channel buffers), adds `<kernel>_coupled`: the
    same kernel coupled from the neuron's output `output` into its input
    `input` through an `[H, H]` matrix of weights, its last buffer
    (`coupling`, role `coupling_weights`). Its neurons are then samples of
    `H`, and each step's input gains the weighted outputs of the sample's
    neurons at the step before: `s[t] = f(x[t] + W s[t − 1])`, a recurrent
    spiking layer, as one kernel over the sequence (and its backward as
    another). `#flexsn.kernel` states the exact semantics.

    `neurons` restricts it to the named neurons (default: all). A neuron
    without the input or output named is an error.

    Rationale:
    * The coupling is a property of the kernel, not of the neuron or its
      scan: fusion, tiling and bufferization never see a coupled scan, and
      the lowerings read the coupling from the signature.
  }];
  let options = [
    Option<"input", "input", "unsigned", "0",
           "The neuron input the coupling adds to">,
    Option<"output", "output", "unsigned", "0",
           "The neuron output feeding it, one step later">,
    ListOption<"neurons", "neurons", "std::string",
               "Neurons whose kernels to couple (default: all)">,
  ];
}

def FlexSNSetParams : Pass<"flexsn-set-params", "::mlir::ModuleOp"> {
  let summary = "Set neuron parameters' defaults, bindings and surrogate";
  let description = [{
    Configures neurons before kernel generation, so one neuron file serves
    every configuration (the Python layer's `compile(..., params=...)` and
    drop-in neurons use it):

    * `values=tau=3.0,soft_reset=true`: new defaults. A `const` parameter
      is then specialized to its new value; a `runtime` one only changes
      the value callers get by default.
    * `kinds=v_threshold=runtime,w=trainable`: new bindings (`const`,
      `runtime`, `trainable`).
    * `shapes=v_threshold=per_neuron`: new shapes (`scalar`, `per_neuron`,
      `per_channel`). A shaped parameter must be an `f32` `runtime` or
      `trainable` one once the bindings are set.
    * `surrogate=#flexsn.atan<alpha=3.0>`: the surrogate of every
      `flexsn.spike` in the neurons. Write it without spaces, or quote
      the option.

    `neurons` restricts it to the named neurons (default: all). A name that
    no selected neuron has, a value that is not of the parameter's type
    (`f32`: a finite number; `i1`: true, false, 1, 0; `i32`: an integer),
    an unknown binding or shape, a non-`f32` trainable or shaped
    parameter, a `const` shaped one and a text that is not a surrogate
    attribute are errors; the surrogate's own range checks apply.

    Rationale:
    * Specializing in IR rather than editing neuron text keeps every
      diagnostic on the user's file and its verifiers in charge.
  }];
  let options = [
    ListOption<"values", "values", "std::string",
               "Parameter defaults, as name=value">,
    ListOption<"kinds", "kinds", "std::string",
               "Parameter bindings, as name=const|runtime|trainable">,
    ListOption<"shapes", "shapes", "std::string",
               "Parameter shapes, as name=scalar|per_neuron|per_channel">,
    Option<"surrogate", "surrogate", "std::string", "\"\"",
           "Surrogate attribute for every spike, e.g. #flexsn.atan<alpha=2.0>">,
    ListOption<"neurons", "neurons", "std::string",
               "Neurons to configure (default: all)">,
  ];
}

def FlexSNFuseConsumers : Pass<"flexsn-fuse-consumers"> {
  let summary = "Move elementwise consumers of scan sequences into the scan";
  let description = [{
    On the value form (tensors), moves each elementwise linalg op that
    reads a `flexsn.scan`'s output or state sequence into the scan's body,
    so the sequence need not be written for it: a residual add of the
    spikes and the input, SEW-ResNet's ADD/AND/IAND with another sequence,
    a scaling, a cast to f16; and sums over t, a spike count or a
    readout's total (the mean is that sum over T, outside). Repeated, it
    moves chains of consumers.

    The consumer's payload runs before the body's yield, on the values the
    body yields for the sequences it reads. Its result becomes a new scan
    output, after the scan's own, written into the consumer's destination
    (a `tensor.empty` made after the scan is made anew before it). A sum
    over t (`linalg.reduce { arith.addf } dimensions = [0]`, or a generic
    whose one reduction loop is t, yielding `acc + v`) becomes a new scan
    reduction of `v` kept per neuron, after the scan's own; its
    destination must hold +0.0 (a `linalg.fill` or constant of zeros), as
    a scan reduction starts from +0.0, and the per-neuron sums add the
    steps in the same order. Its
    other operands become scan inputs or params through composed maps, as
    for `flexsn-fuse-producers`. A scan output that
    nothing reads once the consumer is fused is dropped, so the sequence
    is never written; state sequences stay (the body carries the state).
    A scan that calls a neuron first gets an inline body applying it.

    ```mlir
    %s, %v = flexsn.scan @lif ins(%x : tensor<?x?xf32>) ...
    %y = linalg.map { arith.addf } ins(%s, %x : ...) outs(%e : ...)
    // becomes
    %y, %v = flexsn.scan ins(%x : tensor<?x?xf32>) outs(%e : ...) ... {
    ^bb0(%xi: f32, %vi: f32):
      %r:2 = flexsn.apply @lif(%xi, %vi, ...) : ...
      %yi = arith.addf %r#0, %xi : f32
      flexsn.yield %yi, %r#1 : f32, f32
    }
    ```

    A consumer fuses when it is a linalg op on tensors with one result, only
    parallel loops and no `linalg.index`, it reads the scan's sequences
    along the scan's domain (a permutation of its loops that makes them
    the identity), they are f32 (the body's values before any storage
    rounding), its other operands could fuse as a producer's and are
    computed before the scan, and it writes its result along the domain as
    f32, or as f16/bf16 by an `arith.truncf` to nearest at the end of its
    payload (which the scan's storage performs). Consumers of final
    states and reductions do not fuse (they are not per-step values), nor
    other reductions (a sum over neurons would add in another order). With
    `remarks`, every linalg op still reading a scan result gets a remark
    saying why. `populateFuseConsumersPatterns` takes a control function.

    Rationale:
    * The fused value is the body's own f32 value, which the consumer
      read back after storage: only f32 sequences make the two equal.
    * A residual block's output is what the next layer reads, so the scan
      writes it; the spikes it was computed from no longer need to be.
  }];
  let options = [
    Option<"remarks", "remarks", "bool", "false",
           "Emit a remark for each linalg op still reading a scan result, "
           "saying why it was not fused">,
  ];
  let dependentDialects = ["::mlir::arith::ArithDialect",
                           "::mlir::flexsn::FlexSNDialect",
                           "::mlir::tensor::TensorDialect"];
}

def FlexSNFuseSiblings : Pass<"flexsn-fuse-siblings"> {
  let summary = "Merge scans over one domain that meet only at each (t, n)";
  let description = [{
    On the value form (tensors), merges two `flexsn.scan`s into one where
    the later reads the earlier's sequences (a neuron feeding another
    neuron, a two-layer recurrence per neuron) or both read one input
    along the domain (two neurons on one input). Each step of the merged
    scan runs the first body, then the second on the values the first
    yields, so the sequence between them is never written.

    The operands of each group are the first scan's, then the second's;
    an input both read through one map is read once; the first's outputs
    that only the second read are dropped. The merged scan takes the
    second's place.

    ```mlir
    %s1, %v1 = flexsn.scan @lif ins(%x : ...) outs(%e1 : ...) states(%f1 : ...)
    %s2, %v2 = flexsn.scan @lif ins(%s1 : ...) outs(%e2 : ...) states(%f2 : ...)
    // becomes
    %s2, %v1, %v2 = flexsn.scan ins(%x : ...) outs(%e2 : ...) states(%f1, %f2 : ...) {
    ^bb0(%xi: f32, %a: f32, %b: f32):
      %r1:2 = flexsn.apply @lif(%xi, %a, ...) : ...
      %r2:2 = flexsn.apply @lif(%r1#0, %b, ...) : ...
      flexsn.yield %r2#0, %r1#1, %r2#1 : f32, f32, f32
    }
    ```

    Two scans merge when they run on tensors in the same direction without
    optional inputs, both or neither start from given states and return
    states, the second reads of the first only f32 output or state
    sequences, as inputs, along the domain (a final state or a reduction
    is known only after the last step), and nothing between them uses the
    first's results. With `remarks`, each scan still reading another's
    result gets a remark saying why. `populateFuseSiblingsPatterns` takes a
    control function.

    Rationale:
    * A dependence only at the same `(t, n)` is what a step body expresses;
      anything across `t` or `n` is not, and stays between scans.
  }];
  let options = [
    Option<"remarks", "remarks", "bool", "false",
           "Emit a remark for each scan still reading another scan's result, "
           "saying why they were not merged">,
  ];
  let dependentDialects = ["::mlir::arith::ArithDialect",
                           "::mlir::flexsn::FlexSNDialect"];
}

def FlexSNFuseProducers : Pass<"flexsn-fuse-producers"> {
  let summary = "Move elementwise producers of scan inputs into the scan";
  let description = [{
    On the value form (tensors), moves each elementwise linalg op that
    produces an input of a `flexsn.scan` into the scan's body, so the
    `[T, N...]` tensor between them is never written: batch-norm's apply
    step `x * scale[c] + shift[c]`, a bias, a dropout mask, a cast to f32.
    Repeated, it moves chains of producers.

    The producer's operands are read through the composition of the
    scan's map for the fused input with the producer's maps. Those read at
    every step become scan inputs, after the scan's own; those that do not
    depend on `t`, and scalars, become params, after the scan's own, as a
    neuron's parameters are: a per-channel `[C]` operand of a producer
    over `[T, C, HW]` becomes a param with map `(t, c, hw) -> (c)`. An
    operand the scan already reads through the same map is read once. Its
    payload runs at the start of the body, and its result replaces the
    fused input. A scan that calls a
    neuron first gets an inline body applying it (`flexsn.apply`, which
    the lowerings inline).

    ```mlir
    %y = linalg.generic {indexing_maps = [#seq, #chan, #chan, #seq], ...}
        ins(%x, %scale, %shift : tensor<?x?x?xf32>, tensor<?xf32>, tensor<?xf32>)
        outs(%e : tensor<?x?x?xf32>) { ... mulf, addf ... }
    %s, %v = flexsn.scan @lif ins(%y : tensor<?x?x?xf32>) ...
    // becomes
    %s, %v = flexsn.scan ins(%x : ...) params(%scale, %shift : ...) ...
        indexing_maps = [#seq, #chan, #chan, ...] {
    ^bb0(%xi: f32, %v: f32, %scale_c: f32, %shift_c: f32):
      %m = arith.mulf %xi, %scale_c : f32
      %yi = arith.addf %m, %shift_c : f32
      %r:2 = flexsn.apply @lif(%yi, %v, ...) : ...
      flexsn.yield %r#0, %r#1 : f32, f32
    }
    ```

    A producer fuses when it is a linalg op on tensors with only parallel
    loops and no `linalg.index`, the scan input is its result's only use,
    it writes that result through a permutation of its loops, and:
    * each tensor operand holds f32, f16 or bf16 and is read through a map
      that keeps the scan's domain dimensions once each, in order (no
      transposes: a scan reads each operand along its domain);
    * a half-precision operand is only extended to f32 (the scan reads it
      as f32 already), and the result is f32: a scan body computes in
      f32, so a rounding to f16 cannot move into it;
    * scalar operands are f32, i1 or i32, and the payload's ops are free of
      memory effects and regions, on f32 and integer scalars, using from
      outside only constants.
    Fusion moves computation, never changes it: the fused scan computes
    the same operations in the same order. With `remarks`, every scan
    input still produced by a linalg op gets a remark saying why it was
    not fused. `populateFuseProducersPatterns` takes a control function,
    as upstream linalg's elementwise fusion does.

    Rationale:
    * Fusing into the scan, rather than scans into linalg: the scan's
      domain `(t, n...)` with its sequential `t` is not a linalg iteration
      space, while an elementwise op is a per-step body already.
    * A producer with other uses stays unfused: fusing it would compute it
      twice and still write its result for the other users.
  }];
  let options = [
    Option<"remarks", "remarks", "bool", "false",
           "Emit a remark for each scan input still produced by a linalg "
           "op, saying why it was not fused">,
  ];
  let dependentDialects = ["::mlir::arith::ArithDialect",
                           "::mlir::flexsn::FlexSNDialect"];
}

def FlexSNExpandSurrogates : Pass<"flexsn-expand-surrogates"> {
  let summary = "Expand spike, detach and surrogate ops into arith and math";
  let description = [{
    Rewrites the per-step `flexsn` ops that remain once a scan's body has
    been placed in loops:

    * `flexsn.spike %x` becomes `select(x >= 0, 1.0, 0.0)` (so `H(0) = 1`);
    * `flexsn.detach %x` becomes `%x`;
    * `flexsn.surrogate_grad %x` becomes the surrogate's `g(x)` in `arith`
      and `math` ops, emitted from the same formula text
      (`SurrogateFormulas.h`) that evaluates the attribute in C++.

    With `approximate-functions`, the ops of each `g(x)` carry
    `fastmath<afn>`, so the target may evaluate its functions to a few ulp
    instead of correctly rounded (the GPU pipeline: `ex2.approx` for `exp`,
    `rcp.approx` for a division); the rest of the body is untouched.

    Rationale:
    * It must run after autodiff: once expanded, a spike has lost the
      surrogate that defines its derivative.
    * A surrogate gradient is a heuristic stand-in for the derivative of a
      step, and the correctly rounded `exp` and reciprocal make a
      half-precision backward kernel instruction-bound (LIF's f16 backward
      with `h` saved in f16: 86% of copy bandwidth, 98.6% approximated).
      The forward and the neuron's own math stay exact. It is an option,
      off by default: where `σ` nears 1, `sigmoid`'s `1 − σ` cancels, and
      the approximate reciprocal's few ulp become up to 15% of a tail
      gradient below 10^-4 of the peak.
  }];
  let options = [
    Option<"approximateFunctions", "approximate-functions", "bool", "false",
           "Mark the surrogates' ops `fastmath<afn>`: the target may "
           "evaluate their functions (exp, division...) to a few ulp">,
  ];
  let dependentDialects = ["::mlir::arith::ArithDialect",
                           "::mlir::math::MathDialect"];
}

#endif // FLEXSN_DIALECT_FLEXSN_TRANSFORMS_PASSES_TD
