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
import math
from typing import Mapping, Optional, Sequence, Tuple

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


def _option(default, request: str, what: str = ""):
    """A field of CompileOptions that is the compile request's field
    `request` ("object.field"; a `targets.<name>.` field only when that
    target is built), checked and normalized by that field's type and
    values in the schema; `what` names one of its values in errors."""
    return dataclasses.field(
        default=default, metadata={"request": request, "what": what}
    )


def _checked(field: dataclasses.Field, value):
    """`value` of the CompileOptions field `field`, normalized and checked
    by its request field's type and values."""
    path, name = field.metadata["request"].rsplit(".", 1)
    schema = _dialect.COMPILE_REQUEST["objects"][path][name]
    kind, allowed = schema["type"], schema.get("values")
    what = field.metadata["what"]
    if kind == "bool":
        if not isinstance(value, bool):
            raise TypeError(f"{field.name} is a bool, got {value!r}")
        return value
    if kind == "enum_map":
        pairs = _pairs(field.name, value)
        for parameter, entry in pairs:
            if entry not in allowed:
                raise ValueError(
                    f"unknown {what} '{entry}' for parameter '{parameter}' "
                    f"(one of: {', '.join(allowed)})"
                )
        return pairs
    values = _unique(field.name, value)
    if kind == "enums":
        _check_names(values, allowed, what)
    return values


def _parameter_values(values: Optional[Mapping[str, object]]) -> dict:
    """Parameter name -> value as the request takes them: bools, ints and
    finite floats (JSON has no spelling for the others)."""
    checked = {}
    for name, value in sorted((values or {}).items()):
        if not isinstance(value, (bool, int, float)):
            raise TypeError(
                f"parameter values are bool, int or float, not "
                f"{type(value).__name__}"
            )
        if isinstance(value, float) and not math.isfinite(value):
            raise ValueError(
                f"a parameter value must be finite, got {value!r}"
            )
        checked[str(name)] = value
    return checked


def _putter(request: dict, targets: Sequence[str]):
    """A function storing a value at a request path ("kernels.variants"),
    as JSON, leaving out empty values and the fields of targets not
    built; every target built gets its section."""
    sections = request.setdefault("targets", {})
    for t in targets:
        sections[t] = {}

    def put(path: str, value) -> None:
        *objects, name = path.split(".")
        if objects[0] == "targets" and objects[1] not in targets:
            return
        if isinstance(value, tuple) and value and isinstance(value[0], tuple):
            value = dict(value)  # name -> value pairs
        elif isinstance(value, tuple):
            value = list(value)
        if value in ("", [], {}):
            return
        node = request
        for key in objects:
            node = node.setdefault(key, {})
        node[name] = value

    return put


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

    Each field but `targets` and `neuron` is one field of the compile
    request (its metadata names it): `request()` writes them without a
    field's name spelled here twice, and what a request allows is what the
    compiler's schema says.

    `replace(**changes)` gives a copy with some fields changed."""

    variants: Tuple[str, ...] = _option(
        _dialect.KERNEL_VARIANTS, "kernels.variants", "variant"
    )
    storage_types: Tuple[str, ...] = _option(
        ("f32",), "kernels.storage_types", "storage type"
    )
    targets: Optional[Tuple[str, ...]] = None
    chip: Tuple[str, ...] = _option(("sm_90",), "targets.cuda.chips")
    kinds: Pairs = _option((), "configure.kinds", "parameter kind")
    shapes: Pairs = _option((), "configure.shapes", "shape")
    neuron: Optional[str] = None
    spike_storage: Tuple[str, ...] = _option(
        ("dense",), "kernels.spike_storage", "spike storage"
    )
    save_in_storage_type: bool = _option(True, "kernels.save_in_storage_type")
    approximate_surrogates: bool = _option(
        False, "targets.cuda.approximate_surrogates"
    )
    coupled: bool = _option(False, "kernels.coupled")

    def __post_init__(self):
        for field in dataclasses.fields(self):
            if "request" in field.metadata:
                object.__setattr__(
                    self,
                    field.name,
                    _checked(field, getattr(self, field.name)),
                )
        if not self.spike_storage:
            raise ValueError(
                f"spike_storage lists no storage "
                f"({', '.join(_allowed('kernels', 'spike_storage'))})"
            )
        if self.targets is not None:
            object.__setattr__(
                self, "targets", _unique("targets", self.targets)
            )
            for t in self.targets:
                if t not in TARGETS:
                    raise ValueError(
                        f"unknown target '{t}' ({' or '.join(TARGETS)})"
                    )
        if self.neuron is not None and not isinstance(self.neuron, str):
            raise TypeError(f"neuron is a name, got {self.neuron!r}")
        object.__setattr__(self, "neuron", self.neuron or None)

    def request(
        self,
        targets: Sequence[str],
        values: Mapping[str, object] = None,
        surrogate: str = "",
    ) -> dict:
        """The compile request (flexsn-compile --request) of these options
        for `targets`, with parameter values `values` and the surrogate
        attribute text `surrogate`: every field in its request field, as
        JSON values. A CUDA section has no toolkit: where the toolkit is
        belongs to the machine, not to the compile (_compile_tool adds
        it)."""
        request = {"version": _dialect.COMPILE_REQUEST["version"]}
        put = _putter(request, targets)
        for field in dataclasses.fields(self):
            if "request" in field.metadata:
                put(field.metadata["request"], getattr(self, field.name))
        neurons = [self.neuron] if self.neuron else []
        put("configure.neurons", neurons)
        put("kernels.neurons", neurons)
        put("configure.values", _parameter_values(values))
        put("configure.surrogate", surrogate)
        if "cuda" in targets:
            put("targets.cuda.fatbin", len(self.chip) > 1)
        request["neuron_manifest"] = True
        return request

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
