"""Autograd over the generated training kernels, and the torch.library op.

`scan(...)` is the one entry point the modules call. With torch >= 2.4 it
is the custom op `flexsn::scan` (fake and autograd registrations), so
`torch.compile(fullgraph=True)` traces it without a graph break; with older
torch (Debian's 1.13) it is a torch.autograd.Function.

Parameters reach `scan` as `trainable` (a tensor per trainable parameter, in
declaration order: 0-d for a scalar one, the neuron shape for a per-neuron
one, [C] for a per-channel one) and `runtime` (the other runtime parameters,
in declaration order: numbers, or float32 tensors of those shapes for
shaped ones). Both paths pass the tensors flat, `inputs + given initial
states + trainable + shaped runtime tensors`; scalar runtime values travel
apart.
"""

import contextlib
import itertools
import threading
from typing import Dict, List, Optional, Sequence

import torch

from .._manifest import kernel_options
from .._targets import for_device, targets
from . import _torch_step
from ._kernels import DTYPES, NeuronKernels, TensorLike, check_inputs
from ._layout import IN_PLACE, call_layout, into_layout

# Kernels by handle: the custom op takes an int, which torch.compile guards on.
_registry: Dict[int, "Handle"] = {}
_registry_lock = threading.Lock()
_next_handle = itertools.count(1)


class Handle:
    """A compiled neuron and how a module calls it."""

    def __init__(self, compiled, deterministic: bool = False, options=()):
        self.compiled = compiled
        self.info = compiled.info
        self.deterministic = deterministic
        # The compile options that choose the inference and final-state
        # kernels (none: the default ones). Options choose no training
        # kernel: kernels they choose store outputs that carry no gradient.
        self.options = kernel_options(options)
        # Whether those kernels pack outputs (bits, in the neurons' logical
        # order): their calls then stay row-major.
        self.packs_outputs = any(
            b.dtype == "bits"
            for t in targets()
            for k in compiled.manifest.kernels_of(t.name)
            if k.options == self.options
            for b in k.buffers
        )
        self._kernels = {}
        # The step as PyTorch operations, what the neuron runs under
        # torch.compile (None: its kernels there too). Loaded here: a file
        # read inside a compiled region would break its graph.
        self.torch_step = None if self.options else _torch_step.load(compiled)
        runtime = self.info.runtime_params
        self.num_trainable = len(self.info.trainable_params)
        # Per non-trainable runtime parameter: whether it is shaped
        # (per-neuron or per-channel).
        self.fixed_shaped = tuple(
            p.shaped for p in self.info.fixed_runtime_params
        )
        self.has_shaped = any(p.shaped for p in runtime)
        # The kernels' scalar arguments, in declaration order: (from a
        # trainable tensor, index, type); and their shaped buffers: (from a
        # trainable tensor, index into trainable / shaped runtime tensors).
        self._scalar_plan, self._shaped_plan = [], []
        t = f = r = 0
        for p in runtime:
            if p.kind == "trainable":
                (self._shaped_plan if p.shaped else self._scalar_plan).append(
                    (True, t, p.type)
                )
                t += 1
            elif p.shaped:
                self._shaped_plan.append((False, f, p.type))
                f += 1
            else:
                self._scalar_plan.append((False, r, p.type))
                r += 1
        with _registry_lock:
            self.id = next(_next_handle)
            _registry[self.id] = self

    def kernels(self, device: torch.device) -> NeuronKernels:
        """The kernels of the target that runs tensors on `device`
        (_targets.for_device: another device, or a ROCm GPU, is an error
        naming the neuron)."""
        kind = for_device(device.type, self.info.name).name
        if kind not in self._kernels:
            self._kernels[kind] = NeuronKernels(self.compiled, kind)
        return self._kernels[kind]

    def kernels_for(self, x: torch.Tensor) -> NeuronKernels:
        """kernels(x.device) without building a device object per call."""
        kernels = self._kernels.get(
            "cuda" if x.is_cuda else "cpu" if x.is_cpu else None
        )
        return kernels if kernels is not None else self.kernels(x.device)

    def deterministic_mode(self):
        """True when the module or torch asks for deterministic kernels,
        "warn" when only torch does with warn_only=True (a kernel with no
        deterministic variant then warns and runs), else False."""
        if self.deterministic:
            return True
        if not torch.are_deterministic_algorithms_enabled():
            return False
        return "warn" if _warn_only() else True


