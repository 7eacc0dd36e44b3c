"""Calling compiled kernels: the C runtime on CUDA, the shared library on CPU.

Buffers are passed as raw addresses, so this module needs no framework; the
PyTorch layer (flexsn.torch) allocates, checks shapes and passes
`data_ptr()`s. A kernel's buffer list comes from the manifest:
`Kernel.buffers` in launch order, workspace parts at their offsets.
"""

import ctypes
import sys
import threading
from typing import Dict, Optional, Sequence

from . import _tools
from ._cache import damaged_file_error
from ._manifest import Kernel, KernelOptions, evaluate_size, kernel_options
from ._targets import TARGETS, target


class RuntimeStatusError(RuntimeError):
    """A kernel launch refused its arguments or failed: `status` is the
    runtime's status name (FLEXSN_ERROR_...), `code` its value, `argument`
    the buffer it blamed, if any."""

    def __init__(
        self,
        kernel: str,
        status: str,
        message: str,
        argument: Optional[str] = None,
        cuda_error: int = 0,
        code: int = 0,
    ):
        where = f" (argument '{argument}')" if argument else ""
        cause = f" [CUresult {cuda_error}]" if cuda_error else ""
        super().__init__(f"{kernel}: {status}: {message}{where}{cause}")
        self.kernel, self.status, self.argument = kernel, status, argument
        self.cuda_error, self.code = cuda_error, code


class NoDeterministicKernelError(RuntimeError):
    """A deterministic kernel was asked for where the compiled neuron has
    none: its per-channel gradients are summed with atomics."""


def _status_error(
    what: str, status: int, argument: Optional[str] = None
) -> RuntimeStatusError:
    lib = runtime_library()
    return RuntimeStatusError(
        what,
        lib.flexsn_status_name(status).decode(),
        lib.flexsn_status_message(status).decode(),
        argument,
        lib.flexsn_last_cuda_error(),
        status,
    )


class _Image(ctypes.Structure):
    _fields_ = [
        ("data", ctypes.c_void_p),
        ("size", ctypes.c_size_t),
        ("state", ctypes.c_void_p),
    ]


class _KernelDesc(ctypes.Structure):
    _fields_ = [
        ("vector_kernel", ctypes.c_char_p),
        ("scalar_kernel", ctypes.c_char_p),
        ("vector_width", ctypes.c_int),
        ("element_size", ctypes.c_int),
        ("num_buffers", ctypes.c_int),
        ("kinds", ctypes.POINTER(ctypes.c_int)),
        ("num_scalars", ctypes.c_int),
        ("element_sizes", ctypes.POINTER(ctypes.c_int)),
    ]


_SCALAR_TYPES = {
    "f32": ctypes.c_float,
    "i1": ctypes.c_int8,
    "i32": ctypes.c_int32,
}

_runtime_lock = threading.Lock()
_runtime_lib = None


