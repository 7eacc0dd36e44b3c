"""`flexsn.torch.convert(model)`: a model's SpikingJelly neurons swapped for
FlexSN's drop-ins, each where the model kept the old one.

SpikingJelly's classes are recognized by module path and class name, so
SpikingJelly need not be importable here: `neuron.IFNode`, `LIFNode`,
`ParametricLIFNode` and `FlexSN(core, ...)`, exactly those classes. A
subclass (its own code would be lost) and any other SpikingJelly neuron are
reported instead, as is a neuron whose settings FlexSN's module would not
keep exactly.
"""

import copy
import numbers
from typing import Dict, List, Optional

import torch
from torch import nn

from .. import surrogate as surrogates
from .._tools import CompileError, ToolNotFoundError
from ..compiler import CacheError
from ._modules import FlexSN, IFNode, LIFNode, ParametricLIFNode

#: Where SpikingJelly defines its neurons and surrogates (the neurons are a
#: package, `neuron.lif` and so on, from 2.0; one module before).
_SJ_NEURONS = "spikingjelly.activation_based.neuron"
_SJ_SURROGATES = "spikingjelly.activation_based.surrogate"

#: SpikingJelly's backend names: each runs the same neuron, so any of them
#: converts (the new module runs FlexSN's kernels).
_SJ_BACKENDS = ("torch", "cupy", "triton", "inductor", "hop")

#: The hooks a swap would drop: they are registered on the old module.
_HOOKS = (
    "_forward_hooks",
    "_forward_pre_hooks",
    "_backward_hooks",
    "_backward_pre_hooks",
)


def convert(
    model: nn.Module,
    inplace: bool = False,
    verbose: bool = False,
    report: Optional[List[str]] = None,
) -> nn.Module:
    """`model` with every SpikingJelly `IFNode`, `LIFNode`,
    `ParametricLIFNode` and `FlexSN` replaced by flexsn.torch's module of
    the same name, in the same attribute (state_dict keys stay the same).

    Each replacement keeps the neuron's settings (`v_threshold`,
    `v_reset`, `detach_reset`, `tau`, `decay_input`, the surrogate,
    `step_mode`, `store_v_seq`; PLIF's learned `w`; FlexSN's `core` and
    counts), its training flag, the device and dtype of its parameters and
    its current state. A neuron the swap cannot keep exactly stays as it
    is: a subclass, another SpikingJelly neuron, a tensor `v_threshold`, a
    surrogate FlexSN lacks, a setting of an unexpected type, hooks, or a
    replacement whose state_dict keys would differ.

    `inplace=False` (the default) converts a deep copy and leaves `model`
    unchanged; `inplace=True` changes `model` itself. A model that is
    itself a neuron returns its replacement. `verbose` prints one line per
    neuron, "swapped: <name> LIFNode -> flexsn.torch.LIFNode" or "not
    swapped: <name> (<class>): <why>"; a list given as `report` gets the
    same lines appended."""
    root = model if inplace else _copy(model)
    lines: List[str] = []
    converted = _convert_tree(root, "", {}, lines)
    if report is not None:
        report.extend(lines)
    if verbose:
        print(
            "\n".join(lines)
            if lines
            else "flexsn.torch.convert: no SpikingJelly neuron found"
        )
    return converted


def _copy(model: nn.Module) -> nn.Module:
    """A deep copy of `model`. States with autograd history (a neuron
    called since its last reset) are copied detached: deepcopy copies only
    graph leaves."""
    memo = {}
    for module in model.modules():
        for item in _tensors_in(list(module.__dict__.values())):
            if item.grad_fn is not None:
                memo[id(item)] = item.detach().clone()
    return copy.deepcopy(model, memo)


def _tensors_in(value):
    """The tensors in `value` and its lists, tuples and dicts (where
    SpikingJelly keeps states: `_memories["states"]` is a list)."""
    if isinstance(value, torch.Tensor):
        yield value
    elif isinstance(value, (list, tuple, dict)):
        for item in value.values() if isinstance(value, dict) else value:
            yield from _tensors_in(item)


class _Refused(Exception):
    """Why a neuron stays as it is."""


#: `_flag`'s default: the attribute must be there.
_REQUIRED = object()


def _convert_tree(
    module: nn.Module, name: str, seen: Dict[int, nn.Module], lines: List[str]
) -> nn.Module:
    """`module`'s replacement, or `module` with its children converted. A
    module the model holds twice gets one replacement (`seen`)."""
    if id(module) in seen:
        return seen[id(module)]
    seen[id(module)] = module
    shown = name or "<model>"
    cls = type(module)
    try:
        replacement = _replacement(module)
    except _Refused as why:
        lines.append(f"not swapped: {shown} ({cls.__name__}): {why}")
        replacement = None
    if replacement is not None:
        seen[id(module)] = replacement
        lines.append(
            f"swapped: {shown} {cls.__name__} -> flexsn.torch."
            f"{type(replacement).__name__}"
        )
        return replacement
    for child_name, child in module._modules.items():
        if child is None:
            continue
        qualified = f"{name}.{child_name}" if name else child_name
        new = _convert_tree(child, qualified, seen, lines)
        if new is not child:
            # In place in the ordered dict: keys keep their order.
            module._modules[child_name] = new
    return module


