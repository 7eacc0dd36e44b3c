"""A spiking block as one fused kernel: `Block(neuron, pre=Affine(C),
post=Residual("add"))`.

The block is sent to the compiler as a declaration (one `flexsn.block` op:
neuron, pre-op, connection, readout, storage type), which
`flexsn-expand-blocks` writes as a function on tensors (a linalg op for the
pre-op, a scan of the neuron, a linalg op for the post-op); fusion makes it
one scan, compiled to an inference, a forward and a backward kernel. Those
kernels have a neuron kernel's interface, so the block runs through the same
autograd Function and custom op as a neuron (`_function.scan`), with the
block in the neuron's place: one input `x`, the neuron's states (and,
with `readout="sum"`, a state holding the sum), one output (none with the
readout), and the parameters `scale` and `shift` (trainable, per channel
or scalar) beside the neuron's own runtime parameters.
"""

import dataclasses
from typing import List, Optional

import torch
from torch import nn

from .. import compiler
from .._dialect import BLOCK_CONNECTIONS, BLOCK_PRES, BLOCK_READOUTS
from .._manifest import NeuronInfo, Param
from ._function import Handle, scan
from ._kernels import DTYPES
from ._state import StatefulModule, initial_states


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
                or self.num_channels < 1):
            raise ValueError(f"Affine num_channels is None or a positive "
                             f"int, got {self.num_channels!r}")


#: SEW-ResNet's connect functions of the neuron's spikes s and the block's
#: input x (the `connection` of a `flexsn.block`).
_RESIDUALS = tuple(op for op in BLOCK_CONNECTIONS if op != "none")
#: The readouts over time a Block takes (None: the sequence).
_READOUTS = tuple(r for r in BLOCK_READOUTS if r != "none")


@dataclasses.dataclass(frozen=True)
class Residual:
    """The post-op joining the neuron's output s and the block's input x:
    "add" (s + x), "and" (s·x) or "iand" ((1 - s)·x), SEW-ResNet's
    ADD, AND and IAND."""
    op: str = "add"

    def __post_init__(self):
        if self.op not in _RESIDUALS:
            raise ValueError(f"Residual op is one of "
                             f"{', '.join(_RESIDUALS)}, got {self.op!r}")


class _CompiledBlock:
    """A block's compiled kernels seen as a neuron's (what Handle and
    NeuronKernels read): `info`, and `kernel(device, variant, dtype)`,
    where the final-state variant is the block's inference kernel (it
    writes final states)."""

    _VARIANTS = {"final-state": "inference", "forward": "forward",
                 "backward": "backward"}

    @staticmethod
    def function_name(block: str, dtype: str) -> str:
        """The block function of each storage type: `@<block>` (f32) or
        `@<block>_<dtype>`."""
        return block if dtype == "f32" else f"{block}_{dtype}"

    def __init__(self, kernels, info: NeuronInfo):
        self.kernels, self.info, self.name = kernels, info, info.name
        self.directory, self.manifest = kernels.directory, kernels.manifest

    def kernel(self, device: str, variant: str, dtype: str,
               deterministic: bool = False, spikes: str = "dense"):
        if variant not in self._VARIANTS or spikes != "dense":
            raise RuntimeError(
                f"{self.name}: a Block has no {variant} kernel with "
                f"{spikes} spikes (it keeps final states, dense spikes)")
        return self.kernels.kernel_of(
            device, self.function_name(self.name, dtype),
            self._VARIANTS[variant], dtype, deterministic)