def runtime_library() -> ctypes.CDLL:
    """libflexsn_runtime.so, loaded once."""
    global _runtime_lib
    with _runtime_lock:
        if _runtime_lib is None:
            path = _tools.find_runtime_library()
            if path is None:
                raise _tools.ToolNotFoundError(
                    "libflexsn_runtime.so not found: build FlexSN, or set "
                    "$FLEXSN_RUNTIME_LIB"
                )
            lib = ctypes.CDLL(str(path))
            lib.flexsn_launch.restype = ctypes.c_int
            lib.flexsn_launch.argtypes = [
                ctypes.POINTER(_Image),
                ctypes.POINTER(_KernelDesc),
                ctypes.c_void_p,
                ctypes.c_int64,
                ctypes.c_int64,
                ctypes.c_int64,
                ctypes.c_void_p,
                ctypes.c_void_p,
            ]
            lib.flexsn_launch_coupled.restype = ctypes.c_int
            lib.flexsn_launch_coupled.argtypes = [
                ctypes.POINTER(_Image),
                ctypes.POINTER(_KernelDesc),
                ctypes.c_void_p,
                ctypes.c_int64,
                ctypes.c_int64,
                ctypes.c_int64,
                ctypes.c_int64,
                ctypes.c_void_p,
                ctypes.c_void_p,
            ]
            lib.flexsn_launch_channels.restype = ctypes.c_int
            lib.flexsn_launch_channels.argtypes = [
                ctypes.POINTER(_Image),
                ctypes.POINTER(_KernelDesc),
                ctypes.c_void_p,
                ctypes.c_int64,
                ctypes.c_int64,
                ctypes.c_int64,
                ctypes.c_int64,
                ctypes.c_int64,
                ctypes.c_void_p,
                ctypes.c_void_p,
            ]
            for name in ("flexsn_status_message", "flexsn_status_name"):
                getattr(lib, name).restype = ctypes.c_char_p
                getattr(lib, name).argtypes = [ctypes.c_int]
            lib.flexsn_buffer_kind_from_role.restype = ctypes.c_int
            lib.flexsn_buffer_kind_from_role.argtypes = [ctypes.c_char_p]
            lib.flexsn_last_failed_buffer.restype = ctypes.c_int
            lib.flexsn_last_cuda_error.restype = ctypes.c_int
            lib.flexsn_image_unload.restype = ctypes.c_int
            lib.flexsn_image_unload.argtypes = [ctypes.POINTER(_Image)]
            _runtime_lib = lib
        return _runtime_lib


class GpuImage:
    """A cubin/fatbin, loaded by the runtime lazily once per CUDA context."""

    def __init__(self, path):
        self.data = ctypes.create_string_buffer(path.read_bytes())
        self.image = _Image(
            ctypes.cast(self.data, ctypes.c_void_p),
            len(self.data.raw) - 1,
            None,
        )

    def unload(self):
        """Unloads the image from every context it was loaded into (a later
        launch loads it again); raises RuntimeStatusError if the driver
        failed to unload it somewhere."""
        status = runtime_library().flexsn_image_unload(
            ctypes.byref(self.image)
        )
        if status != 0:
            raise _status_error("unloading the kernel image", status)


