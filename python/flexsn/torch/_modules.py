"""PyTorch modules over compiled neurons: FlexSN and the drop-in nodes."""

import copy
import math
import numbers
import os
from typing import Mapping, Optional, Sequence, Union

import torch
from torch import nn

from .. import _dialect, compiler
from .. import surrogate as surrogates
from .._options import CompileOptions
from ._function import Handle, final_states, scan
from ._state import (
    StatefulModule,
    check_finite,
    check_state_value,
    initial_states,
)

STEP_MODES = ("s", "m")


#: A module's compile options where none are given: every storage type,
#: so that a module runs float32, float16 and bfloat16 inputs.
_MODULE_OPTIONS = CompileOptions(storage_types=_dialect.STORAGE_TYPES)


#: The spike storage (compile option `spike_storage`) of each `spike_dtype`
#: (None: the inputs' dtype; "bits": uint8 bytes of 8 spikes each).
_SPIKE_STORAGE = {None: "dense", torch.uint8: "u8", "bits": "bits"}


class FlexSN(StatefulModule):
    """A compiled neuron in multi-step mode.

    `neuron` is a `.mlir` path, neuron text, a shipped neuron name ("lif",
    "plif", ...), or a Python step function `core(*inputs, *states) ->
    (*outputs, *new_states)` imported with flexsn.fx (SpikingJelly's
    `FlexSN(core, num_inputs, num_states, num_outputs)`; its
    `example_inputs`, `requires_grad` and `backend` are accepted: tracing
    needs no example, gradients follow autograd, the kernels are
    FlexSN's). Calling the module with `[T, N...]` input sequences returns
    the output sequences (one tensor for one output) and keeps the final
    states for the next call (`reset()` clears them, `detach()` cuts their
    graph). `store_state_seqs=True` also keeps every step's states in
    `state_seqs`. `step_mode="s"` takes and returns single steps `[N...]`.

    How the kernels are compiled is `options`, a `flexsn.CompileOptions`
    (default: every storage type), whose fields the keywords `kinds`,
    `shapes`, `storage_types`, `neuron_name` (its `neuron`) and any other
    of its fields (`targets=`, `chip=`, ...) change; the module keeps it
    as `options`, and compiles with it again after a const write.

    Parameters are attributes, read at every call: `const` ones are
    compiled in (writing one, `m.tau = 3.0`, compiles that variant at the
    next call, once: compiles are cached); `runtime` ones are kernel
    arguments; `trainable` ones are `nn.Parameter`s. `params` sets their
    initial values. `surrogate_function` (a flexsn or SpikingJelly
    surrogate object) replaces every spike's surrogate; it is an attribute
    too. `deterministic=True` (or `torch.use_deterministic_algorithms(True)`)
    sums parameter gradients in a fixed order on the GPU.
    Float16 and bfloat16 training saves what the backward reads (LIF: its
    charge) in the inputs' dtype, rounded so that the backward's spikes
    are the forward's; `save_in_storage_type=False` saves it in float32: a
    third more bytes for LIF, gradients at the forward's exact values
    (docs/Python.md measures both). `check_finite=True` checks
    the inputs, initial states and results of every call and raises
    FloatingPointError naming the first tensor, step and neuron that holds
    a NaN or an infinity (a debugging aid: it synchronizes).
    `recompute=True` (an attribute too; `flexsn.torch.set_recompute` sets
    it on a whole model) trades time for training memory: a training call
    keeps its inputs rather than what its backward reads (LIF: its
    charge, as many bytes as its input in float32), and the backward runs
    the training forward again to recompute it. Where the input is kept
    anyway (a fused block's, which its batch norm's backward reads), the
    call then holds nothing of its own from the forward to the backward
    (docs/Python.md measures it).

    States: an entry of `states` is None (the state's reset value, zero
    here), a number (broadcast over the neurons at the next call) or a
    tensor of the neuron shape; a state left by a call on other neurons (a
    new batch size) starts again from its reset value. States follow
    `.to()`, `.half()` and `.bfloat16()`; converting to another dtype is an
    error. A module pickles (`torch.save`, `copy.deepcopy`) with its
    neuron's source and options, never its loaded kernels: a loaded copy
    compiles (or finds in the cache) its kernels at its first call.

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

    # Loaded kernels (ctypes handles) stay in their process; a copy
    # compiles, or finds in the cache, its own at its first call.
    _process_local = dict(
        _compiled=None, _handle=None, _coupled_twin=None, _stale=True
    )

    def __init__(
        self,
        neuron,
        num_inputs: Optional[int] = None,
        num_states: Optional[int] = None,
        num_outputs: Optional[int] = None,
        store_state_seqs: bool = False,
        params: Optional[Mapping[str, object]] = None,
        kinds: Optional[Mapping[str, str]] = None,
        shapes: Optional[Mapping[str, str]] = None,
        neuron_shape: Optional[Sequence[int]] = None,
        num_channels: Optional[int] = None,
        surrogate_function=None,
        deterministic: bool = False,
        step_mode: str = "m",
        spike_dtype: Optional[torch.dtype] = None,
        storage_types: Optional[Sequence[str]] = None,
        neuron_name: Optional[str] = None,
        example_inputs=None,
        requires_grad=None,
        backend=None,
        check_finite: bool = False,
        recompute: bool = False,
        options: Optional[CompileOptions] = None,
        **compile_options,
    ):
        super().__init__()
        self.step_mode = step_mode
        if spike_dtype not in _SPIKE_STORAGE:
            raise ValueError(
                f"spike_dtype is None (the inputs' dtype), "
                f"torch.uint8 or 'bits', got {spike_dtype!r}"
            )
        spike_storage = _SPIKE_STORAGE[spike_dtype]
        # Inference runs the kernels the option chose; training, which the
        # compact ones cannot do, the dense ones.
        self._handle_options = ()
        if spike_storage != "dense":
            compile_options["spike_storage"] = ("dense", spike_storage)
            self._handle_options = (("spike_storage", spike_storage),)
        # How the kernels are compiled: one value, which a rebuild (after a
        # const write, or in a process that unpickled the module) reuses.
        self._options = CompileOptions.of(
            options or _MODULE_OPTIONS,
            storage_types=storage_types,
            kinds=kinds,
            shapes=shapes,
            neuron=neuron_name,
            **compile_options,
        )
        step = None
        if callable(neuron) and not isinstance(neuron, (str, os.PathLike)):
            step = _import_step(
                neuron,
                num_inputs,
                num_states,
                num_outputs,
                params,
                example_inputs,
            )
            # The importer wrote the parameters' kinds and values into the
            # neuron's text.
            neuron, params = step.mlir, None
        params = dict(params or {})
        # Const parameters are compiled in; the others are module state.
        probe = compiler.compile(
            neuron,
            targets=(),
            kinds=self._options.kinds,
            shapes=self._options.shapes,
            neuron=self._options.neuron,
        )
        info = probe.info
        unknown = set(params) - {p.name for p in info.params}
        if unknown:
            raise ValueError(
                f"{info.name} has no parameter {', '.join(sorted(unknown))} "
                f"(it has: {', '.join(p.name for p in info.params)})"
            )
        for what, expected, actual in (
            ("inputs", num_inputs, info.inputs),
            ("states", num_states, info.states),
            ("outputs", num_outputs, info.outputs),
        ):
            if expected is not None and expected != len(actual):
                raise ValueError(
                    f"{info.name} has {len(actual)} {what} "
                    f"({', '.join(actual) or 'none'}), not {expected}"
                )
        # What a rebuild needs besides the options: the source text.
        self._source = compiler.read_source(neuron)[0]
        self._surrogate = _coerce_surrogate(surrogate_function)
        self._deterministic = bool(deterministic)
        self._defaults = {p.name: p.default for p in info.params}
        self._const_names = frozenset(
            p.name for p in info.params if p.kind == "const"
        )
        # Const and scalar runtime parameter values, by name (trainable and
        # shaped ones are parameters and buffers).
        self._param_values = {}
        for p in info.params:
            value = params.get(p.name, p.default)
            if (
                isinstance(value, torch.Tensor)
                and not p.shaped
                and value.numel() != 1
            ):
                raise ValueError(
                    f"{info.name}: parameter '{p.name}' is a scalar, got a "
                    f"tensor of shape {tuple(value.shape)} (a per-neuron "
                    f"or per-channel parameter needs shapes={{'{p.name}': "
                    f"'per_neuron'}} or 'per_channel' and a runtime or "
                    f"trainable kind)"
                )
            if p.kind == "const" or (p.kind == "runtime" and not p.shaped):
                self._param_values[p.name] = _param_value(info.name, p, value)
        self._stale, self._compiled, self._handle = True, None, None
        self._compile(neuron)
        info = self._info
        self.store_state_seqs = store_state_seqs
        self.check_finite = bool(check_finite)
        self.recompute = bool(recompute)
        self._runtime_names = []
        shared = (
            {
                p.name: p.parameter
                for p in step.params
                if p.parameter is not None
            }
            if step
            else {}
        )
        self.neuron_shape = _neuron_shape(info, params, neuron_shape)
        self.num_channels = _num_channels(
            info, params, num_channels, self.neuron_shape
        )
        for p in info.runtime_params:
            value = params.get(p.name, p.default)
            if p.shaped:
                if p.name in shared:
                    raise ValueError(
                        f"{info.name}: the step function's parameter "
                        f"'{p.name}' is a scalar nn.Parameter, it cannot be "
                        f"{p.shape}"
                    )
                shape = (
                    self.neuron_shape if p.per_neuron else (self.num_channels,)
                )
                data = (
                    value.detach().to(dtype=torch.float32, copy=True)
                    if isinstance(value, torch.Tensor)
                    else torch.full(shape, float(value), dtype=torch.float32)
                )
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
                self.register_parameter(
                    p.name,
                    parameter
                    if parameter is not None
                    else nn.Parameter(
                        torch.tensor(float(value), dtype=torch.float32)
                    ),
                )
            else:
                self._runtime_names.append(p.name)
        self._reset_values = [0.0] * len(info.states)
        self._assigned = set()  # states the user set since the last call
        self.states = [None] * len(info.states)
        self.state_seqs = None

    # -- compiling -----------------------------------------------------------

    def _compile(self, source=None):
        """Compiles (or finds in the cache) the kernels for the current const
        parameter values and surrogate."""
        compiled = compiler.compile(
            self._source if source is None else source,
            params=self._const_changes(),
            surrogate=self._surrogate,
            options=self._options,
        )
        self._compiled, self._info = compiled, compiled.info
        self._handle = Handle(
            compiled, self._deterministic, self._handle_options
        )
        self._coupled_twin = None
        self._stale = False

    def _const_changes(self) -> dict:
        """The const parameter values to compile with: only those that
        differ from the neuron's defaults (a module at its defaults shares
        the cache entry of flexsn.compile(neuron))."""
        return {
            name: self._param_values[name]
            for name in sorted(self._const_names)
            if _text(self._param_values[name]) != _text(self._defaults[name])
        }

    def _coupled_handle(self) -> Handle:
        """The handle whose coupled kernels flexsn.torch.Recurrent runs:
        the module's own, or, for a neuron with per-channel parameters
        (which coupled kernels do not take), that of a twin compile with
        them per-neuron: the coupled scan expands each over the samples
        (a [B, C * S] view of the [C] values, neuron j in channel j // S),
        and autograd sums their gradients back."""
        if self._stale:
            self._compile()
        if not self._info.per_channel_params:
            return self._handle
        if self._coupled_twin is None:
            shapes = dict(self._options.shapes)
            shapes.update(
                (p.name, "per_neuron") for p in self._info.per_channel_params
            )
            compiled = compiler.compile(
                self._source,
                params=self._const_changes(),
                surrogate=self._surrogate,
                options=self._options.replace(
                    coupled=True, shapes=tuple(sorted(shapes.items()))
                ),
            )
            self._coupled_twin = Handle(
                compiled, self._deterministic, self._handle_options
            )
        self._coupled_twin.deterministic = self._handle.deterministic
        return self._coupled_twin

    def __deepcopy__(self, memo):
        """A copy in this process shares the compiled neuron (read-only)
        under a handle of its own: its first call does not compile again,
        which under torch.compile would break the graph."""
        new = type(self).__new__(type(self))
        memo[id(self)] = new
        new.__setstate__(copy.deepcopy(self.__getstate__(), memo))
        if not self._stale:
            new.__dict__.update(
                _compiled=self._compiled,
                _info=self._info,
                _handle=Handle(
                    self._compiled, self._deterministic, self._handle_options
                ),
                _stale=False,
            )
        return new

    def __setstate__(self, state):
        # A module pickled before CompileOptions kept its options as a
        # dict of flexsn.compile's keywords.
        old = state.pop("_compile_options", None)
        if old is not None and "_options" not in state:
            state["_options"] = CompileOptions.of(_MODULE_OPTIONS, **old)
        # And one pickled before `recompute` saved what its backward reads.
        state.setdefault("recompute", False)
        super().__setstate__(state)

    @property
    def options(self) -> CompileOptions:
        """How the module's kernels are compiled (a frozen value)."""
        return self._options

    @property
    def compiled(self):
        """The compiled neuron (compiled first after a const write)."""
        if self._stale:
            self._compile()
        return self._compiled

    @property
    def handle(self) -> Handle:
        if self._stale:
            self._compile()
        return self._handle

    @property
    def info(self):
        """The neuron's interface: inputs, states, outputs, parameters."""
        return self._info

    # -- attributes ----------------------------------------------------------

    def __getattr__(self, name):
        values = self.__dict__.get("_param_values")
        if values is not None and name in values:
            return values[name]
        return super().__getattr__(name)

    def __setattr__(self, name, value):
        attribute = getattr(type(self), name, None)
        if isinstance(attribute, property):
            attribute.__set__(self, value)
            return
        values = self.__dict__.get("_param_values")
        if values is not None and name in values:
            self._set_param(name, value)
            return
        super().__setattr__(name, value)

    def _set_param(self, name: str, value) -> None:
        """Writes a const or scalar runtime parameter, checked; a changed
        const value makes the next call compile that variant. A trainable
        or shaped one is a parameter or buffer: nn.Module's rules."""
        if name not in self._param_values:
            nn.Module.__setattr__(self, name, value)
            return
        p = next(p for p in self._info.params if p.name == name)
        value = _param_value(self._info.name, p, value)
        self._check_param(name, value)
        old = self._param_values[name]
        self._param_values[name] = value
        if name in self._const_names and _text(value) != _text(old):
            self._stale = True

    def _check_param(self, name: str, value) -> None:
        """Subclasses check their parameters' ranges here."""

    def _param(self, name: str):
        """A parameter's current value: a number, or its tensor."""
        values = self._param_values
        return values[name] if name in values else getattr(self, name)

    @property
    def step_mode(self) -> str:
        return self._step_mode

    @step_mode.setter
    def step_mode(self, value: str):
        if value not in STEP_MODES:
            raise ValueError(
                f"step_mode is 's' (single step, [N...]) or "
                f"'m' (multi-step, [T, N...]), got {value!r}"
            )
        self.__dict__["_step_mode"] = value

    @property
    def surrogate_function(self):
        """The surrogate every spike uses (None: each spike's own)."""
        return self._surrogate

    @surrogate_function.setter
    def surrogate_function(self, value):
        value = _coerce_surrogate(value)
        if value != self.__dict__.get("_surrogate"):
            self.__dict__["_surrogate"] = value
            self.__dict__["_stale"] = True

    @property
    def deterministic(self) -> bool:
        return self._deterministic

    @deterministic.setter
    def deterministic(self, value: bool):
        self.__dict__["_deterministic"] = bool(value)
        if self.__dict__.get("_handle") is not None:
            self._handle.deterministic = bool(value)

    # -- states --------------------------------------------------------------

    def reset(self):
        """Forgets the states: the next call starts from their reset
        values."""
        # In place where possible: nn.Module.__setattr__ costs microseconds,
        # and SpikingJelly-style code resets before every sample.
        self.states[:] = [None] * len(self._info.states)
        self._assigned.clear()
        if self.state_seqs is not None:
            self.state_seqs = None

    def extra_repr(self) -> str:
        info = self._info
        return (
            f"neuron={info.name}, inputs={list(info.inputs)}, "
            f"states={list(info.states)}, "
            f"outputs={list(info.outputs)}, "
            f"store_state_seqs={self.store_state_seqs}, "
            f"step_mode={self.step_mode!r}"
            + "".join(
                f", {name}={self._param_values[name]!r}"
                for name in sorted(self._const_names)
            )
            + (
                f", surrogate_function={self._surrogate!r}"
                if self._surrogate is not None
                else ""
            )
            + (
                f", neuron_shape={self.neuron_shape}"
                if info.per_neuron_params
                else ""
            )
            + (f", num_channels={self.num_channels}" if info.channels else "")
            + self._storage_repr()
        )

    def _storage_repr(self) -> str:
        """The repr of how spikes are stored and what training keeps."""
        spike_storage = dict(self._handle_options).get("spike_storage")
        return {
            None: "",
            "u8": ", spike_dtype=torch.uint8",
            "bits": ", spike_dtype='bits'",
        }[spike_storage] + (", recompute=True" if self.recompute else "")

    # -- calls ---------------------------------------------------------------

    def forward(self, *inputs: torch.Tensor):
        if self._stale:
            self._compile()
        handle = self._handle
        info = self._info
        if len(inputs) != len(info.inputs):
            raise ValueError(
                f"{info.name} takes {len(info.inputs)} input(s) "
                f"({', '.join(info.inputs)}), got {len(inputs)}"
            )
        single = self._step_mode == "s"
        if single:
            inputs = tuple(x.unsqueeze(0) for x in inputs)
        trainable, runtime, inits = self._call_arguments(inputs[0])
        if self.check_finite:
            self._check_finite("input", info.inputs, inputs, True)
            self._check_finite("initial state", info.states, inits, False)
        outputs, states = scan(
            handle,
            list(inputs),
            inits,
            trainable,
            runtime,
            self.store_state_seqs,
            recompute=self.recompute,
        )
        if self.check_finite:
            self._check_finite("output", info.outputs, outputs, True)
            self._check_finite(
                "state", info.states, states, self.store_state_seqs
            )
        if self.store_state_seqs:
            self.state_seqs = states
            self.states = final_states(states, inits)
        else:
            # In place: nn.Module.__setattr__ costs microseconds per call.
            self.states[:] = states
        if single:
            outputs = [y[0] for y in outputs]
        return outputs[0] if len(outputs) == 1 else tuple(outputs)

    def _call_arguments(self, x: torch.Tensor):
        """(trainable tensors, runtime values, initial states) of a call on
        [T, N...] sequences like `x`, in the kernels' order."""
        info = self._info
        trainable = [self._parameters[p.name] for p in info.trainable_params]
        values = self._param_values
        runtime = [
            values[name] if name in values else self._buffers[name]
            for name in self._runtime_names
        ]
        if info.shaped_params:
            # The kernels take float32 shaped parameters: a module
            # converted with .half() passes float32 copies
            # (differentiable; the gradient comes back in its dtype).
            trainable = [_float32(t) for t in trainable]
            runtime = [_float32(v) for v in runtime]
        inits = initial_states(
            info.name,
            info.states,
            self.states,
            self._reset_values,
            self._assigned,
            x,
        )
        return trainable, runtime, inits

    def _use_coupled_kernels(self) -> None:
        """Compiles the module's kernels with their coupled twins too
        (CompileOptions.coupled), which flexsn.torch.Recurrent runs."""
        if not self._options.coupled:
            self._options = self._options.replace(coupled=True)
            self._stale = True

    def _check_finite(self, what, names, tensors, sequences):
        # Single steps are [1, N...] sequences here: step t = 0.
        for name, tensor in zip(names, tensors):
            if tensor is not None and tensor.dtype != torch.uint8:
                check_finite(self._info.name, what, name, tensor, sequences)


def _float32(value):
    if (
        isinstance(value, torch.Tensor)
        and value.dtype != torch.float32
        and value.is_floating_point()
    ):
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
                f"{tuple(value.shape)}, {where} is {shape}"
            )
    if shape is None and info.per_neuron_params:
        names = ", ".join(p.name for p in info.per_neuron_params)
        raise ValueError(
            f"{info.name}: per-neuron parameter(s) {names} need the neuron "
            f"shape (the inputs' shape without T): pass neuron_shape=(...) "
            f"or a tensor of that shape in params="
        )
    return shape


