"""A compiled neuron's kernels called on torch tensors.

Buffers are matched to tensors by their manifest bindings alone (what each
buffer holds: input k, state k before the first step, at every step or
after the last, output k, a parameter by name, or the gradient of one of
these; `buffer_layout`), never by their names or positions.

Shaped parameters are float32 tensors passed in declaration order as
`shaped`: a per-neuron one has the neuron shape (the inputs' shape without
the time dimension), a per-channel one the shape `[C]`. A neuron with
per-channel parameters takes inputs `[T, B, C, ...]`: its kernels see the
neurons as `[B, C, S]`, S the product of the dimensions after C. The scalar
runtime parameters are `params`.
"""

import contextlib
import functools
import math
import warnings
from typing import List, Optional, Sequence, Tuple

import torch

from .._manifest import Kernel, KernelOptions
from .._runtime import NoDeterministicKernelError
from .._targets import target

DTYPES = {torch.float32: "f32", torch.float16: "f16", torch.bfloat16: "bf16"}


def output_kinds(spec: Kernel, x_dtype: torch.dtype) -> list:
    """Per output of an inference or final-state kernel: the torch dtype it
    is stored in, or "bits" for spikes packed 8 per byte."""
    return [
        "bits"
        if b.dtype == "bits"
        else torch.uint8
        if b.dtype == "u8"
        else x_dtype
        for b in spec.bound("output")
    ]


def buffer_layout(spec: Kernel, info) -> List[Tuple[Tuple[str, bool], int]]:
    """Per argument buffer of `spec` (workspace parts excluded), which
    tensor it takes: the group of tensors, `(value, gradient)` as its
    binding says (("input", False): the inputs, ("state_final", True): the
    final states' gradients, ...), and the index into that group: the
    binding's index or, for a parameter, its position among `info`'s
    shaped parameters (values) or trainable ones (gradients)."""
    shaped = [p.name for p in info.shaped_params]
    trainable = [p.name for p in info.trainable_params]
    layout = []
    for b in spec.buffers:
        if b.in_workspace:
            continue
        binds = b.binds
        index = binds.index
        if binds.value == "param":
            names = trainable if binds.gradient else shaped
            if binds.name not in names:
                raise RuntimeError(
                    f"{spec.name}: buffer '{b.name}' binds parameter "
                    f"'{binds.name}', which is not one of "
                    f"{', '.join(names) or 'none'}"
                )
            index = names.index(binds.name)
        layout.append((binds.key, index))
    return layout