class GpuKernel:
    """One GPU kernel: `launch(stream, T, N, ld, buffers, params)` with
    `buffers` the kernel's arguments (not workspace parts) in manifest
    order and `workspace` the workspace address; a kernel with per-channel
    parameters also takes `channels=(C, S)` (its neurons are [B, C, S]), a
    coupled kernel `coupling=H` (its neurons are samples of H)."""

    #: The image of a cubin or fatbin (_targets' `images`).
    open_image = GpuImage

    def __init__(self, spec: Kernel, image: GpuImage):
        self.spec, self.image = spec, image
        lib = runtime_library()
        kinds = []
        for b in spec.buffers:
            kind = lib.flexsn_buffer_kind_from_role(b.role.encode())
            if kind < 0:
                raise _tools.CompileError(
                    f"{spec.name}: the runtime has no buffer kind "
                    f"'{b.role}': rebuild libflexsn_runtime"
                )
            kinds.append(kind)
        n = len(kinds)
        self._kinds = (ctypes.c_int * n)(*kinds)
        self._sizes = (ctypes.c_int * n)(
            *(b.element_bytes for b in spec.buffers)
        )
        self._names = [
            spec.vector_kernel.encode(),
            spec.scalar_kernel.encode(),
        ]
        self.desc = _KernelDesc(
            self._names[0],
            self._names[1],
            spec.vector_width,
            2 if spec.dtype in ("f16", "bf16") else 4,
            n,
            self._kinds,
            len(spec.params),
            self._sizes,
        )
        self._scalar_types = [_SCALAR_TYPES[t] for _, t in spec.params]
        self._buffer_type = ctypes.c_void_p * n
        self._scalars_type = ctypes.c_void_p * max(1, len(spec.params))
        self._offsets = [b.workspace_offset for b in spec.buffers]
        self._has_workspace = any(o is not None for o in self._offsets)
        self._workspace_parts = {}
        self._image_ref = ctypes.byref(image.image)
        self._desc_ref = ctypes.byref(self.desc)
        # Scalar slots per thread: the launch releases the GIL, so another
        # thread must not overwrite values this one is passing.
        self._slots = threading.local()

    def _scalars(self, params: Sequence):
        if len(params) != len(self._scalar_types):
            raise ValueError(
                f"{self.spec.name} takes {len(self._scalar_types)} runtime "
                f"parameter(s) ({', '.join(n for n, _ in self.spec.params)}),"
                f" got {len(params)}"
            )
        local = self._slots
        values = getattr(local, "values", None)
        if values is None:
            values = local.values = [t() for t in self._scalar_types]
            local.array = self._scalars_type(
                *(ctypes.addressof(v) for v in values)
            )
        for slot, value in zip(values, params):
            slot.value = value
        return local.array

    def launch(
        self,
        stream: int,
        T: int,
        N: int,
        ld: int,
        buffers: Sequence[int],
        workspace: int,
        params: Sequence = (),
        channels=None,
        coupling: Optional[int] = None,
    ) -> None:
        _check_channels(self.spec, channels)
        _check_coupling(self.spec, coupling)
        if self._has_workspace:
            addresses = _with_workspace(
                self._offsets,
                self._workspace_parts,
                buffers,
                workspace,
                T,
                N,
                ld or N,
            )
        else:
            addresses = buffers
        lib = runtime_library()
        if coupling is not None:
            status = lib.flexsn_launch_coupled(
                self._image_ref,
                self._desc_ref,
                stream or None,
                T,
                N,
                ld,
                coupling,
                self._buffer_type(*addresses),
                self._scalars(params),
            )
        elif channels is None:
            status = lib.flexsn_launch(
                self._image_ref,
                self._desc_ref,
                stream or None,
                T,
                N,
                ld,
                self._buffer_type(*addresses),
                self._scalars(params),
            )
        else:
            status = lib.flexsn_launch_channels(
                self._image_ref,
                self._desc_ref,
                stream or None,
                T,
                N,
                ld,
                channels[0],
                channels[1],
                self._buffer_type(*addresses),
                self._scalars(params),
            )
        if status != 0:
            failed = lib.flexsn_last_failed_buffer()
            raise _status_error(
                self.spec.name,
                status,
                self.spec.buffers[failed].name if failed >= 0 else None,
            )


def _check_channels(spec: Kernel, channels) -> None:
    """A kernel with per-channel buffers takes `channels=(C, S)`, others
    none. The GPU runtime checks the values (FLEXSN_ERROR_BAD_CHANNELS);
    CpuKernel checks them itself."""
    if (channels is not None) != spec.channels:
        raise ValueError(
            f"{spec.name}: "
            + (
                "its neurons are [B, C, S]: pass channels=(C, S)"
                if spec.channels
                else "has no per-channel buffers"
            )
        )


def _check_coupling(spec: Kernel, coupling) -> None:
    """A coupled kernel takes `coupling=H` (its sample size), others none.
    The GPU runtime checks the value (FLEXSN_ERROR_BAD_COUPLING);
    CpuKernel checks it itself."""
    if (coupling is not None) != (spec.coupling is not None):
        raise ValueError(
            f"{spec.name}: "
            + (
                "its neurons are samples of H: pass coupling=H"
                if spec.coupling is not None
                else "is not a coupled kernel"
            )
        )


def _with_workspace(offsets, memo, buffers, workspace, T, N, ld):
    """The kernel's buffer addresses: `buffers` in order, with the
    workspace parts (None where a buffer is not one) at their offsets into
    `workspace`. The offsets depend on the sizes only: memoized."""
    parts = memo.get((T, N, ld))
    if parts is None:
        if len(memo) >= 256:
            memo.clear()
        parts = memo[(T, N, ld)] = [
            None if o is None else evaluate_size(o, T=T, N=N, ld=ld)
            for o in offsets
        ]
    args = iter(buffers)
    return [
        next(args)
        if part is None
        else (workspace + part if workspace else None)
        for part in parts
    ]