_warn_only = getattr(
    torch, "is_deterministic_algorithms_warn_only_enabled", lambda: False
)


def split_runtime(handle: Handle, runtime: Sequence) -> (List, List):
    """(scalar values, shaped tensors) of `runtime`, the non-trainable
    runtime parameters in declaration order."""
    if not handle.has_shaped:
        return runtime, []
    if len(runtime) != len(handle.fixed_shaped):
        raise ValueError(
            f"{handle.info.name} takes {len(handle.fixed_shaped)} "
            f"non-trainable runtime parameter(s), got {len(runtime)}"
        )
    scalars, fixed = [], []
    for shaped, value in zip(handle.fixed_shaped, runtime):
        (fixed if shaped else scalars).append(value)
    return scalars, fixed


def _runtime_values(
    handle: Handle, trainable: Sequence[torch.Tensor], runtime: Sequence[float]
) -> List:
    """The kernel's scalar runtime parameters in declaration order:
    trainable ones from their tensors, the rest from `runtime` (the scalar
    non-trainable values, converted to their type)."""
    values = []
    for from_trainable, i, type_ in handle._scalar_plan:
        if from_trainable:
            values.append(float(trainable[i]))
        else:
            v = runtime[i]
            values.append(
                bool(v)
                if type_ == "i1"
                else int(v)
                if type_ == "i32"
                else float(v)
            )
    return values


def _shaped_tensors(handle: Handle, trainable, fixed) -> List:
    """The kernels' shaped parameter buffers in declaration order:
    trainable ones from `trainable`, the others from `fixed`."""
    return [
        trainable[i] if from_trainable else fixed[i]
        for from_trainable, i, _ in handle._shaped_plan
    ]


def expand_inits(given, present) -> List:
    """The initial states: the `given` tensors in order where `present`
    says one was given, None elsewhere."""
    given = iter(given)
    return [next(given) if p else None for p in present]


def split_tensors(tensors, num_inputs: int, present, num_trainable: int):
    """(inputs, initial states with None where `present` says absent,
    trainable parameters, shaped runtime parameters) of the flat tensor
    list the op and the autograd Function take."""
    num_inits = sum(present)
    inits = expand_inits(tensors[num_inputs : num_inputs + num_inits], present)
    start = num_inputs + num_inits
    return (
        list(tensors[:num_inputs]),
        inits,
        list(tensors[start : start + num_trainable]),
        list(tensors[start + num_trainable :]),
    )


def final_states(seqs, inits, copy_inits: bool = False):
    """The last step of each state sequence; when T == 0 the initial state
    (a copy with `copy_inits`), zeros where none was given."""
    return [
        s[-1]
        if s.shape[0]
        else (init.clone() if copy_inits else init)
        if init is not None
        else s.new_zeros(s.shape[1:])
        for s, init in zip(seqs, inits)
    ]


def _check_inputs(handle: Handle, inputs, inits, shaped=()):
    check_inputs(handle.info, inputs, inits, shaped)


def _inference(
    handle,
    inputs,
    inits,
    runtime_values,
    store_state_seqs,
    shaped=(),
    in_place=False,
):
    kernels = handle.kernels_for(inputs[0])
    outputs, states = kernels.inference(
        list(inputs),
        list(inits),
        runtime_values,
        store_state_seqs,
        shaped=shaped,
        options=handle.options,
        in_place=in_place,
    )
    return outputs, states


