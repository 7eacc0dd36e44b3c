"""A spiking block as one fused kernel: `Block(neuron, pre=Affine(C),
post=Residual("add"))`, or around a batch norm:
`Block(neuron, pre=nn.BatchNorm2d(C), post=Residual("add", skip=True))`,
or adding a second input before the neuron (Spiking-ResNet's
`sn(bn(x) + identity)`): `Block(neuron, pre=nn.BatchNorm2d(C),
add_skip=True)`.

The block is sent to the compiler as a declaration (one `flexsn.block` op:
neuron, pre-op, connection and its operand, readout, storage type), which
`flexsn-expand-blocks` writes as a function on tensors (a linalg op for the
pre-op, a scan of the neuron, a linalg op for the post-op); fusion makes it
one scan, compiled to an inference, a forward and a backward kernel. Those
kernels have a neuron kernel's interface, so the block runs through the same
autograd Function and custom op as a neuron (`_function.scan`), with the
block in the neuron's place: the input `x` (and `skip`, the second
input the pre-op adds or the connection reads, when it has one), the
neuron's states (and, with `readout="sum"`, a state holding the sum), one
output (none with the readout), and the parameters `scale` and `shift`
(per channel or scalar) beside the neuron's own runtime parameters.

A batch norm is the pre-op `x·scale + shift` with `scale` and `shift`
computed at each call from its statistics (`batch_norm_affine`): the
batch's in training, computed once per call outside the kernel and
differentiated exactly, or the running ones in eval.
"""

import dataclasses
import functools
from typing import List, Optional

import torch
from torch import nn

from .. import compiler
from .._dialect import (
    BLOCK_CONNECTION_OPERANDS,
    BLOCK_CONNECTIONS,
    BLOCK_PRES,
    BLOCK_READOUTS,
)
from .._manifest import NeuronInfo, Param
from ._function import Handle, compiling, scan
from ._kernels import DTYPES
from ._state import StatefulModule, initial_states

#: The batch norms a block takes as its pre-op (nn.BatchNorm1d, 2d, 3d and
#: their subclasses, such as SpikingJelly's layer.BatchNorm2d).
BatchNorm = nn.modules.batchnorm._BatchNorm


@dataclasses.dataclass(frozen=True)
class Affine:
    """The pre-op `x·scale + shift` (batch-norm's apply step). With
    `num_channels=C` scale and shift are per channel (`[C]`; the block's
    inputs are then `[T, B, C, ...]`), else scalars; both are trainable
    `nn.Parameter`s of the block starting at `scale` and `shift`."""

    num_channels: Optional[int] = None
    scale: float = 1.0
    shift: float = 0.0

    def __post_init__(self):
        if self.num_channels is not None and (
            isinstance(self.num_channels, bool)
            or not isinstance(self.num_channels, int)
            or self.num_channels < 1
        ):
            raise ValueError(
                f"Affine num_channels is None or a positive "
                f"int, got {self.num_channels!r}"
            )


#: SEW-ResNet's connect functions of the neuron's spikes s and the
#: connection's operand (the `connection` of a `flexsn.block`).
_RESIDUALS = tuple(op for op in BLOCK_CONNECTIONS if op != "none")
#: The readouts over time a Block takes (None: the sequence).
_READOUTS = tuple(r for r in BLOCK_READOUTS if r != "none")


@dataclasses.dataclass(frozen=True)
class Residual:
    """The post-op joining the neuron's output s and an operand x: "add"
    (s + x), "and" (s·x) or "iand" ((1 - s)·x), SEW-ResNet's ADD, AND and
    IAND. x is the block's input, or with `skip=True` a second input of the
    output's shape, `block(x, skip)` (SEW-ResNet's identity path, or its
    downsampled identity)."""

    op: str = "add"
    skip: bool = False

    def __post_init__(self):
        if self.op not in _RESIDUALS:
            raise ValueError(
                f"Residual op is one of "
                f"{', '.join(_RESIDUALS)}, got {self.op!r}"
            )
        if not isinstance(self.skip, bool):
            raise TypeError(f"Residual skip is a bool, got {self.skip!r}")


