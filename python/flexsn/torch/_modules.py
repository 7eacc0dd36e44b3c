"""PyTorch modules over compiled neurons: FlexSN and the drop-in nodes."""

import math
import os
from typing import Mapping, Optional, Sequence, Union

import torch
from torch import nn

from .. import compiler
from .. import surrogate as surrogates
from ._function import Handle, final_states, scan
from ._kernels import SPIKE_STORAGE


class FlexSN(nn.Module):
    """A compiled neuron in multi-step mode.

    `neuron` is a `.mlir` path, neuron text, a shipped neuron name ("lif",
    "plif", ...), or a Python step function `core(*inputs, *states) ->
    (*outputs, *new_states)` imported with flexsn.fx (SpikingJelly's
    `FlexSN(core, num_inputs, num_states, num_outputs)`; its
    `example_inputs`, `requires_grad` and `backend` are accepted: tracing
    needs no example, gradients follow autograd, the kernels are FlexSN's). Calling the module with `[T, N...]` input
    sequences returns the output sequences (one tensor for one output) and
    keeps the final states for the next call (`reset()` clears them,
    `detach()` cuts their graph). `store_state_seqs=True` also keeps every
    step's states in `state_seqs`.

    Parameters: `const` ones are compiled in (`params` sets their values,
    recompiling once, cached); `runtime` ones are attributes of the module;
    `trainable` ones are `nn.Parameter`s. `deterministic=True` (or
    `torch.use_deterministic_algorithms(True)`) sums parameter gradients in
    a fixed order on the GPU. `save_in_storage_type=True` makes float16 and
    bfloat16 training save what the backward reads (LIF: its charge) in
    the inputs' dtype instead of float32: a quarter fewer bytes for LIF,
    gradients from rounded values (docs/Python.md measures the cost).

    Per-neuron parameters (`shapes={"v_threshold": "per_neuron"}`, with a
    `runtime` or `trainable` kind, or declared so in the neuron) hold one
    float32 value per neuron: a trainable one is an `nn.Parameter` of the
    neuron shape (the inputs' shape without T, so a batch dimension is
    part of it), a runtime one a registered buffer. Each starts at its
    value, `params[name]` or the default; the shape is `neuron_shape`, or
    that of a tensor given in `params` (both: they must agree).

    Per-channel parameters (`shapes={"w": "per_channel"}`) hold one float32
    value per channel: the inputs are then `[T, B, C, ...]` (channel
    dimension 2, as for a convolution's output) and the parameter an
    `nn.Parameter` (trainable) or buffer (runtime) of shape `[C]`, C being
    `num_channels` or the length of a tensor given in `params`. Its
    gradient is summed over time, batch and the dimensions after C.

    `spike_dtype=torch.uint8` returns spike outputs (outputs that are
    `flexsn.spike` results) as uint8 0/1 sequences, written by kernels that
    store a byte per spike: a quarter of float32's bytes. `spike_dtype=
    "bits"` returns them bit-packed, 8 per byte: a spike output over `[T,
    N...]` inputs is a uint8 `[T, ceil(N / 8)]` tensor (`[ceil(N / 8)]` in
    single-step mode) whose bit `n % 8` (least significant first) of byte
    `n // 8` of row t is the spike of neuron n (flattened) at step t, i.e.
    `numpy.packbits(s.reshape(T, N), axis=-1, bitorder="little")`;
    `flexsn.torch.unpack_spikes` unpacks it. Such spikes carry no
    gradient, so the module then runs inference only (under
    `torch.no_grad()`, or with no input, state or parameter requiring a
    gradient); its other outputs and states keep the inputs' dtype.
    """

    def __init__(self, neuron, num_inputs: Optional[int] = None,
                 num_states: Optional[int] = None,
                 num_outputs: Optional[int] = None,
                 store_state_seqs: bool = False,
                 params: Optional[Mapping[str, object]] = None,
                 kinds: Optional[Mapping[str, str]] = None,
                 shapes: Optional[Mapping[str, str]] = None,
                 neuron_shape: Optional[Sequence[int]] = None,
                 num_channels: Optional[int] = None,
                 surrogate_function=None, deterministic: bool = False,
                 step_mode: str = "m",
                 spike_dtype: Optional[torch.dtype] = None,
                 storage_types: Sequence[str] = ("f32", "f16", "bf16"),
                 neuron_name: Optional[str] = None, example_inputs=None,
                 requires_grad=None, backend=None, **compile_options):
        super().__init__()
        if step_mode not in ("m", "s"):
            raise ValueError("step_mode is 'm' (multi-step, [T, N...]) or "
                             "'s' (single step, [N...])")
        if spike_dtype not in SPIKE_STORAGE:
            raise ValueError(f"spike_dtype is None (the inputs' dtype), "
                             f"torch.uint8 or 'bits', got {spike_dtype!r}")
        spikes = SPIKE_STORAGE[spike_dtype]
        if spikes != "dense":
            compile_options["spike_storage"] = ("dense", spikes)
        step = None
        if callable(neuron) and not isinstance(neuron, (str, os.PathLike)):
            step = _import_step(neuron, num_inputs, num_states, num_outputs,
                                params, example_inputs)
            # The importer wrote the parameters' kinds and values into the
            # neuron's text.
            neuron, params = step.mlir, None
        params = dict(params or {})
        # Const parameters are compiled in; the others are module state.
        probe = compiler.compile(neuron, targets=(), kinds=kinds,
                                 shapes=shapes, neuron=neuron_name)
        info = probe.info
        const = {p.name for p in info.params if p.kind == "const"}
        unknown = set(params) - {p.name for p in info.params}
        if unknown:
            raise ValueError(
                f"{info.name} has no parameter {', '.join(sorted(unknown))} "
                f"(it has: {', '.join(p.name for p in info.params)})")
        self.compiled = compiler.compile(
            neuron, storage_types=storage_types, kinds=kinds,
            params={k: v for k, v in params.items() if k in const},
            surrogate=surrogate_function, neuron=neuron_name, shapes=shapes,
            **compile_options)
        self.info = info = self.compiled.info
        for what, expected, actual in (("inputs", num_inputs, info.inputs),
                                       ("states", num_states, info.states),
                                       ("outputs", num_outputs, info.outputs)):
            if expected is not None and expected != len(actual):
                raise ValueError(
                    f"{info.name} has {len(actual)} {what} "
                    f"({', '.join(actual) or 'none'}), not {expected}")
        self.handle = Handle(self.compiled, deterministic, spikes)
        self.store_state_seqs = store_state_seqs
        self.step_mode = step_mode
        self._runtime_names = []
        shared = {p.name: p.parameter for p in step.params
                  if p.parameter is not None} if step else {}
        self.neuron_shape = _neuron_shape(info, params, neuron_shape)
        self.num_channels = _num_channels(info, params, num_channels,
                                          self.neuron_shape)
        for p in info.params:
            value = params.get(p.name)
            if (isinstance(value, torch.Tensor) and not p.shaped
                    and value.numel() != 1):
                raise ValueError(
                    f"{info.name}: parameter '{p.name}' is a scalar, got a "
                    f"tensor of shape {tuple(value.shape)} (a per-neuron "
                    f"or per-channel parameter needs shapes={{'{p.name}': "
                    f"'per_neuron'}} or 'per_channel' and a runtime or "
                    f"trainable kind)")
        self._shaped_names = tuple(p.name for p in info.shaped_params)
        for p in info.runtime_params:
            value = params.get(p.name, p.default)
            if p.shaped:
                if p.name in shared:
                    raise ValueError(
                        f"{info.name}: the step function's parameter "
                        f"'{p.name}' is a scalar nn.Parameter, it cannot be "
                        f"{p.shape}")
                shape = (self.neuron_shape if p.per_neuron else
                         (self.num_channels,))
                data = (value.detach().to(dtype=torch.float32, copy=True)
                        if isinstance(value, torch.Tensor) else
                        torch.full(shape, float(value), dtype=torch.float32))
                if p.kind == "trainable":
                    self.register_parameter(p.name, nn.Parameter(data))
                else:
                    self.register_buffer(p.name, data)
                    self._runtime_names.append(p.name)
                continue
            if p.kind == "trainable":
                # A step function's own nn.Parameter is the module's: the
                # kernels train the tensor its author holds.
                parameter = shared.get(p.name)
                self.register_parameter(p.name, parameter if parameter
                                        is not None else nn.Parameter(
                                            torch.tensor(float(value),
                                                         dtype=torch.float32)))
            else:
                setattr(self, p.name, value)
                self._runtime_names.append(p.name)
        self.states = [None] * len(info.states)
        self.state_seqs = None

    @property
    def deterministic(self) -> bool:
        return self.handle.deterministic

    @deterministic.setter
    def deterministic(self, value: bool):
        self.handle.deterministic = bool(value)

    def reset(self):
        """Forgets the states: the next call starts from zeros."""
        # In place where possible: nn.Module.__setattr__ costs microseconds,
        # and SpikingJelly-style code resets before every sample.
        self.states[:] = [None] * len(self.info.states)
        if self.state_seqs is not None:
            self.state_seqs = None

    def detach(self):
        """Cuts the states' autograd history (truncated BPTT)."""
        self.states = [None if s is None else s.detach() for s in self.states]

    def extra_repr(self) -> str:
        return (f"neuron={self.info.name}, inputs={list(self.info.inputs)}, "
                f"states={list(self.info.states)}, "
                f"outputs={list(self.info.outputs)}, "
                f"store_state_seqs={self.store_state_seqs}, "
                f"step_mode={self.step_mode!r}"
                + (f", neuron_shape={self.neuron_shape}"
                   if self.info.per_neuron_params else "")
                + (f", num_channels={self.num_channels}"
                   if self.info.channels else "")
                + {"dense": "", "u8": ", spike_dtype=torch.uint8",
                   "bits": ", spike_dtype='bits'"}[self.handle.spikes])

    def forward(self, *inputs: torch.Tensor):
        if len(inputs) != len(self.info.inputs):
            raise ValueError(
                f"{self.info.name} takes {len(self.info.inputs)} input(s) "
                f"({', '.join(self.info.inputs)}), got {len(inputs)}")
        if self.step_mode == "s":
            inputs = tuple(x.unsqueeze(0) for x in inputs)
        trainable = [getattr(self, p.name) for p in self.info.trainable_params]
        runtime = [getattr(self, name) for name in self._runtime_names]
        if self._shaped_names:
            # The kernels take float32 shaped parameters: a module
            # converted with .half() or .double() passes float32 copies
            # (differentiable; the gradient comes back in its dtype).
            trainable = [_float32(t) for t in trainable]
            runtime = [_float32(v) for v in runtime]
        inits = [s if s is None or s.shape == inputs[0].shape[1:] else None
                 for s in self.states]
        outputs, states = scan(self.handle, list(inputs), inits, trainable,
                               runtime, self.store_state_seqs)
        if self.store_state_seqs:
            self.state_seqs = states
            self.states = final_states(states, inits)
        else:
            # In place: nn.Module.__setattr__ costs microseconds per call.
            self.states[:] = states
        if self.step_mode == "s":
            outputs = [y[0] for y in outputs]
        return outputs[0] if len(outputs) == 1 else tuple(outputs)


