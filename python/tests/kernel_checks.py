#!/usr/bin/env python3
"""Checks FlexSN's GPU inference and final-state kernels through the package.

    python3 python/tests/kernel_checks.py [--out DIR] [--quick] [--seed S]
                                          [--deadline SECONDS]
                                          [--neurons lif,plif,...]
    python3 python/tests/kernel_checks.py --compile-only [--neurons ...]

Every kernel is compiled with flexsn.compile (every shipped neuron, and a
copy with soft_reset = true, `<neuron>_soft`, for those with the flag) and
launched through flexsn._runtime.GpuKernel, the path flexsn.torch takes, on
freshly allocated buffers poisoned with NaN and surrounded by NaN guards;
after each call the stream is synchronized, every element of every written
buffer must have been written, the guards (and the gaps between rows of a
strided buffer) must still be NaN, and the values must match:

  (a) an independent reference of the neuron's step loop written from
      docs/Semantics.md (the formulas of test/Integration/CPU/reference.py),
      in float32 on the storage-rounded inputs: PyTorch on the GPU (full mode)
      or NumPy (--quick);
  (b) the package's CPU kernels (flexsn._runtime.CpuKernel), run here on the
      same inputs.

A machine without the FlexSN tools (the GPU machine) takes the kernels from
the compile cache: fill it where the tools are with --compile-only and
FLEXSN_CACHE_DIR set, carry it, and set FLEXSN_CACHE_DIR (and
FLEXSN_RUNTIME_LIB, libflexsn_runtime.so) to the same cache there. The
compile calls do not depend on the other options, so both sides agree.

Tolerances: float32 rtol = atol = 1e-5; f16/bf16 2 ulps of the storage type
(|got - want| <= 2 eps max(|want|, 2^-6)); spikes exactly. A neuron whose
h came within 1e-4 of the threshold is compared only before that step (a
1-ulp difference there may flip its spike), and at most 2% of the neurons
of a group may actually diverge from the reference after such a step.

Groups (one line each):
  grid/<neuron>/<variant>/<dtype>  every neuron and its _soft copy (the
      training-only copies <neuron>_detach and <neuron>_soft_detach are
      train_kernel_checks.py's) x
      {inference, final_state} x {f32, f16, bf16} x T in {0, 1, 16, 64} x
      N in {1, 1000, 2^20 + 3} on fresh seeded random inputs (torch on the
      GPU), plus CPU-path cases (T in {0, 1, 16, 64}, N in {1, 1000}; the
      _soft copies T = 16); inference and final-state must agree bit for
      bit; T = 0 final state = initial state bit for bit.
  absent/<neuron>     NULL initial states (zeros), each NULL output, all NULL.
  strided/<neuron>    ld > N (views of wider tensors), on the scalar and on the
                      vector kernel (ld a multiple of the vector width, N not).
  misaligned/<neuron> buffers offset by one element (the scalar kernel).
  badargs             null input, negative T/N, ld < N, a host pointer, a
                      too-small buffer, a misaligned pointer, an overflowing N:
                      each its status (RuntimeStatusError.status) and blamed
                      buffer (.argument), nothing written, the GPU still
                      healthy.
  streams             a side stream and the legacy default stream.
  unload              every loaded GpuImage unloaded, then launched again.
  spec-defaults       the manifests' parameter defaults and states are
                      docs/Semantics.md's.

--quick: a small subset without PyTorch (CUDA driver API through ctypes and
NumPy only), fast under compute-sanitizer. Prints one line per group, then
`kernel_checks: N passed, M failed`; writes results.json to --out; exits 1 on
any failure (or a check skipped by --deadline).
"""

import argparse
import collections
import concurrent.futures
import ctypes
import json
import math
import os
import pathlib
import sys
import time
import zlib

import numpy as np

# Run as a script: the package of this tree, and the numerics oracle (the
# neurons' equations, defaults and drives).
HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE.parents[1] / "test" / "Oracle"))
import flexsn  # noqa: E402
from flexsn import _runtime  # noqa: E402
import neuron_oracle  # noqa: E402

np.seterr(all="ignore")  # inf/NaN are detected explicitly, not warned about

# ---------------------------------------------------------------------------
# Constants

DTYPES = ("f32", "f16", "bf16")
VARIANTS = ("inference", "final_state")
ELEM = {"f32": 4, "f16": 2, "bf16": 2}
TOL32 = 1e-5  # float32: rtol = atol
ULPS = 2  # f16 / bf16: ulps of the storage type
EPS = {"f16": 2.0**-10, "bf16": 2.0**-7}
FLOOR = 2.0**-6  # below this magnitude the ulp budget is fixed
NEAR = 1e-4  # |h - v_threshold| < NEAR: compare up to there
MAX_CUT = 0.02  # fraction of trajectories allowed to be cut
MAX_ABS = 1000.0  # the references must stay well inside this
GUARD = 64  # NaN elements before and after every buffer

SEQ_ROLES = ("input_sequence", "output_sequence", "state_sequence")
WRITTEN = ("output_sequence", "state_sequence", "final_state")

# The compile calls. They are the cache key under which a machine without
# the tools finds the kernels, so nothing but the neuron and the copy may
# change them (not --quick, --neurons or the environment).
CHIP = "sm_90"
TARGETS = ("cpu", "cuda")
ALL_VARIANTS = ("inference", "final-state", "forward", "backward")
TRAIN_VARIANTS = ("forward", "backward")
# Copies of a neuron with its const flags specialized (suffix -> params).
# detach_reset changes gradients only: those copies are training kernels.
COPIES = {
    "": {},
    "_soft": {"soft_reset": True},
    "_detach": {"detach_reset": True},
    "_soft_detach": {"soft_reset": True, "detach_reset": True},
}
INFERENCE_COPIES = ("", "_soft")

# ---------------------------------------------------------------------------
# The neurons' defaults, states and drives: the numerics oracle's.

DEFAULTS, STATES = neuron_oracle.DEFAULTS, neuron_oracle.STATES
FLAGS, DRIVE = neuron_oracle.FLAGS, neuron_oracle.DRIVE
INIT = neuron_oracle.INIT
# With a soft reset the quadratic / exponential neurons can run away after a
# large input (v stays above the threshold and keeps growing): a milder drive.
DRIVE_SOFT = {"qif": (0.4, 0.4), "eif": (0.4, 0.4), "izhikevich": (0.4, 0.4)}
INIT = {"v": (-0.2, 0.9), "w": (-0.2, 0.3), "c": (-0.3, 0.5)}
RUNTIME_PARAMS = {"w": 0.5}  # non-default values of runtime parameters


def copy_flags(name):
    """(base neuron, soft_reset, detach_reset) of a checked neuron: the
    copies (COPIES) are named <base>_soft, <base>_detach (hard reset,
    detached) and <base>_soft_detach."""
    soft = detach = False
    if name.endswith("_detach"):
        name, detach = name[: -len("_detach")], True
    if name.endswith("_soft"):
        name, soft = name[: -len("_soft")], True
    return name, soft, detach


def base_neuron(name):
    return copy_flags(name)[0]


def drive(gpu_neuron):
    """(mean, std) of the input drive for a kernel's neuron."""
    base, soft, _ = copy_flags(gpu_neuron)
    if soft and base in DRIVE_SOFT:
        return DRIVE_SOFT[base]
    return DRIVE[base]


def reference_params(gpu_neuron, runtime=None):
    """docs/Semantics.md defaults of the neuron a kernel was built from (a
    _soft copy has soft_reset = true, a _detach copy detach_reset = true),
    updated with the runtime parameter values."""
    base, soft, detach = copy_flags(gpu_neuron)
    p = dict(DEFAULTS[base])
    if soft:
        p["soft_reset"] = True
    if detach:
        p["detach_reset"] = True
    for k, v in (runtime or {}).items():
        if k not in p:
            raise KeyError("neuron %s has no parameter %r" % (base, k))
        p[k] = v
    return p


def _sigmoid(w):
    """PLIF's 1/tau = sigmoid(w) of a scalar w, in double precision."""
    return 1.0 / (1.0 + math.exp(-float(w)))


class NumpyOps:
    """Array operations of the reference and the checks, on NumPy."""

    name = "numpy"

    def __init__(self):
        self.np = np

    def scalar(self, v):
        return np.float32(v)

    def f32(self, a):
        return np.asarray(a, dtype=np.float32)

    def exp(self, a):
        return np.exp(a)

    def sigmoid(self, w):
        return self.scalar(_sigmoid(w))

    def spike(self, z):
        return (z >= 0).astype(np.float32)

    @staticmethod
    def detach(s):
        return s  # the identity in the forward pass

    def zeros(self, shape):
        return np.zeros(shape, np.float32)

    def full_int(self, shape, v):
        return np.full(shape, v, np.int64)

    def arange(self, n):
        return np.arange(n, dtype=np.int64)

    def abs(self, a):
        return np.abs(a)

    def clamp_min(self, a, v):
        return np.maximum(a, np.float32(v))

    def isnan(self, a):
        return np.isnan(a)

    def isfinite(self, a):
        return np.isfinite(a)

    def count(self, mask):
        return int(np.count_nonzero(mask))

    def first(self, mask):
        idx = np.argwhere(mask)
        return None if idx.size == 0 else tuple(int(i) for i in idx[0])

    def max(self, a):
        return float(np.max(a)) if a.size else 0.0

    def clone(self, a):
        return np.array(a, copy=True)

    def all(self, a):
        return bool(np.all(a))


