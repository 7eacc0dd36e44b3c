"""A delay line: each neuron's sequence shifted by its own whole number of
steps, y[t] = x[t - d]."""

from typing import Optional

import torch
from torch import nn


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
    that copies it."""

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

    @property
    def max_delay(self) -> int:
        return int(self.steps.max()) if self.steps.numel() else 0

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
        if history is None or history.shape[1:] != x.shape[1:]:
            history = x.new_zeros((depth,) + tuple(x.shape[1:]))
        else:
            history = history.to(dtype=x.dtype, device=x.device)
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