def _float32(value):
    if (isinstance(value, torch.Tensor) and value.dtype != torch.float32
            and value.is_floating_point()):
        return value.float()
    return value


def _neuron_shape(info, params, neuron_shape):
    """The shape of the per-neuron parameters: `neuron_shape`, or that of
    the tensors given for them in `params` (which must all agree)."""
    shape = where = None
    if neuron_shape is not None:
        if isinstance(neuron_shape, int):
            neuron_shape = (neuron_shape,)
        shape = tuple(int(d) for d in neuron_shape)
        if any(d < 0 for d in shape):
            raise ValueError(f"neuron_shape {shape} has a negative size")
        where = "neuron_shape"
    for p in info.per_neuron_params:
        value = params.get(p.name)
        if not isinstance(value, torch.Tensor):
            continue
        if shape is None:
            shape, where = tuple(value.shape), f"params['{p.name}']"
        elif tuple(value.shape) != shape:
            raise ValueError(
                f"{info.name}: per-neuron parameter '{p.name}' has shape "
                f"{tuple(value.shape)}, {where} is {shape}")
    if shape is None and info.per_neuron_params:
        names = ", ".join(p.name for p in info.per_neuron_params)
        raise ValueError(
            f"{info.name}: per-neuron parameter(s) {names} need the neuron "
            f"shape (the inputs' shape without T): pass neuron_shape=(...) "
            f"or a tensor of that shape in params=")
    return shape