class TorchOps:
    """The same operations on PyTorch tensors (float32 on the GPU)."""

    name = "torch"

    def __init__(self, torch, device):
        self.torch = torch
        self.device = device

    def scalar(self, v):
        return float(v)

    def f32(self, a):
        return a.to(self.torch.float32)

    def exp(self, a):
        return self.torch.exp(a)

    def sigmoid(self, w):
        return self.scalar(_sigmoid(w))

    def spike(self, z):
        return (z >= 0).to(self.torch.float32)

    @staticmethod
    def detach(s):
        return s  # the identity in the forward pass

    def zeros(self, shape):
        return self.torch.zeros(
            shape, dtype=self.torch.float32, device=self.device
        )

    def full_int(self, shape, v):
        return self.torch.full(
            shape, v, dtype=self.torch.int64, device=self.device
        )

    def arange(self, n):
        return self.torch.arange(n, dtype=self.torch.int64, device=self.device)

    def abs(self, a):
        return self.torch.abs(a)

    def clamp_min(self, a, v):
        return self.torch.clamp(a, min=v)

    def isnan(self, a):
        return self.torch.isnan(a)

    def isfinite(self, a):
        return self.torch.isfinite(a)

    def count(self, mask):
        return int(self.torch.count_nonzero(mask).item())

    def first(self, mask):
        idx = self.torch.nonzero(mask)
        return (
            None
            if idx.shape[0] == 0
            else tuple(int(i) for i in idx[0].tolist())
        )

    def max(self, a):
        return float(a.max().item()) if a.numel() else 0.0

    def clone(self, a):
        return a.clone()

    def all(self, a):
        return bool(a.all().item())


def step(ops, neuron, p, x, st):
    """One step of the oracle: (spike, new states, h - v_threshold)."""
    return neuron_oracle.step(ops, neuron, p, x, st)


def simulate(ops, gpu_neuron, params, x, states=None, near=NEAR):
    """Runs the neuron over x ([T, N], float32 values) from `states` (list of
    [N] or None entries; None = zeros). Returns spikes [T, N], state_seq
    (list of [T, N]), final (list of [N]), first_near ([N] int: the first step
    with |h - v_threshold| < near, T if none)."""
    neuron = base_neuron(gpu_neuron)
    raw = reference_params(gpu_neuron, params)
    p = {}
    for k, v in raw.items():
        p[k] = bool(v) if k in FLAGS else ops.scalar(v)
    x = ops.f32(x)
    T, N = int(x.shape[0]), int(x.shape[1])
    names = STATES[neuron]
    st = {}
    for i, n in enumerate(names):
        s0 = None if states is None else states[i]
        st[n] = ops.zeros((N,)) if s0 is None else ops.clone(ops.f32(s0))
    spikes = ops.zeros((T, N))
    seq = [ops.zeros((T, N)) for _ in names]
    first_near = ops.full_int((N,), T)
    for t in range(T):
        s, st, over = step(ops, neuron, p, x[t], st)
        spikes[t] = s
        for i, n in enumerate(names):
            seq[i][t] = st[n]
        hit = (ops.abs(over) < near) & (first_near == T)
        first_near[hit] = t
    return dict(
        spikes=spikes,
        state_seq=seq,
        final=[st[n] for n in names],
        first_near=first_near,
    )


def reference_sane(ops, ref):
    """None if every reference value is finite and below MAX_ABS."""
    for a in [ref["spikes"]] + ref["state_seq"] + ref["final"]:
        if min(tuple(a.shape) or (1,)) == 0:
            continue
        if not ops.all(ops.isfinite(a)) or ops.max(ops.abs(a)) >= MAX_ABS:
            return "test design: the reference left |value| < %g" % MAX_ABS
    return None


# ---------------------------------------------------------------------------
# bfloat16 on NumPy (as uint16 bit patterns)


def f32_to_bf16_bits(a):
    u = np.ascontiguousarray(a, dtype=np.float32).view(np.uint32)
    rounding = ((u >> 16) & 1) + np.uint32(0x7FFF)
    return ((u + rounding) >> 16).astype(np.uint16)


def bf16_bits_to_f32(b):
    return (np.asarray(b, dtype=np.uint16).astype(np.uint32) << 16).view(
        np.float32
    )


def np_storage(a, dtype):
    """float array -> NumPy storage array (bf16 as uint16 bits)."""
    if dtype == "f32":
        return np.asarray(a, dtype=np.float32)
    if dtype == "f16":
        return np.asarray(a, dtype=np.float16)
    return f32_to_bf16_bits(np.asarray(a, dtype=np.float32))


def np_to_f32(a, dtype):
    if dtype == "bf16":
        return bf16_bits_to_f32(a)
    return np.asarray(a, dtype=np.float32)


# ---------------------------------------------------------------------------
# The kernels: flexsn.compile, then the package's GPU and CPU kernels


def compile_copy(base, suffix):
    """The flexsn.compile call of one copy of a shipped neuron. Training
    kernels save in float32 (`save_in_storage_type=False`), so that their
    half-precision gradients meet float32 autograd's tolerances here;
    saving in the storage type, the default, has its own checks
    (test_saved_storage.py)."""
    variants = TRAIN_VARIANTS if "detach" in suffix else ALL_VARIANTS
    return flexsn.compile(
        base,
        variants=variants,
        storage_types=DTYPES,
        targets=TARGETS,
        chip=CHIP,
        params=COPIES[suffix],
        save_in_storage_type=False,
    )


def compile_neurons(bases, suffixes):
    """Compiles every neuron of `bases` and the copies `suffixes` that its
    const flags allow, a few compiles at a time. Returns {label: compiled},
    each neuron followed by its copies."""

    def has_flags(info, suffix):
        consts = {p.name for p in info.params if p.kind == "const"}
        return all(flag in consts for flag in COPIES[suffix])

    jobs = max(1, min(8, os.cpu_count() or 1))
    with concurrent.futures.ThreadPoolExecutor(jobs) as pool:
        base = dict(zip(bases, pool.map(lambda n: compile_copy(n, ""), bases)))
        wanted = [
            (n, s)
            for n in bases
            for s in suffixes
            if s and has_flags(base[n].info, s)
        ]
        copies = dict(
            zip(wanted, pool.map(lambda w: compile_copy(*w), wanted))
        )
    out = {}
    for n in bases:
        out[n] = base[n]
        for s in suffixes:
            if (n, s) in copies:
                out[n + s] = copies[(n, s)]
    return out


_STATUSES = {}


def statuses():
    """flexsn_status name -> value, as the runtime library names them."""
    if not _STATUSES:
        lib = _runtime.runtime_library()
        for code in range(256):
            name = lib.flexsn_status_name(code).decode()
            if name == "FLEXSN_UNKNOWN_STATUS":
                break
            _STATUSES[name] = code
    return _STATUSES


Param = collections.namedtuple("Param", "name type")


class Kernel(object):
    """One GPU kernel of a checked neuron: its manifest entry (`spec`, a
    flexsn.Kernel), its flexsn._runtime.GpuKernel (`gpu`) and its neuron
    (`info`, a flexsn.NeuronInfo).

    Called with the buffers that are not workspace parts (`buffers`, in
    manifest order; None for NULL) and the workspace address, it returns
    the launch's status value (0: success); `blamed` is then the buffer
    that the RuntimeStatusError named."""

    def __init__(self, label, spec, gpu, info=None):
        self.spec, self.gpu, self.info = spec, gpu, info
        self.neuron, self.dtype = label, spec.dtype
        # The deterministic backward is its own key: (neuron,
        # "backward_deterministic", dtype).
        self.variant = spec.variant.replace("-", "_") + (
            "_deterministic" if spec.deterministic else ""
        )
        self.name = label + spec.name[len(spec.neuron) :]
        self.vector_width = spec.vector_width
        self.buffers = [b for b in spec.buffers if not b.in_workspace]
        self.workspace_parts = [b for b in spec.buffers if b.in_workspace]
        self.params = [Param(n, t) for n, t in spec.params]
        self.blamed = None

    def workspace_bytes(self, T, N, ld):
        return self.spec.workspace_size(T, N, ld)

    def buffers_of(self, role):
        return [b for b in self.buffers if b.role == role]

    def __call__(self, stream, T, N, ld, pointers, params, workspace=0):
        assert len(pointers) == len(self.buffers)
        assert len(params) == len(self.params)
        self.blamed = None
        try:
            self.gpu.launch(
                stream,
                T,
                N,
                ld,
                [p or 0 for p in pointers],
                workspace or 0,
                list(params),
            )
        except _runtime.RuntimeStatusError as e:
            self.blamed = e.argument
            return e.code
        return 0


