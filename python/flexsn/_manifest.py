"""Kernel signatures as the compiler describes them (the JSON manifest).

Everything the package knows about a kernel -- its buffers in launch order,
their roles and dtypes, where each workspace part lies, its runtime
parameters -- is read here from the manifest flexsn-compile writes (the
output of `flexsn-translate --flexsn-to-manifest`). Nothing about a neuron
or an argument position is hard-coded.
"""

import ast
import dataclasses
import functools
from typing import Dict, List, Optional, Sequence, Tuple

from ._targets import target, targets

MANIFEST_FORMAT = "flexsn-manifest"
MANIFEST_VERSION = 12

#: Bytes per element of each storage dtype the compiler emits; "bits"
#: (spikes packed 8 per byte) is 0, the runtime's FLEXSN_BIT_PACKED.
ELEMENT_BYTES = {
    "f32": 4,
    "f16": 2,
    "bf16": 2,
    "u8": 1,
    "bits": 0,
    "i1": 1,
    "i32": 4,
}


class ManifestError(ValueError):
    """A manifest that this package cannot read (wrong format or version)."""


def evaluate_size(formula: str, **sizes: int) -> int:
    """Evaluates a manifest size formula such as
    `1 * T * ld * 4 + 4 + 4 * 1 * ceil(N / 256)` exactly, over integers.

    Only numbers, the given names, `+ - * /` and `ceil` are accepted, so a
    manifest cannot run code. Launches evaluate the same few formulas at the
    same sizes over and over: results are memoized. A size may also be
    symbolic (torch.compile's SymInt, with dynamic shapes): the formula is
    then built from it with integer operations (a division's divisor must
    be a number)."""
    if all(type(v) is int for v in sizes.values()):
        return _evaluate(formula, tuple(sorted(sizes.items())))
    return _whole(formula, _visit(formula, _parse(formula), sizes))


@functools.lru_cache(maxsize=4096)
def _evaluate(formula: str, sizes: Tuple[Tuple[str, int], ...]) -> int:
    return _whole(formula, _visit(formula, _parse(formula), dict(sizes)))


def _whole(formula: str, value) -> int:
    numerator, denominator = value
    if denominator == 1:
        return numerator
    if isinstance(numerator, int) and numerator % denominator:
        raise ManifestError(f"size formula {formula!r} is not an integer")
    return numerator // denominator


