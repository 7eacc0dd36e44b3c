"""The GPU kernel checks' own logic, without a GPU.

kernel_checks.py --quick and train_kernel_checks.py --quick run as they do
on a GPU machine (the package's compiles, manifests and CPU kernels), but
with the CUDA driver replaced by a fake one (device memory = NumPy byte
arrays at made-up addresses) and every GPU launch replaced by an emulation:
the runtime's argument validation (lib/Runtime/flexsn_runtime.c: statuses
and blamed buffers, T = 0 and N = 0, buffer extents and contexts, the
workspace parts at their manifest offsets), then the kernel's effect in
NumPy (kernel_checks.simulate for the forward step; for the training pair,
train_kernel_checks.reference on the inputs the forward call saw, found
again through its workspace address). Both must pass; then the emulated
kernels are broken one way at a time (a gradient off by 1%, a write into a
guard, an element left unwritten, the T = 0 copy missing, a forward value
1 ulp off the inference kernel's, a too-small workspace accepted, parameter
gradients whose last bit changes from call to call, an error naming the
wrong buffer, ...) and each run must fail.

This checks the checks, not the kernels. FLEXSN_SELFTEST_FULL=lif,plif
also runs train_kernel_checks' full-mode groups on NumPy for those neurons
(minutes).
"""

import argparse
import contextlib
import io
import os
import time

import numpy as np
import pytest

import kernel_checks as kc
import train_kernel_checks as tkc
from flexsn._manifest import evaluate_size

# Neurons (with their copies) of the runs: few, as each costs compiles.
NEURONS = "lif,plif,lif_soft,lif_detach,plif_soft_detach"
INT64_MAX = (1 << 63) - 1
INT32_MAX = (1 << 31) - 1
REQUIRED = (
    "input_sequence",
    "saved_output",
    "saved_input",
    "param_gradient",
    "reduction_scratch",
)
SEQUENCES = (
    "input_sequence",
    "output_sequence",
    "state_sequence",
    "optional_input_sequence",
    "saved_output",
    "saved_input",
)
NP = {"f32": np.float32, "f16": np.float16, "bf16": np.uint16}

FAULTS = set()
REGISTRY = {}  # workspace address -> what the forward call saw
CALLS = [0]  # backward calls (the nondeterministic fault)
DRV = None


class FakeDriver(object):
    """Device memory as NumPy byte arrays at made-up, 512-byte aligned
    addresses with gaps between allocations."""

    name = "fake GPU"

    def __init__(self):
        self.mem = {}
        self.next = 0x7F0000000000

    def alloc(self, nbytes):
        nbytes = max(int(nbytes), 1)
        p = self.next
        self.next += (nbytes + 4096 + 511) // 512 * 512
        self.mem[p] = np.zeros(nbytes, np.uint8)
        return p

    def free(self, p):
        self.mem.pop(p, None)

    def find(self, p):
        """(base, array) of the allocation holding address p, or None."""
        for base, arr in self.mem.items():
            if base <= p < base + arr.size:
                return base, arr
        return None

    def bytes_at(self, p, n):
        base, arr = self.find(p)
        return arr[p - base : p - base + n]

    def htod(self, dst, host):
        host = np.ascontiguousarray(host)
        self.bytes_at(dst, host.nbytes)[:] = host.view(np.uint8).reshape(-1)

    def dtoh(self, host, src):
        host.view(np.uint8).reshape(-1)[:] = self.bytes_at(src, host.nbytes)

    def memset8(self, p, value, nbytes):
        self.bytes_at(p, nbytes)[:] = value

    def sync(self):
        pass

    def create_stream(self):
        return 1


def read_seq(p, T, N, ld, dtype):
    es = kc.ELEM[dtype]
    out = np.zeros((T, N), np.float32)
    for t in range(T):
        raw = np.frombuffer(
            DRV.bytes_at(p + t * ld * es, N * es).tobytes(), NP[dtype]
        )
        out[t] = kc.np_to_f32(raw, dtype)
    return out