@dataclasses.dataclass(frozen=True)
class BlockShape:
    """What a `flexsn.block` declares around its neuron: the pre-op, the
    connection and its operand, the readout (the dialect's enum cases)."""

    pre: str = "none"
    connection: str = "none"
    operand: str = "input"
    readout: str = "none"

    def __post_init__(self):
        for value, cases in (
            (self.pre, BLOCK_PRES),
            (self.connection, BLOCK_CONNECTIONS),
            (self.operand, BLOCK_CONNECTION_OPERANDS),
            (self.readout, BLOCK_READOUTS),
        ):
            if value not in cases:
                raise ValueError(f"{value!r} is not one of {cases}")
        if self.adds_skip and self.operand == "skip":
            raise ValueError(
                "a block has one skip input: the pre-op adds "
                "it or the connection reads it, not both"
            )

    @property
    def adds_skip(self) -> bool:
        """Whether the pre-op adds the second input `skip`."""
        return self.pre == "add" or self.pre.endswith("_add")

    @property
    def takes_skip(self) -> bool:
        return self.adds_skip or self.operand == "skip"

    @property
    def affine(self) -> Optional[str]:
        """The pre-op's scale and shift: "per_channel", "scalar" or None."""
        if self.pre.startswith("channel_affine"):
            return "per_channel"
        return "scalar" if self.pre.startswith("affine") else None

    @classmethod
    def of(
        cls,
        pre,
        post: Optional[Residual],
        readout: Optional[str],
        add_skip: bool = False,
    ):
        if pre is None:
            pre_kind = "none"
        elif isinstance(pre, BatchNorm) or pre.num_channels is not None:
            pre_kind = "channel_affine"
        else:
            pre_kind = "affine"
        if add_skip:
            pre_kind = "add" if pre is None else pre_kind + "_add"
        return cls(
            pre_kind,
            post.op if post else "none",
            "skip" if post and post.skip else "input",
            readout or "none",
        )


class _CompiledBlock:
    """A block's compiled kernels seen as a neuron's (what Handle and
    NeuronKernels read): `info`, and `kernel(device, variant, dtype)`,
    where the final-state variant is the block's inference kernel (it
    writes final states)."""

    _VARIANTS = {
        "final-state": "inference",
        "forward": "forward",
        "backward": "backward",
    }

    @staticmethod
    def function_name(block: str, dtype: str) -> str:
        """The block function of each storage type: `@<block>` (f32) or
        `@<block>_<dtype>`."""
        return block if dtype == "f32" else f"{block}_{dtype}"

    def __init__(self, kernels, info: NeuronInfo):
        self.kernels, self.info, self.name = kernels, info, info.name
        self.directory, self.manifest = kernels.directory, kernels.manifest

    def kernel(
        self,
        device: str,
        variant: str,
        dtype: str,
        deterministic: bool = False,
        options=(),
        final_states: Optional[bool] = None,
    ):
        # A block's one forward kernel keeps final states.
        if variant not in self._VARIANTS or options:
            raise RuntimeError(
                f"{self.name}: a Block has no {variant} kernel"
                + (f" chosen by {dict(options)}" if options else "")
                + " (it keeps final states; no option chooses its kernels)"
            )
        return self.kernels.kernel_of(
            device,
            self.function_name(self.name, dtype),
            self._VARIANTS[variant],
            dtype,
            deterministic,
        )


@dataclasses.dataclass
class BlockProgram:
    """A block compiled around a neuron as configured: its source, its
    kernels, its interface (`info`) and the Handle that runs them."""

    source: str
    kernels: object
    info: NeuronInfo
    handle: Handle


def compile_block(
    compiled, shape: BlockShape, name: str, storage_types, targets=None
) -> BlockProgram:
    """Compiles the block of `shape` around the neuron `compiled` (a
    neuron module's `compiled`: its const parameters and surrogate), one
    function per storage type."""
    return compile_blocks(compiled, {name: shape}, storage_types, targets)[
        name
    ]