def _num_channels(info, params, num_channels, neuron_shape):
    """C of the per-channel parameters: `num_channels`, or the length of
    the 1-d tensors given for them in `params`, or dimension 1 of the
    per-neuron parameters' shape [B, C, ...] (all that are given must
    agree)."""
    count = where = None
    if num_channels is not None:
        if (
            isinstance(num_channels, bool)
            or not isinstance(num_channels, int)
            or num_channels < 1
        ):
            raise ValueError(
                f"num_channels is a positive int, got " f"{num_channels!r}"
            )
        count, where = num_channels, "num_channels"
    for p in info.per_channel_params:
        value = params.get(p.name)
        if not isinstance(value, torch.Tensor):
            continue
        if value.dim() != 1:
            raise ValueError(
                f"{info.name}: per-channel parameter '{p.name}' is a [C] "
                f"tensor, got shape {tuple(value.shape)}"
            )
        if count is None:
            count, where = value.shape[0], f"params['{p.name}']"
        elif value.shape[0] != count:
            raise ValueError(
                f"{info.name}: per-channel parameter '{p.name}' has "
                f"{value.shape[0]} channels, {where} says {count}"
            )
    if not info.per_channel_params:
        if num_channels is not None:
            raise ValueError(
                f"{info.name} has no per-channel parameter: "
                f"num_channels does not apply"
            )
        return None
    if count is None and neuron_shape is not None and len(neuron_shape) > 1:
        count, where = neuron_shape[1], "neuron_shape"
    if count is None:
        names = ", ".join(p.name for p in info.per_channel_params)
        raise ValueError(
            f"{info.name}: per-channel parameter(s) {names} need the number "
            f"of channels (dimension 2 of the [T, B, C, ...] inputs): pass "
            f"num_channels=C or a [C] tensor in params="
        )
    if neuron_shape is not None and (
        len(neuron_shape) < 2 or neuron_shape[1] != count
    ):
        raise ValueError(
            f"{info.name}: the neuron shape {neuron_shape} is [B, C, ...] "
            f"with C = {count} ({where})"
        )
    return count