def read_vec(p, N, dtype):
    es = kc.ELEM[dtype]
    raw = np.frombuffer(DRV.bytes_at(p, N * es).tobytes(), NP[dtype])
    return kc.np_to_f32(raw, dtype)


def encode(a, dtype):
    return np.ascontiguousarray(
        kc.np_storage(np.asarray(a, np.float32), dtype)
    ).view(np.uint8)


def write_seq(p, a, ld, dtype, skip_last=False):
    es = kc.ELEM[dtype]
    T, N = a.shape
    for t in range(T):
        row = encode(a[t], dtype)
        if skip_last and t == T - 1:
            row = row[:-es]
        DRV.bytes_at(p + t * ld * es, row.size)[:] = row


def write_vec(p, a, dtype):
    b = encode(a, dtype)
    DRV.bytes_at(p, b.size)[:] = b


def bump_ulp(v, d):
    """The value one storage ulp above v (float32 result)."""
    st = kc.np_storage(np.array([v], np.float32), d)
    bits = st.view(np.uint32 if d == "f32" else np.uint16) + 1
    return kc.np_to_f32(bits.view(NP[d]), d)[0]


def fake_call(kern, stream, T, N, ld, pointers, params, workspace=0):
    """kernel_checks.Kernel.__call__ on the fake GPU: flexsn_launch's
    validation, then the kernel's effect."""
    codes = kc.statuses()
    specs = kern.spec.buffers
    kern.blamed = None

    def fail(name, i=None):
        if i is not None and "blame" not in FAULTS:
            kern.blamed = specs[i].name
        return codes["FLEXSN_ERROR_" + name]

    if T < 0 or N < 0:
        return fail("NEGATIVE_SIZE")
    if ld < 0 or (ld != 0 and ld < N):
        return fail("BAD_STRIDE")
    ld = ld or N
    # The addresses as GpuKernel.launch passes them: workspace parts at
    # their offsets.
    args, ptrs = iter(pointers), []
    for b in specs:
        if b.in_workspace:
            ptrs.append(
                workspace + evaluate_size(b.workspace_offset, T=T, N=N, ld=ld)
                if workspace
                else 0
            )
        else:
            ptrs.append(int(next(args) or 0))
    for i, (b, p) in enumerate(zip(specs, ptrs)):
        if b.role in REQUIRED and not p:
            return fail("NULL_POINTER", i)
    seq = 0
    if T > 0 and N > 0:
        if T - 1 > (INT64_MAX - N) // ld:
            return fail("SIZE_OVERFLOW")
        seq = (T - 1) * ld + N
    if N > 0 and (N - 1) // 256 + 1 > INT32_MAX:
        return fail("SIZE_OVERFLOW")
    slots = len([b for b in specs if b.role == "param_gradient"])
    extents = []
    for b in specs:
        count = seq if b.role in SEQUENCES else N
        if count > INT64_MAX // b.element_bytes:
            return fail("SIZE_OVERFLOW")
        extents.append(
            4
            if b.role == "param_gradient"
            else 4 + 4 * slots * ((N + 255) // 256)
            if b.role == "reduction_scratch"
            else count * b.element_bytes
        )
    for i, (b, p) in enumerate(zip(specs, ptrs)):
        if p % b.element_bytes:
            return fail("INVALID_ARGUMENT", i)

    def check(p, nbytes, i=None):
        hit = DRV.find(p)
        if hit is None:
            return fail("CONTEXT_MISMATCH", i)
        base, arr = hit
        if p - base + nbytes > arr.size:
            if "ws-small-ok" in FAULTS:
                return "accept"  # a runtime that checks nothing
            return fail("BUFFER_TOO_SMALL", i)
        return 0

    roles = [b.role for b in specs]
    if T == 0 or N == 0:
        for r, p in zip(roles, ptrs):
            if r == "param_gradient":
                write_vec(p, np.zeros(1, np.float32), "f32")
        if N == 0:
            return 0
        inits = [p for r, p in zip(roles, ptrs) if r == "initial_state"]
        finals = [p for r, p in zip(roles, ptrs) if r == "final_state"]
        nb = N * kc.ELEM[kern.dtype]
        for k, p in enumerate(finals):
            if p:
                s = check(p, nb) or (check(inits[k], nb) if inits[k] else 0)
                if s:
                    return s
        for k, p in enumerate(finals):
            if not p:
                continue
            if inits[k] and "t0" not in FAULTS:
                DRV.bytes_at(p, nb)[:] = DRV.bytes_at(inits[k], nb)
            else:
                DRV.bytes_at(p, nb)[:] = 0
        return 0
    for i, (p, nbytes) in enumerate(zip(ptrs, extents)):
        if p:
            s = check(p, nbytes, i)
            if s == "accept":
                return 0  # (and the kernel would overrun)
            if s:
                return s
    by = {}
    for r, p in zip(roles, ptrs):
        by.setdefault(r, []).append(p)
    P = dict(zip([q.name for q in kern.params], params))
    if kern.variant in ("inference", "final_state", "forward"):
        return emulate_forward(kern, T, N, ld, by, P, workspace)
    return emulate_backward(kern, T, N, ld, pointers, P, workspace)


def emulate_forward(kern, T, N, ld, by, P, workspace):
    d = kern.dtype
    x = read_seq(by["input_sequence"][0], T, N, ld, d)
    inits = [read_vec(p, N, d) if p else None for p in by["initial_state"]]
    ref = kc.simulate(kc.NumpyOps(), kern.neuron, P, x, inits)
    spikes = ref["spikes"]
    if "inference" in FAULTS and kern.variant == "inference":
        ref["state_seq"][0][T - 1, N - 1] += 1e-3
    for p in by.get("output_sequence", []):
        if p:
            write_seq(p, spikes, ld, d)
    for i, p in enumerate(by.get("state_sequence", [])):
        if p:
            s = ref["state_seq"][i].copy()
            if "fwd-bits" in FAULTS and kern.variant == "forward":
                s[T - 1, N - 1] = bump_ulp(s[T - 1, N - 1], d)
            write_seq(p, s, ld, d)
    for i, p in enumerate(by.get("final_state", [])):
        if p:
            write_vec(p, ref["final"][i], d)
    saved = [b.dtype for b in kern.spec.buffers if b.role == "saved_output"]
    for p, dtype in zip(by.get("saved_output", []), saved):
        write_seq(p, spikes + 0.5, ld, dtype)
    if kern.variant == "forward":
        REGISTRY[workspace] = dict(x=x, inits=inits, T=T, N=N)
    return 0


def emulate_backward(kern, T, N, ld, pointers, P, workspace):
    d = kern.dtype
    nd = kern.info
    roles = tkc.bwd_roles(kern, nd)
    saw = REGISTRY.get(workspace)
    if saw is None or saw["T"] != T or saw["N"] != N:
        return kc.statuses()["FLEXSN_ERROR_INVALID_ARGUMENT"]
    gin = dict(
        out=None, seq=[None] * len(nd.states), final=[None] * len(nd.states)
    )
    ptrs = [int(p or 0) for p in pointers]
    for (w, i), p in zip(roles, ptrs):
        if not p:
            continue
        if w == "gout":
            gin["out"] = read_seq(p, T, N, ld, d)
        elif w == "gseq":
            gin["seq"][i] = read_seq(p, T, N, ld, d)
        elif w == "gfin":
            gin["final"][i] = read_vec(p, N, d)
    trainable = [p.name for p in nd.params if p.kind == "trainable"]
    ref = tkc.reference(
        tkc.NumpyAD(), kern.neuron, P, trainable, saw["x"], saw["inits"], gin
    )
    for (w, i), p in zip(roles, ptrs):
        if not p:
            continue
        if w == "xgrad":
            g = ref["x_grad"].copy()
            if "xgrad" in FAULTS:
                g[T - 1, N - 1] = g[T - 1, N - 1] * 1.01 + 1e-3
            write_seq(p, g, ld, d, skip_last="unwritten" in FAULTS)
            if "guard" in FAULTS:
                es = kc.ELEM[d]
                write_vec(p + ((T - 1) * ld + N) * es, np.zeros(1), d)
        elif w == "igrad":
            write_vec(p, ref["init_grads"][i], d)
        elif w == "pgrad":
            v = np.float32(ref["params"][i].sum())
            if "pgrad" in FAULTS:
                v = v * np.float32(1.01) + np.float32(1e-3)
            if "nondeterministic" in FAULTS:  # a different last bit per call
                CALLS[0] += 1
                v = np.nextafter(v, np.float32(np.inf)) if CALLS[0] % 2 else v
            write_vec(p, np.array([v], np.float32), "f32")
    return 0


@pytest.fixture
def fake_gpu(monkeypatch):
    """The checks' CUDA driver, GPU launches and image unloading faked."""
    global DRV
    DRV = FakeDriver()
    monkeypatch.setattr(kc, "CudaDriver", lambda: DRV)
    monkeypatch.setattr(kc.Kernel, "__call__", fake_call)
    monkeypatch.setattr(kc.KernelSet, "unload_all", lambda self: 0)
    FAULTS.clear()
    REGISTRY.clear()
    yield DRV
    FAULTS.clear()
    REGISTRY.clear()


def run(main, argv):
    """(exit status, the failing groups' lines, all output) of a check."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        rc = main(argv)
    text = out.getvalue()
    failing = "\n".join(
        line
        for line in text.splitlines()
        if line.startswith(("FAIL", "     "))
    )
    return rc, failing, text


@pytest.mark.parametrize(
    "main", [kc.main, tkc.main], ids=["kernel_checks", "train_kernel_checks"]
)
def test_quick_checks_pass_on_correct_kernels(fake_gpu, main):
    rc, failing, text = run(main, ["--quick", "--neurons", NEURONS])
    assert rc == 0, "the checks fail on correct (emulated) kernels:\n" + (
        failing or text
    )
    assert " 0 failed" in text.splitlines()[-1]


@pytest.mark.parametrize(
    "fault, main, neurons",
    [
        ("xgrad", tkc.main, "lif"),
        ("pgrad", tkc.main, "plif"),
        ("guard", tkc.main, "lif"),
        ("unwritten", tkc.main, "lif"),
        ("t0", tkc.main, "lif"),
        ("fwd-bits", tkc.main, "lif"),
        ("ws-small-ok", tkc.main, "lif"),
        ("nondeterministic", tkc.main, "plif"),
        ("blame", tkc.main, "lif"),
        ("inference", kc.main, "lif"),
        ("t0", kc.main, "lif"),
        ("blame", kc.main, "lif,plif"),
    ],
    ids=lambda v: v.__module__ if callable(v) else None,
)
def test_quick_checks_catch_a_broken_kernel(fake_gpu, fault, main, neurons):
    FAULTS.add(fault)
    rc, _, text = run(main, ["--quick", "--neurons", neurons])
    assert rc != 0, "the checks missed the fault %r:\n%s" % (fault, text)


@pytest.mark.skipif(
    not os.environ.get("FLEXSN_SELFTEST_FULL"),
    reason="set FLEXSN_SELFTEST_FULL=lif,plif,... (minutes)",
)
def test_train_full_mode_on_numpy(fake_gpu, monkeypatch):
    """train_kernel_checks' full-mode groups on NumPy (PyTorch is the GPU
    machine's), with N = 2^20 + 3 replaced by a smaller odd N."""
    monkeypatch.setattr(tkc, "BIG_N", 2053)
    bases, labels = kc.requested(os.environ["FLEXSN_SELFTEST_FULL"])
    kernels = kc.KernelSet(bases, tuple(kc.COPIES))
    neurons = kc.select(kernels, labels, ("forward", "backward"))
    c = tkc.TrainChecker(
        kc.NumpyEnv(DRV),
        kernels,
        argparse.Namespace(deadline=None, seed=0),
        tkc.NumpyAD(),
    )
    t0 = time.time()
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        tkc.run_groups(c, neurons, "full")
        rc = kc.summarize(c, None, {}, prog="train_kernel_checks")
    assert rc == 0, out.getvalue()
    print("%.0f s: %s" % (time.time() - t0, out.getvalue().splitlines()[-1]))
