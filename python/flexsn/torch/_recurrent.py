"""A recurrent spiking layer: a neuron whose spikes feed back, through a
weight matrix, into its own input at the next step.

    s[t] = neuron(W_in x[t] + b + W_rec s[t-1]),   s[-1] = 0

The input projection W_in x + b is one matrix product over the whole
sequence. The recurrence runs as the neuron's coupled kernels
(CompileOptions.coupled, #flexsn.kernel's coupling): one forward kernel
over the whole sequence, with the per-step product W_rec s[t-1] inside its
time loop, and one backward kernel running the adjoint (the incoming
gradient of s[t-1] gains W_rec^T times the drive's gradient at t); the
recurrent weights' gradient is one matrix product over the sequence
afterwards. Where those kernels cannot run (torch.compile tracing, a
sample of more than 1024 neurons on the GPU, check_finite), the layer
steps in Python, one neuron call per step: the same values."""

from typing import Optional

import torch
from torch import nn

from ._function import (
    _registry,
    _runtime_values,
    _shaped_tensors,
    compiling,
    final_states,
    split_runtime,
    split_tensors,
)
from ._kernels import DTYPES, TensorLike, check_inputs
from ._modules import FlexSN, LIFNode

#: The largest sample (hidden_size) the coupled GPU kernels take: a block
#: of 256 threads of up to 4 neurons each runs one sample.
MAX_CUDA_HIDDEN = 1024


class _CoupledScan(torch.autograd.Function):
    """The coupled forward kernel over [T, B, H] drives, the coupled
    backward kernel in reverse time, and the recurrent weights' gradient
    sum_t g[t]^T s[t-1] (g: the drive's gradient) as one matrix product.

    Tensors: the drive x, the recurrent weights W [H, H] (the forward
    kernel takes M = W^T: input j gains sum_k M[k, j] s[k]; the backward
    kernel W), the given initial states, the trainable parameters and the
    shaped runtime ones. Results: the spikes, then the states (final ones
    with `finals`, else sequences)."""

    @staticmethod
    def forward(ctx, handle_id, runtime, present, finals, x, weights, *rest):
        handle = _registry[handle_id]
        inputs, inits, trainable, fixed = split_tensors(
            (x,) + rest, 1, present, handle.num_trainable
        )
        values = _runtime_values(handle, trainable, runtime)
        shaped = _shaped_tensors(handle, trainable, fixed)
        kernels = handle.kernels_for(x)
        coupling = weights.detach().t().to(torch.float32).contiguous()
        outputs, states, workspace = kernels.forward(
            inputs, inits, values, shaped, finals, coupling=coupling
        )
        if finals:
            states = final_states(states, inits, copy_inits=True)
        spikes = outputs[0]
        ctx.handle, ctx.values, ctx.finals = handle, values, finals
        ctx.present, ctx.num_fixed = present, len(fixed)
        ctx.trainable_like = [(t.dtype, t.shape) for t in trainable]
        ctx.weights_like = (weights.dtype, weights.shape)
        read = kernels.inputs_read_by_backward(DTYPES[x.dtype])
        ctx.like = None if 0 in read else TensorLike(x)
        ctx.save_for_backward(
            workspace,
            x if 0 in read else None,
            weights,
            spikes,
            *shaped,
        )
        ctx.set_materialize_grads(False)
        return (spikes,) + tuple(states)

    @staticmethod
    def backward(ctx, grad_spikes, *grad_states):
        workspace, x, weights, spikes, *shaped = ctx.saved_tensors
        handle = ctx.handle
        like = ctx.like or x
        kernels = handle.kernels_for(like)
        none = [None] * kernels.num_states
        if x is not None:
            # A backward kernel that reads the input reads the one the
            # forward stepped on: the drive plus W s[t - 1] (one matrix
            # product over the sequence).
            H = weights.shape[0]
            feedback = spikes[:-1].reshape(-1, H).to(torch.float32) @ (
                weights.detach().t().to(torch.float32)
            )
            x = torch.cat([x[:1], x[1:] + feedback.view_as(x[1:]).to(x.dtype)])
        grad_inputs, grad_inits, grad_params = kernels.backward(
            [grad_spikes],
            none if ctx.finals else list(grad_states),
            workspace,
            [x],
            ctx.values,
            handle.deterministic_mode(),
            like,
            grad_finals=list(grad_states) if ctx.finals else none,
            present=ctx.present,
            shaped=shaped,
            coupling=weights.detach().to(torch.float32).contiguous(),
        )
        grad_x = grad_inputs[0]
        dtype, shape = ctx.weights_like
        H = shape[0]
        if grad_x.shape[0] > 1:
            # dW[j, k] = sum over t >= 1 and b of g[t, b, j] s[t - 1, b, k].
            grad_weights = (
                grad_x[1:].reshape(-1, H).t().to(torch.float32)
                @ spikes[:-1].reshape(-1, H).to(torch.float32)
            ).to(dtype)
        else:
            grad_weights = torch.zeros(shape, dtype=dtype, device=x.device)
        grad_params = [
            g
            if g.dtype == dtype_ and g.shape == shape_
            else g.to(dtype_).reshape(shape_)
            for g, (dtype_, shape_) in zip(grad_params, ctx.trainable_like)
        ]
        grad_inits = [g for g, p in zip(grad_inits, ctx.present) if p]
        return (
            (None,) * 4
            + (grad_x, grad_weights)
            + tuple(grad_inits)
            + tuple(grad_params)
            + (None,) * ctx.num_fixed
        )