class KernelSet(object):
    """The checked neurons: label -> CompiledNeuron (`compiled`), and every
    GPU kernel by (label, variant, dtype). load=False reads the manifests
    only (no runtime library needed)."""

    def __init__(self, bases=None, suffixes=INFERENCE_COPIES, load=True):
        bases = list(bases if bases is not None else flexsn.shipped_neurons())
        self.compiled = compile_neurons(bases, suffixes)
        self.neurons = list(self.compiled)
        self.kernels = {}
        for label, c in self.compiled.items():
            for spec in c.manifest.gpu_kernels:
                # The training forward that keeps final states is checked
                # against the sequence forward (test_final_state_forward).
                if spec.neuron != c.name or (
                    spec.variant == "forward" and spec.final_states
                ):
                    continue
                gpu = (
                    c.kernel(
                        "cuda", spec.variant, spec.dtype, spec.deterministic
                    )
                    if load
                    else None
                )
                k = Kernel(label, spec, gpu, c.info)
                self.kernels[(label, k.variant, k.dtype)] = k

    def __getitem__(self, key):
        return self.kernels[key]

    def __contains__(self, key):
        return key in self.kernels

    def get(self, key, default=None):
        return self.kernels.get(key, default)

    def info(self, label):
        """The neuron's flexsn.NeuronInfo (inputs, states, params)."""
        return self.compiled[label].info

    def cpu(self, label, variant, dtype):
        """The CPU kernel (flexsn._runtime.CpuKernel) of the same compile."""
        return self.compiled[label].kernel(
            "cpu", variant.replace("_", "-"), dtype
        )

    def describe(self):
        return "%d neurons, %d GPU kernels, cache %s" % (
            len(self.neurons),
            len(self.kernels),
            flexsn.cache_dir(),
        )

    def status(self, name):
        """The value of FLEXSN_ERROR_<name>, FLEXSN_<name> or <name>."""
        table = statuses()
        for full in ("FLEXSN_ERROR_" + name, "FLEXSN_" + name, name):
            if full in table:
                return table[full]
        raise KeyError("no flexsn_status %s" % name)

    def status_name(self, code):
        return _runtime.runtime_library().flexsn_status_name(code).decode()

    def message(self, code):
        return _runtime.runtime_library().flexsn_status_message(code).decode()

    def unload_all(self):
        """Unloads the image of every loaded kernel; returns the first
        failing status."""
        images = {
            id(k.gpu.image): k.gpu.image
            for k in self.kernels.values()
            if k.gpu is not None
        }
        status = 0
        for image in images.values():
            try:
                image.unload()
            except _runtime.RuntimeStatusError as e:
                status = status or e.code
        return status

    def runtime_params(self, kern, values=None):
        """Values of the kernel's runtime parameters: `values`, else
        RUNTIME_PARAMS, else the manifest default."""
        defaults = {p.name: p.default for p in self.info(kern.neuron).params}
        out = {}
        for p in kern.params:
            if values and p.name in values:
                out[p.name] = values[p.name]
            else:
                out[p.name] = RUNTIME_PARAMS.get(p.name, defaults[p.name])
        return out


NP_STORAGE = {"f32": np.float32, "f16": np.float16, "bf16": np.uint16}


def run_cpu(kernel, T, N, inputs, params, workspace=None):
    """Runs a CPU kernel (flexsn._runtime.CpuKernel) on contiguous NumPy
    storage arrays (bf16 as uint16 bits). inputs: buffer name -> array; the
    other buffers are allocated NaN-filled. Returns (name -> array for every
    buffer, the workspace): a forward's workspace goes to its backward."""
    spec = kernel.spec
    arrays, addresses = {}, []
    for b in spec.buffers:
        if b.in_workspace:
            continue
        if b.name in inputs:
            a = np.ascontiguousarray(inputs[b.name], NP_STORAGE[b.dtype])
        else:
            shape = {("T", "N"): (T, N), ("N",): (N,), (): (1,)}[b.shape]
            a = np.empty(shape, NP_STORAGE[b.dtype])
            a.view(np.uint8)[...] = 0xFF  # NaN in every dtype
        arrays[b.name] = a
        addresses.append(a.ctypes.data)
    if workspace is None:
        workspace = np.empty(
            max(1, (spec.workspace_size(T, N, N) + 3) // 4), np.float32
        )
    kernel.launch(
        T,
        N,
        addresses,
        workspace.ctypes.data,
        [params[name] for name, _ in spec.params],
    )
    return arrays, workspace


# ---------------------------------------------------------------------------
# Buffers: a flat allocation of GUARD + offset + extent + GUARD elements, all
# NaN, holding a [T, N] buffer (rows ld apart) or an [N] buffer.


def seq_view(flat, start, T, N, L):
    return flat[start : start + T * L].reshape(T, L)[:, :N]


class Buf(object):
    def __init__(self, env, arg, dtype, T, N, L, offset):
        self.arg, self.dtype = arg, dtype
        self.seq = arg.role in SEQ_ROLES
        self.T, self.N, self.L = T, N, L
        self.start = GUARD + offset
        self.extent = T * L if self.seq else N
        self.nelem = self.start + self.extent + GUARD
        self.handle = env.alloc(self.nelem, dtype)
        self.ptr = env.address(self.handle) + self.start * ELEM[dtype]

    def view(self, flat):
        if self.seq:
            return seq_view(flat, self.start, self.T, self.N, self.L)
        return flat[self.start : self.start + self.N]

    def outside(self, flat):
        """The parts that must stay NaN: guards and the gaps between rows."""
        parts = [flat[: self.start], flat[self.start + self.extent :]]
        if self.seq and self.L > self.N and self.T > 0:
            parts.append(
                flat[self.start : self.start + self.extent].reshape(
                    self.T, self.L
                )[:, self.N :]
            )
        return parts


class TorchEnv(object):
    """Device memory and references with PyTorch on the current CUDA device."""

    kind = "torch"

    def __init__(self, torch):
        self.torch = torch
        self.device = torch.device("cuda")
        torch.cuda.init()
        torch.zeros(1, device=self.device)  # makes the primary context current
        self.ops = TorchOps(torch, self.device)
        self.tdt = {
            "f32": torch.float32,
            "f16": torch.float16,
            "bf16": torch.bfloat16,
        }
        self.stream_override = None

    def describe(self):
        t = self.torch
        return "%s, torch %s, CUDA %s" % (
            t.cuda.get_device_name(0),
            t.__version__,
            t.version.cuda,
        )

    def stream(self):
        if self.stream_override is not None:
            return self.stream_override
        return self.torch.cuda.current_stream().cuda_stream

    def alloc(self, nelem, dtype):
        return self.torch.full(
            (nelem,), float("nan"), dtype=self.tdt[dtype], device=self.device
        )

    def address(self, handle):
        return handle.data_ptr()

    def write(self, buf, data):
        buf.view(buf.handle).copy_(data)

    def fetch(self, buf):
        return buf.handle

    def free(self, buf):
        buf.handle = None

    def sync(self):
        self.torch.cuda.synchronize()

    def to_f32(self, a, dtype):
        return a.to(self.torch.float32)

    def isnan_storage(self, a, dtype):
        return self.torch.isnan(a)

    def equal_bits(self, a, b, dtype):
        return bool(
            (
                a.contiguous().view(
                    self.torch.int16 if dtype != "f32" else self.torch.int32
                )
                == b.contiguous().view(
                    self.torch.int16 if dtype != "f32" else self.torch.int32
                )
            )
            .all()
            .item()
        )

    def zeros_storage(self, n, dtype):
        return self.torch.zeros(
            (n,), dtype=self.tdt[dtype], device=self.device
        )

    def from_storage(self, arr, dtype):
        """A NumPy storage array (bf16 as uint16 bits) -> device tensor."""
        arr = np.ascontiguousarray(arr)
        if dtype == "bf16":  # torch has no uint16: the same bits as int16
            t = self.torch.from_numpy(arr.view(np.int16)).view(
                self.torch.bfloat16
            )
        else:
            t = self.torch.from_numpy(arr)
        return t.to(self.device)

    def random_inputs(self, neuron, dtype, T, N, seed):
        torch = self.torch
        g = torch.Generator(device=self.device)
        g.manual_seed(seed)
        mean, std = drive(neuron)
        x = torch.randn((T, N), generator=g, device=self.device) * std + mean
        inits = []
        for s in STATES[base_neuron(neuron)]:
            lo, hi = INIT[s]
            inits.append(
                (
                    torch.rand((N,), generator=g, device=self.device)
                    * (hi - lo)
                    + lo
                ).to(self.tdt[dtype])
            )
        return x.to(self.tdt[dtype]), inits

    def host_pointer_array(self, n):
        return np.zeros(n, np.float32)


class CudaDriver(object):
    """The few CUDA driver calls the NumPy mode needs, through ctypes."""

    def __init__(self):
        self.lib = ctypes.CDLL("libcuda.so.1")
        L = self.lib
        u64, vp, sz = ctypes.c_uint64, ctypes.c_void_p, ctypes.c_size_t
        sig = {
            "cuInit": [ctypes.c_uint],
            "cuDeviceGet": [ctypes.POINTER(ctypes.c_int), ctypes.c_int],
            "cuDeviceGetName": [ctypes.c_char_p, ctypes.c_int, ctypes.c_int],
            "cuDevicePrimaryCtxRetain": [ctypes.POINTER(vp), ctypes.c_int],
            "cuCtxSetCurrent": [vp],
            "cuCtxGetCurrent": [ctypes.POINTER(vp)],
            "cuCtxSynchronize": [],
            "cuMemAlloc_v2": [ctypes.POINTER(u64), sz],
            "cuMemFree_v2": [u64],
            "cuMemcpyHtoD_v2": [u64, vp, sz],
            "cuMemcpyDtoH_v2": [vp, u64, sz],
            "cuMemsetD8_v2": [u64, ctypes.c_ubyte, sz],
            "cuStreamCreate": [ctypes.POINTER(vp), ctypes.c_uint],
            "cuStreamSynchronize": [vp],
            "cuStreamDestroy_v2": [vp],
        }
        for name, args in sig.items():
            f = getattr(L, name)
            f.argtypes = args
            f.restype = ctypes.c_int
        self.check(L.cuInit(0), "cuInit")
        dev = ctypes.c_int()
        self.check(L.cuDeviceGet(ctypes.byref(dev), 0), "cuDeviceGet")
        name = ctypes.create_string_buffer(256)
        L.cuDeviceGetName(name, 256, dev)
        self.name = name.value.decode()
        ctx = ctypes.c_void_p()
        self.check(
            L.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev),
            "cuDevicePrimaryCtxRetain",
        )
        self.check(L.cuCtxSetCurrent(ctx), "cuCtxSetCurrent")

    @staticmethod
    def check(r, what):
        if r != 0:
            raise RuntimeError("%s failed with CUresult %d" % (what, r))

    def alloc(self, nbytes):
        p = ctypes.c_uint64()
        self.check(
            self.lib.cuMemAlloc_v2(ctypes.byref(p), max(int(nbytes), 1)),
            "cuMemAlloc",
        )
        return p.value

    def free(self, p):
        self.lib.cuMemFree_v2(p)

    def htod(self, dst, host):
        host = np.ascontiguousarray(host)
        self.check(
            self.lib.cuMemcpyHtoD_v2(dst, host.ctypes.data, host.nbytes),
            "cuMemcpyHtoD",
        )

    def dtoh(self, host, src):
        self.check(
            self.lib.cuMemcpyDtoH_v2(host.ctypes.data, src, host.nbytes),
            "cuMemcpyDtoH",
        )

    def memset8(self, p, value, nbytes):
        self.check(self.lib.cuMemsetD8_v2(p, value, nbytes), "cuMemsetD8")

    def create_stream(self):
        s = ctypes.c_void_p()
        self.check(
            self.lib.cuStreamCreate(ctypes.byref(s), 0), "cuStreamCreate"
        )
        return s.value

    def sync(self):
        self.check(self.lib.cuCtxSynchronize(), "cuCtxSynchronize")


