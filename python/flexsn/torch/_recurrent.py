"""A recurrent spiking layer: a neuron whose spikes feed back, through a
weight matrix, into its own input at the next step.

    s[t] = neuron(W_in x[t] + b + W_rec s[t-1]),   s[-1] = 0

The input projection W_in x + b is one matrix product over the whole
sequence; the recurrent one runs step by step, each step's neuron call
carrying its states to the next (so gradients flow back through time
along both the states and the spikes)."""

from typing import Optional

import torch
from torch import nn

from ._modules import FlexSN, LIFNode


class Recurrent(nn.Module):
    """A recurrent layer of `hidden_size` spiking neurons over
    [T, B, input_size] sequences, returning their spikes [T, B,
    hidden_size]:

        s[t] = neuron(W_in x[t] + b + W_rec s[t-1]),   s[-1] = 0

    `input` (nn.Linear, with its bias when `bias`) holds W_in and b,
    `recurrent` (nn.Linear without bias) W_rec, and `neuron` the neurons
    (a FlexSN neuron module of one input and one output; default
    `LIFNode()`, tau 2 with a hard reset to 0). Like a neuron, the layer
    keeps its state between calls, the neuron's states and its last
    spikes, until `reset()`; `detach()` cuts their autograd history
    (truncated BPTT). `to_nir` exports it as a nested NIR graph whose
    cycle `from_nir` reads back."""

    def __init__(
        self,
        input_size: int,
        hidden_size: int,
        neuron: Optional[nn.Module] = None,
        bias: bool = True,
    ):
        super().__init__()
        for name, size in (
            ("input_size", input_size),
            ("hidden_size", hidden_size),
        ):
            if (
                not isinstance(size, int)
                or isinstance(size, bool)
                or size <= 0
            ):
                raise ValueError(
                    f"Recurrent: {name} must be a positive "
                    f"int, got {size!r}"
                )
        if neuron is None:
            neuron = LIFNode()
        if not isinstance(neuron, FlexSN):
            raise TypeError(
                f"Recurrent: the neuron must be a FlexSN neuron "
                f"module, not {type(neuron).__name__}"
            )
        info = neuron.info
        if len(info.inputs) != 1 or len(info.outputs) != 1:
            raise ValueError(
                f"Recurrent: the neuron {info.name} takes {len(info.inputs)} "
                f"input(s) and gives {len(info.outputs)} output(s); a "
                f"recurrent layer feeds back one output into one input"
            )
        self.input_size, self.hidden_size = input_size, hidden_size
        self.input = nn.Linear(input_size, hidden_size, bias=bias)
        self.recurrent = nn.Linear(hidden_size, hidden_size, bias=False)
        self.neuron = neuron
        self.spikes: Optional[torch.Tensor] = None

    def reset(self):
        """Forgets the neuron's states and the last spikes."""
        self.neuron.reset()
        self.spikes = None

    def detach(self):
        """Cuts the states' and the last spikes' autograd history."""
        self.neuron.detach()
        if self.spikes is not None:
            self.spikes = self.spikes.detach()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.dim() != 3 or x.shape[2] != self.input_size:
            raise ValueError(
                f"Recurrent: expects [T, B, {self.input_size}] "
                f"inputs, got {tuple(x.shape)}"
            )
        drive = self.input(x)
        previous = self.spikes
        if previous is not None:
            if previous.shape != drive.shape[1:]:
                previous = None  # a new batch size starts again from rest
            else:
                previous = previous.to(dtype=drive.dtype, device=drive.device)
        single = self.neuron.step_mode == "s"
        outputs = []
        for current in drive:
            if previous is not None:
                current = current + self.recurrent(previous)
            spikes = self.neuron(current if single else current[None])
            previous = spikes if single else spikes[0]
            outputs.append(previous)
        if not outputs:
            return drive
        self.spikes = previous
        return torch.stack(outputs)

    def extra_repr(self) -> str:
        return (
            f"input_size={self.input_size}, "
            f"hidden_size={self.hidden_size}, "
            f"bias={self.input.bias is not None}"
        )