def _over_samples(info, channels, names, values, drive: torch.Tensor):
    """`values` (named `names`) with each per-channel one ([C], named in
    `channels`) as per-neuron values [B, H] of the drive [T, B, H]: sample
    neuron j in channel j // (H / C), as a per-channel kernel reads it."""
    B, H = drive.shape[1], drive.shape[2]
    result = []
    for name, value in zip(names, values):
        if name in channels:
            C = value.numel()
            if H % C:
                raise ValueError(
                    f"{info.name}: {C} channels of parameter '{name}' do "
                    f"not divide the {H} neurons of a sample"
                )
            value = value.reshape(1, C, 1).expand(B, C, H // C).reshape(B, H)
        result.append(value)
    return result


def coupled_scan(neuron: FlexSN, drive: torch.Tensor, weights: torch.Tensor):
    """The spikes [T, B, H] of `neuron` over the drive [T, B, H] coupled
    through `weights` (W_rec [H, H]: s[t] = f(drive[t] + W_rec s[t-1]),
    s[-1] = 0), from the neuron's states, which it updates as a call
    does."""
    handle = neuron._coupled_handle()
    info = handle.info
    trainable, runtime, inits = neuron._call_arguments(drive)
    if handle is not neuron._handle:  # per-channel parameters per neuron
        channels = {p.name for p in neuron.info.per_channel_params}
        names = [p.name for p in neuron.info.trainable_params]
        trainable = _over_samples(info, channels, names, trainable, drive)
        names = neuron._runtime_names
        runtime = _over_samples(info, channels, names, runtime, drive)
    runtime, fixed = split_runtime(handle, runtime)
    check_inputs(
        info, [drive], inits, _shaped_tensors(handle, trainable, fixed)
    )
    present = tuple(s is not None for s in inits)
    finals = not neuron.store_state_seqs
    spikes, *states = _CoupledScan.apply(
        handle.id,
        tuple(runtime),
        present,
        finals,
        drive,
        weights,
        *(s for s in inits if s is not None),
        *trainable,
        *fixed,
    )
    if neuron.store_state_seqs:
        neuron.state_seqs = states
        neuron.states = final_states(states, inits)
    else:
        neuron.states[:] = states
    return spikes


def runs_coupled(neuron: FlexSN, drive: torch.Tensor) -> bool:
    """Whether coupled_scan runs `neuron` on the drive [T, B, H] (else
    the recurrence steps in Python): not while torch.compile traces, not
    with check_finite, and on the GPU for samples of at most
    MAX_CUDA_HIDDEN neurons."""
    if compiling() or neuron.check_finite or drive.dim() != 3:
        return False
    if drive.is_cuda:
        return drive.shape[2] <= MAX_CUDA_HIDDEN
    return drive.is_cpu


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
    cycle `from_nir` reads back. The neuron's kernels are compiled with
    their coupled twins, which run the whole recurrence (see the module's
    docstring)."""

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
        if info.per_channel_params and neuron.num_channels != hidden_size:
            raise ValueError(
                f"Recurrent: the neuron {info.name} has per-channel "
                f"parameters of {neuron.num_channels} channel(s); a "
                f"recurrent layer's neurons are its hidden_size "
                f"({hidden_size}) channels"
            )
        self.input_size, self.hidden_size = input_size, hidden_size
        self.input = nn.Linear(input_size, hidden_size, bias=bias)
        self.recurrent = nn.Linear(hidden_size, hidden_size, bias=False)
        neuron._use_coupled_kernels()
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
        if drive.shape[0] and runs_coupled(self.neuron, drive):
            if previous is not None:
                # s[-1] from the last call enters through the first step.
                first = drive[:1] + self.recurrent(previous)[None]
                drive = torch.cat([first, drive[1:]])
            spikes = coupled_scan(self.neuron, drive, self.recurrent.weight)
            self.spikes = spikes[-1]
            return spikes
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