class NumpyEnv(object):
    """Device memory through a CudaDriver (or, for tests, any object with the
    same alloc/free/htod/dtoh/memset8/sync methods); NumPy references."""

    kind = "numpy"

    def __init__(self, driver):
        self.drv = driver
        self.ops = NumpyOps()
        self.stream_override = None
        self._pending = {}

    def describe(self):
        return "%s, CUDA driver API + NumPy %s" % (
            getattr(self.drv, "name", "?"),
            np.__version__,
        )

    def stream(self):
        return self.stream_override  # None: the legacy default stream

    def alloc(self, nelem, dtype):
        nbytes = nelem * ELEM[dtype]
        p = self.drv.alloc(nbytes)
        self.drv.memset8(p, 0xFF, nbytes)  # all-ones: NaN in every dtype
        return (p, nelem, dtype)

    def address(self, handle):
        return handle[0]

    def write(self, buf, data):
        p, nelem, dtype = buf.handle
        host = np.empty(nelem, NP_STORAGE[dtype])
        host.view(np.uint8)[:] = 0xFF  # NaN around the data, as on device
        buf.view(host)[...] = data
        self.drv.htod(p, host)

    def fetch(self, buf):
        p, nelem, dtype = buf.handle
        host = np.empty(nelem, NP_STORAGE[dtype])
        self.drv.dtoh(host, p)
        return host

    def free(self, buf):
        if buf.handle is not None:
            self.drv.free(buf.handle[0])
            buf.handle = None

    def sync(self):
        self.drv.sync()

    def to_f32(self, a, dtype):
        return np_to_f32(a, dtype)

    def isnan_storage(self, a, dtype):
        return np.isnan(np_to_f32(a, dtype))

    def equal_bits(self, a, b, dtype):
        return bool(
            np.array_equal(
                np.ascontiguousarray(a).view(np.uint8),
                np.ascontiguousarray(b).view(np.uint8),
            )
        )

    def zeros_storage(self, n, dtype):
        return np.zeros(n, NP_STORAGE[dtype])

    def from_storage(self, arr, dtype):
        return np.array(arr, dtype=NP_STORAGE[dtype], copy=True)

    def random_inputs(self, neuron, dtype, T, N, seed):
        rng = np.random.default_rng(seed)
        mean, std = drive(neuron)
        x = rng.normal(mean, std, (T, N)).astype(np.float32)
        inits = []
        for s in STATES[base_neuron(neuron)]:
            lo, hi = INIT[s]
            inits.append(np_storage(rng.uniform(lo, hi, N), dtype))
        return np_storage(x, dtype), inits

    def host_pointer_array(self, n):
        return np.zeros(n, np.float32)


# ---------------------------------------------------------------------------
# Running one case and checking it


class Case(object):
    """One kernel call: inputs (storage arrays of the env), which buffers are
    absent, offsets, ld; after run(): status and the written buffers."""

    def __init__(
        self,
        env,
        kern,
        T,
        N,
        x,
        inits,
        ld=0,
        absent=(),
        offset=0,
        offsets=None,
        params=None,
    ):
        self.env, self.kern = env, kern
        self.T, self.N, self.ld = T, N, ld
        self.L = ld if ld else N
        self.x, self.inits = x, inits
        self.absent = set(absent)
        self.offset, self.offsets = offset, offsets or {}
        self.params = params or {}
        self.bufs = {}
        self.status = None

    def run(self):
        env, kern = self.env, self.kern
        pointers = []
        k_init = 0
        for a in kern.buffers:
            init = None
            if a.role == "initial_state":
                init = self.inits[k_init] if self.inits is not None else None
                k_init += 1
                if init is None:
                    self.absent.add(a.name)
            if a.name in self.absent:
                pointers.append(None)
                continue
            off = self.offsets.get(a.name, self.offset)
            b = Buf(env, a, kern.dtype, self.T, self.N, self.L, off)
            if a.role == "input_sequence":
                env.write(b, self.x)
            elif a.role == "initial_state":
                env.write(b, init)
            self.bufs[a.name] = b
            pointers.append(b.ptr)
        params = [self.params[p.name] for p in kern.params]
        env.sync()  # the inputs are in place before the kernel, on any stream
        self.status = kern(
            env.stream(), self.T, self.N, self.ld, pointers, params
        )
        env.sync()
        self.flat = {n: env.fetch(b) for n, b in self.bufs.items()}
        return self.status

    def view(self, name):
        return self.bufs[name].view(self.flat[name])

    def release(self):
        for b in self.bufs.values():
            self.env.free(b)
        self.flat = {}


class Result(object):
    def __init__(self):
        self.errors = []
        self.max_err = 0.0  # largest |got - want| compared
        self.max_ratio = 0.0  # largest |got - want| / tolerance
        # Neurons whose spikes left the reference after coming near the
        # threshold: legitimate (a 1-ulp difference flips a spike) but capped.
        self.diverged = 0

    def fail(self, msg):
        self.errors.append(msg)

    @property
    def ok(self):
        return not self.errors


def tolerance(ops, want, dtype):
    if dtype == "f32":
        return TOL32 + TOL32 * ops.abs(want)
    return ULPS * EPS[dtype] * ops.clamp_min(ops.abs(want), FLOOR)


def compare(ops, res, what, got, want, valid, dtype, exact):
    """compare_within at the storage type's tolerance."""
    tol = None if exact else tolerance(ops, want, dtype)
    compare_within(ops, res, what, got, want, tol, valid, exact)


def compare_within(ops, res, what, got, want, tol, valid, exact=False):
    """got, want: float32 arrays of one shape; tol broadcastable (ignored if
    exact); valid: bool mask broadcastable. NaN in got always fails."""
    if tuple(got.shape) != tuple(want.shape):
        res.fail(
            "%s: shape %s, expected %s"
            % (what, tuple(got.shape), tuple(want.shape))
        )
        return
    if min(tuple(got.shape) or (1,)) == 0:
        return
    diff = ops.abs(got - want)
    if exact:
        ok = got == want
    else:
        ok = diff <= tol
        ratio = diff / tol
        vr = valid & ops.isfinite(ratio)
        if ops.count(vr):
            res.max_ratio = max(res.max_ratio, ops.max(ratio[vr]))
    fin = valid & ops.isfinite(diff)
    if ops.count(fin):
        res.max_err = max(res.max_err, ops.max(diff[fin]))
    bad = valid & ~ok
    nbad = ops.count(bad)
    if nbad:
        idx = ops.first(bad)
        res.fail(
            "%s: %d of %d compared differ%s; first at %s: got %r, "
            "expected %r"
            % (
                what,
                nbad,
                ops.count(valid & (want == want)),
                "" if exact else " beyond tolerance",
                list(idx),
                float(got[idx]),
                float(want[idx]),
            )
        )