def _import_step(
    core, num_inputs, num_states, num_outputs, params, example_inputs
):
    """A Python step function `core(*inputs, *states) -> (*outputs,
    *new_states)` as a neuron (flexsn.fx), SpikingJelly's FlexSN(core,
    ...) convention."""
    from .. import fx

    if num_inputs is None or num_states is None:
        raise ValueError(
            "a Python step function needs num_inputs and "
            "num_states (and num_outputs unless it can be "
            "inferred from what core returns)"
        )
    if example_inputs is not None and len(example_inputs) != (
        num_inputs + num_states
    ):
        raise ValueError(
            f"example_inputs has {len(example_inputs)} tensor(s), core takes "
            f"num_inputs + num_states = {num_inputs + num_states}"
        )
    owner = core if isinstance(core, nn.Module) else None
    name = type(owner).__name__ if owner else getattr(core, "__name__", "")
    if not (isinstance(name, str) and name.isidentifier()):
        name = "neuron"  # a lambda, a partial
    return fx.trace_step(
        core, num_inputs, num_states, num_outputs, params=params, name=name
    )


def _param_value(owner: str, p, value):
    """`value` as parameter `p` holds it (bool, int or float), or a clear
    error."""
    if isinstance(value, torch.Tensor) and value.numel() == 1:
        value = value.item()
    if p.type == "i1":
        if isinstance(value, bool) or (
            isinstance(value, numbers.Integral) and value in (0, 1)
        ):
            return bool(value)
        raise TypeError(
            f"{owner}: parameter '{p.name}' is a bool, got " f"{value!r}"
        )
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(
            f"{owner}: parameter '{p.name}' is a number, got " f"{value!r}"
        )
    if p.type == "i32":
        if value != int(value):
            raise TypeError(
                f"{owner}: parameter '{p.name}' is an int, got " f"{value!r}"
            )
        return int(value)
    value = float(value)
    if not math.isfinite(value):
        raise ValueError(
            f"{owner}: parameter '{p.name}' must be finite, " f"got {value}"
        )
    return value