def _num_channels(info, params, num_channels, neuron_shape):
    """C of the per-channel parameters: `num_channels`, or the length of
    the 1-d tensors given for them in `params`, or dimension 1 of the
    per-neuron parameters' shape [B, C, ...] (all that are given must
    agree)."""
    count = where = None
    if num_channels is not None:
        if isinstance(num_channels, bool) or not isinstance(
                num_channels, int) or num_channels < 1:
            raise ValueError(f"num_channels is a positive int, got "
                             f"{num_channels!r}")
        count, where = num_channels, "num_channels"
    for p in info.per_channel_params:
        value = params.get(p.name)
        if not isinstance(value, torch.Tensor):
            continue
        if value.dim() != 1:
            raise ValueError(
                f"{info.name}: per-channel parameter '{p.name}' is a [C] "
                f"tensor, got shape {tuple(value.shape)}")
        if count is None:
            count, where = value.shape[0], f"params['{p.name}']"
        elif value.shape[0] != count:
            raise ValueError(
                f"{info.name}: per-channel parameter '{p.name}' has "
                f"{value.shape[0]} channels, {where} says {count}")
    if not info.per_channel_params:
        if num_channels is not None:
            raise ValueError(f"{info.name} has no per-channel parameter: "
                             f"num_channels does not apply")
        return None
    if count is None and neuron_shape is not None and len(neuron_shape) > 1:
        count, where = neuron_shape[1], "neuron_shape"
    if count is None:
        names = ", ".join(p.name for p in info.per_channel_params)
        raise ValueError(
            f"{info.name}: per-channel parameter(s) {names} need the number "
            f"of channels (dimension 2 of the [T, B, C, ...] inputs): pass "
            f"num_channels=C or a [C] tensor in params=")
    if neuron_shape is not None and (len(neuron_shape) < 2
                                     or neuron_shape[1] != count):
        raise ValueError(
            f"{info.name}: the neuron shape {neuron_shape} is [B, C, ...] "
            f"with C = {count} ({where})")
    return count