def check_written(env, case, res):
    """Every element of every written buffer written; guards and row gaps
    untouched; input buffers untouched too."""
    ops = env.ops
    dtype = case.kern.dtype
    for name, b in case.bufs.items():
        flat = case.flat[name]
        for part in b.outside(flat):
            if tuple(part.shape) and min(part.shape) > 0:
                n_written = ops.count(~env.isnan_storage(part, dtype))
                if n_written:
                    res.fail(
                        "%s: %d elements written outside the buffer "
                        "(guards or row gaps)" % (name, n_written)
                    )
        if b.arg.role in WRITTEN:
            v = b.view(flat)
            if tuple(v.shape) and min(v.shape) > 0:
                n = ops.count(env.isnan_storage(v, dtype))
                if n:
                    res.fail(
                        "%s: %d of %d elements not written (still NaN)"
                        % (name, n, int(np.prod(tuple(v.shape))))
                    )


def check_against(env, case, ref, res, label, cpu=None):
    """Compares the written buffers with the reference (and a CPU result
    dict name -> float32 array, if given)."""
    ops = env.ops
    kern, T, N, dtype = case.kern, case.T, case.N, case.kern.dtype
    fn = ref["first_near"]
    seq_valid = ops.arange(T).reshape(T, 1) < fn.reshape(1, N)
    fin_valid = fn == T
    outs = kern.buffers_of("output_sequence")
    states = [
        a for a in kern.buffers if a.role in ("state_sequence", "final_state")
    ]
    for a in outs:
        if a.name not in case.bufs:
            continue
        got = env.to_f32(case.view(a.name), dtype)
        if T > 0:
            notbin = ~((got == 0) | (got == 1))
            if ops.count(notbin):
                idx = ops.first(notbin)
                res.fail(
                    "%s: %s[%s] = %r is not 0 or 1"
                    % (label, a.name, list(idx), float(got[idx]))
                )
        compare(
            ops,
            res,
            "%s %s vs reference" % (label, a.name),
            got,
            ref["spikes"],
            seq_valid,
            dtype,
            exact=True,
        )
        if T > 0:
            differs = (got != ref["spikes"]) & ~seq_valid
            res.diverged = max(res.diverged, ops.count(differs.sum(0) > 0))
        if cpu is not None and a.name in cpu:
            compare(
                ops,
                res,
                "%s %s vs CPU path" % (label, a.name),
                got,
                cpu[a.name],
                seq_valid,
                dtype,
                exact=True,
            )
    for i, a in enumerate(states):
        if a.name not in case.bufs:
            continue
        got = env.to_f32(case.view(a.name), dtype)
        if a.role == "state_sequence":
            want, valid = ref["state_seq"][i], seq_valid
        else:
            want, valid = ref["final"][i], fin_valid
            if T == 0:
                init = case.inits[i] if case.inits is not None else None
                if init is None:
                    init = env.zeros_storage(N, dtype)
                if not env.equal_bits(case.view(a.name), init, dtype):
                    res.fail(
                        "%s: %s with T = 0 differs from the initial "
                        "state" % (label, a.name)
                    )
        compare(
            ops,
            res,
            "%s %s vs reference" % (label, a.name),
            got,
            want,
            valid,
            dtype,
            exact=False,
        )
        if cpu is not None and a.name in cpu:
            compare(
                ops,
                res,
                "%s %s vs CPU path" % (label, a.name),
                got,
                cpu[a.name],
                valid,
                dtype,
                exact=False,
            )


# ---------------------------------------------------------------------------
# The checker: groups of checks, results, deadline