class _Descriptor:
    """StridedMemRefType<T, rank> of MLIR's C interface, by rank."""

    types: Dict[int, type] = {}

    @classmethod
    def of_rank(cls, rank: int) -> type:
        if rank not in cls.types:
            fields = [
                ("allocated", ctypes.c_void_p),
                ("aligned", ctypes.c_void_p),
                ("offset", ctypes.c_int64),
            ]
            if rank:
                fields += [
                    ("sizes", ctypes.c_int64 * rank),
                    ("strides", ctypes.c_int64 * rank),
                ]
            cls.types[rank] = type(
                f"MemRef{rank}", (ctypes.Structure,), {"_fields_": fields}
            )
        return cls.types[rank]


# Buffers a CPU kernel writes: the first to touch a fresh allocation.
_WRITTEN_ROLES = frozenset(
    {
        "output_sequence",
        "state_sequence",
        "final_state",
        "saved_output",
        "param_gradient",
        "per_neuron_param_gradient",
        "per_channel_param_gradient",
    }
)
_HUGE_PAGE = 2 << 20
_madvise = None


def _advise_huge_pages(address: int, nbytes: int) -> None:
    """Asks Linux to back the whole 2 MiB pages inside [address, address +
    nbytes) with transparent huge pages (MADV_HUGEPAGE; the machine's THP
    mode is often `madvise`, and PyTorch 1.13's allocator asks for none).
    A kernel writing a freshly allocated 64 MiB output otherwise takes
    16384 page faults, about 30 ms on one core, more than the kernel
    itself; with huge pages 512 times fewer (docs/Rationale.md). A no-op
    where madvise is missing or refuses."""
    global _madvise
    if _madvise is None:
        _madvise = False
        if not sys.platform.startswith("linux"):
            return  # MADV_HUGEPAGE is Linux's value
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            _madvise = libc.madvise
            _madvise.argtypes = [
                ctypes.c_void_p,
                ctypes.c_size_t,
                ctypes.c_int,
            ]
        except (OSError, AttributeError):
            pass
    if not _madvise:
        return
    start = -(-address // _HUGE_PAGE) * _HUGE_PAGE
    end = (address + nbytes) // _HUGE_PAGE * _HUGE_PAGE
    if end > start:
        _madvise(start, end - start, 14)  # MADV_HUGEPAGE


class CpuKernel:
    """One CPU kernel of the ahead-of-time compiled library. Buffers are
    contiguous: `[T, N]` sequences, `[N]` states, rank-0 gradients; with
    per-channel parameters (`channels=(C, S)`), `[T, B, C, S]` sequences,
    `[B, C, S]` states and `[C]` parameters and gradients, the same memory
    with B = N / (C S)."""

    @staticmethod
    def open_image(path) -> ctypes.CDLL:
        """The library of a kernels.so (_targets' `images`)."""
        return ctypes.CDLL(str(path))

    def __init__(self, spec: Kernel, library: ctypes.CDLL):
        self.spec = spec
        self.function = getattr(library, spec.function)
        self.function.restype = None
        scalar_types = [
            ctypes.c_bool if t == "i1" else _SCALAR_TYPES[t]
            for _, t in spec.params
        ]
        self._types = [_Descriptor.of_rank(len(b.shape)) for b in spec.buffers]
        # The thread count comes last (docs/ABI.md).
        self.function.argtypes = (
            [ctypes.c_void_p] * len(spec.buffers)
            + scalar_types
            + [ctypes.c_int32]
        )
        self._scalar_types = scalar_types
        self._offsets = [b.workspace_offset for b in spec.buffers]
        self._workspace_parts = {}
        # Descriptors by sizes, per thread (the call lets go of the GIL,
        # so another thread must not rewrite descriptors in use): a layer
        # is called with few sizes, and only the addresses change.
        self._plans = threading.local()

    def _plan(self, key: tuple, sizes: Dict[str, int]):
        """(descriptors, their addresses, the bytes of each written buffer
        or 0) for buffers of `sizes` (which `key` identifies), built once
        per thread and sizes."""
        plans = getattr(self._plans, "by_sizes", None)
        if plans is None:
            plans = self._plans.by_sizes = {}
        plan = plans.get(key)
        if plan is None:
            if len(plans) >= 64:
                plans.clear()
            descriptors, written = [], []
            for desc_type, spec in zip(self._types, self.spec.buffers):
                d = desc_type(None, None, 0)
                # Contiguous, row-major: the last dimension has stride 1.
                stride = 1
                for i in reversed(range(len(spec.shape))):
                    d.sizes[i], d.strides[i] = sizes[spec.shape[i]], stride
                    stride *= sizes[spec.shape[i]]
                descriptors.append(d)
                nbytes = stride * spec.element_bytes
                written.append(
                    nbytes
                    if spec.role in _WRITTEN_ROLES and nbytes >= 2 * _HUGE_PAGE
                    else 0
                )
            plan = plans[key] = (
                descriptors,
                [ctypes.addressof(d) for d in descriptors],
                written,
            )
        return plan

    def launch(
        self,
        T: int,
        N: int,
        buffers: Sequence[int],
        workspace: int,
        params: Sequence = (),
        channels=None,
        num_threads: int = 0,
        coupling: Optional[int] = None,
    ) -> None:
        """Runs the kernel on `num_threads` threads (0: OpenMP's default,
        OMP_NUM_THREADS or every core); the results are bitwise the same
        for any count. ctypes lets go of the GIL for the call."""
        _check_channels(self.spec, channels)
        _check_coupling(self.spec, coupling)
        sizes = {"T": T, "N": N}
        key = (T, N)
        if coupling is not None:
            # The function trusts its descriptors: samples must tile N.
            H = int(coupling)
            if H < 1 or N % H:
                raise ValueError(
                    f"{self.spec.name}: N = {N} neurons are not samples of "
                    f"H = {H}"
                )
            sizes["H"] = H
            key = (T, N, H)
        if channels is not None:
            # The function trusts its descriptors: a (C, S) that does not
            # tile N would make it read and write out of bounds.
            C, S = (int(c) for c in channels)
            if C < 1 or S < 1 or N % (C * S):
                raise ValueError(
                    f"{self.spec.name}: channels (C, S) = ({C}, {S}) do not "
                    f"lay out N = {N} neurons as [B, C, S]"
                )
            sizes.update(B=N // (C * S), C=C, S=S)
            key = (T, N, C, S)
        addresses = _with_workspace(
            self._offsets, self._workspace_parts, buffers, workspace, T, N, N
        )
        descriptors, pointers, written = self._plan(key, sizes)
        for address, d, nbytes in zip(addresses, descriptors, written):
            d.allocated = d.aligned = address
            if nbytes and address:
                _advise_huge_pages(address, nbytes)
        self.function(
            *pointers,
            *(t(v) for t, v in zip(self._scalar_types, params)),
            ctypes.c_int32(num_threads),
        )


_loaded: Dict[tuple, object] = {}
_load_lock = threading.Lock()


def load_kernel(
    compiled,
    device: str,
    variant: str,
    dtype: str,
    deterministic: bool = False,
    options: KernelOptions = (),
    neuron: Optional[str] = None,
    final_states: Optional[bool] = None,
    coupled: bool = False,
):
    """The kernel of `neuron` (default: `compiled.name`; for a block, its
    function) for `device`, `variant`, storage `dtype` and the compile
    `options` that chose it (none: the variant's default); `final_states`
    picks the training forward that keeps states only at
    their end (True) or as sequences (False), `coupled` the coupled
    (recurrent) kernel, which has no deterministic mode."""
    neuron = neuron or compiled.name
    options = kernel_options(options)
    key = (
        str(compiled.directory),
        device,
        neuron,
        variant,
        dtype,
        deterministic,
        options,
        final_states,
        coupled,
    )
    with _load_lock:
        if key in _loaded:
            return _loaded[key]
        manifest = compiled.manifest
        spec = manifest.find(
            device,
            variant,
            dtype,
            deterministic and not coupled,
            neuron,
            options,
            final_states,
            coupled,
        )
        if spec is not None and coupled and deterministic:
            if (
                spec.buffers_with_role("param_gradient")
                and target(device).sums_across_threads
            ):
                raise NoDeterministicKernelError(
                    f"{spec.name}: no deterministic kernel: a coupled "
                    f"kernel sums its parameter gradients with atomics"
                )
        if spec is None and deterministic and not coupled:
            # Without parameter gradients summed across threads every
            # kernel is deterministic.
            spec = manifest.find(device, variant, dtype, False, neuron)
            if spec is not None and spec.buffers_with_role(
                "per_channel_param_gradient"
            ):
                names = ", ".join(
                    b.name
                    for b in spec.buffers_with_role(
                        "per_channel_param_gradient"
                    )
                )
                raise NoDeterministicKernelError(
                    f"{spec.name}: no deterministic kernel: the per-channel "
                    f"gradient(s) {names} are summed with atomics in an "
                    f"order that varies between runs (train without the "
                    f"deterministic mode, or on the CPU)"
                )
            if spec is not None and spec.buffers_with_role("param_gradient"):
                spec = None
        if spec is None:
            chosen = "".join(f", {name}={value}" for name, value in options)
            if final_states:
                chosen += ", keeping final states"
            if coupled:
                chosen += ", coupled"
            raise KeyError(
                f"{neuron} was not compiled for {device}, variant "
                f"'{variant}', storage {dtype}{chosen}: compile it with that "
                f"variant, storage type"
                + (", options" if chosen else "")
                + " and target"
            )
        kernel = _loaded[key] = _instantiate(compiled, device, spec)
        return kernel


def _instantiate(compiled, device: str, spec: Kernel):
    """The kernel `spec` of `compiled`'s image or library for the target
    `device`, each file loaded once (the caller holds _load_lock)."""
    t = target(device)
    kernel_class = globals()[t.kernel_class]
    key = (t.name, str(compiled.directory))
    if key not in _loaded:
        _loaded[key] = _open(
            compiled,
            compiled.image(t.name),
            kernel_class.open_image,
            " or ".join(t.images),
        )
    return kernel_class(spec, _loaded[key])


def _open(compiled, path, opener, name: str):
    """`opener(path)` of a compiled file; a file gone or unreadable since
    the compile checked it raises CacheError naming it, not a bare OSError."""
    if path is None:
        raise damaged_file_error(
            compiled.directory, compiled.directory / name, "missing"
        )
    try:
        return opener(path)
    except OSError as error:
        raise damaged_file_error(
            compiled.directory, path, f"cannot be loaded ({error})"
        ) from None


def load_named_kernel(
    compiled, device: str, name: str, deterministic: bool = False
):
    key = (str(compiled.directory), device, name, deterministic)
    with _load_lock:
        if key in _loaded:
            return _loaded[key]
        manifest = compiled.manifest
        kernels = manifest.kernels_of(device) if device in TARGETS else []
        if not kernels:
            raise KeyError(
                f"no kernel was compiled for '{device}' (targets: "
                f"{', '.join(compiled.targets)})"
            )
        spec = next(
            (k for k in kernels if k.name == name and not k.deterministic),
            None,
        )
        if (
            spec is not None
            and deterministic
            and target(device).sums_across_threads
        ):
            # Without parameter gradients summed across threads the kernel
            # is deterministic as it is (so is every CPU kernel).
            fixed = manifest.deterministic_of(spec)
            if fixed is None and spec.buffers_with_role(
                "param_gradient", "per_channel_param_gradient"
            ):
                raise NoDeterministicKernelError(
                    f"{name}: no deterministic kernel"
                )
            spec = fixed or spec
        if spec is None:
            raise KeyError(
                f"no kernel '{name}' (the kernels: "
                f"{', '.join(compiled.names)})"
            )
        kernel = _loaded[key] = _instantiate(compiled, device, spec)
        return kernel