def _check_inference_only(handle: Handle) -> None:
    """Kernels chosen by compile options store outputs that carry no
    gradient (uint8 or packed spikes): their module runs inference only."""
    if handle.options:
        chosen = ", ".join(f"{k}={v}" for k, v in handle.options)
        raise RuntimeError(
            f"{handle.info.name}: its kernels ({chosen}) store outputs "
            f"that carry no gradient, but an input, state or trainable "
            f"parameter requires one: run the module under torch.no_grad() "
            f"(inference), or build it without them for training"
        )


class _ScanFunction(torch.autograd.Function):
    """Forward kernel with saves; backward kernel in reverse time.

    With `finals`, the state results are final states rather than
    sequences: their gradients reach the backward kernel as gradients of
    the final states (`[N...]`), not as `[T, N...]` sequences that are
    zero but for the last step. Absent gradients stay absent (NULL
    buffers).

    `runtime` holds the scalar non-trainable runtime values; the tensors
    are inputs, given initial states, trainable parameters and shaped
    runtime parameters (no gradient). `in_place`: see call_layout's
    IN_PLACE.

    `normalization` (or None): the batch statistics some trainable
    parameters were computed from (a block's batch norm, see
    _block.BatchStatistics), whose own tensors (the batch norm's weight
    and bias) follow the others. Its backward runs in this node's, after
    the kernel's: one autograd node for the batch norm and the block,
    where a node of its own would cost each call the host time of another
    Function (tens of microseconds).

    With `recompute`, the forward runs the inference kernels and saves
    its inputs instead of the workspace; the backward runs the training
    forward again (writing only the workspace) before the backward
    kernel. Nothing of the size of the inputs is then held from the
    forward to the backward beyond the inputs themselves, which a block's
    batch norm already keeps: activation checkpointing of the neuron."""

    @staticmethod
    def forward(
        ctx,
        handle_id,
        runtime,
        num_inputs,
        present,
        finals,
        in_place,
        normalization,
        recompute,
        *tensors,
    ):
        handle = _registry[handle_id]
        if normalization is not None:
            tensors = tensors[: len(tensors) - len(normalization.tensors)]
        inputs, inits, trainable, fixed = split_tensors(
            tensors, num_inputs, present, handle.num_trainable
        )
        values = _runtime_values(handle, trainable, runtime)
        shaped = _shaped_tensors(handle, trainable, fixed)
        kernels = handle.kernels_for(inputs[0])
        if recompute:
            outputs, states = kernels.inference(
                inputs,
                inits,
                values,
                not finals,
                shaped=shaped,
                in_place=in_place,
            )
            workspace = None
        else:
            outputs, states, workspace = kernels.forward(
                inputs, inits, values, shaped, finals, in_place
            )
            if finals:
                # Views of the last step (no copy on the device); an
                # initial state returned as a result must be a new tensor.
                states = final_states(states, inits, copy_inits=True)
        ctx.handle, ctx.values, ctx.finals = handle, values, finals
        ctx.present, ctx.in_place = present, in_place
        ctx.trainable_like = [(t.dtype, t.shape) for t in trainable]
        ctx.num_inputs, ctx.num_fixed = num_inputs, len(fixed)
        ctx.recompute, ctx.num_inits = recompute, len(inits)
        # Only the inputs the backward kernel reads are saved (an input's
        # memory is then free after the forward), and the shaped
        # parameters, which it reads again: saved, so that changing one
        # in place before backward is an error. A recomputing call saves
        # every input and given initial state instead of the workspace.
        read = (
            range(num_inputs)
            if recompute
            else kernels.inputs_read_by_backward(DTYPES[inputs[0].dtype])
        )
        ctx.like = None if 0 in read else TensorLike(inputs[0])
        ctx.normalization = normalization
        normalized = () if normalization is None else (inputs[0],)
        ctx.save_for_backward(
            workspace,
            *(x if i in read else None for i, x in enumerate(inputs)),
            *(inits if recompute else ()),
            *shaped,
            *normalized,
        )
        ctx.set_materialize_grads(False)
        return tuple(outputs) + tuple(states)

    @staticmethod
    def backward(ctx, *grads):
        workspace, *rest = ctx.saved_tensors
        normalization = ctx.normalization
        if normalization is not None:
            *rest, normalized = rest
        inputs, rest = rest[: ctx.num_inputs], rest[ctx.num_inputs :]
        handle = ctx.handle
        like = ctx.like or inputs[0]
        kernels = handle.kernels_for(like)
        if ctx.recompute:
            inits, shaped = rest[: ctx.num_inits], rest[ctx.num_inits :]
            _, _, workspace = kernels.forward(
                list(inputs),
                list(inits),
                ctx.values,
                shaped,
                ctx.finals,
                ctx.in_place,
                results=False,
            )
        else:
            shaped = rest
        n_out = kernels.num_outputs
        grad_outputs, grad_states = grads[:n_out], grads[n_out:]
        none = [None] * kernels.num_states
        grad_inputs, grad_inits, grad_params = kernels.backward(
            grad_outputs,
            none if ctx.finals else grad_states,
            workspace,
            inputs,
            ctx.values,
            handle.deterministic_mode(),
            like,
            grad_finals=grad_states if ctx.finals else none,
            present=ctx.present,
            shaped=shaped,
            in_place=ctx.in_place,
        )
        # Each in its parameter's dtype and shape (no op where it is:
        # each costs the host microseconds on the GPU machines).
        grad_params = [
            g
            if g.dtype == dtype and g.shape == shape
            else g.to(dtype).reshape(shape)
            for g, (dtype, shape) in zip(grad_params, ctx.trainable_like)
        ]
        grad_inits = [g for g, p in zip(grad_inits, ctx.present) if p]
        extra = ()
        if normalization is not None:
            grad_inputs[0], extra = normalization.backward(
                normalized,
                grad_inputs[0],
                grad_params,
                ctx.needs_input_grad[8],
            )
        return (
            (None,) * 8
            + tuple(grad_inputs)
            + tuple(grad_inits)
            + tuple(grad_params)
            + (None,) * ctx.num_fixed
            + tuple(extra)
        )