def _is_spikingjelly(cls: type, package: str) -> bool:
    module = getattr(cls, "__module__", None) or ""
    return module == package or module.startswith(package + ".")


def _replacement(module: nn.Module) -> Optional[nn.Module]:
    """FlexSN's module for a SpikingJelly neuron; None for a module that
    is not one; _Refused for one that cannot be swapped."""
    cls = type(module)
    if not _is_spikingjelly(cls, _SJ_NEURONS):
        base = next(
            (c for c in cls.__mro__[1:] if _is_spikingjelly(c, _SJ_NEURONS)),
            None,
        )
        if base is None:
            return None
        raise _Refused(
            f"a subclass of SpikingJelly's {base.__name__}: "
            f"only the exact classes are swapped, its own code "
            f"would be lost"
        )
    build = _BUILDERS.get(cls.__name__)
    if build is None:
        raise _Refused(
            f"FlexSN has no drop-in for it (drop-ins: "
            f"{', '.join(_BUILDERS)})"
        )
    hooks = [name for name in _HOOKS if getattr(module, name, None)]
    if hooks:
        raise _Refused(
            f"it has hooks ({', '.join(hooks)}) that would stay "
            f"on the old module"
        )
    try:
        new = build(module)
    except (ToolNotFoundError, CacheError):
        raise  # the machine's tools, not the neuron: every swap would fail
    except (TypeError, ValueError, CompileError) as error:
        raise _Refused(
            f"flexsn.torch.{cls.__name__} refused its settings: " f"{error}"
        ) from None
    _match_tensors(module, new)
    old_keys, new_keys = list(module.state_dict()), list(new.state_dict())
    if old_keys != new_keys:
        raise _Refused(
            f"its state_dict keys {old_keys} would become " f"{new_keys}"
        )
    new.train(module.training)
    return new


# -- reading a SpikingJelly neuron --------------------------------------------


def _attribute(module: nn.Module, name: str):
    try:
        return getattr(module, name)
    except AttributeError:
        raise _Refused(f"it has no attribute '{name}'") from None


def _describe(value) -> str:
    if isinstance(value, torch.Tensor):
        return f"a tensor of shape {tuple(value.shape)}"
    return repr(value)


def _number(module: nn.Module, name: str) -> float:
    value = _attribute(module, name)
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise _Refused(f"{name} is {_describe(value)}, not a number")
    return float(value)


def _flag(module: nn.Module, name: str, default=_REQUIRED) -> bool:
    value = (
        _attribute(module, name)
        if default is _REQUIRED
        else getattr(module, name, default)
    )
    if not isinstance(value, bool):
        raise _Refused(f"{name} is {_describe(value)}, not a bool")
    return value


def _int(module: nn.Module, name: str) -> int:
    value = _attribute(module, name)
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise _Refused(f"{name} is {_describe(value)}, not an int")
    return int(value)


def _step_mode(module: nn.Module) -> str:
    value = _attribute(module, "step_mode")
    if value not in ("s", "m"):
        raise _Refused(f"step_mode is {_describe(value)}, not 's' or 'm'")
    return value


def _check_backend(module: nn.Module) -> None:
    """Any of SpikingJelly's backends computes the same neuron; another
    value may be a backend with semantics of its own."""
    backend = getattr(module, "backend", "torch")
    if backend not in _SJ_BACKENDS:
        raise _Refused(
            f"backend is {_describe(backend)}, not one of "
            f"SpikingJelly's ({', '.join(_SJ_BACKENDS)})"
        )


def _surrogate(module: nn.Module):
    """The neuron's surrogate as FlexSN's: one of SpikingJelly's own classes
    (not a subclass: its gradient may differ) or a flexsn surrogate."""
    value = _attribute(module, "surrogate_function")
    if isinstance(value, surrogates.Surrogate):
        return value
    cls = type(value)
    known = {c.__name__ for c in surrogates.ALL}
    if not _is_spikingjelly(cls, _SJ_SURROGATES):
        raise _Refused(
            f"surrogate_function {cls.__name__} is neither "
            f"SpikingJelly's nor FlexSN's"
        )
    if cls.__name__ not in known:
        raise _Refused(
            f"FlexSN has no surrogate {cls.__name__} (it has "
            f"{', '.join(sorted(known))})"
        )
    try:
        return surrogates.coerce(value)
    except (TypeError, ValueError) as error:
        raise _Refused(f"surrogate_function: {error}") from None