def packed_shape(seq_shape: Sequence[int]) -> Tuple[int, int]:
    """The shape of bit-packed spikes of a [T, N...] sequence: [T, ceil(N /
    8)] bytes, numpy.packbits(axis=-1, bitorder="little") of [T, N]."""
    return (seq_shape[0], (math.prod(seq_shape[1:]) + 7) // 8)


def unpack_spikes(
    packed: torch.Tensor,
    shape: Sequence[int],
    dtype: torch.dtype = torch.float32,
) -> torch.Tensor:
    """The 0/1 spikes of shape `shape` ([T, N...]) from their bit-packed
    form `packed` (uint8 [T, ceil(N / 8)], as `spike_dtype="bits"` returns
    them): bit n % 8 (least significant first) of byte n // 8 of each row
    is neuron n's spike."""
    T, N = shape[0], math.prod(shape[1:])
    if packed.dtype != torch.uint8 or tuple(packed.shape) != (T, (N + 7) // 8):
        raise ValueError(
            f"packed spikes of a {tuple(shape)} sequence are "
            f"uint8 [{T}, {(N + 7) // 8}], got {packed.dtype} "
            f"{tuple(packed.shape)}"
        )
    weights = torch.tensor(
        [1 << i for i in range(8)], dtype=torch.uint8, device=packed.device
    )
    bits = packed.unsqueeze(-1).bitwise_and(weights).ne(0)
    return bits.reshape(T, -1)[:, :N].reshape(tuple(shape)).to(dtype)


def storage_type(tensors: Sequence[torch.Tensor], what: str) -> str:
    dtypes = {t.dtype for t in tensors}
    if len(dtypes) != 1:
        raise TypeError(
            f"{what}: every input and state must have one dtype, "
            f"got {sorted(str(d) for d in dtypes)}"
        )
    dtype = dtypes.pop()
    if dtype not in DTYPES:
        raise TypeError(
            f"{what}: FlexSN kernels store float32, float16 or "
            f"bfloat16 sequences, got {dtype}"
        )
    return DTYPES[dtype]


def time_stride(x: torch.Tensor, allow_strided: bool) -> Optional[int]:
    """The time stride of `x` [T, ...] in elements when each step is
    contiguous and the layout is one the kernel reads in place; else None
    (the caller copies)."""
    if x.dim() < 1:
        return None
    n, ld = _step_layout(x.shape, x.stride())
    if ld is not None and (ld == n or (allow_strided and ld > n)):
        return ld
    return None


@functools.lru_cache(maxsize=1024)
def _step_layout(shape: torch.Size, stride: Tuple[int, ...]):
    """(elements per step, time stride), the stride None unless every step
    is contiguous. Memoized: a training loop sees a handful of layouts."""
    n = 1
    for size, step in zip(reversed(shape[1:]), reversed(stride[1:])):
        if size != 1 and step != n:
            return math.prod(shape[1:]), None
        n *= size
    return n, stride[0] if shape[0] > 1 else n


# The raw stream handle without building a torch.cuda.Stream object (the
# accessor torch.compile's generated code uses); older torch: the object.
_raw_stream = getattr(torch._C, "_cuda_getCurrentRawStream", None)


def channels(info, x: torch.Tensor) -> Optional[Tuple[int, int]]:
    """(C, S) of inputs `x` [T, B, C, ...] when the neuron has per-channel
    parameters (S: the product of the dimensions after C), else None."""
    if not info.channels:
        return None
    return x.shape[2], math.prod(x.shape[3:])


def check_inputs(info, inputs, inits, shaped=()):
    """Clear errors for inputs, initial states and shaped parameters
    that do not fit the neuron: counts, ranks, shapes, devices and
    dtypes."""
    if len(inputs) != len(info.inputs):
        raise ValueError(
            f"{info.name} takes {len(info.inputs)} input "
            f"sequence(s) ({', '.join(info.inputs)}), got "
            f"{len(inputs)}"
        )
    x0 = inputs[0]
    if x0.dim() < 2:
        raise ValueError(
            f"{info.name}: inputs are [T, N...] sequences, got "
            f"shape {tuple(x0.shape)}"
        )
    if info.channels and x0.dim() < 3:
        names = ", ".join(p.name for p in info.per_channel_params)
        raise ValueError(
            f"{info.name}: inputs are [T, B, C, ...] sequences "
            f"(per-channel parameter(s) {names}), got shape "
            f"{tuple(x0.shape)}"
        )
    for name, x in zip(info.inputs[1:], inputs[1:]):
        if x.shape != x0.shape:
            raise ValueError(
                f"{info.name}: input '{name}' has shape "
                f"{tuple(x.shape)}, '{info.inputs[0]}' has "
                f"{tuple(x0.shape)}"
            )
        if x.device != x0.device:
            raise ValueError(
                f"{info.name}: input '{name}' is on {x.device}, "
                f"'{info.inputs[0]}' on {x0.device}"
            )
    for name, s in zip(info.states, inits):
        if s is None:
            continue
        if s.shape != x0.shape[1:]:
            raise ValueError(
                f"{info.name}: state '{name}' has shape "
                f"{tuple(s.shape)}, expected the neuron shape "
                f"{tuple(x0.shape[1:])}"
            )
        if s.device != x0.device:
            raise ValueError(
                f"{info.name}: state '{name}' is on {s.device}, "
                f"the inputs on {x0.device}"
            )
        if s.dtype != x0.dtype:
            raise TypeError(
                f"{info.name}: state '{name}' is {s.dtype}, the "
                f"inputs {x0.dtype}"
            )
    check_shaped(info, x0, shaped)


def check_shaped(info, x0, shaped):
    """Each shaped parameter is a float32 tensor on the inputs' device: of
    the neuron shape (x0.shape[1:]) for a per-neuron one, of shape [C]
    (x0.shape[2]) for a per-channel one."""
    params = info.shaped_params
    if len(shaped) != len(params):
        raise ValueError(
            f"{info.name} takes {len(params)} per-neuron or per-channel "
            f"parameter(s) ({', '.join(p.name for p in params) or 'none'}), "
            f"got {len(shaped)}"
        )
    for p, t in zip(params, shaped):
        what = (
            "per-neuron parameter" if p.per_neuron else "per-channel parameter"
        )
        if not isinstance(t, torch.Tensor):
            raise TypeError(
                f"{info.name}: {what} '{p.name}' is a tensor of "
                + ("the neuron shape" if p.per_neuron else "shape [C]")
                + f", not {type(t).__name__}"
            )
        if p.per_neuron and t.shape != x0.shape[1:]:
            raise ValueError(
                f"{info.name}: {what} '{p.name}' has shape "
                f"{tuple(t.shape)}, expected the neuron shape "
                f"{tuple(x0.shape[1:])} (the inputs' shape without T)"
            )
        if p.per_channel and t.shape != x0.shape[2:3]:
            raise ValueError(
                f"{info.name}: {what} '{p.name}' has shape "
                f"{tuple(t.shape)}, expected [C] = {tuple(x0.shape[2:3])} "
                f"(C is dimension 2 of the [T, B, C, ...] inputs)"
            )
        if t.dtype != torch.float32:
            raise TypeError(
                f"{info.name}: {what} '{p.name}' "
                f"is {t.dtype}, the kernels take float32"
            )
        if t.device != x0.device:
            raise ValueError(
                f"{info.name}: {what} '{p.name}' "
                f"is on {t.device}, the inputs on {x0.device}"
            )


def sequence_like(
    x0: torch.Tensor,
    steps: int,
    in_place: bool,
    dtype: Optional[torch.dtype] = None,
) -> torch.Tensor:
    """An empty `[steps, N...]` sequence of x0's neurons: each step in
    x0's memory order when `in_place` (x0 is dense, T outermost), else
    row-major."""
    shape = (steps,) + tuple(x0.shape[1:])
    if not in_place:
        return x0.new_empty(shape, dtype=dtype)
    return x0.new_empty_strided(
        shape, (math.prod(shape[1:]),) + x0.stride()[1:], dtype=dtype
    )


def step_like(
    x0: torch.Tensor, in_place: bool, dtype: Optional[torch.dtype] = None
) -> torch.Tensor:
    """An empty step `[N...]` of x0's neurons, as sequence_like lays out
    each step."""
    if not in_place:
        return x0.new_empty(x0.shape[1:], dtype=dtype)
    return x0.new_empty_strided(x0.shape[1:], x0.stride()[1:], dtype=dtype)


class TensorLike:
    """What the backward kernels need of an input they do not read: its
    shape, strides, dtype and device, for the gradients they make like it
    (sequence_like, step_like, as_read). Saved in the input's place, it
    does not hold the input's memory until backward."""

    def __init__(self, t: torch.Tensor):
        self.shape, self._stride = t.shape, t.stride()
        self.dtype, self.device = t.dtype, t.device
        self.is_cuda, self.is_cpu = t.is_cuda, t.is_cpu

    def stride(self):
        return self._stride

    def dim(self) -> int:
        return len(self.shape)

    def new_empty(self, shape, dtype=None):
        return torch.empty(
            shape, dtype=dtype or self.dtype, device=self.device
        )

    def new_empty_strided(self, shape, stride, dtype=None):
        return torch.empty_strided(
            shape, stride, dtype=dtype or self.dtype, device=self.device
        )

    def new_zeros(self, shape, dtype=None):
        return torch.zeros(
            shape, dtype=dtype or self.dtype, device=self.device
        )


def in_order(
    t: torch.Tensor, x0: torch.Tensor, step: bool = False
) -> torch.Tensor:
    """`t`, of x0's shape (or a step's), in x0's memory order: itself when
    it has x0's strides, else a copy (an incoming gradient laid out
    otherwise, or expanded)."""
    if t.stride() == (x0.stride()[1:] if step else x0.stride()):
        return t
    like = (
        step_like(x0, True, t.dtype)
        if step
        else sequence_like(x0, x0.shape[0], True, t.dtype)
    )
    return like.copy_(t)


def as_read(
    tensors, x0: torch.Tensor, in_place: bool, step: bool = False
) -> list:
    """`tensors` (sequences like x0, or steps; None stays None) as the
    kernels read them: in x0's memory order when `in_place`, else
    contiguous; copies where they are not."""
    if in_place:
        return [None if t is None else in_order(t, x0, step) for t in tensors]
    return [None if t is None else t.contiguous() for t in tensors]


# The current CUDA device's index without building a device object.
_current_device = (
    getattr(torch._C, "_cuda_getDevice", None) or torch.cuda.current_device
)


def current_stream(device_index: int) -> int:
    if _raw_stream is not None:
        return _raw_stream(device_index)
    return torch.cuda.current_stream(device_index).cuda_stream


class NeuronKernels:
    """Runs one compiled neuron on tensors of one device."""

    def __init__(self, compiled, device_type: str):
        self.compiled = compiled
        self.info = compiled.info
        self.device_type = device_type
        self.num_inputs = len(self.info.inputs)
        self.num_states = len(self.info.states)
        self.num_outputs = len(self.info.outputs)
        self._cache = {}
        self._plans = {}
        self._layouts = {}
        self._written = {}
        self._per_neuron_sums = {}
        self._state_sequences = {}
        self._read_by_backward = {}
        # Per-channel gradients where kernels sum them across threads (the
        # GPU): the deterministic kernel (each neuron's sum over time,
        # summed per channel here by torch) is also the faster one
        # (docs/perf/per_channel_results.md): it serves every backward call.
        self._sum_channels_here = target(
            device_type
        ).sums_across_threads and any(
            p.per_channel for p in self.info.trainable_params
        )

    def kernel(
        self,
        variant: str,
        dtype: str,
        deterministic: bool = False,
        options: KernelOptions = (),
        final_states: Optional[bool] = None,
        coupled: bool = False,
    ) -> Kernel:
        """The kernel of `variant` over `dtype` sequences that the compile
        `options` chose (none: the variant's default)."""
        key = (variant, dtype, deterministic, options, final_states, coupled)
        kernel = self._cache.get(key)
        if kernel is None:
            # Only neurons have coupled kernels (a block's compile does
            # not take the keyword).
            extra = {"coupled": True} if coupled else {}
            kernel = self._cache[key] = self.compiled.kernel(
                self.device_type,
                variant,
                dtype,
                deterministic,
                options,
                final_states=final_states,
                **extra,
            )
        return kernel

    def inputs_read_by_backward(self, dtype: str) -> frozenset:
        """The indices of the inputs whose values a backward kernel (either
        variant) binds: only these are saved for backward (saving the
        others would hold their memory from the forward to the backward
        for nothing)."""
        read = self._read_by_backward.get(dtype)
        if read is None:
            read = set()
            for deterministic in (False, True):
                try:
                    spec = self.kernel("backward", dtype, deterministic).spec
                except NoDeterministicKernelError:
                    continue
                read |= {
                    i
                    for key, i in self._layout(spec)
                    if key == ("input", False)
                }
            read = self._read_by_backward[dtype] = frozenset(read)
        return read

    def forward_kernel(self, dtype: str, finals: bool) -> Kernel:
        """The training forward: with `finals`, the one that writes each
        state only at its end (T times fewer state bytes), where the
        compile has it (a hand-written forward kernel has no such twin)."""
        if finals and self.num_states:
            key = ("forward", dtype, "finals")
            kernel = self._cache.get(key)
            if kernel is None:
                try:
                    kernel = self.kernel("forward", dtype, final_states=True)
                except KeyError:
                    kernel = self.kernel("forward", dtype, final_states=False)
                self._cache[key] = kernel
            return kernel
        return self.kernel("forward", dtype, final_states=False)

    def empty_outputs(
        self, x: torch.Tensor, options: KernelOptions
    ) -> List[torch.Tensor]:
        """Contiguous tensors like the outputs of the inference or
        final-state kernel `options` chose, over inputs like `x`: as its
        buffers store them (`output_kinds`; packed uint8 [T, ceil(N / 8)]
        for bits)."""
        kinds = (
            output_kinds(
                self.kernel(
                    "inference", DTYPES[x.dtype], options=options
                ).spec,
                x.dtype,
            )
            if options
            else [x.dtype] * self.num_outputs
        )
        return [
            x.new_empty(packed_shape(x.shape), dtype=torch.uint8)
            if kind == "bits"
            else torch.empty_like(
                x, memory_format=torch.contiguous_format, dtype=kind
            )
            for kind in kinds
        ]

    # -- launching ---------------------------------------------------------

    def _launch(
        self,
        kernel,
        T,
        N,
        ld,
        buffers,
        workspace,
        params,
        device,
        channels=None,
        coupling=None,
    ):
        """Launches `kernel`; `coupling`: a coupled kernel's sample size
        H."""
        extra = {} if coupling is None else {"coupling": coupling}
        if self.device_type == "cuda":
            index = device if isinstance(device, int) else device.index
            # As torch's own operators do: the tensors' device is made
            # current for the launch (the runtime launches in the current
            # context, which must own the stream and buffers).
            guard = (
                contextlib.nullcontext()
                if index == _current_device()
                else torch.cuda.device(index)
            )
            with guard:
                kernel.launch(
                    current_stream(index),
                    T,
                    N,
                    ld,
                    buffers,
                    workspace,
                    params,
                    channels,
                    **extra,
                )
        else:
            # As many threads as torch's own CPU operators use.
            kernel.launch(
                T,
                N,
                buffers,
                workspace,
                params,
                channels,
                num_threads=torch.get_num_threads(),
                **extra,
            )

    @staticmethod
    def _address(t: Optional[torch.Tensor]) -> int:
        return 0 if t is None else t.data_ptr()

    def _workspace(self, kernel, T, N, ld, device) -> torch.Tensor:
        nbytes = kernel.spec.workspace_size(T, N, ld)
        # The caching allocator on CUDA; 16-byte alignment either way.
        return torch.empty(
            (nbytes + 3) // 4, dtype=torch.float32, device=device
        )

    def _layout(self, spec) -> List[Tuple[Tuple[str, bool], int]]:
        """buffer_layout of `spec`, worked out once per kernel, with (for a
        backward kernel) the trainable parameters whose gradient it writes
        and the per-channel ones it writes per neuron (each neuron's sum
        over time, summed per channel here)."""
        layout = self._layouts.get(spec.name)
        if layout is None:
            layout = self._layouts[spec.name] = buffer_layout(spec, self.info)
            self._written[spec.name] = frozenset(
                i for key, i in layout if key == ("param", True)
            )
            trainable = self.info.trainable_params
            self._per_neuron_sums[spec.name] = frozenset(
                i
                for b, (key, i) in zip(
                    (b for b in spec.buffers if not b.in_workspace), layout
                )
                if key == ("param", True)
                and b.role == "per_neuron_param_gradient"
                and trainable[i].per_channel
            )
        return layout

    def _buffers(self, spec, sources) -> List[int]:
        """The addresses of `spec`'s argument buffers, each taken from
        `sources[(value, gradient)][index]` as its binding says."""
        address = self._address
        return [address(sources[key][i]) for key, i in self._layout(spec)]

    # -- the variants ------------------------------------------------------

    def inference(
        self,
        inputs: List[torch.Tensor],
        inits: List[Optional[torch.Tensor]],
        params: Sequence,
        store_state_seqs: bool,
        allow_strided: bool = True,
        shaped: Sequence[torch.Tensor] = (),
        options: KernelOptions = (),
        in_place: bool = False,
    ) -> Tuple[List[torch.Tensor], List[torch.Tensor]]:
        """Outputs and (state sequences or final states), with no graph,
        from the kernels the compile `options` chose (spike outputs are
        then stored as their buffers say: `output_kinds`). `in_place`: as
        for `forward`."""
        # Everything that depends only on the layout is worked out (and
        # checked) once per layout: a module is called with few of them.
        # Shaped parameters are part of the layout (shape, dtype, device):
        # the plan checks them too.
        key = (
            store_state_seqs,
            allow_strided,
            options,
            in_place,
            *[(x.shape, x.stride(), x.dtype, x.get_device()) for x in inputs],
            *[
                None
                if s is None
                else (s.shape, s.stride(), s.dtype, s.get_device())
                for s in inits
            ],
            *[
                (p.shape, p.dtype, p.get_device())
                if isinstance(p, torch.Tensor)
                else type(p)
                for p in shaped
            ],
            len(shaped),
        )
        plan = self._plans.get(key)
        if plan is None:
            plan = self._plan_inference(
                inputs,
                inits,
                store_state_seqs,
                allow_strided,
                shaped,
                options,
                in_place,
            )
            if len(self._plans) >= 64:
                self._plans.clear()
            self._plans[key] = plan
        (
            kernel,
            T,
            N,
            ld,
            copy_inputs,
            seq_shape,
            layout,
            output_dtypes,
        ) = plan
        if copy_inputs:
            inputs = [x.contiguous() for x in inputs]
        x0 = inputs[0]
        inits = as_read(inits, x0, in_place, True)
        shaped = as_read(shaped, x0, in_place, True)

        def sequence(dtype=None):
            if dtype == "bits":
                # Rows of ceil(ld / 8) bytes, the first ceil(N / 8) used.
                rows = x0.new_empty((T, (ld + 7) // 8), dtype=torch.uint8)
                return rows[:, : (N + 7) // 8]
            if ld == N:
                # Dense like the (possibly copied) inputs, in their order.
                return torch.empty_like(x0, dtype=dtype)
            return x0.new_empty((T, ld), dtype=dtype)[:, :N].view(seq_shape)

        outputs = [sequence(dtype) for dtype in output_dtypes]
        if store_state_seqs:
            states = [sequence() for _ in range(self.num_states)]
        else:
            states = [step_like(x0, in_place) for _ in range(self.num_states)]
        if T == 0 or N == 0:
            # No launch: a final state is the initial one (zeros if absent).
            if not store_state_seqs:
                states = [
                    torch.zeros_like(s) if init is None else init.clone()
                    for s, init in zip(states, inits)
                ]
            return outputs, states
        # Contiguous copies stay referenced until the launch is queued.
        buffers = self._buffers(
            kernel.spec,
            self._step_sources(inputs, inits, outputs, states, shaped),
        )
        self._launch(
            kernel,
            T,
            N,
            ld if ld != N else 0,
            buffers,
            0,
            params,
            x0.get_device(),
            layout,
        )
        return outputs, states

    @staticmethod
    def _step_sources(inputs, inits, outputs, states, shaped) -> dict:
        """The tensors an inference, final-state or forward kernel binds."""
        return {
            ("input", False): inputs,
            ("state_init", False): inits,
            ("output", False): outputs,
            ("state_seq", False): states,
            ("state_final", False): states,
            ("param", False): shaped,
        }

    def _plan_inference(
        self,
        inputs,
        inits,
        store_state_seqs,
        allow_strided,
        shaped=(),
        options=(),
        in_place=False,
    ):
        """(kernel, T, N, ld, whether to copy the inputs, sequence shape,
        channels, the outputs' dtypes)."""
        check_inputs(self.info, inputs, inits, shaped)
        dtype = storage_type(
            inputs + [s for s in inits if s is not None], self.info.name
        )
        x0 = inputs[0]
        T, shape = x0.shape[0], x0.shape[1:]
        N = math.prod(shape)
        lds = {
            N
            if in_place
            else time_stride(x, allow_strided and self.device_type == "cuda")
            for x in inputs
        }
        ld = lds.pop() if len(lds) == 1 else None
        copy_inputs = ld is None
        if copy_inputs:
            ld = N
        kernel = self.kernel(
            "inference" if store_state_seqs else "final-state",
            dtype,
            options=options,
        )
        output_dtypes = output_kinds(kernel.spec, x0.dtype)
        return (
            kernel,
            T,
            N,
            ld,
            copy_inputs,
            (T,) + tuple(shape),
            channels(self.info, x0),
            output_dtypes,
        )

    def state_steps(self, kernel: Kernel, T: int) -> List[int]:
        """Per state, the steps a training forward kernel's state buffer
        holds: T for a state sequence, min(T, 1) for a final state (a
        block's forward kernel keeps only what the block returns), so that
        the last step of either is the final state."""
        spec = kernel.spec
        sequences = self._state_sequences.get(spec.name)
        if sequences is None:
            held = sorted(
                spec.bound("state_seq") + spec.bound("state_final"),
                key=lambda b: b.binds.index,
            )
            sequences = self._state_sequences[spec.name] = [
                b.binds.value == "state_seq" for b in held
            ]
        return [T if sequence else min(T, 1) for sequence in sequences]

    def forward(
        self,
        inputs,
        inits,
        params,
        shaped=(),
        finals=False,
        in_place=False,
        coupling=None,
        results=True,
    ):
        """Training forward: outputs, states ([steps, N...], see
        state_steps; with `finals`, final states where the kernel keeps
        them) and the workspace. Without `results`, only the workspace is
        written (outputs and states are None, NULL buffers): the backward
        of a call that recomputes its saves (scan's `recompute`). The
        caller has checked the tensors (check_inputs). `in_place`: the
        tensors share the first input's dense memory order (call_layout's
        IN_PLACE), which the results take too; else they are made
        row-major. `coupling`: the [H, H] float32 weights M of the coupled
        kernel, whose inputs are [T, B, H] (#flexsn.kernel's coupling:
        input 0 of neuron j at step t gains sum over k of M[k, j] times
        output 0 of neuron k at t - 1)."""
        x0 = inputs[0]
        dtype = storage_type(
            inputs + [s for s in inits if s is not None], self.info.name
        )
        inputs = as_read(inputs, x0, in_place)
        inits = as_read(inits, x0, in_place, True)
        shaped = as_read(shaped, x0, in_place, True)
        T, shape = x0.shape[0], tuple(x0.shape[1:])
        N = math.prod(shape)
        device = x0.device
        if coupling is None:
            kernel = self.forward_kernel(dtype, finals)
        else:
            kernel = self.kernel(
                "forward", dtype, final_states=finals, coupled=True
            )
        if results:
            outputs = [
                sequence_like(x0, T, in_place) for _ in range(self.num_outputs)
            ]
            states = [
                sequence_like(x0, steps, in_place)
                for steps in self.state_steps(kernel, T)
            ]
        else:
            outputs = [None] * self.num_outputs
            states = [None] * self.num_states
        workspace = self._workspace(kernel, T, N, N, device)
        if T == 0 or N == 0:
            return outputs, states, workspace
        sources = self._step_sources(inputs, inits, outputs, states, shaped)
        sources[("coupling", False)] = [coupling]
        buffers = self._buffers(kernel.spec, sources)
        self._launch(
            kernel,
            T,
            N,
            0,
            buffers,
            workspace.data_ptr(),
            params,
            device,
            channels(self.info, x0),
            None if coupling is None else coupling.shape[0],
        )
        return outputs, states, workspace

    def backward(
        self,
        grad_outputs,
        grad_states,
        workspace,
        inputs,
        params,
        deterministic,
        dtype_like: torch.Tensor,
        grad_finals=None,
        present=None,
        shaped=(),
        in_place=False,
        coupling=None,
    ):
        """Gradients of inputs, initial states and trainable parameters
        from those of the outputs, the state sequences (`grad_states`) and
        the final states (`grad_finals`); absent (None) incoming gradients
        are zeros. `present` (default: all) says which initial states were
        given: the others get no gradient (None, a NULL buffer).
        `shaped` holds the shaped parameters the forward ran with.
        `deterministic` is Handle.deterministic_mode(): False, True, or
        "warn" (a missing deterministic kernel then warns, not raises).
        One gradient per trainable parameter, in declaration order: a 0-d
        float32 tensor for a scalar one, a float32 tensor of the neuron
        shape for a per-neuron one (its gradient summed over T), a [C] one
        for a per-channel one (summed over T, B and S). `in_place`: the
        forward ran in_place on tensors in `dtype_like`'s memory order,
        which the gradients take (incoming ones are copied into it where
        they differ). `coupling`: the [H, H] float32 weights of the coupled
        backward kernel (the transpose of the forward's: for
        s[t] = f(x[t] + W s[t - 1]) it takes W itself), which has no
        deterministic mode."""
        dtype = DTYPES[dtype_like.dtype]
        try:
            kernel = self.kernel(
                "backward",
                dtype,
                bool(deterministic) or self._sum_channels_here,
                coupled=coupling is not None,
            )
        except NoDeterministicKernelError as error:
            if deterministic and deterministic != "warn":
                raise
            if deterministic:
                # torch.use_deterministic_algorithms(True, warn_only=True):
                # as torch's own operations without a deterministic version
                # do.
                warnings.warn(
                    f"{error}; running the non-deterministic "
                    f"kernel (torch.use_deterministic_algorithms("
                    f"warn_only=True))",
                    UserWarning,
                    stacklevel=2,
                )
            kernel = self.kernel(
                "backward", dtype, False, coupled=coupling is not None
            )
        spec = kernel.spec
        T, shape = dtype_like.shape[0], tuple(dtype_like.shape[1:])
        N = math.prod(shape)
        device = dtype_like.device
        grad_inputs = [
            sequence_like(dtype_like, T, in_place)
            for _ in range(self.num_inputs)
        ]
        grad_inits = [
            step_like(dtype_like, in_place) if p else None
            for p in (present or [True] * self.num_states)
        ]
        self._layout(spec)
        written = self._written[spec.name]
        per_neuron_sums = self._per_neuron_sums[spec.name]
        # Scalar gradients start at zero; shaped ones are overwritten by
        # the kernel (zeros where it has no buffer for one, or when no
        # kernel runs); a per-channel one that the kernel writes per neuron
        # is summed over each channel's neurons after it ran.
        # The per-neuron sums share one buffer [k, B, C, ...], summed per
        # channel in two reductions whatever k is (each reduction costs the
        # host a launch; a block's scale and shift are two of them).
        summed = sorted(per_neuron_sums) if T and N else []
        sums = (
            dtype_like.new_empty((len(summed),) + shape, dtype=torch.float32)
            if summed
            else None
        )
        grad_params = []
        for i, p in enumerate(self.info.trainable_params):
            if not p.shaped:
                g = dtype_like.new_zeros((), dtype=torch.float32)
            elif not (i in written and T and N):
                g = dtype_like.new_zeros(
                    shape if p.per_neuron else shape[1:2], dtype=torch.float32
                )
            elif p.per_neuron:
                g = step_like(dtype_like, in_place, torch.float32)
            elif i in per_neuron_sums:
                g = sums[summed.index(i)]
            else:
                g = dtype_like.new_empty(shape[1:2], dtype=torch.float32)
            grad_params.append(g)
        finals = as_read(
            grad_finals or [None] * self.num_states, dtype_like, in_place, True
        )
        if T == 0 or N == 0:
            # Each initial state is the final one (when T == 0).
            for g, final in zip(grad_inits, finals):
                if g is None:
                    continue
                if T == 0 and final is not None:
                    g.copy_(final)
                else:
                    g.zero_()
            return grad_inputs, grad_inits, grad_params
        # Copies stay referenced (by `sources`) until the launch is queued.
        sources = {
            ("output", True): as_read(grad_outputs, dtype_like, in_place),
            ("state_seq", True): as_read(grad_states, dtype_like, in_place),
            ("input", False): as_read(
                [
                    x if i in self.inputs_read_by_backward(dtype) else None
                    for i, x in enumerate(inputs)
                ],
                dtype_like,
                in_place,
            ),
            ("state_final", True): finals,
            ("input", True): grad_inputs,
            ("state_init", True): grad_inits,
            ("param", True): grad_params,
            ("param", False): as_read(shaped, dtype_like, in_place, True),
            ("coupling", False): [coupling],
        }
        buffers = self._buffers(spec, sources)
        self._launch(
            kernel,
            T,
            N,
            0,
            buffers,
            workspace.data_ptr(),
            params,
            device,
            channels(self.info, dtype_like),
            None if coupling is None else coupling.shape[0],
        )
        if summed:
            # [k, B, C, ...] -> [k, C], in torch's fixed reduction order:
            # over the contiguous S first (a row reduction, several times
            # faster than both dimensions at once), then B. S = 1
            # (channels-last steps) needs no first pass.
            g = sums.view(len(summed), shape[0], shape[1], -1)
            g = g[..., 0] if g.shape[3] == 1 else g.sum(3)
            for row, i in zip(g.sum(1), summed):
                grad_params[i] = row
        return grad_inputs, grad_inits, grad_params