def compile_blocks(compiled, shapes: dict, storage_types, targets=None):
    """{name: BlockProgram} of the blocks `shapes` ({name: BlockShape})
    around the neuron `compiled`, in one compile (one module)."""
    info = compiled.info
    neuron_text = (compiled.directory / "configured.mlir").read_text()
    text = block_module(
        neuron_text,
        [
            block_declaration(
                _CompiledBlock.function_name(name, dtype), info, shape, dtype
            )
            for name, shape in shapes.items()
            for dtype in storage_types
        ],
    )
    kernels = compiler.compile_kernels(text, targets=targets)
    return {
        name: _block_program(
            text, kernels, info, shape, name, storage_types[0]
        )
        for name, shape in shapes.items()
    }


def _block_program(
    text, kernels, info: NeuronInfo, shape: BlockShape, name: str, dtype: str
) -> BlockProgram:
    """The block `name` of compiled `kernels` as a program: its interface
    and the Handle running it."""
    inputs = ("x", "skip") if shape.takes_skip else ("x",)
    outputs = ("y",) if shape.connection != "none" else info.outputs
    # A sum over time is a state of the kernels, kept only at its end.
    states = info.states
    if shape.readout != "none":
        states, outputs = states + ("readout",), ()
    params = list(info.runtime_params)
    if shape.affine:
        params[:0] = [
            Param("scale", "f32", 1.0, "trainable", shape.affine),
            Param("shift", "f32", 0.0, "trainable", shape.affine),
        ]
    # In the kernels' order, which fusion chose: their param buffers, then
    # their scalar params.
    function = _CompiledBlock.function_name(name, dtype)
    manifest = kernels.manifest
    spec = manifest.find(
        "cpu", "inference", dtype, neuron=function
    ) or manifest.find("cuda", "inference", dtype, neuron=function)
    order = [
        b.binds.name for b in spec.buffers if b.binds.key == ("param", False)
    ]
    order += [n for n, _ in spec.params]
    params.sort(key=lambda p: order.index(p.name))
    block_info = NeuronInfo(name, inputs, states, outputs, tuple(params))
    return BlockProgram(
        text, kernels, block_info, Handle(_CompiledBlock(kernels, block_info))
    )


def _batch_statistics(x, running_mean, running_var, factor, eps):
    """(mean, invstd), float32 `[C]`, of x `[T, B, C, ...]` over every
    dimension but C, invstd = (var + eps)^-1/2; the running statistics
    updated (`factor` the momentum) when they are given. On CUDA,
    PyTorch's own batch norm kernels (those of SyncBatchNorm) compute
    them, in one read of x for any dense layout (channels-last
    included)."""
    n = x.numel() // x.shape[2]
    if x.is_cuda:
        flat = x.flatten(0, 1)  # [T·B, C, ...]: a view
        mean, invstd = torch.batch_norm_stats(flat, eps)
        mean, invstd = mean.float(), invstd.float()
        if running_mean is not None:
            # PyTorch's kernel updates statistics of the count's dtype:
            # float32 copies of half ones (`.bfloat16()`), rounded once.
            half = running_mean.dtype != torch.float32
            stats = (
                (running_mean.float(), running_var.float())
                if half
                else (running_mean, running_var)
            )
            torch.batch_norm_gather_stats_with_counts(
                flat,
                mean[None],
                invstd[None],
                *stats,
                factor,
                eps,
                _count(n, mean),
            )
            if half:
                running_mean.copy_(stats[0])
                running_var.copy_(stats[1])
        return mean, invstd
    dims = [d for d in range(x.dim()) if d != 2]
    if x.dtype == torch.float32:
        var, mean = torch.var_mean(x, dims, unbiased=False)
    else:
        # Half inputs: float32 sums of x and x².
        mean = x.mean(dims, dtype=torch.float32)
        square = torch.linalg.vector_norm(x, 2, dims, dtype=torch.float32)
        var = (square.square_().div_(n) - mean.square()).clamp_(min=0)
    if running_mean is not None:
        # In float32, rounded once to the statistics' own dtype (bfloat16
        # after `.bfloat16()`), as nn.BatchNorm does.
        running_mean.copy_(running_mean.float().lerp_(mean, factor))
        running_var.copy_(
            running_var.float().lerp_(var * (n / max(n - 1, 1)), factor)
        )
    return mean, torch.rsqrt(var + eps)


