"""`flexsn.CompileOptions`: how a neuron is compiled, as one frozen value
that `flexsn.compile`, the FlexSN modules (`FlexSN(..., options=)`) and the
compile cache's key all read.

Its fields are checked against the compile request's schema, which the
compiler declares (CompileRequest.td, its enum values from FlexSNAttrs.td,
copied into `_dialect.COMPILE_REQUEST`) when the value is made, and
normalized (tuples in
the order given without repeats; name -> value mappings as sorted pairs),
so two values that compile the same kernels are equal, and a value is
hashable and pickles."""

import dataclasses
from typing import Mapping, Optional, Tuple

from . import _dialect, _targets

#: The compile targets' names (_targets.TARGETS): the CPU kernels (a shared
#: library) and the CUDA ones (a cubin, or a fatbin for several chips).
TARGETS = tuple(_targets.TARGETS)

Pairs = Tuple[Tuple[str, str], ...]


def _unique(name: str, values) -> tuple:
    if isinstance(values, str):
        values = (values,)
    try:
        return tuple(dict.fromkeys(values))
    except TypeError:
        raise TypeError(
            f"{name} is a sequence of names, got {values!r}"
        ) from None


def _allowed(path: str, field: str) -> tuple:
    """The values the compile request's field `path.field` allows."""
    return tuple(_dialect.COMPILE_REQUEST["objects"][path][field]["values"])


def _check_names(values, allowed, what: str) -> None:
    for value in values:
        if value not in allowed:
            raise ValueError(
                f"unknown {what} '{value}' (one of: {', '.join(allowed)})"
            )


def _pairs(name: str, mapping) -> Pairs:
    """A name -> name mapping (or its pairs) as sorted pairs."""
    if mapping is None:
        return ()
    items = mapping.items() if isinstance(mapping, Mapping) else mapping
    try:
        pairs = tuple(sorted((str(k), str(v)) for k, v in items))
    except (TypeError, ValueError):
        raise TypeError(
            f"{name} maps parameter names to names, got {mapping!r}"
        ) from None
    return pairs


@dataclasses.dataclass(frozen=True)
class CompileOptions:
    """How `flexsn.compile` builds a neuron's kernels.

    - `variants`: the kernels to build (inference, final-state, forward,
      backward);
    - `storage_types`: the sequences' storage types (f32, f16, bf16);
    - `targets`: "cpu" and/or "cuda"; None: the CPU, and CUDA where a CUDA
      toolkit is installed;
    - `chip`: the CUDA architectures (a fatbin for several);
    - `kinds`: parameter name -> const, runtime or trainable;
    - `shapes`: parameter name -> scalar, per_neuron or per_channel
      (applied after `kinds`);
    - `neuron`: which neuron of a file of several;
    - `spike_storage`: how inference and final-state kernels store spike
      outputs (dense, u8, bits);
    - `save_in_storage_type`: f16 and bf16 training saves what the
      backward reads in the storage type (False: in f32);
    - `approximate_surrogates`: CUDA backward kernels evaluate surrogate
      gradients with the GPU's approximate exp and division;
    - `coupled`: also build each kernel coupled from the neuron's first
      output into its first input, s[t] = f(x[t] + W s[t-1]) in one kernel
      over the sequence (what `flexsn.torch.Recurrent` runs).

    `replace(**changes)` gives a copy with some fields changed."""

    variants: Tuple[str, ...] = _dialect.KERNEL_VARIANTS
    storage_types: Tuple[str, ...] = ("f32",)
    targets: Optional[Tuple[str, ...]] = None
    chip: Tuple[str, ...] = ("sm_90",)
    kinds: Pairs = ()
    shapes: Pairs = ()
    neuron: Optional[str] = None
    spike_storage: Tuple[str, ...] = ("dense",)
    save_in_storage_type: bool = True
    approximate_surrogates: bool = False
    coupled: bool = False

    def __post_init__(self):
        def put(name, value):
            object.__setattr__(self, name, value)

        put("variants", _unique("variants", self.variants))
        _check_names(self.variants, _allowed("kernels", "variants"), "variant")
        put("storage_types", _unique("storage_types", self.storage_types))
        _check_names(
            self.storage_types,
            _allowed("kernels", "storage_types"),
            "storage type",
        )
        if self.targets is not None:
            put("targets", _unique("targets", self.targets))
            for t in self.targets:
                if t not in TARGETS:
                    raise ValueError(f"unknown target '{t}' (cpu or cuda)")
        put("chip", _unique("chip", self.chip))
        put("kinds", _pairs("kinds", self.kinds))
        _check_names(
            (kind for _, kind in self.kinds),
            _allowed("configure", "kinds"),
            "parameter kind",
        )
        put("shapes", _pairs("shapes", self.shapes))
        shapes = _allowed("configure", "shapes")
        for name, shape in self.shapes:
            if shape not in shapes:
                raise ValueError(
                    f"unknown shape '{shape}' for parameter '{name}' (one "
                    f"of: {', '.join(shapes)})"
                )
        if self.neuron is not None and not isinstance(self.neuron, str):
            raise TypeError(f"neuron is a name, got {self.neuron!r}")
        put("neuron", self.neuron or None)
        put("spike_storage", _unique("spike_storage", self.spike_storage))
        spikes = _allowed("kernels", "spike_storage")
        _check_names(self.spike_storage, spikes, "spike storage")
        if not self.spike_storage:
            raise ValueError(
                f"spike_storage lists no storage ({', '.join(spikes)})"
            )
        for name in (
            "save_in_storage_type",
            "approximate_surrogates",
            "coupled",
        ):
            if not isinstance(getattr(self, name), bool):
                raise TypeError(
                    f"{name} is a bool, got {getattr(self, name)!r}"
                )

    def replace(self, **changes) -> "CompileOptions":
        return dataclasses.replace(self, **changes)

    @classmethod
    def of(
        cls, options: Optional["CompileOptions"] = None, **fields
    ) -> "CompileOptions":
        """`options` (or the defaults) with `fields` changed; None fields
        are left as they are."""
        base = cls() if options is None else options
        if not isinstance(base, cls):
            raise TypeError(
                f"options is a flexsn.CompileOptions, got "
                f"{type(base).__name__}"
            )
        unknown = set(fields) - {f.name for f in dataclasses.fields(cls)}
        if unknown:
            raise TypeError(
                f"unknown compile option(s) {', '.join(sorted(unknown))} "
                f"(the options: "
                f"{', '.join(f.name for f in dataclasses.fields(cls))})"
            )
        changes = {k: v for k, v in fields.items() if v is not None}
        return base.replace(**changes) if changes else base