def _visit(formula: str, node, names):
    """The value of `node` as (numerator, denominator): the denominator a
    positive int, the numerator an int or a symbolic size; exact."""
    if isinstance(node, ast.Expression):
        return _visit(formula, node.body, names)
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return node.value, 1
    if isinstance(node, ast.Name) and node.id in names:
        return names[node.id], 1
    if isinstance(node, ast.BinOp) and isinstance(
        node.op, (ast.Add, ast.Sub, ast.Mult, ast.Div)
    ):
        a, b = _visit(formula, node.left, names)
        c, d = _visit(formula, node.right, names)
        if isinstance(node.op, ast.Add):
            return a * d + c * b, b * d
        if isinstance(node.op, ast.Sub):
            return a * d - c * b, b * d
        if isinstance(node.op, ast.Mult):
            return a * c, b * d
        if not isinstance(c, int) or c == 0:
            raise ManifestError(
                f"size formula {formula!r}: a division by zero or by a "
                f"symbolic size"
            )
        return (a * d, b * c) if c > 0 else (-a * d, -b * c)
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id == "ceil"
        and len(node.args) == 1
        and not node.keywords
    ):
        numerator, denominator = _visit(formula, node.args[0], names)
        return -(-numerator // denominator), 1
    raise ManifestError(f"unsupported size formula {formula!r}")


@functools.lru_cache(maxsize=256)
def _parse(formula: str) -> ast.Expression:
    try:
        return ast.parse(formula, mode="eval")
    except SyntaxError:
        raise ManifestError(f"unsupported size formula {formula!r}") from None


@dataclasses.dataclass(frozen=True)
class Param:
    name: str
    type: str  # "f32", "i1", "i32"
    default: object
    kind: str  # "const", "runtime", "trainable"
    shape: str = "scalar"  # "scalar", "per_neuron" or "per_channel"

    @property
    def per_neuron(self) -> bool:
        """One value per neuron (a `[N]` buffer of the kernels), not a
        scalar kernel argument."""
        return self.shape == "per_neuron"

    @property
    def per_channel(self) -> bool:
        """One value per channel (a `[C]` buffer of the kernels, whose
        neurons are then `[B, C, S]`)."""
        return self.shape == "per_channel"

    @property
    def shaped(self) -> bool:
        """A buffer of the kernels (per-neuron or per-channel), not a
        scalar argument."""
        return self.shape != "scalar"


def _view():
    """A field of NeuronInfo derived from the others in __post_init__: not
    an argument, not shown, not compared."""
    return dataclasses.field(init=False, repr=False, compare=False)


@dataclasses.dataclass(frozen=True)
class NeuronInfo:
    name: str
    inputs: Tuple[str, ...]
    states: Tuple[str, ...]
    outputs: Tuple[str, ...]
    params: Tuple[Param, ...]

    # Views of the fields, read on every kernel call, computed once in
    # __post_init__ as plain attributes (equality and hashing read the
    # fields only). Never lazily: torch.compile that traces the first read
    # of a lazily cached one sees the object change inside the frame, and
    # fails its own guards ("Guard failed on the same frame it was
    # created").
    #: The parameters the kernels take at run time (not `const`).
    runtime_params: Tuple[Param, ...] = _view()
    #: The trainable ones, in declaration order.
    trainable_params: Tuple[Param, ...] = _view()
    #: The runtime parameters that are not trainable, in declaration order:
    #: the `runtime` values a call passes.
    fixed_runtime_params: Tuple[Param, ...] = _view()
    #: The kernels' scalar `param` arguments, in declaration order.
    scalar_runtime_params: Tuple[Param, ...] = _view()
    #: The kernels' `per_neuron_param` buffers, in declaration order.
    per_neuron_params: Tuple[Param, ...] = _view()
    #: The kernels' `per_channel_param` buffers, in declaration order.
    per_channel_params: Tuple[Param, ...] = _view()
    #: The kernels' parameter buffers (per-neuron and per-channel), in
    #: declaration order: the order the kernels take them in.
    shaped_params: Tuple[Param, ...] = _view()
    #: Whether the kernels see the neurons as `[B, C, S]` (the neuron has a
    #: per-channel parameter): inputs are then `[T, B, C, ...]`.
    channels: bool = _view()

    def __post_init__(self):
        runtime = tuple(p for p in self.params if p.kind != "const")
        views = dict(
            runtime_params=runtime,
            trainable_params=tuple(
                p for p in self.params if p.kind == "trainable"
            ),
            fixed_runtime_params=tuple(
                p for p in runtime if p.kind != "trainable"
            ),
            scalar_runtime_params=tuple(p for p in runtime if not p.shaped),
            per_neuron_params=tuple(p for p in self.params if p.per_neuron),
            per_channel_params=tuple(p for p in self.params if p.per_channel),
            shaped_params=tuple(p for p in self.params if p.shaped),
            channels=any(p.per_channel for p in self.params),
        )
        for name, value in views.items():
            object.__setattr__(self, name, value)


@dataclasses.dataclass(frozen=True)
class Binding:
    """What a buffer holds (`#flexsn.binds`): input, state_init, state_seq,
    state_final or output `index`, parameter `name` (of `shape`), the
    gradient of one of these, workspace slot `index` ("saved") or the
    reduction scratch. Callers match buffers to tensors by this alone."""

    value: str
    index: int = 0
    name: str = ""
    shape: str = "scalar"
    gradient: bool = False

    @property
    def key(self) -> Tuple[str, bool]:
        """The group of values it indexes into: (value, gradient)."""
        return (self.value, self.gradient)


@dataclasses.dataclass(frozen=True)
class Buffer:
    """One buffer a kernel takes, in launch order."""

    name: str  # the C argument's name: for messages only
    role: str  # the runtime's buffer kind, spelled as in flexsn_runtime.h
    dtype: str
    shape: Tuple[str, ...]  # names of run-time sizes: ("T", "N"), ("N",), ()
    binds: Binding
    # A size formula, for workspace parts.
    workspace_offset: Optional[str] = None

    @property
    def element_bytes(self) -> int:
        return ELEMENT_BYTES[self.dtype]

    @property
    def in_workspace(self) -> bool:
        return self.workspace_offset is not None


#: The compile options that chose a kernel, as sorted (name, value) pairs.
KernelOptions = Tuple[Tuple[str, object], ...]


def kernel_options(options) -> KernelOptions:
    """`options` (a mapping or (name, value) pairs) as KernelOptions."""
    return tuple(sorted(dict(options).items()))


@dataclasses.dataclass(frozen=True)
class Kernel:
    """One compiled kernel: a GPU entry pair or a CPU function."""

    name: str
    function: str
    neuron: str
    variant: str
    dtype: str
    buffers: Tuple[Buffer, ...]
    params: Tuple[Tuple[str, str], ...]  # (name, type) of runtime parameters
    workspace_bytes: str
    deterministic: bool = False
    vector_kernel: str = ""
    scalar_kernel: str = ""
    vector_width: int = 1
    channels: bool = False  # sees its neurons as [B, C, S]: takes C and S
    # The compile options that chose it over its variant's default kernel,
    # by their request names, as sorted (name, value) pairs: callers select
    # kernels by them (`find`'s `options`) and name none.
    options: KernelOptions = ()
    # A coupled (recurrent) kernel's (input, output): its neurons are
    # samples of H, the input fed by the output one step before, through
    # its coupling_weights buffer; None for the others.
    coupling: Optional[Tuple[int, int]] = None

    def workspace_size(self, T: int, N: int, ld: int) -> int:
        return evaluate_size(self.workspace_bytes, T=T, N=N, ld=ld or N)

    def buffers_with_role(self, *roles: str) -> List[Buffer]:
        return [b for b in self.buffers if b.role in roles]

    @property
    def final_states(self) -> bool:
        """Whether it writes states only at their end (a final-state or
        final-state training forward kernel), not state sequences."""
        return any(b.binds.key == ("state_final", False) for b in self.buffers)

    def bound(self, value: str, gradient: bool = False) -> List[Buffer]:
        """The buffers holding `value` (or its gradient), by index."""
        return sorted(
            (b for b in self.buffers if b.binds.key == (value, gradient)),
            key=lambda b: (b.binds.index, b.binds.name),
        )


def _neuron(entry: dict) -> NeuronInfo:
    return NeuronInfo(
        name=entry["name"],
        inputs=tuple(entry["inputs"]),
        states=tuple(entry["states"]),
        outputs=tuple(entry["outputs"]),
        params=tuple(
            Param(
                p["name"],
                p["type"],
                p["default"],
                p["kind"],
                p.get("shape", "scalar"),
            )
            for p in entry["params"]
        ),
    )


def _kernel(entry: dict) -> Kernel:
    buffers = tuple(
        Buffer(
            b["name"],
            b["role"],
            b["dtype"],
            tuple(b["shape"]),
            Binding(**b["binds"]),
            b.get("workspace_offset"),
        )
        for b in entry["buffers"]
    )
    params = tuple(
        (a["name"], a["dtype"])
        for a in entry["arguments"]
        if a["role"] == "param"
    )
    return Kernel(
        name=entry["name"],
        function=entry["function"],
        neuron=entry["neuron"],
        variant=entry["variant"],
        dtype=entry["dtype"],
        buffers=buffers,
        params=params,
        workspace_bytes=entry["workspace_bytes"],
        deterministic=entry.get("deterministic", False),
        vector_kernel=entry.get("vector_kernel", ""),
        scalar_kernel=entry.get("scalar_kernel", ""),
        vector_width=entry.get("vector_width", 1),
        channels=entry.get("channels", False),
        options=kernel_options(entry["options"]),
        coupling=(
            (entry["coupling"]["input"], entry["coupling"]["output"])
            if "coupling" in entry
            else None
        ),
    )


@dataclasses.dataclass
class Manifest:
    neurons: Dict[str, NeuronInfo]
    gpu_kernels: List[Kernel]
    cpu_kernels: List[Kernel]
    #: The GPU chips of the kernels' binaries (CUDA's "chips").
    chips: List[str]

    @classmethod
    def from_json(cls, documents: Sequence[dict]) -> "Manifest":
        """Merges the manifests of one neuron's modules (its definition, its
        CPU and its GPU lowering)."""
        manifest = cls({}, [], [], [])
        for doc in documents:
            if doc.get("format") != MANIFEST_FORMAT:
                raise ManifestError("not a FlexSN manifest")
            if doc.get("version") != MANIFEST_VERSION:
                raise ManifestError(
                    f"manifest version {doc.get('version')}, this package "
                    f"reads version {MANIFEST_VERSION}: recompile"
                )
            for entry in doc["neurons"]:
                manifest.neurons[entry["name"]] = _neuron(entry)
            sections = doc["targets"]
            for t in targets():
                if t.name in sections:
                    manifest.kernels_of(t.name).extend(
                        _kernel(k) for k in sections[t.name]["kernels"]
                    )
            for section in sections.values():
                manifest.chips += section.get("chips", [])
        return manifest

    def kernels_of(self, target_name: str) -> List[Kernel]:
        """The kernels of the target `target_name`."""
        return getattr(self, target(target_name).kernels_attr)

    def deterministic_of(self, kernel: Kernel) -> Optional[Kernel]:
        """The deterministic GPU kernel of `kernel`: the same neuron,
        variant, storage and bindings, plus the reduction scratch."""
        bindings = [b.binds for b in kernel.buffers]
        for k in self.gpu_kernels:
            if (
                k.deterministic
                and (k.neuron, k.variant, k.dtype, k.options)
                == (
                    kernel.neuron,
                    kernel.variant,
                    kernel.dtype,
                    kernel.options,
                )
                and [b.binds for b in k.buffers if b.binds.value != "scratch"]
                == bindings
            ):
                return k
        return None

    def find(
        self,
        device: str,
        variant: str,
        dtype: str,
        deterministic: bool = False,
        neuron: Optional[str] = None,
        options: KernelOptions = (),
        final_states: Optional[bool] = None,
        coupled: bool = False,
    ) -> Optional[Kernel]:
        """The first kernel that matches; `options` are those that chose
        it (none: the variant's default kernel), `final_states` (when not
        None) picks between a neuron's two training forward kernels,
        `coupled` between a kernel and its coupled (recurrent) twin."""
        summed = target(device).sums_across_threads
        options = kernel_options(options)
        for k in self.kernels_of(device):
            if (
                k.variant == variant
                and k.dtype == dtype
                and k.options == options
                and (neuron is None or k.neuron == neuron)
                and (final_states is None or k.final_states == final_states)
                and k.deterministic == (deterministic and summed)
                and (k.coupling is not None) == coupled
            ):
                return k
        return None