class Checker(object):
    def __init__(self, env, kernels, args):
        self.env, self.kernels, self.args = env, kernels, args
        self.ops = env.ops
        self.groups = {}
        self.order = []
        self.records = []
        self.t0 = time.time()
        self.deadline = args.deadline
        self.cpu_max_T = self.cpu_Ns = None  # CPU-path cases: all

    def group(self, name):
        if name not in self.groups:
            self.groups[name] = dict(
                name=name,
                passed=0,
                failed=0,
                skipped=0,
                cut=0,
                neurons=0,
                max_err=0.0,
                max_ratio=0.0,
                failures=[],
                t0=time.time(),
            )
            self.order.append(name)
        return self.groups[name]

    def out_of_time(self):
        return self.deadline and time.time() - self.t0 > self.deadline

    def record(self, group, case, res, status=None, extra=None):
        g = self.group(group)
        ok = res.ok
        g["passed" if ok else "failed"] += 1
        g["cut"] += res.diverged
        g["max_err"] = max(g["max_err"], res.max_err)
        g["max_ratio"] = max(g["max_ratio"], res.max_ratio)
        if not ok:
            g["failures"].append("%s: %s" % (case, "; ".join(res.errors[:3])))
        rec = dict(
            group=group,
            case=case,
            ok=ok,
            errors=res.errors[:5],
            max_err=res.max_err,
            max_ratio=res.max_ratio,
        )
        if status is not None:
            rec["status"] = self.kernels.status_name(status)
        if extra:
            rec.update(extra)
        self.records.append(rec)

    def skip(self, group, case):
        g = self.group(group)
        g["skipped"] += 1
        self.records.append(
            dict(
                group=group,
                case=case,
                ok=False,
                skipped=True,
                errors=["deadline"],
            )
        )

    def run_group(self, name, fn, *args, **kwargs):
        """Runs a group method; an exception outside its guarded checks (in
        its setup) is recorded as a failure instead of ending the run."""
        try:
            fn(*args, **kwargs)
        except Exception as e:
            res = Result()
            res.fail(
                "exception in the group's setup: %s: %s"
                % (type(e).__name__, e)
            )
            self.record(name, "setup", res)

    def run_guarded(self, group, case, fn):
        """Runs fn() -> Result, turning exceptions into failures."""
        if self.out_of_time():
            self.skip(group, case)
            return None
        try:
            res = fn()
        except Exception as e:  # a crash of one check must not stop the rest
            res = Result()
            res.fail("exception: %s: %s" % (type(e).__name__, e))
        if res is not None:
            self.record(
                group,
                case,
                res,
                getattr(res, "status", None),
                getattr(res, "extra", None),
            )
        return res

    # -- the basic check: one kernel on given inputs vs reference (+CPU) ----
    def check_case(
        self,
        kern,
        T,
        N,
        x,
        inits,
        ref,
        params,
        label,
        cpu=None,
        ld=0,
        absent=(),
        offset=0,
        offsets=None,
        keep=False,
    ):
        env = self.env
        res = Result()
        case = Case(
            env,
            kern,
            T,
            N,
            x,
            inits,
            ld=ld,
            absent=absent,
            offset=offset,
            offsets=offsets,
            params=params,
        )
        status = case.run()
        res.status = status
        if status != 0:
            res.fail(
                "%s: status %s (%s)"
                % (
                    label,
                    self.kernels.status_name(status),
                    self.kernels.message(status),
                )
            )
        else:
            check_written(env, case, res)
            check_against(env, case, ref, res, label, cpu)
        if keep:
            res.case = case
        else:
            case.release()
        return res

    def reference(self, kern, x, inits, params):
        ops, env = self.ops, self.env
        dtype = kern.dtype
        xs = env.to_f32(x, dtype)
        ss = (
            None
            if inits is None
            else [None if s is None else env.to_f32(s, dtype) for s in inits]
        )
        return simulate(ops, kern.neuron, params, xs, ss)

    def consistency(self, inf, fin, T, N):
        """Inference and final-state kernels on the same inputs agree bit for
        bit: spikes, and the final state = the last state of the sequence."""
        res = Result()
        env = self.env
        ki, kf = inf.case.kern, fin.case.kern
        dtype = ki.dtype
        for a, b in zip(
            ki.buffers_of("output_sequence"), kf.buffers_of("output_sequence")
        ):
            if a.name in inf.case.bufs and b.name in fin.case.bufs:
                if not env.equal_bits(
                    inf.case.view(a.name), fin.case.view(b.name), dtype
                ):
                    res.fail(
                        "%s differs between inference and final-state" % a.name
                    )
        if T > 0:
            for a, b in zip(
                ki.buffers_of("state_sequence"), kf.buffers_of("final_state")
            ):
                if a.name in inf.case.bufs and b.name in fin.case.bufs:
                    last = inf.case.view(a.name)[T - 1]
                    if not env.equal_bits(last, fin.case.view(b.name), dtype):
                        res.fail(
                            "%s differs from the last row of %s"
                            % (b.name, a.name)
                        )
        return res

    # -- groups ---------------------------------------------------------------
    def grid(self, neurons, dtypes, Ts, Ns):
        for neuron in neurons:
            for dtype in dtypes:
                for T in Ts:
                    for N in Ns:
                        self._grid_point(neuron, dtype, T, N)
            self._cpu_cases(neuron, dtypes)

    def _grid_point(self, neuron, dtype, T, N):
        b, ops = self.kernels, self.ops
        label = "T=%d N=%d rand" % (T, N)
        if self.out_of_time():
            for v in VARIANTS:
                self.skip("grid/%s/%s/%s" % (neuron, v, dtype), label)
            return
        kerns = {v: b[(neuron, v, dtype)] for v in VARIANTS}
        params = b.runtime_params(kerns["inference"])
        seed = zlib.crc32(
            ("%s/%s/%d/%d/%d" % (neuron, dtype, T, N, self.args.seed)).encode()
        )
        try:
            x, inits = self.env.random_inputs(neuron, dtype, T, N, seed)
            ref = self.reference(kerns["inference"], x, inits, params)
            bad = reference_sane(ops, ref)
        except Exception as e:
            bad = "reference: %s: %s" % (type(e).__name__, e)
        if bad:
            for v in VARIANTS:
                r = Result()
                r.fail(bad)
                self.record("grid/%s/%s/%s" % (neuron, v, dtype), label, r)
            return
        n = N if T > 0 else 0
        kept = {}
        for v in VARIANTS:
            g = "grid/%s/%s/%s" % (neuron, v, dtype)
            gg = self.group(g)
            gg["neurons"] += n
            kept[v] = self.run_guarded(
                g,
                label,
                lambda v=v: self.check_case(
                    kerns[v], T, N, x, inits, ref, params, label, keep=True
                ),
            )
        if all(
            kept[v] is not None and hasattr(kept[v], "case") for v in VARIANTS
        ):
            if (
                kept["inference"].status == 0
                and kept["final_state"].status == 0
            ):
                self.run_guarded(
                    "grid/%s/final_state/%s" % (neuron, dtype),
                    label + " == inference",
                    lambda: self.consistency(
                        kept["inference"], kept["final_state"], T, N
                    ),
                )
        for v in VARIANTS:
            if kept[v] is not None and hasattr(kept[v], "case"):
                kept[v].case.release()

    def _cpu_cases(self, neuron, dtypes):
        """The package's CPU kernels and the GPU kernels on the same seeded
        inputs (T in {0, 1, 16, 64}, N in {1, 1000}; copies T = 16)."""
        base, soft, _ = copy_flags(neuron)
        Ts = (0, 1, 16, 64) if neuron == base else (16,)
        if self.cpu_max_T is not None:
            Ts = [T for T in Ts if T <= self.cpu_max_T]
        Ns = self.cpu_Ns or (1, 1000)
        reset = "soft" if soft else "hard"
        for dtype in dtypes:
            for T in Ts:
                for N in Ns:
                    label = "T=%d N=%d cpu-%s" % (T, N, reset)
                    if self.out_of_time():
                        for v in VARIANTS:
                            self.skip(
                                "grid/%s/%s/%s" % (neuron, v, dtype), label
                            )
                        continue
                    seed = [
                        zlib.crc32(neuron.encode()),
                        DTYPES.index(dtype),
                        T,
                        N,
                        self.args.seed,
                    ]
                    self._cpu_case(neuron, dtype, T, N, seed, label)

    def _cpu_case(self, neuron, dtype, T, N, seed, label):
        b, env = self.kernels, self.env
        kerns = {v: b[(neuron, v, dtype)] for v in VARIANTS}
        params = b.runtime_params(kerns["inference"])
        rng = np.random.default_rng(seed)
        mean, std = drive(neuron)
        x = np_storage(rng.normal(mean, std, (T, N)).astype(np.float32), dtype)
        init_names = [
            a.name for a in kerns["inference"].buffers_of("initial_state")
        ]
        inits = [
            np_storage(rng.uniform(*INIT[s], N).astype(np.float32), dtype)
            for s in STATES[base_neuron(neuron)]
        ]
        x_name = kerns["inference"].buffers_of("input_sequence")[0].name
        host = dict(zip(init_names, inits), **{x_name: x})
        gx = env.from_storage(x, dtype)
        ginits = [env.from_storage(s, dtype) for s in inits]
        ref = self.reference(kerns["inference"], gx, ginits, params)
        for v in VARIANTS:
            g = "grid/%s/%s/%s" % (neuron, v, dtype)

            def fn(v=v):
                arrays, _ = run_cpu(
                    b.cpu(neuron, v, dtype), T, N, host, params
                )
                cpu = {
                    a.name: env.to_f32(
                        env.from_storage(arrays[a.name], dtype), dtype
                    )
                    for a in kerns[v].buffers
                    if a.role in WRITTEN
                }
                return self.check_case(
                    kerns[v], T, N, gx, ginits, ref, params, label, cpu=cpu
                )

            self.run_guarded(g, label, fn)

    def absent_buffers(self, neurons, dtypes, N_list, T=16):
        b = self.kernels
        for neuron in neurons:
            g = "absent/%s" % neuron
            for dtype in dtypes:
                for N in N_list:
                    for v in VARIANTS:
                        kern = b[(neuron, v, dtype)]
                        params = b.runtime_params(kern)
                        seed = zlib.crc32(
                            (
                                "absent/%s/%s/%d/%s" % (neuron, dtype, N, v)
                            ).encode()
                        )
                        x, inits = self.env.random_inputs(
                            neuron, dtype, T, N, seed
                        )
                        ref0 = self.reference(kern, x, None, params)
                        ref = self.reference(kern, x, inits, params)
                        tag = "%s %s N=%d" % (v, dtype, N)
                        self.run_guarded(
                            g,
                            tag + " init=NULL",
                            lambda: self.check_case(
                                kern, T, N, x, None, ref0, params, "init NULL"
                            ),
                        )
                        x0 = x[:0]
                        ref00 = self.reference(kern, x0, None, params)
                        self.run_guarded(
                            g,
                            tag + " T=0 init=NULL",
                            lambda: self.check_case(
                                kern,
                                0,
                                N,
                                x0,
                                None,
                                ref00,
                                params,
                                "T=0 init NULL",
                            ),
                        )
                        written = [
                            a.name for a in kern.buffers if a.role in WRITTEN
                        ]
                        for name in written:
                            self.run_guarded(
                                g,
                                tag + " %s=NULL" % name,
                                lambda name=name: self.check_case(
                                    kern,
                                    T,
                                    N,
                                    x,
                                    inits,
                                    ref,
                                    params,
                                    "%s NULL" % name,
                                    absent=[name],
                                ),
                            )
                        self.run_guarded(
                            g,
                            tag + " all outputs NULL",
                            lambda: self.check_case(
                                kern,
                                T,
                                N,
                                x,
                                inits,
                                ref,
                                params,
                                "all NULL",
                                absent=written,
                            ),
                        )

    def strided(self, neurons, dtypes, shapes, variants=VARIANTS, T=16):
        """shapes: (N, ld) pairs with ld > N."""
        b = self.kernels
        for neuron in neurons:
            g = "strided/%s" % neuron
            for dtype in dtypes:
                for N, ld in shapes:
                    kern0 = b[(neuron, "inference", dtype)]
                    params = b.runtime_params(kern0)
                    seed = zlib.crc32(
                        (
                            "strided/%s/%s/%d/%d" % (neuron, dtype, N, ld)
                        ).encode()
                    )
                    if self.out_of_time():
                        for v in variants:
                            self.skip(
                                g, "%s %s N=%d ld=%d" % (v, dtype, N, ld)
                            )
                        continue
                    x, inits = self.env.random_inputs(
                        neuron, dtype, T, N, seed
                    )
                    ref = self.reference(kern0, x, inits, params)
                    for v in variants:
                        kern = b[(neuron, v, dtype)]
                        path = (
                            "vector"
                            if ld % kern.vector_width == 0
                            else "scalar"
                        )
                        self.run_guarded(
                            g,
                            "%s %s N=%d ld=%d (%s)" % (v, dtype, N, ld, path),
                            lambda kern=kern: self.check_case(
                                kern,
                                T,
                                N,
                                x,
                                inits,
                                ref,
                                params,
                                "ld=%d" % ld,
                                ld=ld,
                            ),
                        )

    def misaligned(self, neurons, dtypes, N=1000, T=16):
        b = self.kernels
        for neuron in neurons:
            g = "misaligned/%s" % neuron
            for dtype in dtypes:
                kern0 = b[(neuron, "inference", dtype)]
                params = b.runtime_params(kern0)
                seed = zlib.crc32(
                    ("misaligned/%s/%s" % (neuron, dtype)).encode()
                )
                x, inits = self.env.random_inputs(neuron, dtype, T, N, seed)
                ref = self.reference(kern0, x, inits, params)
                for v in VARIANTS:
                    kern = b[(neuron, v, dtype)]
                    self.run_guarded(
                        g,
                        "%s %s all buffers +1 element" % (v, dtype),
                        lambda kern=kern: self.check_case(
                            kern,
                            T,
                            N,
                            x,
                            inits,
                            ref,
                            params,
                            "offset 1",
                            offset=1,
                        ),
                    )
                    x_name = kern.buffers_of("input_sequence")[0].name
                    self.run_guarded(
                        g,
                        "%s %s only %s +1 element" % (v, dtype, x_name),
                        lambda kern=kern, x_name=x_name: self.check_case(
                            kern,
                            T,
                            N,
                            x,
                            inits,
                            ref,
                            params,
                            "x offset 1",
                            offsets={x_name: 1},
                        ),
                    )

    def streams(self, neuron="lif", dtype="f32", T=16, N=1000):
        """Launches on a non-default stream (and the legacy default one)."""
        b, env = self.kernels, self.env
        kern = b[(neuron, "inference", dtype)]
        params = b.runtime_params(kern)
        x, inits = env.random_inputs(neuron, dtype, T, N, 1234)
        ref = self.reference(kern, x, inits, params)
        handles = []
        if env.kind == "torch":
            side = env.torch.cuda.Stream()
            handles.append(("side stream", side.cuda_stream))
            handles.append(("legacy default stream", 0))
        else:
            handles.append(("created stream", env.drv.create_stream()))
        for label, h in handles:

            def fn(h=h):
                env.stream_override = h
                try:
                    return self.check_case(
                        kern, T, N, x, inits, ref, params, label
                    )
                finally:
                    env.stream_override = None

            self.run_guarded("streams", label, fn)

    def unload(self, neuron="lif", dtype="f16", T=4, N=100):
        """Every loaded image unloaded, then a launch loads it again."""
        b, env = self.kernels, self.env
        kern = b[(neuron, "final_state", dtype)]
        params = b.runtime_params(kern)
        x, inits = env.random_inputs(neuron, dtype, T, N, 99)
        ref = self.reference(kern, x, inits, params)

        def fn():
            r = Result()
            s = b.unload_all()
            if s != 0:
                r.fail("flexsn_image_unload: %s" % b.status_name(s))
            r2 = self.check_case(
                kern, T, N, x, inits, ref, params, "after unload"
            )
            r.errors += r2.errors
            r.status = getattr(r2, "status", None)
            return r

        self.run_guarded("unload", "unload all, launch again", fn)
        self.run_guarded(
            "unload",
            "second launch (cached module)",
            lambda: self.check_case(
                kern, T, N, x, inits, ref, params, "cached"
            ),
        )

    def spec_defaults(self, neurons):
        """The manifests' parameter defaults are docs/Semantics.md's."""
        for name in neurons:
            nd = self.kernels.info(name)
            res = Result()
            base = base_neuron(name)
            if base not in DEFAULTS:
                res.fail("unknown neuron %s: not in docs/Semantics.md" % name)
            else:
                want = reference_params(name)
                got = {p.name: p.default for p in nd.params}
                if set(got) != set(want):
                    res.fail(
                        "parameters %s, docs/Semantics.md has %s"
                        % (sorted(got), sorted(want))
                    )
                for k in want:
                    if k in got and abs(float(got[k]) - float(want[k])) > 1e-6:
                        res.fail(
                            "%s = %r, docs/Semantics.md's default %r"
                            % (k, got[k], want[k])
                        )
                if list(nd.states) != STATES[base]:
                    res.fail(
                        "states %s, docs/Semantics.md's %s"
                        % (list(nd.states), STATES[base])
                    )
            self.record("spec-defaults", name, res)

    def bad_args(self, cases):
        """cases: (neuron, variant, dtype) triples."""
        for neuron, variant, dtype in cases:
            kern = self.kernels[(neuron, variant, dtype)]
            for label, fn, want, blamed in self._bad_arg_cases(kern):

                def run(fn=fn, want=want, blamed=blamed, kern=kern):
                    return self._bad_arg(kern, fn, want, blamed)

                self.run_guarded("badargs", "%s: %s" % (kern.name, label), run)
        # Afterwards the GPU must still work.
        kern = self.kernels[("lif", "inference", "f32")]
        params = self.kernels.runtime_params(kern)
        x, inits = self.env.random_inputs("lif", "f32", 8, 1000, 7)
        ref = self.reference(kern, x, inits, params)
        self.run_guarded(
            "badargs",
            "a good call afterwards",
            lambda: self.check_case(
                kern, 8, 1000, x, inits, ref, params, "after bad args"
            ),
        )

    def _bad_arg_cases(self, kern):
        """(label, mutate(pointers, sizes) -> None, expected status name,
        the buffer the error must name or None)."""
        names = [a.name for a in kern.buffers]
        xi = names.index(kern.buffers_of("input_sequence")[0].name)
        out = [i for i, a in enumerate(kern.buffers) if a.role in WRITTEN][0]
        es = ELEM[kern.dtype]
        x_name, out_name = names[xi], names[out]
        cases = [
            (
                "input NULL",
                lambda p, s: p.__setitem__(xi, None),
                "NULL_POINTER",
                x_name,
            ),
            (
                "T = -1",
                lambda p, s: s.__setitem__("T", -1),
                "NEGATIVE_SIZE",
                None,
            ),
            (
                "N = -5",
                lambda p, s: s.__setitem__("N", -5),
                "NEGATIVE_SIZE",
                None,
            ),
            (
                "ld = N - 1",
                lambda p, s: s.__setitem__("ld", s["N"] - 1),
                "BAD_STRIDE",
                None,
            ),
            (
                "ld = -1",
                lambda p, s: s.__setitem__("ld", -1),
                "BAD_STRIDE",
                None,
            ),
            (
                "N = 2^62",
                lambda p, s: s.__setitem__("N", 1 << 62),
                "SIZE_OVERFLOW",
                None,
            ),
            (
                "output misaligned by 1 byte",
                lambda p, s: p.__setitem__(out, p[out] + 1),
                "INVALID_ARGUMENT",
                out_name,
            ),
            (
                "output a host pointer",
                "host-out",
                "CONTEXT_MISMATCH",
                out_name,
            ),
            ("input a host pointer", "host-in", "CONTEXT_MISMATCH", x_name),
            (
                "output too small (2 MiB allocation)",
                "small-out",
                "BUFFER_TOO_SMALL",
                out_name,
            ),
            (
                "input too small (2 MiB allocation)",
                "small-in",
                "BUFFER_TOO_SMALL",
                x_name,
            ),
        ]
        self._bad_idx = (xi, out, es)
        return cases

    def _bad_arg(self, kern, mutate, want, blamed):
        """A call with one bad argument on otherwise valid, poisoned buffers:
        the expected status and blamed buffer, nothing written, no error on
        the stream."""
        env, b = self.env, self.kernels
        xi, out, es = self._bad_idx
        T, N = 4, 1 << 18  # [T, N] needs 4 MiB (f32) / 2 MiB (16-bit)
        if es == 2:
            T = 8  # ... 4 MiB as well
        res = Result()
        x, inits = env.random_inputs(kern.neuron, kern.dtype, T, N, 5)
        case = Case(env, kern, T, N, x, inits, params=b.runtime_params(kern))
        # Allocate and fill the buffers as Case.run does, without launching.
        pointers, k_init = [], 0
        for a in kern.buffers:
            bf = Buf(env, a, kern.dtype, T, N, N, 0)
            if a.role == "input_sequence":
                env.write(bf, x)
            elif a.role == "initial_state":
                env.write(bf, inits[k_init])
                k_init += 1
            case.bufs[a.name] = bf
            pointers.append(bf.ptr)
        sizes = {"T": T, "N": N, "ld": 0}
        keep = []
        raw = None
        if callable(mutate):
            mutate(pointers, sizes)
        elif mutate.startswith("host"):
            host = env.host_pointer_array(T * N + 64)
            keep.append(host)
            pointers[out if mutate == "host-out" else xi] = host.ctypes.data
        elif mutate.startswith("small"):
            raw = RawAlloc(env, 2 << 20)
            pointers[out if mutate == "small-out" else xi] = raw.ptr
        params = [b.runtime_params(kern)[p.name] for p in kern.params]
        try:
            status = kern(
                env.stream(),
                sizes["T"],
                sizes["N"],
                sizes["ld"],
                pointers,
                params,
            )
            env.sync()
        finally:
            if raw is not None:
                raw.free()
        res.status = status
        if status != b.status(want):
            res.fail(
                "status %s (%s), expected FLEXSN_ERROR_%s"
                % (b.status_name(status), b.message(status), want)
            )
        elif kern.blamed != blamed:
            res.fail(
                "the error names argument %r, expected %r"
                % (kern.blamed, blamed)
            )
        case.flat = {n: env.fetch(bf) for n, bf in case.bufs.items()}
        for a in kern.buffers:
            if a.role in WRITTEN:
                flat = case.flat[a.name]
                n = env.ops.count(~env.isnan_storage(flat, kern.dtype))
                if n:
                    res.fail(
                        "%s: %d elements written by a call that failed"
                        % (a.name, n)
                    )
        case.release()
        return res