def _text(value) -> str:
    """A parameter value as the compiler reads it: equal texts, equal
    kernels (0.0 and -0.0 differ, as they do in MLIR)."""
    return compiler._format_value(value)


#: SpikingJelly's backends: a drop-in neuron accepts their names and runs
#: FlexSN's kernels whichever is named.
_SPIKINGJELLY_BACKENDS = ("torch", "cupy", "triton")


class _NodeBase(FlexSN):
    """SpikingJelly-style neurons with one state `v`.

    As SpikingJelly's: `v` starts (and `reset()` returns it) at `v_reset`
    (0 for a soft reset, `v_reset=None`), single-step mode by default,
    `v_threshold`, `v_reset`, `detach_reset`, `surrogate_function`,
    `store_v_seq`, `step_mode` (and each neuron's own) are attributes read
    at every call, and SpikingJelly's surrogate objects are accepted.
    `backend` takes SpikingJelly's names; the kernels are FlexSN's.

    A per-neuron threshold (`per_neuron_threshold=True` with
    `neuron_shape=`, or a tensor `v_threshold`) is a trainable
    `nn.Parameter` `v_threshold` of the neuron shape; with
    `kinds={"v_threshold": "runtime"}` a buffer instead."""

    supported_backends = ("flexsn",) + _SPIKINGJELLY_BACKENDS

    def __init__(
        self,
        neuron: str,
        params: dict,
        v_reset,
        detach_reset,
        surrogate_function,
        store_v_seq,
        step_mode,
        backend,
        per_neuron_threshold=False,
        **options,
    ):
        _check_backend(backend)
        threshold = params["v_threshold"]
        if isinstance(threshold, torch.Tensor) or per_neuron_threshold:
            options["shapes"] = {
                **(options.get("shapes") or {}),
                "v_threshold": "per_neuron",
            }
            options["kinds"] = {
                "v_threshold": "trainable",
                **(options.get("kinds") or {}),
            }
        if v_reset is not None and (
            isinstance(v_reset, bool) or not isinstance(v_reset, numbers.Real)
        ):
            raise TypeError(
                f"v_reset is a number or None (soft reset), got "
                f"{v_reset!r}"
            )
        params.update(
            v_reset=0.0 if v_reset is None else float(v_reset),
            soft_reset=v_reset is None,
            detach_reset=detach_reset,
        )
        super().__init__(
            neuron,
            params=params,
            surrogate_function=_surrogate(surrogate_function),
            store_state_seqs=store_v_seq,
            step_mode=step_mode,
            **options,
        )
        # SpikingJelly registers v with v_reset as its reset value, fixed
        # at construction.
        self._reset_values[0] = 0.0 if v_reset is None else float(v_reset)

    @property
    def v_reset(self) -> Optional[float]:
        """The hard reset's potential, or None for a soft reset."""
        return None if self._param("soft_reset") else self._param("v_reset")

    @v_reset.setter
    def v_reset(self, value: Optional[float]):
        if value is None:
            self._set_param("soft_reset", True)
            return
        if isinstance(value, bool) or not isinstance(value, numbers.Real):
            raise TypeError(
                f"v_reset is a number or None (soft reset), got " f"{value!r}"
            )
        self._set_param("v_reset", float(value))
        self._set_param("soft_reset", False)

    @property
    def store_v_seq(self) -> bool:
        return self.store_state_seqs

    @store_v_seq.setter
    def store_v_seq(self, value: bool):
        self.store_state_seqs = bool(value)
        self.state_seqs = None

    @property
    def backend(self) -> str:
        return "flexsn"

    @backend.setter
    def backend(self, value: str):
        _check_backend(value)

    @property
    def v(self):
        """The membrane potential: a tensor after a call, else a number
        (`v_reset`, or what was assigned)."""
        v = self.states[0]
        return self._reset_values[0] if v is None else v

    @v.setter
    def v(self, value):
        self.states[0] = check_state_value(self._info.name, "v", value)
        self._assigned.add(0)

    @property
    def v_seq(self):
        return None if self.state_seqs is None else self.state_seqs[0]

    def extra_repr(self) -> str:
        # SpikingJelly's fields, in its order and format; the surrogate on
        # its own line, where SpikingJelly prints its submodule.
        threshold = self._param("v_threshold")
        if isinstance(threshold, torch.Tensor):
            threshold = f"tensor of shape {tuple(threshold.shape)}"
        text = (
            f"v_threshold={threshold}, v_reset={self.v_reset}, "
            f"detach_reset={self._param('detach_reset')}, "
            f"step_mode={self.step_mode}, backend={self.backend}"
            + self._neuron_repr()
        )
        text += self._storage_repr()
        surrogate = self._surrogate
        return text + (
            f"\n(surrogate_function): "
            f"{type(surrogate).__name__}("
            + "".join(f"{k}={v}, " for k, v in surrogate.params.items())
            + "spiking=True)"
        )

    def _neuron_repr(self) -> str:
        return ""


