"""Sequences in a dense layout other than row-major, run in place.

A convolution in `torch.channels_last` (much faster on GPUs, especially in
half precision) gives `[T, B, C, H, W]` sequences whose memory is
`[T, B, H, W, C]`. The kernels see a step as N contiguous neurons (and,
with per-channel parameters, as `[B, C, S]`), so a call on such a tensor
would copy it to row-major and hand back row-major outputs, which the next
convolution copies back. Instead:

- a neuron whose kernels treat every neuron alike (no per-channel
  parameter) runs on the tensors as they are (`IN_PLACE`) when the call's
  sequences, initial states and per-neuron parameters share the input's
  memory order: neuron n of the kernels is the n-th in memory, the same
  neuron in every tensor, and the results are allocated in that order too.
  No view is made, which matters on the GPU, where each costs the host
  microseconds per call;
- otherwise `Layout` views every tensor of the call in memory order (a
  permutation, then a reshape to `[T, B', C, S]` that moves no data), and
  the results are viewed back: outputs and states keep the input's
  strides, and nothing is copied.
"""

import functools
import math
from typing import List, Optional, Tuple, Union

import torch


@functools.lru_cache(maxsize=256)
def memory_order(
    shape: torch.Size, stride: Tuple[int, ...]
) -> Optional[Tuple[int, ...]]:
    """The dimensions of a `[T, ...]` tensor from outermost to innermost in
    memory, when it is dense, T is outermost and the rest is not row-major
    (e.g. channels-last); else None (row-major, or not dense)."""
    if len(shape) < 3:
        return None
    # Stable: dimensions of equal stride (size 1) keep their order.
    rest = sorted(range(1, len(shape)), key=lambda d: -stride[d])
    expected = 1
    for d in reversed(rest):
        if shape[d] != 1:
            if stride[d] != expected:
                return None
            expected *= shape[d]
    if shape[0] > 1 and stride[0] != expected:
        return None
    order = (0, *rest)
    return None if order == tuple(range(len(shape))) else order


#: call_layout's answer for a call the kernels run on its tensors as given,
#: in their shared memory order.
IN_PLACE = "in place"


class Layout:
    """How the tensors of one call on sequences of `shape` laid out in
    `order` are viewed row-major (`into_*`) and back (`*_back`)."""

    def __init__(
        self, shape: torch.Size, order: Tuple[int, ...], channels: bool
    ):
        self.order = order
        self.step_order = tuple(d - 1 for d in order[1:])
        self.inverse = tuple(order.index(d) for d in range(len(order)))
        self.step_inverse = tuple(
            self.step_order.index(d) for d in range(len(order) - 1)
        )
        self.permuted = tuple(shape[d] for d in order)
        if channels:
            # [T, B', C, S]: C is dimension 2, as per-channel kernels read.
            axis = order.index(2)
            p = self.permuted
            self.shape = (
                p[0],
                math.prod(p[1:axis]),
                p[axis],
                math.prod(p[axis + 1 :]),
            )
        else:
            self.shape = self.permuted

    def into_sequence(self, t: torch.Tensor) -> torch.Tensor:
        # A view when t is laid out like the call's inputs, else a copy.
        return t.permute(self.order).reshape(self.shape)

    def into_step(self, t: torch.Tensor) -> torch.Tensor:
        return t.permute(self.step_order).reshape(self.shape[1:])

    def sequence_back(self, t: torch.Tensor) -> torch.Tensor:
        return t.view(self.permuted).permute(self.inverse)

    def step_back(self, t: torch.Tensor) -> torch.Tensor:
        return t.view(self.permuted[1:]).permute(self.step_inverse)


def _per_neuron(info, trainable, runtime):
    """(tensor or value, Param) of the per-neuron parameters among
    `trainable` and the non-trainable `runtime` (declaration order)."""
    fixed = info.fixed_runtime_params
    pairs = list(zip(trainable, info.trainable_params))
    if len(runtime) == len(fixed):
        pairs += zip(runtime, fixed)
    return [(t, p) for t, p in pairs if p.per_neuron]


def call_layout(
    info, packs_outputs: bool, inputs, inits, trainable, runtime
) -> Union[None, str, Layout]:
    """How a call whose first input is dense and not row-major runs, when
    every other sequence, initial state and per-neuron parameter has its
    shape: IN_PLACE when the neuron has no per-channel parameter, the
    input holds neurons and every one of those tensors has the input's
    strides (a step's for the step-shaped ones), else its Layout. None
    otherwise: the call runs as given (copied to row-major; wrong shapes
    get the kernels' own errors). Calls of kernels that pack outputs (bits)
    stay row-major: the bit order is the neurons' logical order."""
    x = inputs[0]
    if packs_outputs or not isinstance(x, torch.Tensor):
        return None
    stride = x.stride()
    order = memory_order(x.shape, stride)
    if order is None:
        return None
    shape, step = x.shape, x.shape[1:]
    others = inputs[1:]
    steps = [s for s in inits if s is not None]
    if info.per_neuron_params:
        steps += [t for t, _ in _per_neuron(info, trainable, runtime)]
    if any(
        not isinstance(t, torch.Tensor) or t.shape != shape for t in others
    ) or any(
        not isinstance(t, torch.Tensor) or t.shape != step for t in steps
    ):
        return None
    if (
        not info.channels
        and x.numel()
        and all(t.stride() == stride for t in others)
        and all(t.stride() == stride[1:] for t in steps)
    ):
        return IN_PLACE
    return _layout(shape, order, info.channels)


@functools.lru_cache(maxsize=256)
def _layout(
    shape: torch.Size, order: Tuple[int, ...], channels: bool
) -> Layout:
    """Layouts are immutable: one per shape and order."""
    return Layout(shape, order, channels)


def into_layout(
    layout: Layout, info, inputs, inits, trainable, runtime
) -> Tuple[List, List, List, List]:
    """The call's tensors viewed row-major: sequences, initial states and
    per-neuron parameters; per-channel and scalar ones are unchanged."""
    per_neuron = {id(t) for t, _ in _per_neuron(info, trainable, runtime)}

    def steps(tensors):
        return [
            layout.into_step(t) if id(t) in per_neuron else t for t in tensors
        ]

    return (
        [layout.into_sequence(x) for x in inputs],
        [None if s is None else layout.into_step(s) for s in inits],
        steps(trainable),
        steps(runtime),
    )