def scan_autograd(
    handle: Handle,
    inputs,
    inits,
    trainable,
    runtime,
    store_state_seqs: bool,
    in_place: bool = False,
    normalization=None,
    recompute: bool = False,
):
    """Outputs and states (sequences, or final states when not
    `store_state_seqs`), differentiable through the training kernels when
    any tensor needs a gradient. `in_place`: see call_layout's IN_PLACE;
    `normalization`, `recompute`: see _ScanFunction."""
    runtime, fixed = split_runtime(handle, runtime)
    extra = () if normalization is None else normalization.tensors
    needs_grad = torch.is_grad_enabled() and any(
        t is not None and t.requires_grad
        for t in itertools.chain(inputs, inits, trainable, extra)
    )
    if not needs_grad:
        # The inference path checks the inputs once per layout it plans.
        values = _runtime_values(handle, trainable, runtime)
        shaped = _shaped_tensors(handle, trainable, fixed)
        return _inference(
            handle, inputs, inits, values, store_state_seqs, shaped, in_place
        )
    _check_inference_only(handle)
    _check_inputs(
        handle, inputs, inits, _shaped_tensors(handle, trainable, fixed)
    )
    present = tuple(s is not None for s in inits)
    results = _ScanFunction.apply(
        handle.id,
        tuple(runtime),
        len(inputs),
        present,
        not store_state_seqs,
        in_place,
        normalization,
        bool(recompute),
        *inputs,
        *(s for s in inits if s is not None),
        *trainable,
        *fixed,
        *extra,
    )
    n_out = len(handle.info.outputs)
    return list(results[:n_out]), list(results[n_out:])