def _batch_affine(weight, bias, mean, invstd):
    """(scale, shift), float32 `[C]`: scale = weight·invstd and shift =
    bias - mean·scale, as PyTorch's CPU kernel folds them."""
    scale = invstd if weight is None else invstd * weight.float()
    shift = torch.addcmul(
        torch.zeros_like(mean) if bias is None else bias.float(),
        mean,
        scale,
        value=-1,
    )
    return scale, shift


def _batch_norm_backward(
    x, grad_y, grad_scale, grad_shift, mean, invstd, scale, needs_x: bool
):
    """(dx, d weight in float32) of a training batch norm read as
    `x·scale + shift`, from grad_y, the gradient its reader gives x
    (g·scale, g the gradient of the pre-activation), and those of scale
    (Σ g·x per channel) and shift (Σ g: also the bias's gradient). One
    elementwise pass over x: grad_y and the gradient through the
    statistics meet there."""
    n = x.numel() // x.shape[2]
    # Σ g·(x - mean) per channel. Through scale = w·invstd, shift = b -
    # mean·scale and the statistics:
    # dx = grad_y - scale·Σg/n - (x - mean)·invstd²·scale·common/n.
    common = torch.addcmul(grad_scale, mean, grad_shift, value=-1)
    grad_weight = invstd * common
    if not needs_x:
        return None, grad_weight
    if x.is_cuda:
        # The kernel computes (dy - (x - mean)·invstd²·sum_dy_xmu/n -
        # sum_dy/n)·invstd·weight: weight = 1/invstd.
        grad_x = torch.batch_norm_backward_elemt(
            grad_y.flatten(0, 1),
            x.flatten(0, 1),
            mean,
            invstd,
            invstd.reciprocal(),
            scale * grad_shift,
            scale * common,
            _count(n, mean, torch.int32),
        ).view(x.shape)
        return grad_x, grad_weight
    slope = invstd.square().mul_(scale).mul_(common).mul_(-1.0 / n)
    offset = torch.addcmul(scale * grad_shift, slope, mean, value=n).mul_(
        -1.0 / n
    )
    view = (1, 1, -1) + (1,) * (x.dim() - 3)
    # In float32: slope is ~1/n, below half precision's range.
    grad_x = torch.addcmul(offset.view(view), x, slope.view(view)).add_(grad_y)
    return (
        grad_x if grad_x.dtype == x.dtype else grad_x.to(x.dtype),
        grad_weight,
    )


class _BatchNormAffine(torch.autograd.Function):
    """`(x, scale, shift)` of a training batch norm whose batch statistics
    (mean, invstd) are given, differentiable through them: x comes back
    as itself (a view), and the block reads that, so that the gradient
    the block gives x and the one through the statistics meet in this
    node's backward (_batch_norm_backward). BatchStatistics.attach: where
    the scan does not take the statistics into its own node."""

    @staticmethod
    def forward(ctx, x, weight, bias, mean, invstd):
        scale, shift = _batch_affine(weight, bias, mean, invstd)
        ctx.save_for_backward(x, mean, invstd, scale)
        ctx.weight_dtype = None if weight is None else weight.dtype
        return x.view_as(x), scale, shift

    @staticmethod
    def backward(ctx, grad_y, grad_scale, grad_shift):
        x, mean, invstd, scale = ctx.saved_tensors
        grad_x, grad_weight = _batch_norm_backward(
            x,
            grad_y,
            grad_scale,
            grad_shift,
            mean,
            invstd,
            scale,
            ctx.needs_input_grad[0],
        )
        if ctx.weight_dtype is None:
            return grad_x, None, None, None, None
        return (
            grad_x,
            grad_weight.to(ctx.weight_dtype),
            grad_shift.to(ctx.weight_dtype),
            None,
            None,
        )


