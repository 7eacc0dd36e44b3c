"""A delay line: each neuron's sequence shifted by its own whole number of
steps, y[t] = x[t - d]."""

import threading
from typing import Dict, Optional

import torch
from torch import nn

from .. import _dialect, compiler
from .._options import CompileOptions
from ._function import Handle, scan

#: Up to this depth a delay runs as a scan, whose states (the last max(d)
#: inputs) a GPU thread keeps in registers; deeper ones run as a gather
#: along time, which computes the same copies. The compile grows with the
#: depth: 16 states compile in about 3 s on two cores (both targets, every
#: storage type), 32 in about 8.
SCAN_MAX_DELAY = 16


def shift_register(depth: int) -> str:
    """The `flexsn.neuron` delaying its input by its per-neuron `delay`
    (0 to `depth` steps): state s_k holds x[t - k], and the output selects
    one of x, s_1, ..., s_depth, a copy (and in the backward, the copy of
    one gradient)."""
    lines = ["  %zero = arith.constant 0.0 : f32"]
    for k in range(depth + 1):
        lines += [
            f"  %k{k} = arith.constant {float(k)} : f32",
            f"  %is{k} = arith.cmpf oeq, %delay, %k{k} : f32",
        ]
    lines.append(
        f"  %y{depth} = arith.select %is{depth}, %s{depth}, %zero : f32"
    )
    for k in range(depth - 1, -1, -1):
        source = f"%s{k}" if k else "%x"
        lines.append(
            f"  %y{k} = arith.select %is{k}, {source}, %y{k + 1} : f32"
        )
    results = ["%y0", "%x"] + [f"%s{k}" for k in range(1, depth)]
    states = ", ".join(f"%s{k}: f32" for k in range(1, depth + 1))
    return (
        f"flexsn.neuron @delay{depth} inputs(%x: f32) states({states}) "
        f"outputs(y)\n    params(%delay: f32 = 0.0) {{\n"
        + "\n".join(lines)
        + f"\n  flexsn.yield {', '.join(results)} : "
        + ", ".join(["f32"] * len(results))
        + "\n}\n"
    )


#: What the scan's kernels store (other dtypes, float64 or integers, take
#: the gather).
_SCAN_DTYPES = (torch.float32, torch.float16, torch.bfloat16)

_handles: Dict[int, Handle] = {}
_handles_lock = threading.Lock()


def _scan_depth(depth: int) -> int:
    # Powers of two: a model's delay layers share few compiles.
    return 1 << (depth - 1).bit_length()


def _shift_register_handle(depth: int) -> Handle:
    # Read without the lock once compiled: a lock taken inside a region
    # torch.compile traces would break its graph.
    handle = _handles.get(depth)
    if handle is not None:
        return handle
    with _handles_lock:
        if depth not in _handles:
            compiled = compiler.compile(
                shift_register(depth),
                options=CompileOptions(
                    storage_types=_dialect.STORAGE_TYPES,
                    kinds={"delay": "runtime"},
                    shapes={"delay": "per_neuron"},
                ),
            )
            _handles[depth] = Handle(compiled)
        return _handles[depth]


class Delay(nn.Module):
    """y[t] = x[t - d] over [T, B, ...] sequences, d a whole number of steps
    per neuron: `delays` is an int, or an integer tensor (or array) that
    broadcasts to a sample's shape (the dimensions after T and B).

    Like a neuron, the layer keeps its state between calls: the last
    max(d) steps of its input, which the next call's first steps read, so
    that a sequence fed in pieces gives what it gives whole; before the
    first call (and after `reset()`) they are zeros. `detach()` cuts their
    autograd history. Forward and backward are exact: every output is a
    copy of one input (or zero), every input's gradient the one output's
    that copies it.

    On the CPU and CUDA the layer is a scan, one kernel forward and one
    backward: a neuron whose states are its last inputs
    (`shift_register`), for delays up to SCAN_MAX_DELAY in float32, float16
    and bfloat16; deeper ones, other dtypes and other devices run as a
    gather along time."""

    def __init__(self, delays):
        super().__init__()
        steps = torch.as_tensor(delays)
        if (
            steps.is_floating_point()
            or steps.is_complex()
            or steps.dtype == torch.bool
        ):
            raise TypeError(
                f"Delay: delays are whole numbers of steps (an "
                f"integer tensor), got {steps.dtype}"
            )
        if steps.numel() and int(steps.min()) < 0:
            raise ValueError(
                f"Delay: delays must be >= 0, got " f"{int(steps.min())}"
            )
        self.register_buffer("steps", steps.to(torch.long))
        self.history: Optional[torch.Tensor] = None
        self._depth = self._max_of(self.steps)

    @staticmethod
    def _max_of(steps: torch.Tensor) -> int:
        return int(steps.max()) if steps.numel() else 0

    @property
    def max_delay(self) -> int:
        # Kept as a number (load_state_dict refreshes it): reading it from
        # the tensor at each call would break torch.compile's graph.
        return self._depth

    def _load_from_state_dict(self, state_dict, prefix, *args, **kwargs):
        super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)
        self._depth = self._max_of(self.steps)

    def reset(self):
        """Forgets the input kept for the next call: it starts at zeros."""
        self.history = None

    def detach(self):
        if self.history is not None:
            self.history = self.history.detach()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.dim() < 2:
            raise ValueError(
                f"Delay: expects [T, B, ...] sequences, got "
                f"shape {tuple(x.shape)}"
            )
        try:
            steps = torch.broadcast_to(self.steps, x.shape[2:])
        except RuntimeError:
            raise ValueError(
                f"Delay: delays of shape "
                f"{tuple(self.steps.shape)} do not broadcast to "
                f"samples of shape {tuple(x.shape[2:])}"
            ) from None
        depth = self.max_delay
        if depth == 0:
            return x
        history = self.history
        if history is not None and history.shape[1:] == x.shape[1:]:
            history = history.to(dtype=x.dtype, device=x.device)
        else:
            history = None  # zeros: the first call, or new samples
        if (
            depth <= SCAN_MAX_DELAY
            and x.device.type in ("cpu", "cuda")
            and x.dtype in _SCAN_DTYPES
        ):
            return self._scan(x, steps, depth, history)
        return self._gather(x, steps, depth, history)

    def _scan(self, x, steps, depth, history):
        size = _scan_depth(depth)
        inits = [None] * size
        if history is not None:
            inits[:depth] = [history[depth - k] for k in range(1, depth + 1)]
        delay = (
            steps.to(device=x.device, dtype=torch.float32)
            .expand(x.shape[1:])
            .contiguous()
        )
        (y,), states = scan(
            _shift_register_handle(size), [x], inits, [], [delay], False
        )
        # State s_k is x[T - k]: the history runs the other way.
        self.history = torch.stack(states[depth - 1 :: -1])
        return y

    def _gather(self, x, steps, depth, history):
        if history is None:
            history = x.new_zeros((depth,) + tuple(x.shape[1:]))
        whole = torch.cat([history, x])
        self.history = whole[-depth:]
        # y[t] = whole[depth + t - d]: one gather along time.
        T = x.shape[0]
        source = (
            torch.arange(T, device=x.device).view((T,) + (1,) * steps.dim())
            + depth
            - steps.to(x.device)
        )
        index = source.unsqueeze(1).expand(x.shape)
        return torch.gather(whole, 0, index)

    def extra_repr(self) -> str:
        shape = tuple(self.steps.shape)
        return (
            f"delays={int(self.steps)}"
            if not shape
            else f"delays of shape {shape}, at most {self.max_delay}"
        )