def _node_options(module: nn.Module) -> dict:
    """What IFNode, LIFNode and PLIF share, as FlexSN's modules take it."""
    threshold = _attribute(module, "v_threshold")
    if isinstance(threshold, torch.Tensor):
        raise _Refused(
            f"v_threshold is {_describe(threshold)}: FlexSN's "
            f"module would hold it as a per-neuron parameter "
            f"(another state_dict key)"
        )
    v_reset = _attribute(module, "v_reset")
    if v_reset is not None:
        v_reset = _number(module, "v_reset")
    _check_backend(module)
    return dict(
        v_threshold=_number(module, "v_threshold"),
        v_reset=v_reset,
        surrogate_function=_surrogate(module),
        detach_reset=_flag(module, "detach_reset"),
        step_mode=_step_mode(module),
        store_v_seq=_flag(module, "store_v_seq", default=False),
    )


def _carry_v(module: nn.Module, new: nn.Module, v_reset) -> None:
    """The old neuron's `v` and reset value: a converted model continues
    a sequence where the old one was."""
    reset_value = 0.0 if v_reset is None else v_reset
    registered = getattr(module, "_memories_rv", {}).get("v")
    if isinstance(registered, numbers.Real) and not isinstance(
        registered, bool
    ):
        # SpikingJelly fixes v's reset value at construction, as FlexSN
        # does: a v_reset written since then does not move it.
        reset_value = float(registered)
        new._reset_values[0] = reset_value
    v = getattr(module, "v", reset_value)
    if isinstance(v, torch.Tensor):
        new.states[0] = v  # as a call leaves it: a new batch size resets it
    elif isinstance(v, numbers.Real) and not isinstance(v, bool):
        if float(v) != reset_value:
            new.states[0] = float(v)
    else:
        raise _Refused(f"v is {_describe(v)}, not a number or a tensor")


def _if_node(module: nn.Module) -> nn.Module:
    options = _node_options(module)
    new = IFNode(**options)
    _carry_v(module, new, options["v_reset"])
    return new


def _lif_node(module: nn.Module) -> nn.Module:
    options = _node_options(module)
    new = LIFNode(
        tau=_number(module, "tau"),
        decay_input=_flag(module, "decay_input"),
        **options,
    )
    _carry_v(module, new, options["v_reset"])
    return new


def _plif_node(module: nn.Module) -> nn.Module:
    options = _node_options(module)
    w = _attribute(module, "w")
    new = ParametricLIFNode(
        decay_input=_flag(module, "decay_input"), **options
    )
    if not isinstance(w, torch.Tensor) or w.shape != new.w.shape:
        raise _Refused(f"w is {_describe(w)}, not a scalar tensor")
    with torch.no_grad():
        new.w.copy_(w)
    new.w.requires_grad_(w.requires_grad)  # a frozen leak stays frozen
    _carry_v(module, new, options["v_reset"])
    return new


def _flexsn(module: nn.Module) -> nn.Module:
    _check_backend(module)
    new = FlexSN(
        _attribute(module, "core"),
        num_inputs=_int(module, "num_inputs"),
        num_states=_int(module, "num_states"),
        num_outputs=_int(module, "num_outputs"),
        store_state_seqs=_flag(module, "store_state_seqs", default=False),
        step_mode=_step_mode(module),
    )
    states = getattr(module, "states", None)
    if states is not None:
        if (
            not isinstance(states, (list, tuple))
            or len(states) != len(new.states)
            or not all(isinstance(s, torch.Tensor) for s in states)
        ):
            raise _Refused(
                f"states is {_describe(states)}, not None or "
                f"{len(new.states)} tensor(s)"
            )
        new.states[:] = list(states)
    return new


#: SpikingJelly's neurons that have a FlexSN module of the same name, and
#: how each is built.
_BUILDERS = {
    "IFNode": _if_node,
    "LIFNode": _lif_node,
    "ParametricLIFNode": _plif_node,
    "FlexSN": _flexsn,
}


def _match_tensors(module: nn.Module, new: nn.Module) -> None:
    """Moves `new` to the device and dtype of `module`'s parameters and
    buffers (a neuron without any keeps no tensor until called)."""
    tensors = [
        t
        for t in (*module.parameters(), *module.buffers())
        if t.is_floating_point()
    ]
    if not tensors:
        return
    device, dtype = tensors[0].device, tensors[0].dtype
    try:
        new.to(device=device, dtype=dtype)
    except TypeError as error:  # float64: FlexSN kernels have no variant
        raise _Refused(str(error)) from None