def _import_step(core, num_inputs, num_states, num_outputs, params,
                 example_inputs):
    """A Python step function `core(*inputs, *states) -> (*outputs,
    *new_states)` as a neuron (flexsn.fx), SpikingJelly's FlexSN(core,
    ...) convention."""
    from .. import fx
    if num_inputs is None or num_states is None:
        raise ValueError("a Python step function needs num_inputs and "
                         "num_states (and num_outputs unless it can be "
                         "inferred from what core returns)")
    if example_inputs is not None and len(example_inputs) != (
            num_inputs + num_states):
        raise ValueError(
            f"example_inputs has {len(example_inputs)} tensor(s), core takes "
            f"num_inputs + num_states = {num_inputs + num_states}")
    owner = core if isinstance(core, nn.Module) else None
    name = type(owner).__name__ if owner else getattr(core, "__name__", "")
    if not (isinstance(name, str) and name.isidentifier()):
        name = "neuron"  # a lambda, a partial
    return fx.trace_step(core, num_inputs, num_states, num_outputs,
                         params=params, name=name)


def _surrogate(surrogate_function):
    if surrogate_function is None:
        return surrogates.Sigmoid()
    if isinstance(surrogate_function, (surrogates.Surrogate, str)):
        return surrogate_function
    raise TypeError("surrogate_function is a flexsn.surrogate object (e.g. "
                    "flexsn.surrogate.ATan(alpha=2.0)) or attribute text")