class RawAlloc(object):
    """A plain cuMemAlloc allocation (its range is exactly its size, unlike
    the caching allocator's pieces of larger segments)."""

    def __init__(self, env, nbytes):
        if env.kind == "torch":
            self.drv = CudaDriverLite()
        else:
            self.drv = env.drv
        self.ptr = self.drv.alloc(nbytes)

    def free(self):
        self.drv.free(self.ptr)


class CudaDriverLite(object):
    """cuMemAlloc / cuMemFree in the current context (PyTorch's)."""

    def __init__(self):
        L = ctypes.CDLL("libcuda.so.1")
        L.cuMemAlloc_v2.argtypes = [
            ctypes.POINTER(ctypes.c_uint64),
            ctypes.c_size_t,
        ]
        L.cuMemAlloc_v2.restype = ctypes.c_int
        L.cuMemFree_v2.argtypes = [ctypes.c_uint64]
        L.cuMemFree_v2.restype = ctypes.c_int
        self.lib = L

    def alloc(self, nbytes):
        p = ctypes.c_uint64()
        r = self.lib.cuMemAlloc_v2(ctypes.byref(p), nbytes)
        if r != 0:
            raise RuntimeError("cuMemAlloc failed with CUresult %d" % r)
        return p.value

    def free(self, p):
        self.lib.cuMemFree_v2(p)