def _check_backend(backend) -> None:
    if backend is not None and backend not in _NodeBase.supported_backends:
        raise ValueError(
            f"backend is one of "
            f"{', '.join(_NodeBase.supported_backends)} (each "
            f"runs FlexSN's kernels), got {backend!r}"
        )


def _surrogate(surrogate_function):
    return (
        surrogates.Sigmoid()
        if surrogate_function is None
        else _coerce_surrogate(surrogate_function)
    )


def _coerce_surrogate(value):
    if value is None:
        return None
    try:
        return surrogates.coerce(value)
    except TypeError as error:
        raise TypeError(f"surrogate_function: {error}") from None


class IFNode(_NodeBase):
    """Integrate-and-fire: h = v + x (SpikingJelly's IFNode)."""

    def __init__(
        self,
        v_threshold: Union[float, torch.Tensor] = 1.0,
        v_reset: Optional[float] = 0.0,
        surrogate_function=None,
        detach_reset: bool = False,
        step_mode: str = "s",
        backend: Optional[str] = None,
        store_v_seq: bool = False,
        per_neuron_threshold: bool = False,
        **options,
    ):
        super().__init__(
            "if",
            {"v_threshold": v_threshold},
            v_reset,
            detach_reset,
            surrogate_function,
            store_v_seq,
            step_mode,
            backend,
            per_neuron_threshold,
            **options,
        )