class BatchStatistics:
    """A training batch norm's batch statistics (computed, and the running
    ones updated, once per call) and its weight and bias (`tensors`, the
    ones it has), for a block whose `scale` and `shift` (trainable
    parameters `scale_index` and `shift_index` of its scan) were computed
    from them without a graph: the scan differentiates them in its own
    autograd node (`backward`, see _function._ScanFunction), or, where it
    does not (`attach`), a node of their own."""

    def __init__(self, mean, invstd, scale, weight, bias):
        self.mean, self.invstd, self.scale = mean, invstd, scale
        self.weight, self.bias = weight, bias
        self.tensors = tuple(t for t in (weight, bias) if t is not None)
        self.scale_index = self.shift_index = None

    def attach(self, inputs, trainable):
        """inputs and trainable with x, scale and shift differentiable
        through the statistics."""
        x, scale, shift = _attached(
            inputs[0], self.weight, self.bias, self.mean, self.invstd
        )
        trainable = list(trainable)
        trainable[self.scale_index] = scale
        trainable[self.shift_index] = shift
        return [x] + list(inputs[1:]), trainable

    def backward(self, x, grad_y, grad_params, needs_x: bool):
        """(dx, gradients of `tensors`) from grad_y, the kernel's gradient
        of x, and `grad_params`, its gradients of the trainable parameters
        (those of scale and shift set to None here: they need none)."""
        grad_scale = grad_params[self.scale_index]
        grad_shift = grad_params[self.shift_index]
        grad_params[self.scale_index] = grad_params[self.shift_index] = None
        grad_x, grad_weight = _batch_norm_backward(
            x,
            grad_y,
            grad_scale,
            grad_shift,
            self.mean,
            self.invstd,
            self.scale,
            needs_x,
        )
        return grad_x, tuple(
            g.to(t.dtype)
            for g, t in ((grad_weight, self.weight), (grad_shift, self.bias))
            if t is not None
        )


_counts: dict = {}


def _count(n: int, like: torch.Tensor, dtype=None) -> torch.Tensor:
    """The sample count `[1]` PyTorch's batch norm kernels take (of the
    statistics' dtype, or int32 for the backward), made once per (n,
    device, dtype): not in each replay of a captured CUDA graph."""
    dtype = like.dtype if dtype is None else dtype
    key = (n, like.device, dtype)
    count = _counts.get(key)
    if count is None:
        count = _counts[key] = torch.full(
            (1,), n, dtype=dtype, device=like.device
        )
    return count


def _eager_under_compile(function):
    """`function` run eagerly under torch.compile (a graph break): torch
    2.11's Inductor fails to compile its fusion of the statistics with the
    running-statistics update (a Triton compile error). Outside
    torch.compile `function` itself is called: the wrapper torch.compile
    needs costs each eager call tens of microseconds of host time."""
    compiler = getattr(torch, "compiler", None)
    disable = getattr(compiler, "disable", None)
    if disable is None:
        return function
    disabled = disable(function)

    @functools.wraps(function)
    def call(*args):
        return (disabled if compiling() else function)(*args)

    return call


@_eager_under_compile
def _attached(x, weight, bias, mean, invstd):
    return _BatchNormAffine.apply(x, weight, bias, mean, invstd)