#: Under torch.compile, a call of fewer neurons per step (the input's
#: elements over T) runs the neuron's PyTorch step (Inductor fuses it with
#: its neighbours, and the step costs the host nothing apart), a larger one
#: its kernels (the custom op): Inductor's own scan of a large call reads
#: and writes more than the kernels do. Measured on an H200, float32,
#: row-major, training (docs/perf/zoo/README.md, "Under torch.compile").
TORCH_STEP_MAX_NEURONS = 1 << 22

#: How a call under torch.compile picks between its kernels and the
#: PyTorch step (set_compile_policy).
COMPILE_POLICIES = ("by_size", "kernels", "torch_step")
_compile_policy = "by_size"


def set_compile_policy(policy: str) -> None:
    """How FlexSN neurons run under torch.compile, for the graphs traced
    from now on: "by_size" (the default) runs a call of fewer than
    TORCH_STEP_MAX_NEURONS neurons per step as the neuron's PyTorch step,
    which Inductor fuses with its neighbours, and a larger one as its
    kernels; "kernels" runs every call as its kernels, which is faster
    where the compiled step replays as CUDA graphs
    (torch.compile(mode="reduce-overhead"): a kernel's call then costs the
    host nothing); "torch_step" runs every call as the PyTorch step. Each
    computes the same (docs/Python.md, "Under torch.compile")."""
    global _compile_policy
    if policy not in COMPILE_POLICIES:
        raise ValueError(
            f"set_compile_policy: unknown policy {policy!r} "
            f"(one of {', '.join(COMPILE_POLICIES)})"
        )
    _compile_policy = policy


def get_compile_policy() -> str:
    """The policy set_compile_policy last set ("by_size" unless set)."""
    return _compile_policy


@contextlib.contextmanager
def compile_policy(policy: str):
    """set_compile_policy(policy) for the graphs traced inside the block;
    the policy before it again after, however the block ends."""
    before = _compile_policy
    set_compile_policy(policy)
    try:
        yield
    finally:
        set_compile_policy(before)


def _runs_torch_step(x) -> bool:
    """Whether a traced call on input `x` ([T, N...], T > 0) runs the
    PyTorch step under the compile policy."""
    if _compile_policy == "by_size":
        return x.numel() < TORCH_STEP_MAX_NEURONS * x.shape[0]
    return _compile_policy == "torch_step"


_is_compiling = getattr(getattr(torch, "compiler", None), "is_compiling", None)


def compiling() -> bool:
    """Whether torch.compile is tracing this call (never on torch 1.x)."""
    return _is_compiling is not None and _is_compiling()


def has_custom_op() -> bool:
    """Whether this torch has torch.library.custom_op (2.4 and newer)."""
    return hasattr(torch, "library") and hasattr(torch.library, "custom_op")


_HAS_CUSTOM_OP = has_custom_op()