class LIFNode(_NodeBase):
    """Leaky integrate-and-fire (SpikingJelly's LIFNode)."""

    def __init__(
        self,
        tau: float = 2.0,
        decay_input: bool = True,
        v_threshold: Union[float, torch.Tensor] = 1.0,
        v_reset: Optional[float] = 0.0,
        surrogate_function=None,
        detach_reset: bool = False,
        step_mode: str = "s",
        backend: Optional[str] = None,
        store_v_seq: bool = False,
        per_neuron_threshold: bool = False,
        **options,
    ):
        _check_tau("tau", tau)
        super().__init__(
            "lif",
            {
                "tau": float(tau),
                "decay_input": decay_input,
                "v_threshold": v_threshold,
            },
            v_reset,
            detach_reset,
            surrogate_function,
            store_v_seq,
            step_mode,
            backend,
            per_neuron_threshold,
            **options,
        )

    def _check_param(self, name, value):
        if name == "tau":
            _check_tau(name, value)

    def _neuron_repr(self) -> str:
        return f", tau={self._param('tau')}"


class ParametricLIFNode(_NodeBase):
    """LIF with a learned leak 1/tau = sigmoid(w), w0 = -ln(init_tau - 1)
    (SpikingJelly's ParametricLIFNode).

    `num_channels=C` learns one leak per channel: `w` is an `nn.Parameter`
    of shape [C] and the inputs are `[T, B, C, ...]`."""

    def __init__(
        self,
        init_tau: float = 2.0,
        decay_input: bool = True,
        v_threshold: Union[float, torch.Tensor] = 1.0,
        v_reset: Optional[float] = 0.0,
        surrogate_function=None,
        detach_reset: bool = False,
        step_mode: str = "s",
        backend: Optional[str] = None,
        store_v_seq: bool = False,
        per_neuron_threshold: bool = False,
        num_channels: Optional[int] = None,
        **options,
    ):
        _check_tau("init_tau", init_tau)
        if num_channels is not None:
            options["shapes"] = {
                **(options.get("shapes") or {}),
                "w": "per_channel",
            }
            options["num_channels"] = num_channels
        super().__init__(
            "plif",
            {
                "w": -math.log(init_tau - 1.0),
                "decay_input": decay_input,
                "v_threshold": v_threshold,
            },
            v_reset,
            detach_reset,
            surrogate_function,
            store_v_seq,
            step_mode,
            backend,
            per_neuron_threshold,
            **options,
        )

    def _neuron_repr(self) -> str:
        with torch.no_grad():
            tau = 1.0 / self.w.sigmoid()
        return f", tau={tau}"


def _check_tau(name: str, tau) -> None:
    if (
        isinstance(tau, bool)
        or not isinstance(tau, numbers.Real)
        or not tau > 1.0
        or not math.isfinite(tau)
    ):
        raise ValueError(f"{name} must be a finite number > 1, got {tau!r}")


def set_recompute(model: nn.Module, enabled: bool = True) -> int:
    """Sets `recompute` on every FlexSN neuron of `model` (a fused block
    follows its neuron's) and returns how many it set: with it, training
    calls keep their inputs instead of what their backward reads and
    recompute that in the backward (FlexSN's `recompute`). A recurrent
    layer's coupled kernels (Recurrent) save as before."""
    count = 0
    for module in model.modules():
        if isinstance(module, FlexSN):
            module.recompute = bool(enabled)
            count += 1
    return count