# ---------------------------------------------------------------------------
# Main


def summarize(checker, out_dir, extra, allow_skip=False, prog="kernel_checks"):
    passed = failed = skipped = 0
    lines = []
    groups = []
    for name in checker.order:
        g = checker.groups[name]
        frac = g["cut"] / g["neurons"] if g["neurons"] else 0.0
        too_many_cut = g["neurons"] >= 1000 and frac > MAX_CUT
        if too_many_cut:
            g["failed"] += 1
            g["failures"].append(
                "%.2f%% of the trajectories came within "
                "%g of the threshold (limit %.0f%%)"
                % (100 * frac, NEAR, 100 * MAX_CUT)
            )
        ok = g["failed"] == 0 and g["skipped"] == 0
        passed += g["passed"]
        failed += g["failed"]
        skipped += g["skipped"]
        line = "%s %-36s %4d passed %3d failed" % (
            "PASS" if ok else "FAIL",
            name,
            g["passed"],
            g["failed"],
        )
        if g["skipped"]:
            line += " %d skipped" % g["skipped"]
        if g["max_err"] or g["max_ratio"]:
            line += "  max|err| %.2e (%.2f of tol)" % (
                g["max_err"],
                g["max_ratio"],
            )
        if g["neurons"]:
            line += "  cut %.2f%%" % (100 * frac)
        lines.append(line)
        for f in g["failures"][:3]:
            lines.append("     " + f)
        if len(g["failures"]) > 3:
            lines.append("     ... %d more" % (len(g["failures"]) - 3))
        groups.append(
            dict(
                name=name,
                ok=ok,
                passed=g["passed"],
                failed=g["failed"],
                skipped=g["skipped"],
                max_err=g["max_err"],
                max_ratio=g["max_ratio"],
                cut_fraction=frac,
                failures=g["failures"][:20],
            )
        )
    for line in lines:
        print(line)
    summary = "%s: %d passed, %d failed" % (prog, passed, failed)
    if skipped:
        summary += " (%d skipped: deadline)" % skipped
    summary_d = dict(
        passed=passed,
        failed=failed,
        skipped=skipped,
        seconds=time.time() - checker.t0,
    )
    if out_dir:
        os.makedirs(out_dir, exist_ok=True)
        doc = dict(
            summary=summary_d,
            line=summary,
            groups=groups,
            checks=checker.records,
        )
        doc.update(extra)
        with open(os.path.join(out_dir, "results.json"), "w") as f:
            json.dump(doc, f, indent=1)
    print(summary)
    return 0 if failed == 0 and (skipped == 0 or allow_skip) else 1


def checker_arguments(doc):
    """The options kernel_checks.py and train_kernel_checks.py share."""
    ap = argparse.ArgumentParser(
        description=doc.splitlines()[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="\n".join(doc.splitlines()[1:]),
    )
    ap.add_argument(
        "--out", default=None, help="folder for results.json (default: none)"
    )
    ap.add_argument(
        "--quick",
        action="store_true",
        help="small subset, CUDA driver API + NumPy, no PyTorch",
    )
    ap.add_argument(
        "--compile-only",
        action="store_true",
        help="only make the flexsn.compile calls of the checks "
        "(fills the cache for a machine without the tools)",
    )
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument(
        "--deadline",
        type=float,
        default=None,
        help="skip the checks left after this many seconds",
    )
    ap.add_argument(
        "--neurons",
        default=None,
        help="comma-separated subset: shipped neurons and their "
        "copies (lif, lif_soft, ...)",
    )
    ap.add_argument(
        "--allow-skip",
        action="store_true",
        help="checks skipped by --deadline do not fail the run",
    )
    return ap


def requested(names):
    """(shipped neurons to compile, labels to check or None for all) of a
    --neurons value."""
    if not names:
        return list(flexsn.shipped_neurons()), None
    labels = names.split(",")
    bases = list(dict.fromkeys(base_neuron(n) for n in labels))
    return bases, labels


def select(kernels, labels, variants):
    """The labels of `kernels` that have every variant in every dtype,
    restricted to `labels` (None: all)."""
    return [
        n
        for n in kernels.neurons
        if all((n, v, d) in kernels for v in variants for d in DTYPES)
        and (labels is None or n in labels)
    ]


def make_env(quick, prog="kernel_checks"):
    """NumPy and the CUDA driver API (--quick), else PyTorch."""
    if quick:
        return NumpyEnv(CudaDriver())
    import torch

    if not torch.cuda.is_available():
        sys.exit("%s: PyTorch sees no CUDA device" % prog)
    return TorchEnv(torch)


def run_groups(c, neurons, mode, only=None):
    """The groups of a mode ("full" or "quick") on a checker; `only`: the
    one group to run."""

    def run(name, fn, *args, **kwargs):
        if only is None or only == name:
            c.run_group(name, fn, *args, **kwargs)

    base = [n for n in neurons if base_neuron(n) == n]
    some = [
        n for n in ("lif", "plif", "izhikevich", "cuba_lif") if n in base
    ] or base[:1]
    run("spec-defaults", c.spec_defaults, neurons)
    if mode == "quick":
        c.cpu_max_T = 16
        c.cpu_Ns = (1000,)
        run("grid", c.grid, neurons, DTYPES, (0, 1, 16), (1, 1000))
        run("absent", c.absent_buffers, some, ("f32", "bf16"), (37,))
        run(
            "strided",
            c.strided,
            base,
            ("f32", "f16"),
            [(37, 40), (1000, 1003)],
        )
        run("misaligned", c.misaligned, some, ("f32", "f16"))
        if "lif" in base and "plif" in base:
            run(
                "badargs",
                c.bad_args,
                [("lif", "inference", "f32"), ("plif", "final_state", "f16")],
            )
        if "lif" in base:
            run("streams", c.streams)
            run("unload", c.unload)
        return
    c.cpu_max_T = None
    c.cpu_Ns = None
    big = (1 << 20) + 3
    run("grid", c.grid, neurons, DTYPES, (0, 1, 16, 64), (1, 1000, big))
    run("absent", c.absent_buffers, base, DTYPES, (37, 1000))
    run(
        "strided",
        c.strided,
        base,
        DTYPES,
        [(1000, 1003), (1000, 1024), (5, 8), (1003, 1008)],
    )
    # ld a multiple of the vector width with N not: the vector kernel with
    # a ragged tail; an odd ld: the scalar kernel; large N.
    run(
        "strided",
        c.strided,
        some[:3],
        DTYPES,
        [(big, big + 5), (big, big + 6)],
        T=8,
    )
    run("misaligned", c.misaligned, base, DTYPES)
    bad = [
        k
        for k in [
            ("lif", "inference", "f32"),
            ("plif", "final_state", "f16"),
            ("izhikevich", "inference", "bf16"),
        ]
        if k[0] in base
    ]
    if bad and "lif" in base:
        run("badargs", c.bad_args, bad)
    if "lif" in base:
        run("streams", c.streams)
        run("unload", c.unload)


def main(argv=None):
    args = checker_arguments(__doc__).parse_args(argv)
    bases, labels = requested(args.neurons)
    if args.compile_only:
        t0 = time.time()
        compiled = compile_neurons(bases, INFERENCE_COPIES)
        print(
            "kernel_checks: %d compiles in %.0f s (cache %s)"
            % (len(compiled), time.time() - t0, flexsn.cache_dir())
        )
        return 0

    kernels = KernelSet(bases, INFERENCE_COPIES)
    env = make_env(args.quick)
    neurons = select(kernels, labels, VARIANTS)
    mode = "quick" if args.quick else "full"
    print(
        "kernel_checks: %s; %s; %s mode"
        % (env.describe(), kernels.describe(), mode)
    )
    sys.stdout.flush()

    c = Checker(env, kernels, args)
    run_groups(c, neurons, mode)
    extra = dict(
        device=env.describe(),
        mode=mode,
        neurons=neurons,
        cache=str(flexsn.cache_dir()),
    )
    return summarize(c, args.out, extra, args.allow_skip)


if __name__ == "__main__":
    sys.exit(main())