class Block(StatefulModule):
    """`post(neuron(pre(x)), x)` over sequences, as one fused kernel.

    `neuron` is a FlexSN neuron module of one input and one output (e.g.
    `LIFNode(tau=2.0)`): its compiled step, with its const parameters, is
    the block's (a const write to the neuron rebuilds the block at the
    next call); its runtime and trainable scalar parameters are read from
    it at each call (a trainable one is trained through the block); its
    states start from its reset values (`v_reset`). The block runs
    `[T, ...]` sequences whatever the neuron's `step_mode`. `pre`
    is None or an `Affine`; `post` None or a `Residual`. Calling the block
    with x `[T, N...]` (`[T, B, C, ...]` for a per-channel Affine) of one
    of `storage_types` ("f32", "f16", "bf16"; default f32 only: each is
    compiled), on the CPU or a GPU, returns the output sequence, or with
    `readout="sum"` its sum over time per neuron (`[N...]`: a spike count
    for post=None; the sequence itself is then never stored), and keeps the
    neuron's final states for the next call (`reset()`, `detach()`), as a
    neuron module does; gradients flow to x, the initial states, scale and
    shift and the neuron's trainable parameters through the block's
    backward kernel (one reverse scan)."""

    # A copy builds its kernels at its first call (from the cache, or
    # compiling).
    _process_local = dict(kernels=None, handle=None, _built_for=None)

    def __init__(self, neuron, pre: Optional[Affine] = None,
                 post: Optional[Residual] = None, readout=None,
                 name: str = "block", storage_types=("f32",),
                 targets=None):
        super().__init__()
        if readout is not None and readout not in _READOUTS:
            raise ValueError(f"readout is None or 'sum' (the output's sum "
                             f"over time), got {readout!r}")
        if pre is not None and not isinstance(pre, Affine):
            raise TypeError(f"pre is None or flexsn.torch.Affine, got "
                            f"{type(pre).__name__}")
        if post is not None and not isinstance(post, Residual):
            raise TypeError(f"post is None or flexsn.torch.Residual, got "
                            f"{type(post).__name__}")
        compiled = getattr(neuron, "compiled", None)
        info = getattr(compiled, "info", None)
        if not isinstance(info, NeuronInfo):
            raise TypeError("neuron is a FlexSN neuron module (e.g. "
                            "flexsn.torch.LIFNode(...))")
        if len(info.inputs) != 1 or len(info.outputs) != 1:
            raise ValueError(
                f"a Block's neuron has one input and one output; "
                f"{info.name} has {len(info.inputs)} and "
                f"{len(info.outputs)}")
        shaped = [p.name for p in info.runtime_params if p.shaped]
        if shaped:
            raise ValueError(
                f"{info.name}: per-neuron or per-channel parameters "
                f"({', '.join(shaped)}) cannot be in a Block yet")
        if not name.isidentifier():
            raise ValueError(f"name is an identifier, got {name!r}")
        storage_types = tuple(dict.fromkeys(storage_types))
        if not storage_types or not set(storage_types) <= set(DTYPES.values()):
            raise ValueError(f"storage_types are some of f32, f16, bf16, got "
                             f"{storage_types!r}")
        if readout and storage_types != ("f32",):
            raise ValueError("readout='sum' is float32 only for now: a sum "
                             "over time is kept in float32")
        self.neuron, self.pre, self.post = neuron, pre, post
        self.readout = readout
        self.name, self.targets = name, targets
        self.storage_types = storage_types
        if pre is not None:
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
        info = compiled.info
        self.neuron_params = info.runtime_params
        pre, post, readout, name = self.pre, self.post, self.readout, self.name
        neuron_text = (compiled.directory / "configured.mlir").read_text()
        text = block_module(neuron_text, [
            block_declaration(_CompiledBlock.function_name(name, dtype),
                              info, pre, post, readout, dtype)
            for dtype in self.storage_types])
        self.source = text
        self.kernels = compiler.compile_kernels(text, targets=self.targets)
        outputs = ("y",) if post is not None else info.outputs
        # A sum over time is a state of the kernels, kept only at its end.
        states = info.states + (("readout",) if readout else ())
        if readout:
            outputs = ()
        params = list(self.neuron_params)
        if pre is not None:
            shape = "per_channel" if pre.num_channels else "scalar"
            params[:0] = [Param("scale", "f32", pre.scale, "trainable", shape),
                          Param("shift", "f32", pre.shift, "trainable", shape)]
        # In the kernels' order, which fusion chose: their param buffers,
        # then their scalar params.
        dtype, manifest = self.storage_types[0], self.kernels.manifest
        function = _CompiledBlock.function_name(name, dtype)
        spec = (manifest.find("cpu", "inference", dtype, neuron=function)
                or manifest.find("cuda", "inference", dtype, neuron=function))
        order = [b.binds.name for b in spec.buffers
                 if b.binds.key == ("param", False)]
        order += [n for n, _ in spec.params]
        params.sort(key=lambda p: order.index(p.name))
        self.info = NeuronInfo(name, ("x",), states, outputs, tuple(params))
        self.handle = Handle(_CompiledBlock(self.kernels, self.info))
        self._built_for = compiled

    def reset(self):
        """Forgets the states: the next call starts from the neuron's reset
        values (v_reset for SpikingJelly's neurons)."""
        self.states[:] = [None] * len(self.states)
        self._assigned.clear()

    def extra_repr(self) -> str:
        return (f"name={self.info.name}, pre={self.pre}, post={self.post}, "
                f"readout={self.readout!r}")

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.neuron.compiled is not self._built_for:
            self._build()
        if DTYPES.get(x.dtype) not in self.storage_types:
            raise TypeError(f"{self.info.name}: the block was compiled for "
                            f"{', '.join(self.storage_types)} inputs "
                            f"(storage_types), got {x.dtype}")
        trainable, runtime = [], []
        for p in self.info.runtime_params:
            owner = self if p.name in ("scale", "shift") and self.pre else \
                self.neuron
            value = getattr(owner, p.name)
            (trainable if p.kind == "trainable" else runtime).append(value)
        neuron_states = self.info.states[:len(self.states)]
        inits = initial_states(self.info.name, neuron_states, self.states,
                               self.neuron._reset_values, self._assigned, x)
        if self.readout:
            inits.append(None)  # each call's sum starts at zero
        outputs, states = scan(self.handle, [x], inits, trainable, runtime,
                               False)
        self.states[:] = states[:len(self.states)]
        return states[-1] if self.readout else outputs[0]


def block_module(neuron_text: str, functions) -> str:
    """The neuron's module (as configured: `module { flexsn.neuron ... }`)
    with the block functions added."""
    text = neuron_text.rstrip()
    if not (text.startswith("module {") and text.endswith("}")):
        raise RuntimeError("not a configured neuron module")
    return text[:-1] + "".join(functions) + "}\n"


def block_declaration(function: str, info: NeuronInfo,
                      pre: Optional[Affine], post: Optional[Residual],
                      readout: Optional[str] = None,
                      dtype: str = "f32") -> str:
    """The `flexsn.block` op declaring the block function `@function` over
    sequences of `dtype`; `flexsn-expand-blocks` writes its IR."""
    if pre is None:
        pre_kind = "none"
    else:
        pre_kind = "affine" if pre.num_channels is None else "channel_affine"
    assert pre_kind in BLOCK_PRES
    return (f"  flexsn.block @{function} neuron(@{info.name}) "
            f"pre({pre_kind}) connection({post.op if post else 'none'}) "
            f"readout({readout or 'none'}) storage({dtype})\n")
