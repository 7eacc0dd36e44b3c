"""What neuron modules and blocks share about their states: where each
call starts from, how states follow `.to()`, the optional finite check, and
what a pickled module leaves out.

A module keeps one entry per state in `states`: None (the state's reset
value), a Python number (broadcast over the neurons at the next call, as
SpikingJelly's `v = v_reset` is) or a tensor (the last call's final state,
or one the user assigned).
"""

import math
from typing import List, Optional, Sequence

import torch

from ._function import compiling

#: The dtypes FlexSN kernels store sequences in.
SUPPORTED_DTYPES = (torch.float32, torch.float16, torch.bfloat16)

# The autograd engine's current graph task: -1 outside a backward pass
# (torch >= 2; torch 1.x cannot tell).
_graph_task_id = getattr(torch._C, "_current_graph_task_id", None)


def in_backward_pass() -> bool:
    """Whether this eager call runs inside a backward pass: the recompute
    of torch.utils.checkpoint (never true on torch 1.x)."""
    return (
        _graph_task_id is not None
        and not compiling()
        and _graph_task_id() != -1
    )


def initial_states(
    owner: str,
    names: Sequence[str],
    states: List,
    reset_values: Sequence[float],
    assigned: set,
    x: torch.Tensor,
) -> List[Optional[torch.Tensor]]:
    """The initial states of a call on `x` ([T, N...]): None for a zero
    state (the kernels then read no buffer), else a tensor of the neuron
    shape in x's dtype and device.

    A state carried from a call on other neurons starts again from its
    reset value (SpikingJelly does the same when the batch size changes);
    one the user assigned (indices in `assigned`) must fit, or it is an
    error naming both shapes.

    Inside a backward pass (torch.utils.checkpoint recomputing its
    forward) a state the module's last call left is an error: the
    recompute would start from where the checkpointed call ended, not
    where it began, and give wrong gradients without a word."""
    shape = x.shape[1:]
    carried = [
        i
        for i, state in enumerate(states)
        if isinstance(state, torch.Tensor) and i not in assigned
    ]
    if carried and in_backward_pass():
        raise RuntimeError(
            f"{owner}: called inside a backward pass (torch.utils."
            f"checkpoint's recompute?) from the state "
            f"'{names[carried[0]]}' its last call left: the recomputed "
            f"forward would start where the checkpointed call ended, and "
            f"its gradients would be wrong. Reset the neuron (or assign "
            f"its states) inside the checkpointed function, or save "
            f"memory with flexsn.torch.set_recompute(model, True) instead"
        )
    inits = []
    for i, (name, state) in enumerate(zip(names, states)):
        if isinstance(state, torch.Tensor):
            if state.shape != shape:
                if i in assigned:
                    raise ValueError(
                        f"{owner}: state '{name}' was set to a tensor of "
                        f"shape {tuple(state.shape)}, but the inputs' "
                        f"neurons are {tuple(shape)}"
                    )
                state = None
            elif state.dtype != x.dtype or state.device != x.device:
                state = state.to(dtype=x.dtype, device=x.device)
        if state is None:
            state = reset_values[i]
        if not isinstance(state, torch.Tensor):
            value = float(state)
            if value == 0.0 and math.copysign(1.0, value) > 0:
                state = None  # +0.0: the kernels' own zero start
            else:
                state = torch.full(
                    shape, value, dtype=x.dtype, device=x.device
                )
        inits.append(state)
    assigned.clear()
    return inits


class StatefulModule(torch.nn.Module):
    """A module holding `states` (and, when it keeps them, `state_seqs`)
    beside kernels loaded in this process: the states follow `.to()` and
    `.detach()`; a pickled copy leaves the kernels behind, replacing the
    attributes named in `_process_local` with the values given there, and
    loads its own at its first call."""

    _process_local: dict = {}

    def detach(self):
        """Cuts the states' autograd history (truncated BPTT)."""
        self.states = [
            s.detach() if isinstance(s, torch.Tensor) else s
            for s in self.states
        ]

    def _apply(self, fn, *args, **kwargs):
        check_conversion(self, fn)
        module = super()._apply(fn, *args, **kwargs)
        self.states = apply_to_states(self.states, fn)
        if getattr(self, "state_seqs", None) is not None:
            self.state_seqs = apply_to_states(self.state_seqs, fn)
        return module

    def __getstate__(self):
        state = self.__dict__.copy()
        state.update(self._process_local)
        return state


def check_state_value(owner: str, name: str, value):
    """A value a user assigns to a state: a number, a tensor or None."""
    if value is None or isinstance(value, torch.Tensor):
        return value
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(
            f"{owner}: state '{name}' is a number or a tensor, "
            f"got {type(value).__name__}"
        )
    return float(value)


def check_conversion(module: torch.nn.Module, fn) -> None:
    """Raises, before anything is converted, when `fn` (what `.to()`,
    `.half()`, `.double()`... apply to every tensor) makes floating-point
    tensors of a dtype FlexSN kernels do not store."""
    try:
        probe = fn(torch.zeros(1))
    except Exception:  # noqa: BLE001: the conversion itself will say
        return
    if (
        isinstance(probe, torch.Tensor)
        and probe.is_floating_point()
        and probe.dtype not in SUPPORTED_DTYPES
    ):
        raise TypeError(
            f"{type(module).__name__}: FlexSN kernels run float32, float16 "
            f"and bfloat16 tensors; cannot convert the module to "
            f"{probe.dtype}"
        )


def apply_to_states(states: List, fn) -> List:
    """The states with `fn` applied to each tensor among them (what
    `nn.Module._apply` does to parameters and buffers)."""
    return [fn(s) if isinstance(s, torch.Tensor) else s for s in states]


def check_finite(owner: str, what: str, name: str, tensor, sequence: bool):
    """Raises FloatingPointError naming `tensor` ('<what> <name>'), the
    first step (for a [T, N...] sequence) and the neuron holding a NaN or
    an infinity."""
    if tensor is None or not tensor.is_floating_point():
        return
    bad = ~torch.isfinite(tensor)
    if not bool(bad.any()):
        return
    where = ""
    if sequence:
        step = int(bad.reshape(bad.shape[0], -1).any(1).nonzero()[0])
        tensor, bad = tensor[step], bad[step]
        where = f" at step t = {step}"
    flat = int(bad.reshape(-1).nonzero()[0])
    index = tuple(int(i) for i in _unravel(flat, tensor.shape))
    value = float(tensor.reshape(-1)[flat])
    raise FloatingPointError(
        f"{owner}: {what} '{name}' is not finite{where}: {value} at neuron "
        f"{index} (check_finite=True)"
    )


def _unravel(flat: int, shape) -> List[int]:
    index = []
    for size in reversed(tuple(shape)):
        index.append(flat % size)
        flat //= size
    return list(reversed(index))