@_eager_under_compile
def batch_norm_affine(bn: BatchNorm, x: torch.Tensor):
    """(scale, shift, statistics), scale and shift float32 `[C]`, such that
    `x·scale + shift` is what `bn` computes on x `[T, B, C, ...]` (over
    T·B samples, as SpikingJelly's multi-step batch norms do), updating
    its running statistics and batch count as nn.BatchNorm does: batch
    statistics in training (or without running ones), the running ones in
    eval, folded as PyTorch's CPU kernel folds them (`invstd·weight`,
    `bias - mean·scale`). With batch statistics, scale and shift have no
    graph and `statistics` (a BatchStatistics) differentiates them, with
    x, in the block's scan (run_block); else `statistics` is None and
    they are differentiable as they are."""
    if x.dim() < 3 or x.shape[2] != bn.num_features:
        raise ValueError(
            f"{type(bn).__name__}({bn.num_features}) takes [T, B, C, ...] "
            f"inputs with C = {bn.num_features}, got {tuple(x.shape)}"
        )
    batch_statistics = bn.training or bn.running_mean is None
    if batch_statistics and x.numel() // x.shape[2] == 1:
        raise ValueError(
            f"Expected more than 1 value per channel when "
            f"training, got input size {list(x.shape)}"
        )
    factor = 0.0 if bn.momentum is None else bn.momentum
    if (
        bn.training
        and bn.track_running_stats
        and bn.num_batches_tracked is not None
    ):
        bn.num_batches_tracked.add_(1)
        if bn.momentum is None:  # a cumulative moving average
            factor = 1.0 / float(bn.num_batches_tracked)
    if batch_statistics and x.numel() == 0:
        # No samples, no statistics: the running ones stay as they are (as
        # nn.BatchNorm leaves them), and nothing is normalized.
        ones = torch.ones(x.shape[2], dtype=torch.float32, device=x.device)
        return ones, torch.zeros_like(ones), None
    if batch_statistics:
        update = bn.training and bn.track_running_stats
        with torch.no_grad():
            mean, invstd = _batch_statistics(
                x,
                bn.running_mean if update else None,
                bn.running_var if update else None,
                factor,
                bn.eps,
            )
            scale, shift = _batch_affine(bn.weight, bn.bias, mean, invstd)
        return (
            scale,
            shift,
            BatchStatistics(mean, invstd, scale, bn.weight, bn.bias),
        )
    invstd = 1.0 / torch.sqrt(bn.running_var.float() + bn.eps)
    mean = bn.running_mean.float()
    if bn.weight is None:
        return invstd, -mean * invstd, None
    scale = invstd * bn.weight.float()
    return scale, bn.bias.float() - mean * scale, None


def run_block(
    program: BlockProgram,
    neuron,
    pre,
    x: torch.Tensor,
    skip: Optional[torch.Tensor],
    scale,
    shift,
    states: List,
    assigned: set,
    statistics: Optional[BatchStatistics] = None,
) -> torch.Tensor:
    """Runs a compiled block on x (and skip) from `states` (a state list as
    modules keep them, updated in place to the final states), reading the
    neuron's runtime and trainable parameters from `neuron`; `scale` and
    `shift` are the pre-op's (with `statistics`, batch_norm_affine's).
    Returns the output sequence, or the readout."""
    info = program.info
    if (skip is not None) != ("skip" in info.inputs):
        raise TypeError(
            f"{info.name}: "
            + (
                "the block takes a second input, " "block(x, skip)"
                if skip is None
                else "the block takes one input x (nothing in "
                "it reads a skip input)"
            )
        )
    if skip is not None and skip.shape != x.shape:
        raise ValueError(
            f"{info.name}: skip has the output's shape "
            f"{tuple(x.shape)}, got {tuple(skip.shape)}"
        )
    trainable, runtime = [], []
    for p in info.runtime_params:
        if pre is not None and p.name in ("scale", "shift"):
            value = scale if p.name == "scale" else shift
            if statistics is not None:
                setattr(statistics, p.name + "_index", len(trainable))
        else:
            value = getattr(neuron, p.name)
        (trainable if p.kind == "trainable" else runtime).append(value)
    readout = "readout" in info.states
    neuron_states = info.states[: len(states)]
    inits = initial_states(
        info.name, neuron_states, states, neuron._reset_values, assigned, x
    )
    if readout:
        inits.append(None)  # each call's sum starts at zero
    inputs = [x] if skip is None else [x, skip]
    outputs, finals = scan(
        program.handle,
        inputs,
        inits,
        trainable,
        runtime,
        False,
        statistics,
        getattr(neuron, "recompute", False),
    )
    states[:] = finals[: len(states)]
    return finals[-1] if readout else outputs[0]