if _HAS_CUSTOM_OP:
    from torch import Tensor

    def _decode(present_mask: int, num_states: int):
        return [bool(present_mask >> i & 1) for i in range(num_states)]

    @torch.library.custom_op("flexsn::scan", mutates_args=())
    def _scan_op(
        handle_id: int,
        tensors: List[Tensor],
        num_inputs: int,
        present_mask: int,
        runtime: List[float],
        training: bool,
        store_state_seqs: bool,
        recompute: bool,
    ) -> List[Tensor]:
        """Outputs, then states (sequences when store_state_seqs; else
        final states, which training returns as `[steps, N...]`, see
        NeuronKernels.state_steps), then the workspace when training.
        Training with `recompute` runs the inference kernels (no
        workspace): its backward recomputes the saves.
        `tensors` are the inputs, the given initial states, the
        trainable parameters and the shaped runtime parameters;
        `present_mask` has bit s set when initial state s is given;
        `runtime` holds the scalar non-trainable runtime parameters as
        floats (bools and ints convert exactly), which torch.compile
        treats as constants of the graph."""
        handle = _registry[handle_id]
        present = _decode(present_mask, len(handle.info.states))
        inputs, inits, trainable, fixed = split_tensors(
            tensors, num_inputs, present, handle.num_trainable
        )
        values = _runtime_values(handle, trainable, runtime)
        shaped = _shaped_tensors(handle, trainable, fixed)
        kernels = handle.kernels_for(inputs[0])
        if training and not recompute:
            outputs, states, workspace = kernels.forward(
                inputs, inits, values, shaped, not store_state_seqs
            )
            return outputs + states + [workspace]
        outputs, states = kernels.inference(
            inputs,
            inits,
            values,
            store_state_seqs,
            shaped=shaped,
            options=handle.options,
        )
        return outputs + states

    @_scan_op.register_fake
    def _(
        handle_id,
        tensors,
        num_inputs,
        present_mask,
        runtime,
        training,
        store_state_seqs,
        recompute,
    ):
        handle = _registry[handle_id]
        x = tensors[0]
        info = handle.info
        outputs = handle.kernels(x.device).empty_outputs(
            x, () if training else handle.options
        )
        training = training and not recompute
        if training:
            kernels = handle.kernels(x.device)
            steps = kernels.state_steps(
                kernels.forward_kernel(_dtype_name(x), not store_state_seqs),
                x.shape[0],
            )
            states = [x.new_empty((n,) + tuple(x.shape[1:])) for n in steps]
        elif store_state_seqs:
            states = [
                torch.empty_like(x, memory_format=torch.contiguous_format)
                for _ in info.states
            ]
        else:
            states = [x.new_empty(x.shape[1:]) for _ in info.states]
        if not training:
            return outputs + states
        kernels = handle.kernels(x.device)
        spec = kernels.forward_kernel(
            _dtype_name(x), not store_state_seqs
        ).spec
        n = 1
        for d in x.shape[1:]:
            n = n * d
        # Symbolic with dynamic shapes (torch.compile's automatic dynamic
        # after a shape changes): evaluate_size builds it from SymInts.
        nbytes = spec.workspace_size(x.shape[0], n, n)
        return (
            outputs
            + states
            + [x.new_empty(((nbytes + 3) // 4,), dtype=torch.float32)]
        )

    @torch.library.custom_op("flexsn::scan_backward", mutates_args=())
    def _scan_backward_op(
        handle_id: int,
        grads: List[Optional[Tensor]],
        workspace: Optional[Tensor],
        inputs: List[Tensor],
        inits: List[Tensor],
        trainable: List[Tensor],
        fixed: List[Tensor],
        present_mask: int,
        runtime: List[float],
        finals: bool,
    ) -> List[Tensor]:
        """Gradients of the inputs, the given initial states and the
        trainable parameters (each of its parameter's shape and dtype);
        `fixed` are the shaped runtime parameters (no gradient). With
        `finals` (the forward did not store state sequences), the states'
        gradients are those of the final states where the forward kernel
        kept only those. Without a `workspace` (a recomputing forward,
        which returned final states as `[N...]`), the training forward
        first recomputes it from the inputs and the given initial states
        `inits`."""
        handle = _registry[handle_id]
        present = _decode(present_mask, len(handle.info.states))
        kernels = handle.kernels_for(inputs[0])
        values = _runtime_values(handle, trainable, runtime)
        shaped = _shaped_tensors(handle, trainable, fixed)
        n_out = kernels.num_outputs
        grad_states, grad_finals = grads[n_out:], None
        if workspace is None:
            _, _, workspace = kernels.forward(
                inputs,
                expand_inits(inits, present),
                values,
                shaped,
                finals,
                results=False,
            )
            if finals:
                grad_finals, grad_states = grad_states, [None] * len(
                    grad_states
                )
        elif kernels.forward_kernel(
            _dtype_name(inputs[0]), finals
        ).spec.final_states:
            # [steps, N...] with steps = min(T, 1): the last step's.
            grad_finals = [
                None if g is None or not g.shape[0] else g[-1]
                for g in grad_states
            ]
            grad_states = [None] * len(grad_states)
        gi, gs, gp = kernels.backward(
            grads[:n_out],
            grad_states,
            workspace,
            inputs,
            values,
            handle.deterministic_mode(),
            inputs[0],
            grad_finals=grad_finals,
            present=present,
            shaped=shaped,
        )
        gs = [g for g, p in zip(gs, present) if p]
        gp = [g.to(t.dtype).reshape(t.shape) for g, t in zip(gp, trainable)]
        # A custom op's outputs may not alias each other: per-channel
        # gradients are rows of one buffer (NeuronKernels.backward).
        gp = [g if g._base is None else g.clone() for g in gp]
        return gi + gs + gp

    @_scan_backward_op.register_fake
    def _(
        handle_id,
        grads,
        workspace,
        inputs,
        inits,
        trainable,
        fixed,
        present_mask,
        runtime,
        finals,
    ):
        x = inputs[0]
        handle = _registry[handle_id]
        present = _decode(present_mask, len(handle.info.states))
        return (
            [
                torch.empty_like(x, memory_format=torch.contiguous_format)
                for _ in inputs
            ]
            + [x.new_empty(x.shape[1:]) for p in present if p]
            + [torch.empty_like(t) for t in trainable]
        )

    def _setup_context(ctx, inputs, output):
        (
            handle_id,
            tensors,
            num_inputs,
            present_mask,
            runtime,
            training,
            store_state_seqs,
            recompute,
        ) = inputs
        handle = _registry[handle_id]
        present = _decode(present_mask, len(handle.info.states))
        ins, inits, trainable, fixed = split_tensors(
            tensors, num_inputs, present, handle.num_trainable
        )
        ctx.handle_id, ctx.present_mask = handle_id, present_mask
        ctx.runtime, ctx.finals = runtime, not store_state_seqs
        ctx.num_inputs, ctx.num_trainable = num_inputs, len(trainable)
        ctx.num_fixed = len(fixed)
        ctx.recompute = recompute
        ctx.num_results = len(output) - (0 if recompute else 1)
        if recompute:
            # The backward recomputes the workspace from every input and
            # given initial state.
            given = [s for s in inits if s is not None]
            ctx.num_inits = len(given)
            ctx.save_for_backward(*ins, *given, *trainable, *fixed)
            return
        # An input the backward kernel does not read is saved as a stand-in
        # of its shape and dtype (one element), not holding its memory.
        read = handle.kernels_for(ins[0]).inputs_read_by_backward(
            DTYPES[ins[0].dtype]
        )
        ins = [
            x if i in read else x.new_zeros(()).expand(x.shape)
            for i, x in enumerate(ins)
        ]
        ctx.num_inits = 0
        ctx.save_for_backward(output[-1], *ins, *trainable, *fixed)

    def _backward(ctx, grads):
        rest = list(ctx.saved_tensors)
        workspace = None if ctx.recompute else rest.pop(0)
        n_in, n_tr = ctx.num_inputs, ctx.num_trainable
        n_init = ctx.num_inits
        inputs, inits = rest[:n_in], rest[n_in : n_in + n_init]
        trainable = rest[n_in + n_init : n_in + n_init + n_tr]
        fixed = rest[n_in + n_init + n_tr :]
        results = _scan_backward_op(
            ctx.handle_id,
            list(grads[: ctx.num_results]),
            workspace,
            list(inputs),
            list(inits),
            list(trainable),
            list(fixed),
            ctx.present_mask,
            ctx.runtime,
            ctx.finals,
        )
        # Non-tensor arguments get None; a list argument, a list of them
        # (the shaped runtime parameters among `tensors` get None).
        return (
            None,
            list(results) + [None] * ctx.num_fixed,
            None,
            None,
            [None] * len(ctx.runtime),
            None,
            None,
            None,
        )

    _scan_op.register_autograd(_backward, setup_context=_setup_context)

    def _dtype_name(x):
        return DTYPES[x.dtype]


def scan(
    handle: Handle,
    inputs,
    inits,
    trainable,
    runtime,
    store_state_seqs: bool,
    normalization=None,
    recompute: bool = False,
):
    """Runs a neuron over sequences: (outputs, states), differentiable
    through the generated training kernels; with `recompute`, a training
    call keeps its inputs instead of the workspace, which its backward
    recomputes (_ScanFunction). States are sequences with
    `store_state_seqs`, else final states. `trainable`: a tensor per
    trainable parameter (declaration order; a per-neuron one of the neuron
    shape, a per-channel one of shape [C], float32); `runtime`: the other
    runtime parameters (declaration order; numbers, or float32 tensors of
    those shapes). With per-channel parameters the inputs are
    `[T, B, C, ...]`. `normalization`: see _ScanFunction; where the scan
    does not run through it (torch.compile, a layout it converts),
    `normalization.attach` makes the input and those parameters
    differentiable through the statistics first."""
    if normalization is not None and compiling():
        inputs, trainable = normalization.attach(inputs, trainable)
        normalization = None
    if (
        compiling()
        and handle.torch_step is not None
        and not handle.has_shaped
        and inputs[0].shape[0] > 0
        and _runs_torch_step(inputs[0])
    ):
        # Under torch.compile, a small call (or every call, as the policy
        # says): the step as PyTorch operations, which Inductor fuses with
        # the neuron's neighbours (_torch_step).
        _check_inputs(handle, inputs, inits)
        info = handle.info
        params = dict(zip((p.name for p in info.trainable_params), trainable))
        params.update(
            zip((p.name for p in info.fixed_runtime_params), runtime)
        )
        return _torch_step.run(
            handle.torch_step, inputs, inits, params, store_state_seqs
        )
    # Eager calls skip the dispatcher (tens of microseconds per call); the
    # custom op is what torch.compile traces for a neuron without a
    # PyTorch step.
    if not _HAS_CUSTOM_OP or not compiling():
        layout = call_layout(
            handle.info,
            handle.packs_outputs,
            inputs,
            inits,
            trainable,
            runtime,
        )
        if layout is None or layout is IN_PLACE:
            return scan_autograd(
                handle,
                inputs,
                inits,
                trainable,
                runtime,
                store_state_seqs,
                layout is IN_PLACE,
                normalization,
                recompute,
            )
        if normalization is not None:
            inputs, trainable = normalization.attach(inputs, trainable)
        # Channels-last and other dense layouts: viewed row-major and back.
        outputs, states = scan_autograd(
            handle,
            *into_layout(
                layout, handle.info, inputs, inits, trainable, runtime
            ),
            store_state_seqs,
            recompute=recompute,
        )
        back = layout.sequence_back if store_state_seqs else layout.step_back
        return (
            [layout.sequence_back(y) for y in outputs],
            [back(s) for s in states],
        )
    runtime, fixed = split_runtime(handle, runtime)
    _check_inputs(
        handle, inputs, inits, _shaped_tensors(handle, trainable, fixed)
    )
    training = torch.is_grad_enabled() and any(
        t is not None and t.requires_grad
        for t in itertools.chain(inputs, inits, trainable)
    )
    if training:
        _check_inference_only(handle)
    present_mask = sum(1 << i for i, s in enumerate(inits) if s is not None)
    tensors = (
        list(inputs)
        + [s for s in inits if s is not None]
        + list(trainable)
        + list(fixed)
    )
    results = _scan_op(
        handle.id,
        tensors,
        len(inputs),
        present_mask,
        [float(v) for v in runtime],
        training,
        store_state_seqs,
        bool(recompute),
    )
    n_out = len(handle.info.outputs)
    outputs = list(results[:n_out])
    states = list(results[n_out : n_out + len(handle.info.states)])
    if training and not store_state_seqs and not recompute:
        states = final_states(states, inits)
    return outputs, states