class _NodeBase(FlexSN):
    """SpikingJelly-style neurons with one state `v`.

    A per-neuron threshold (`per_neuron_threshold=True` with
    `neuron_shape=`, or a tensor `v_threshold`) is a trainable
    `nn.Parameter` `v_threshold` of the neuron shape; with
    `kinds={"v_threshold": "runtime"}` a buffer instead."""

    def __init__(self, neuron: str, params: dict, v_reset, detach_reset,
                 surrogate_function, store_v_seq, step_mode,
                 per_neuron_threshold=False, **options):
        threshold = params["v_threshold"]
        if isinstance(threshold, torch.Tensor) or per_neuron_threshold:
            options["shapes"] = {**(options.get("shapes") or {}),
                                 "v_threshold": "per_neuron"}
            options["kinds"] = {"v_threshold": "trainable",
                                **(options.get("kinds") or {})}
        if not isinstance(threshold, torch.Tensor):
            params["v_threshold"] = float(threshold)
        params.update(v_reset=0.0 if v_reset is None else float(v_reset),
                      soft_reset=v_reset is None,
                      detach_reset=bool(detach_reset))
        super().__init__(neuron, params=params,
                         surrogate_function=_surrogate(surrogate_function),
                         store_state_seqs=store_v_seq, step_mode=step_mode,
                         **options)

    @property
    def v(self):
        return self.states[0]

    @v.setter
    def v(self, value):
        self.states[0] = value

    @property
    def v_seq(self):
        return None if self.state_seqs is None else self.state_seqs[0]


class IFNode(_NodeBase):
    """Integrate-and-fire: h = v + x (SpikingJelly's IFNode)."""

    def __init__(self, v_threshold: Union[float, torch.Tensor] = 1.0,
                 v_reset: Optional[float] = 0.0, surrogate_function=None,
                 detach_reset: bool = False, step_mode: str = "m",
                 store_v_seq: bool = False,
                 per_neuron_threshold: bool = False, **options):
        super().__init__("if", {"v_threshold": v_threshold}, v_reset,
                         detach_reset, surrogate_function, store_v_seq,
                         step_mode, per_neuron_threshold, **options)


class LIFNode(_NodeBase):
    """Leaky integrate-and-fire (SpikingJelly's LIFNode)."""

    def __init__(self, tau: float = 2.0, decay_input: bool = True,
                 v_threshold: Union[float, torch.Tensor] = 1.0,
                 v_reset: Optional[float] = 0.0,
                 surrogate_function=None, detach_reset: bool = False,
                 step_mode: str = "m", store_v_seq: bool = False,
                 per_neuron_threshold: bool = False, **options):
        if not tau > 1.0:
            raise ValueError(f"tau must be > 1, got {tau}")
        super().__init__("lif", {"tau": float(tau),
                                 "decay_input": bool(decay_input),
                                 "v_threshold": v_threshold},
                         v_reset, detach_reset, surrogate_function,
                         store_v_seq, step_mode, per_neuron_threshold,
                         **options)


class ParametricLIFNode(_NodeBase):
    """LIF with a learned leak 1/tau = sigmoid(w), w0 = -ln(init_tau - 1)
    (SpikingJelly's ParametricLIFNode).

    `num_channels=C` learns one leak per channel: `w` is an `nn.Parameter`
    of shape [C] and the inputs are `[T, B, C, ...]`."""

    def __init__(self, init_tau: float = 2.0, decay_input: bool = True,
                 v_threshold: Union[float, torch.Tensor] = 1.0,
                 v_reset: Optional[float] = 0.0,
                 surrogate_function=None, detach_reset: bool = False,
                 step_mode: str = "m", store_v_seq: bool = False,
                 per_neuron_threshold: bool = False,
                 num_channels: Optional[int] = None, **options):
        if not init_tau > 1.0:
            raise ValueError(f"init_tau must be > 1, got {init_tau}")
        if num_channels is not None:
            options["shapes"] = {**(options.get("shapes") or {}),
                                 "w": "per_channel"}
            options["num_channels"] = num_channels
        super().__init__("plif", {"w": -math.log(init_tau - 1.0),
                                  "decay_input": bool(decay_input),
                                  "v_threshold": v_threshold},
                         v_reset, detach_reset, surrogate_function,
                         store_v_seq, step_mode, per_neuron_threshold,
                         **options)