class Block(StatefulModule):
    """`post(neuron(pre(x)), x or skip)` over sequences, as one fused
    kernel.

    `neuron` is a FlexSN neuron module of one input and one output (e.g.
    `LIFNode(tau=2.0)`): its compiled step, with its const parameters, is
    the block's (a const write to the neuron rebuilds the block at the
    next call); its runtime and trainable scalar parameters are read from
    it at each call (a trainable one is trained through the block); its
    states start from its reset values (`v_reset`). The block runs
    `[T, ...]` sequences whatever the neuron's `step_mode`.

    `pre` is None, an `Affine`, or a batch norm module (`nn.BatchNorm1d`,
    `2d`, `3d`, or a subclass): its statistics are the batch's in training
    (its running statistics updated as nn.BatchNorm does, gradients exact
    through them) and its running ones in eval, applied in the kernel as a
    per-channel scale and shift. `post` is None or a `Residual`; with
    `Residual(op, skip=True)` the block takes a second input,
    `block(x, skip)`; with `add_skip=True` it takes one too, added to the
    pre-op's output before the neuron: `post(neuron(pre(x) + skip), x)`
    (Spiking-ResNet's `sn2(bn2(x) + identity)`). Calling the block with x
    `[T, N...]` (`[T, B, C, ...]` for a per-channel pre-op) of one of
    `storage_types` ("f32", "f16", "bf16"; default f32 only: each is
    compiled), on the CPU or a GPU,
    returns the output sequence, or with `readout="sum"` its sum over time
    per neuron (`[N...]`: a spike count for post=None; the sequence itself
    is then never stored), and keeps the neuron's final states for the
    next call (`reset()`, `detach()`), as a neuron module does; gradients
    flow to x, skip, the initial states, the pre-op's parameters and the
    neuron's trainable parameters through the block's backward kernel (one
    reverse scan)."""

    # A copy builds its kernels at its first call (from the cache, or
    # compiling).
    _process_local = dict(program=None, _built_for=None)

    def __init__(
        self,
        neuron,
        pre=None,
        post: Optional[Residual] = None,
        readout=None,
        name: str = "block",
        storage_types=("f32",),
        targets=None,
        add_skip: bool = False,
    ):
        super().__init__()
        if readout is not None and readout not in _READOUTS:
            raise ValueError(
                f"readout is None or 'sum' (the output's sum "
                f"over time), got {readout!r}"
            )
        if pre is not None and not isinstance(pre, (Affine, BatchNorm)):
            raise TypeError(
                f"pre is None, flexsn.torch.Affine or a batch "
                f"norm module, got {type(pre).__name__}"
            )
        if post is not None and not isinstance(post, Residual):
            raise TypeError(
                f"post is None or flexsn.torch.Residual, got "
                f"{type(post).__name__}"
            )
        if not isinstance(add_skip, bool):
            raise TypeError(f"add_skip is a bool, got {add_skip!r}")
        if add_skip and post is not None and post.skip:
            raise ValueError(
                "a Block has one skip input: add_skip=True "
                "adds it before the neuron, so post reads x "
                "(Residual(op, skip=False))"
            )
        info = check_block_neuron(neuron)
        if not name.isidentifier():
            raise ValueError(f"name is an identifier, got {name!r}")
        storage_types = tuple(dict.fromkeys(storage_types))
        if not storage_types or not set(storage_types) <= set(DTYPES.values()):
            raise ValueError(
                f"storage_types are some of f32, f16, bf16, got "
                f"{storage_types!r}"
            )
        if readout and storage_types != ("f32",):
            raise ValueError(
                "readout='sum' is float32 only for now: a sum "
                "over time is kept in float32"
            )
        self.neuron, self.pre, self.post = neuron, pre, post
        self.readout = readout
        self.add_skip = add_skip
        self.shape = BlockShape.of(pre, post, readout, add_skip)
        self.name, self.targets = name, targets
        self.storage_types = storage_types
        if isinstance(pre, Affine):
            size = (pre.num_channels,) if pre.num_channels else ()
            self.scale = nn.Parameter(torch.full(size, float(pre.scale)))
            self.shift = nn.Parameter(torch.full(size, float(pre.shift)))
        self._built_for = None
        self._build()
        self.states: List = [None] * len(info.states)
        self._assigned = set()

    def _build(self):
        """Compiles the block around the neuron as it is now configured
        (its const parameters and surrogate): again after one changed."""
        compiled = self.neuron.compiled
        self.program = compile_block(
            compiled, self.shape, self.name, self.storage_types, self.targets
        )
        self._built_for = compiled

    @property
    def source(self) -> str:
        return self.program.source

    @property
    def kernels(self):
        return self.program.kernels

    @property
    def info(self) -> NeuronInfo:
        return self.program.info

    @property
    def handle(self) -> Handle:
        return self.program.handle

    def reset(self):
        """Forgets the states: the next call starts from the neuron's reset
        values (v_reset for SpikingJelly's neurons)."""
        self.states[:] = [None] * len(self.states)
        self._assigned.clear()

    def extra_repr(self) -> str:
        pre = None if isinstance(self.pre, nn.Module) else self.pre
        return (
            f"name={self.name}, pre={pre}, post={self.post}, "
            f"readout={self.readout!r}"
            + (", add_skip=True" if self.add_skip else "")
        )

    def forward(
        self, x: torch.Tensor, skip: Optional[torch.Tensor] = None
    ) -> torch.Tensor:
        if self.program is None or self.neuron.compiled is not self._built_for:
            self._build()
        if DTYPES.get(x.dtype) not in self.storage_types:
            raise TypeError(
                f"{self.info.name}: the block was compiled for "
                f"{', '.join(self.storage_types)} inputs "
                f"(storage_types), got {x.dtype}"
            )
        scale = shift = statistics = None
        if isinstance(self.pre, BatchNorm):
            scale, shift, statistics = batch_norm_affine(self.pre, x)
        elif self.pre is not None:
            scale, shift = self.scale, self.shift
        return run_block(
            self.program,
            self.neuron,
            self.pre,
            x,
            skip,
            scale,
            shift,
            self.states,
            self._assigned,
            statistics,
        )


def check_block_neuron(neuron) -> NeuronInfo:
    """The interface of a neuron a block can hold: a FlexSN neuron module
    of one input and one output, with scalar runtime parameters."""
    compiled = getattr(neuron, "compiled", None)
    info = getattr(compiled, "info", None)
    if not isinstance(info, NeuronInfo):
        raise TypeError(
            "neuron is a FlexSN neuron module (e.g. "
            "flexsn.torch.LIFNode(...))"
        )
    if len(info.inputs) != 1 or len(info.outputs) != 1:
        raise ValueError(
            f"a Block's neuron has one input and one output; "
            f"{info.name} has {len(info.inputs)} and "
            f"{len(info.outputs)}"
        )
    shaped = [p.name for p in info.runtime_params if p.shaped]
    if shaped:
        raise ValueError(
            f"{info.name}: per-neuron or per-channel parameters "
            f"({', '.join(shaped)}) cannot be in a Block yet"
        )
    return info


def block_module(neuron_text: str, functions) -> str:
    """The neuron's module (as configured: `module { flexsn.neuron ... }`)
    with the block functions added."""
    text = neuron_text.rstrip()
    if not (text.startswith("module {") and text.endswith("}")):
        raise RuntimeError("not a configured neuron module")
    return text[:-1] + "".join(functions) + "}\n"


def block_declaration(
    function: str, info: NeuronInfo, shape: BlockShape, dtype: str = "f32"
) -> str:
    """The `flexsn.block` op declaring the block function `@function` over
    sequences of `dtype`; `flexsn-expand-blocks` writes its IR."""
    connection = shape.connection
    if shape.operand != "input":
        connection += f", {shape.operand}"
    return (
        f"  flexsn.block @{function} neuron(@{info.name}) "
        f"pre({shape.pre}) connection({connection}) "
        f"readout({shape.readout}) storage({dtype})\n"
    )
