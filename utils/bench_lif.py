#!/usr/bin/env python3
"""Benchmarks FlexSN's LIF kernels and PyTorch modules on a GPU machine
(targets: docs/Reference.md).

    python3 utils/bench_lif.py [--out DIR] [--reps 20] [--budget SECONDS]
                               [--workers K] [--ns 24,20] [--quick]
                               [--no-compile] [--no-modules]
    python3 utils/bench_lif.py --compile-only      # fill the kernel cache

Kernels come from the package, as users get them: flexsn.compile("lif",
all four variants, f32/f16/bf16, targets cpu and cuda, sm_90) and
CompiledNeuron.kernel("cuda", variant, dtype) -> flexsn._runtime.GpuKernel,
launched with GpuKernel.launch. The GPU machine has no FlexSN tools: run
--compile-only where they are with FLEXSN_CACHE_DIR set, carry that cache,
and set FLEXSN_CACHE_DIR (and FLEXSN_RUNTIME_LIB, libflexsn_runtime.so) on
the GPU machine; every compile here has fixed arguments, so both runs use
the same cache keys.

For N in {2^24, 2^20} (--ns) x T in {4, 16, 64} x {f32, f16, bf16} x
{inference, final_state, train} it times, with CUDA events (warm-up, then the
median of --reps runs, each queued behind a short GPU sleep so that launch
latency is not counted), on fresh random inputs (never zeros):

  FlexSN   the <variant> kernel of the compiled LIF, v_init given;
           train = the forward kernel (x -> spike, v_seq NULL, the f32
           workspace) then the backward (spike_grad given, v_seq_grad and
           v_final_grad NULL -> x_grad, v_init_grad), timed as one pair;
  stream   a same-mix stream (CuPy RawKernels, 16-byte accesses) moving the
           same arrays: inference reads one [T, N] array and writes two,
           final-state reads one and writes one, train reads one and writes
           one plus an f32 one (the forward), then reads one and the f32 one
           and writes one (the backward);
  eager    the plain PyTorch LIF loop in the storage dtype, torch.stack'ed;
           for train with the spike as a torch.autograd.Function (Heaviside
           forward, sigmoid(4) surrogate backward), forward + autograd.grad
           of the spikes w.r.t. x and v_init;
  compile  torch.compile (mode default, static shapes) of the same loop
           (train: forward + backward through AOTAutograd). Compiling is the
           slow part, so --workers processes compile AND time it, in
           parallel with this process's measurements: every timed
           measurement of every process holds one GPU lock (flock), so none
           overlaps another (a worker's untimed first call may); a memory
           ledger keeps the workers' big allocations within --worker-gib.
           Its compile time (the first call) is reported, not counted;

plus the device-to-device copy bandwidth (a torch copy of 1 GiB; bytes =
read + write), at the start and the end. For every row: the time, the bytes
that must move, the achieved bandwidth, the fraction of the copy bandwidth
and of the same-mix stream, the speedups over eager and torch.compile, and
(N <= 2^20) the host wall time per call of back-to-back calls. Bytes that
must move (es = element size): inference (3T+1)N es (x, spike, v_seq,
v_init); final-state (2T+2)N es; train T N (4 es + 8) + 2N es (forward: x,
spike, workspace (f32); backward: spike_grad, workspace, x_grad; v_init and
v_init_grad). FlexSN's spikes (f32: and state, x_grad) are compared with
eager's.

The PyTorch modules (flexsn.torch.LIFNode and FlexSN("lif"), f32, after the
compile workers are done so that the host is quiet) against direct
GpuKernel.launch calls of the same kernels on preallocated buffers, each
module call from a reset state (inference under torch.no_grad: the
final-state kernel; train: forward + torch.autograd.grad of the spikes;
the direct train launches pass the buffers the module passes):

  host     T = 4, N = 1024 (the kernel is negligible): host time per call
           of back-to-back calls; target: module - direct < 20 us (train:
           module - autograd floor, a bare autograd.Function over the same
           two launches);
  wall     T = 16, N = 2^24: CUDA-event time of one call (GPU idle before
           it, so the call's host work counts) and of back-to-back calls;
           target: module <= 1.03 x direct back to back (a single call
           also counts the host time, reported).

Writes results.json, results.md, bench.png (inference and final-state) and
bench_train.png (train) to --out. Stops adding rows when --budget seconds
have passed (the rows done are still written).
"""

import argparse
import contextlib
import fcntl
import json
import math
import os
import statistics
import subprocess
import sys
import time
import zlib

# The Inductor and Triton caches of the compile workers; set before torch is
# imported.
_CACHE = os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR",
                               "/tmp/flexsn_bench_inductor_%d" % os.getuid())
os.environ.setdefault("TRITON_CACHE_DIR", os.path.join(_CACHE, "triton"))
os.environ.setdefault("TORCHINDUCTOR_FX_GRAPH_CACHE", "1")
os.environ.setdefault("TORCHINDUCTOR_AUTOGRAD_CACHE", "1")
os.environ.setdefault("TORCHINDUCTOR_COMPILE_THREADS", "1")

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "python"))

NS = (1 << 24, 1 << 20)
TS = (4, 16, 64)
DTYPES = ("f32", "f16", "bf16")
VARIANTS = ("inference", "final_state", "train")
ELEM = {"f32": 4, "f16": 2, "bf16": 2}
TAU, V_TH = 2.0, 1.0            # lib/Neurons/lif.mlir defaults (hard reset to 0)
COPY_BYTES = 1 << 30
SLEEP_CYCLES = 200000           # ~0.1 ms of GPU sleep ahead of each timed run
TARGETS = {"inference": (0.93, 0.97), "final_state": (0.95, None),
           "train": (0.95, None)}
# Rough compile cost of a task (seconds, for sharing them among workers) and
# memory (bytes per element of [T, N]).
COST = {"inference": {4: 2.0, 16: 4.0, 64: 18.0},
        "final_state": {4: 1.5, 16: 3.0, 64: 14.0},
        "train": {4: 6.0, 16: 18.0, 64: 70.0}}
MEM_PER_ELEM = {"inference": 3, "final_state": 2, "train": 7}

# Every flexsn.compile of the run, with fixed arguments whatever the flags:
# the GPU machine has no tools and finds the entries by a key of them. The
# targets are explicit because their default depends on the machine (a CUDA
# toolkit or not).
COMPILE_OPTIONS = dict(targets=("cpu", "cuda"), chip="sm_90")
LIF_COMPILE = dict(variants=("inference", "final-state", "forward",
                             "backward"),
                   storage_types=DTYPES, **COMPILE_OPTIONS)
PLIF_COMPILE = dict(variants=("forward", "backward"), storage_types=("f32",),
                    **COMPILE_OPTIONS)
# LIF's inference kernels with spikes stored as bytes, and the dense ones
# they are compared with.
LIF_U8_COMPILE = dict(variants=("inference", "final-state"),
                      storage_types=("f32", "f16"),
                      spike_storage=("dense", "u8", "bits"),
                      **COMPILE_OPTIONS)
# SpikingJelly's fastest kernel for an inference call of its multi-step LIF
# (its FlexSN kernel: 0.870 ms), measured side by side with FlexSN's
# inference kernel (0.822 ms) on an H200 (LIF, f32, T = 16, N = 2^24;
# docs/Reference.md). The user gets the spikes and the final v, what
# FlexSN's final-state call returns; its kernel writes the v sequence too,
# as FlexSN's inference call does: both are compared.
SJ_BEST_MS = {("inference", "f32", 16): 0.870,
              ("final_state", "f32", 16): 0.870}
KERNEL_VARIANT = {"inference": "inference", "final_state": "final-state"}
# The module measurements: host overhead at a negligible kernel, wall time at
# a large one.
HOST_T, HOST_N, HOST_TARGET_US = 4, 1024, 20.0
WALL_T, WALL_N, WALL_TARGET = 16, 1 << 24, 0.03

# The loop every peer runs: LIF (docs/Semantics.md; decay_input, v_reset =
# 0, hard reset not detached) written the way a PyTorch user would, in the
# storage dtype.
# One copy of the source per (variant, dtype, T, N), so that each has its own
# code object (its own Dynamo cache).
LOOP_SRC = {
    "inference": '''
def lif_loop(x, v):
    spikes = []
    vs = []
    for t in range({T}):
        h = v + (x[t] - v) / {tau}
        s = (h >= {v_th}).to(x.dtype)
        v = h * (1.0 - s)
        spikes.append(s)
        vs.append(v)
    return torch.stack(spikes), torch.stack(vs)
''',
    "final_state": '''
def lif_loop(x, v):
    spikes = []
    for t in range({T}):
        h = v + (x[t] - v) / {tau}
        s = (h >= {v_th}).to(x.dtype)
        v = h * (1.0 - s)
        spikes.append(s)
    return torch.stack(spikes), v
''',
    "train": '''
class SpikeFn(torch.autograd.Function):
    """Heaviside forward; sigmoid(alpha = 4) surrogate gradient."""
    @staticmethod
    def forward(ctx, over):
        ctx.save_for_backward(over)
        return (over >= 0).to(over.dtype)

    @staticmethod
    def backward(ctx, grad):
        over, = ctx.saved_tensors
        sg = torch.sigmoid(4.0 * over)
        return grad * (4.0 * sg * (1.0 - sg))


def lif_loop(x, v):
    spikes = []
    for t in range({T}):
        h = v + (x[t] - v) / {tau}
        s = SpikeFn.apply(h - {v_th})
        v = h * (1.0 - s)
        spikes.append(s)
    return torch.stack(spikes)
''',
}


def make_loop(torch, variant, dtype, T, N=None):
    src = LOOP_SRC[variant].format(T=T, tau=TAU, v_th=V_TH)
    name = "<flexsn-bench lif_loop %s %s T=%d N=%s>" % (variant, dtype, T, N)
    ns = {"torch": torch}
    exec(compile(src, name, "exec"), ns)
    return ns["lif_loop"]


def key_str(variant, dtype, T):
    return "%s/%s/T%d" % (variant, dtype, T)


def configure_dynamo(torch):
    import torch._dynamo
    cfg = torch._dynamo.config
    for name in ("cache_size_limit", "recompile_limit"):
        if hasattr(cfg, name):
            setattr(cfg, name, 64)


def tdtypes(torch):
    return {"f32": torch.float32, "f16": torch.float16,
            "bf16": torch.bfloat16}


def make_inputs(torch, variant, dtype, T, N):
    """Seeded random inputs: x ~ 0.9 normal + 0.8, v0 ~ U(-0.2, 0.9) (many
    neurons spike, never all zeros); train also a spike gradient."""
    g = torch.Generator(device="cuda")
    g.manual_seed(zlib.crc32(("%d/%d/%s/%s" % (N, T, dtype, variant))
                             .encode()))
    tdt = tdtypes(torch)[dtype]
    x = (torch.randn((T, N), generator=g, device="cuda") * 0.9 + 0.8).to(tdt)
    v0 = (torch.rand((N,), generator=g, device="cuda") * 1.1 - 0.2).to(tdt)
    gs = None
    if variant == "train":
        gs = torch.randn((T, N), generator=g, device="cuda").to(tdt)
    return x, v0, gs


def peer_call(torch, fn, variant, x, v0, gs):
    """The peer's unit of work: inference / final-state without autograd;
    train forward + autograd.grad (x and v0 require grad)."""
    if variant != "train":
        def run():
            with torch.no_grad():
                return fn(x, v0)
        return run
    xr = x.detach().requires_grad_(True)
    vr = v0.detach().requires_grad_(True)

    def run():
        s = fn(xr, vr)
        return torch.autograd.grad(s, (xr, vr), gs)
    return run

# ---------------------------------------------------------------------------
# Sharing the GPU between processes


class GpuLock(object):
    """An exclusive flock held around every timed measurement."""

    def __init__(self, path):
        self.path = path
        self.f = open(path, "a+")

    @contextlib.contextmanager
    def held(self):
        fcntl.flock(self.f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(self.f, fcntl.LOCK_UN)


class MemLedger(object):
    """GiB reserved by the compile workers, in a JSON file under a flock;
    entries of dead processes are dropped. A task larger than the budget
    runs alone."""

    def __init__(self, path, budget_gib):
        self.path, self.budget = path, budget_gib

    def _edit(self, fn):
        with open(self.path, "a+") as f:
            fcntl.flock(f, fcntl.LOCK_EX)
            try:
                f.seek(0)
                text = f.read()
                try:
                    led = json.loads(text) if text.strip() else {}
                except ValueError:
                    led = {}
                for pid in list(led):
                    try:
                        os.kill(int(pid), 0)
                    except OSError:
                        del led[pid]
                ok = fn(led)
                f.seek(0)
                f.truncate()
                f.write(json.dumps(led))
                return ok
            finally:
                fcntl.flock(f, fcntl.LOCK_UN)

    def acquire(self, gib):
        me = str(os.getpid())

        def take(led):
            used = sum(v for k, v in led.items() if k != me)
            if used + gib <= self.budget or not [k for k in led if k != me]:
                led[me] = gib
                return True
            return False
        while not self._edit(take):
            time.sleep(0.5)

    def release(self):
        me = str(os.getpid())
        self._edit(lambda led: led.pop(me, None) or True)

# ---------------------------------------------------------------------------
# Timing


class Timer(object):
    def __init__(self, torch, reps, warmup, lock=None):
        self.torch, self.reps, self.warmup = torch, reps, warmup
        self.sleep = getattr(torch.cuda, "_sleep", None)
        self.lock = lock

    def _held(self):
        return self.lock.held() if self.lock else contextlib.nullcontext()

    def gpu_ms(self, fn, reps=None, warmup=None):
        """Median and minimum GPU time of fn() in ms, CUDA events."""
        torch = self.torch
        reps = reps or self.reps
        with self._held():
            for _ in range(self.warmup if warmup is None else warmup):
                fn()
            torch.cuda.synchronize()
            evs = [(torch.cuda.Event(enable_timing=True),
                    torch.cuda.Event(enable_timing=True))
                   for _ in range(reps)]
            for s, e in evs:
                if self.sleep is not None:
                    self.sleep(SLEEP_CYCLES)
                s.record()
                fn()
                e.record()
            torch.cuda.synchronize()
        ts = [s.elapsed_time(e) for s, e in evs]
        return statistics.median(ts), min(ts)

    def wall_us(self, fn, calls=20):
        """Host wall time per call of back-to-back calls (CPU overhead
        included), in microseconds."""
        torch = self.torch
        with self._held():
            fn()
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            for _ in range(calls):
                fn()
            torch.cuda.synchronize()
            return (time.perf_counter() - t0) / calls * 1e6

# ---------------------------------------------------------------------------
# Compile workers: each compiles its (variant, dtype, T, N) tasks (static
# shapes) and times them.


def worker_main(tasks, args):
    import torch
    configure_dynamo(torch)
    torch.zeros(1, device="cuda")
    lock = GpuLock(args.lock)
    ledger = MemLedger(args.ledger, args.worker_gib)
    timer = Timer(torch, args.reps, 3, lock)
    for variant, dtype, T, N in tasks:
        rec = dict(key=key_str(variant, dtype, T), N=N, ok=False)
        gib = MEM_PER_ELEM[variant] * T * N * ELEM[dtype] / 2.0 ** 30 + 0.5
        ledger.acquire(gib)
        x = v0 = gs = run = fn = out = None
        try:
            x, v0, gs = make_inputs(torch, variant, dtype, T, N)
            fn = torch.compile(make_loop(torch, variant, dtype, T, N),
                               dynamic=False)
            run = peer_call(torch, fn, variant, x, v0, gs)
            t0 = time.time()
            out = run()
            torch.cuda.synchronize()
            rec["cold_s"] = time.time() - t0
            del out
            ms, mn = timer.gpu_ms(run)
            rec.update(ms=ms, min_ms=mn, ok=True)
            if N <= (1 << 20):
                rec["wall_us"] = timer.wall_us(run)
        except Exception as e:  # reported in the row
            rec["error"] = "%s: %s" % (type(e).__name__, str(e)[:300])
        finally:
            x = v0 = gs = run = fn = out = None  # noqa: F841
            torch.cuda.empty_cache()
            ledger.release()
        print("WORKER " + json.dumps(rec))
        sys.stdout.flush()
    return 0


class Workers(object):
    """The compile workers, started at once, collected at the end."""

    def __init__(self, count, tasks, args):
        self.procs, self.t0 = [], time.time()
        self.results = {}
        if count <= 0 or not tasks:
            return
        order = sorted(tasks, key=lambda k: -COST[k[0]].get(k[2], 10.0))
        bins = [[] for _ in range(count)]
        load = [0.0] * count
        for k in order:
            i = load.index(min(load))
            bins[i].append(k)
            load[i] += COST[k[0]].get(k[2], 10.0)
        env = dict(os.environ)
        env["TORCHINDUCTOR_COMPILE_THREADS"] = "1"
        self.logs = []
        for i, b in enumerate(bins):
            if not b:
                continue
            cmd = [sys.executable, os.path.abspath(__file__), "--worker",
                   json.dumps([list(k) for k in b]), "--lock", args.lock,
                   "--ledger", args.ledger, "--worker-gib",
                   str(args.worker_gib), "--reps", str(args.reps)]
            # Output to a file: a full pipe nobody reads would stall it.
            log = open(os.path.join(_CACHE, "worker%d.log" % i), "w+")
            self.logs.append(log)
            self.procs.append(subprocess.Popen(
                cmd, stdout=log, stderr=subprocess.STDOUT, text=True,
                env=env))

    def collect(self, deadline):
        """Waits for the workers until `deadline` (time.time()), kills the
        rest; returns {(key, N): record}."""
        for p, log in zip(self.procs, self.logs):
            left = max(1.0, deadline - time.time())
            try:
                p.wait(timeout=left)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
            log.seek(0)
            out = log.read()
            log.close()
            got = False
            for line in out.splitlines():
                if line.startswith("WORKER "):
                    rec = json.loads(line[len("WORKER "):])
                    self.results[(rec["key"], rec["N"])] = rec
                    got = True
            if p.returncode not in (0, None) and not got:
                print("bench_lif: a compile worker failed:\n" + out[-2000:])
        return self.results, time.time() - self.t0

# ---------------------------------------------------------------------------
# Same-mix streams


STREAM_SRC = r'''
extern "C" __global__ void stream_1r2w(const float4 *__restrict__ a,
                                       float4 *__restrict__ b,
                                       float4 *__restrict__ c, long long n) {
  long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    float4 v = a[i];
    b[i] = v;
    c[i] = v;
  }
}
extern "C" __global__ void stream_1r1w(const float4 *__restrict__ a,
                                       float4 *__restrict__ b, long long n) {
  long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) b[i] = a[i];
}
// The training forward's mix: read a, write b (same size) and k planes of
// the f32 workspace (k = 4 / element size: as many bytes as a, times k).
extern "C" __global__ void mix_fwd(const uint4 *__restrict__ a,
                                   uint4 *__restrict__ b,
                                   uint4 *__restrict__ c, long long n, int k) {
  long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    uint4 v = a[i];
    b[i] = v;
    for (int j = 0; j < k; ++j) c[j * n + i] = v;
  }
}
// The backward's: read g and the k workspace planes, write d.
extern "C" __global__ void mix_bwd(const uint4 *__restrict__ g,
                                   const uint4 *__restrict__ c,
                                   uint4 *__restrict__ d, long long n, int k) {
  long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    uint4 v = g[i];
    for (int j = 0; j < k; ++j) {
      uint4 w = c[j * n + i];
      v.x ^= w.x; v.y ^= w.y; v.z ^= w.z; v.w ^= w.w;
    }
    d[i] = v;
  }
}
'''


class Stream(object):
    """The same-mix stream kernels (CuPy RawKernel), on torch's stream."""

    def __init__(self, torch):
        import cupy as cp
        self.cp, self.torch = cp, torch
        mod = cp.RawModule(code=STREAM_SRC)
        self.k12 = mod.get_function("stream_1r2w")
        self.k11 = mod.get_function("stream_1r1w")
        self.fwd = mod.get_function("mix_fwd")
        self.bwd = mod.get_function("mix_bwd")
        self.version = cp.__version__

    def _ext(self):
        handle = self.torch.cuda.current_stream().cuda_stream
        return self.cp.cuda.ExternalStream(handle) if handle else None

    def make(self, variant, T, N, es):
        """A callable running the variant's mix on [T, N] arrays of element
        size es; returns (run, bytes it moves)."""
        torch, cp = self.torch, self.cp
        nbytes = T * N * es
        n = nbytes // 16
        grid = ((n + 255) // 256,)
        new = lambda b: torch.empty(b // 4, device="cuda")  # noqa: E731
        ext = self._ext()
        if variant == "train":
            k = 4 // es
            a = torch.rand(nbytes // 4, device="cuda")
            b, c, d = new(nbytes), new(k * nbytes), new(nbytes)
            ca, cb, cc, cd = (cp.from_dlpack(t) for t in (a, b, c, d))
            calls = [(self.fwd, (ca, cb, cc, cp.int64(n), cp.int32(k))),
                     (self.bwd, (ca, cc, cd, cp.int64(n), cp.int32(k)))]
            moved = nbytes * (2 + k) + nbytes * (2 + k)
            keep = (a, b, c, d, ca, cb, cc, cd)
        else:
            writes = 2 if variant == "inference" else 1
            a = torch.rand(nbytes // 4, device="cuda")
            outs = [new(nbytes) for _ in range(writes)]
            co = [cp.from_dlpack(o) for o in outs]
            ca = cp.from_dlpack(a)
            kern = self.k12 if writes == 2 else self.k11
            calls = [(kern, tuple([ca] + co + [cp.int64(n)]))]
            moved = nbytes * (1 + writes)
            keep = (a, outs, ca, co)

        def run():
            if ext is not None:
                with ext:
                    for kern, args in calls:
                        kern(grid, (256,), args)
            else:
                for kern, args in calls:
                    kern(grid, (256,), args)
        run.keep = keep
        return run, moved

# ---------------------------------------------------------------------------
# The package: compiling and launching


def compile_all():
    """Every flexsn.compile the benchmark makes: the LIF kernels, PLIF's
    with a scalar and with a per-channel w (the parameter-gradient rows)
    and the modules' (their constructors compile). Returns (lif,
    {"scalar": plif, "per_channel": plif}, {name: module}, lif with u8
    spike kernels)."""
    import flexsn
    from flexsn.torch import FlexSN, LIFNode
    lif = flexsn.compile("lif", **LIF_COMPILE)
    plif = {"scalar": flexsn.compile("plif", **PLIF_COMPILE),
            "per_channel": flexsn.compile("plif", shapes={"w": "per_channel"},
                                          **PLIF_COMPILE)}
    modules = {"LIFNode": LIFNode(step_mode="m", tau=TAU, v_threshold=V_TH,
                                  **COMPILE_OPTIONS),
               "FlexSN(lif)": FlexSN("lif", **COMPILE_OPTIONS)}
    lif_u8 = flexsn.compile("lif", **LIF_U8_COMPILE)
    return lif, plif, modules, lif_u8


def entry_name(compiled):
    """A cache entry as <key>/<toolchain>: no machine path in the results."""
    d = compiled.directory
    return "%s/%s" % (d.parent.name, d.name)


def addresses(kernel, tensors):
    """GpuKernel.launch's buffer list: the addresses of the kernel's buffers
    (workspace parts left out) in manifest order, from a buffer name ->
    tensor map; names not given are NULL."""
    names = [b.name for b in kernel.spec.buffers if not b.in_workspace]
    unknown = set(tensors) - set(names)
    if unknown:
        raise KeyError("%s has no buffer %s (it has %s)"
                       % (kernel.spec.name, ", ".join(sorted(unknown)),
                          ", ".join(names)))
    return [0 if tensors.get(n) is None else tensors[n].data_ptr()
            for n in names]


def new_workspace(torch, kernels, T, N):
    """An f32 workspace for all of `kernels`; NaN, so unwritten parts show."""
    nbytes = max(k.spec.workspace_size(T, N, 0) for k in kernels)
    return torch.full(((nbytes + 3) // 4,), float("nan"),
                      dtype=torch.float32, device="cuda")

# ---------------------------------------------------------------------------
# Main benchmark


def row_bytes(variant, T, N, es):
    if variant == "inference":   # x, spike, v_seq [T, N]; v_init [N]
        return (3 * T + 1) * N * es
    if variant == "final_state":  # x, spike [T, N]; v_init, v_final [N]
        return (2 * T + 2) * N * es
    # forward: x, spike, workspace (f32); backward: spike_grad, workspace,
    # x_grad; v_init, v_init_grad.
    return T * N * (4 * es + 8) + 2 * N * es


def bench_deterministic(torch, plif, timer, N, Ts=(4, 16)):
    """PLIF's backward, f32: the atomic and the deterministic reduction of
    w's gradient on the same inputs. Returns one record per T: both times,
    the deterministic result's spread over 5 calls (must be 0) and its
    distance from the atomic one."""
    import flexsn
    out = []
    try:
        kf = plif.kernel("cuda", "forward", "f32")
        kb = plif.kernel("cuda", "backward", "f32")
        kd = plif.kernel("cuda", "backward", "f32", deterministic=True)
    except KeyError as e:
        print("bench_lif: no deterministic rows: %s" % e)
        return out
    stream = torch.cuda.current_stream().cuda_stream
    w = [-math.log(2.0 - 1.0)]                  # init_tau = 2
    for T in Ts:
        gen = torch.Generator(device="cuda").manual_seed(T)
        x = torch.randn((T, N), device="cuda", generator=gen) * 0.5 + 0.8
        gs = torch.randn((T, N), device="cuda", generator=gen)
        ws = new_workspace(torch, (kf, kb, kd), T, N)
        spike, xg = torch.empty_like(x), torch.empty_like(x)
        wg = torch.zeros(1, device="cuda")
        wp = ws.data_ptr()
        rec = dict(T=T, N=N, status="FLEXSN_SUCCESS")
        try:
            kf.launch(stream, T, N, 0,
                      addresses(kf, {"x": x, "spike": spike}), wp, w)
            for k, name in ((kb, "atomic"), (kd, "deterministic")):
                ptrs = addresses(k, {"spike_grad": gs, "x": x, "x_grad": xg,
                                     "w_grad": wg})

                def call(k=k, ptrs=ptrs):
                    k.launch(stream, T, N, 0, ptrs, wp, w)
                values = []
                for _ in range(5):
                    call()
                    torch.cuda.synchronize()
                    values.append(float(wg.item()))
                ms, _ = timer.gpu_ms(call)
                rec[name] = dict(ms=ms, values=values)
        except flexsn.RuntimeStatusError as e:
            rec.update(status=e.status, error=str(e))
            print("bench_lif: PLIF backward f32 T=%d: %s" % (T, e))
            out.append(rec)
            continue
        d = rec["deterministic"]["values"]
        rec["deterministic_spread"] = max(d) - min(d)
        rec["overhead"] = rec["deterministic"]["ms"] / rec["atomic"]["ms"] - 1
        print("bench_lif: PLIF backward f32 T=%d N=%d: atomic %.3f ms, "
              "deterministic %.3f ms (%+.1f%%); w_grad over 5 calls: atomic "
              "spread %.3g, deterministic spread %.3g"
              % (T, N, rec["atomic"]["ms"], rec["deterministic"]["ms"],
                 100 * rec["overhead"],
                 max(rec["atomic"]["values"]) - min(rec["atomic"]["values"]),
                 rec["deterministic_spread"]))
        sys.stdout.flush()
        out.append(rec)
        del x, gs, ws, spike, xg
        torch.cuda.empty_cache()
    return out


# (C, S) layouts of N neurons [B, C, S] for the per-channel rows: a conv
# layer's feature maps (S = H W), small ones, a linear layer (S = 1: one
# channel per neuron of a sample), one channel.
CHANNEL_LAYOUTS = ((64, 1024), (256, 64), (4096, 1), (1, 1 << 14))


def bench_per_channel(torch, plif, timer, N, copy_gbs, Ts=(4, 16)):
    """PLIF's backward, f32, with a scalar w and with a per-channel w over
    the CHANNEL_LAYOUTS, on the same inputs: times, the fraction of the
    copy bandwidth on the bytes the backward must move (spike_grad, x, the
    f32 workspace read, x_grad written: T N (3 es + 4)), and the ratio to
    the scalar kernel. A per-channel layout also times the deterministic
    gradient: its kernel (each neuron's sum over time, [N]) and the torch
    sum over B and S that the PyTorch layer adds. One record per (T,
    layout)."""
    import flexsn
    out = []
    kernels = {name: (c.kernel("cuda", "forward", "f32"),
                      c.kernel("cuda", "backward", "f32"))
               for name, c in plif.items()}
    fixed = plif["per_channel"].kernel("cuda", "backward", "f32",
                                       deterministic=True)
    stream = torch.cuda.current_stream().cuda_stream
    for T in Ts:
        gen = torch.Generator(device="cuda").manual_seed(100 + T)
        x = torch.randn((T, N), device="cuda", generator=gen) * 0.5 + 0.8
        gs = torch.randn((T, N), device="cuda", generator=gen)
        spike, xg = torch.empty_like(x), torch.empty_like(x)
        ws = new_workspace(torch, [k for pair in kernels.values()
                                   for k in pair], T, N)
        nbytes = T * N * (3 * 4 + 4)
        scalar_ms = None
        for layout in (None,) + CHANNEL_LAYOUTS:
            kf, kb = kernels["scalar" if layout is None else "per_channel"]
            C = 1 if layout is None else layout[0]
            w = torch.linspace(-1.0, 1.0, C, device="cuda")
            wg = torch.zeros(C, device="cuda")
            # The per-channel kernels take w as a buffer, the scalar one
            # as a value.
            params = [0.0] if layout is None else []
            extra = {} if layout is None else {"w": w}
            rec = dict(T=T, N=N, layout=None if layout is None else
                       dict(C=layout[0], S=layout[1],
                            B=N // (layout[0] * layout[1])))
            try:
                kf.launch(stream, T, N, 0,
                          addresses(kf, dict(x=x, spike=spike, **extra)),
                          ws.data_ptr(), params, channels=layout)
                ptrs = addresses(kb, dict(spike_grad=gs, x=x, x_grad=xg,
                                          w_grad=wg, **extra))

                def call(ptrs=ptrs, kb=kb, layout=layout, params=params,
                         wp=ws.data_ptr()):
                    kb.launch(stream, T, N, 0, ptrs, wp, params,
                              channels=layout)
                ms, _ = timer.gpu_ms(call)
                if layout is not None:
                    terms = torch.empty(N, device="cuda")
                    fixed_ptrs = addresses(fixed, dict(
                        spike_grad=gs, x=x, x_grad=xg, w_grad=terms, w=w))
                    B = N // (layout[0] * layout[1])

                    def fixed_call(ptrs=fixed_ptrs, layout=layout, B=B,
                                   terms=terms, wp=ws.data_ptr()):
                        fixed.launch(stream, T, N, 0, ptrs, wp, [],
                                     channels=layout)
                        return terms.view(B, layout[0], -1).sum((0, 2))
                    fixed_ms, _ = timer.gpu_ms(fixed_call)
                    got = fixed_call()
                    torch.cuda.synchronize()
                    rec["deterministic_ms"] = fixed_ms
                    rec["deterministic_close"] = bool(torch.allclose(
                        got, wg, rtol=1e-3, atol=1e-3 * float(
                            wg.abs().max())))
            except flexsn.RuntimeStatusError as e:
                rec.update(status=e.status, error=str(e))
                out.append(rec)
                continue
            rec.update(status="FLEXSN_SUCCESS", ms=ms,
                       frac_copy=nbytes / (ms * 1e-3) / 1e9 / copy_gbs)
            if layout is None:
                scalar_ms = ms
            elif scalar_ms:
                rec["vs_scalar"] = ms / scalar_ms
                rec["deterministic_vs_scalar"] = (rec["deterministic_ms"]
                                                  / scalar_ms)
            print("bench_lif: PLIF backward f32 T=%d N=2^%d %s: %.4f ms, "
                  "%.1f%% of copy%s" % (
                      T, N.bit_length() - 1,
                      "scalar w" if layout is None else
                      "per-channel w C=%d S=%d" % layout, ms,
                      100 * rec["frac_copy"],
                      ", x%.3f of scalar; deterministic %.4f ms (x%.3f)%s"
                      % (rec["vs_scalar"], rec["deterministic_ms"],
                         rec["deterministic_vs_scalar"],
                         "" if rec["deterministic_close"]
                         else ", GRADIENTS DIFFER")
                      if "vs_scalar" in rec else ""))
            sys.stdout.flush()
            out.append(rec)
        del x, gs, ws, spike, xg
        torch.cuda.empty_cache()
    return out

def spike_bytes(variant, T, N, es, spike_es):
    """Bytes an inference (x, spike, v_seq; v_init) or final-state (x,
    spike; v_init, v_final) call must move, with spikes of spike_es
    bytes."""
    if variant == "inference":
        return (2 * T + 1) * N * es + T * N * spike_es
    return (T + 2) * N * es + T * N * spike_es


def pack_spikes(torch, spikes):
    """[T, N] 0/1 spikes (N a multiple of 8) packed 8 per byte, least
    significant bit first: the bits kernels' layout, computed with torch
    ops."""
    T, N = spikes.shape
    weights = torch.tensor([1 << i for i in range(8)], device=spikes.device,
                           dtype=torch.int32)
    return (spikes.reshape(T, N // 8, 8).to(torch.int32) * weights).sum(
        -1).to(torch.uint8)


def bench_spike_storage(torch, lif_u8, timer, N, copy_gbs, Ts=(4, 16, 64)):
    """LIF's inference and final-state kernels storing spikes in the
    storage type, as bytes and as bits, on the same inputs: times, the
    fraction of the copy bandwidth on each call's own bytes, the speedups
    of bytes and bits over dense, and whether all wrote the same spikes
    (and states, bitwise)."""
    out = []
    stream = torch.cuda.current_stream().cuda_stream
    tdt = tdtypes(torch)
    for variant in ("final_state", "inference"):
        for dtype in ("f32", "f16"):
            es = ELEM[dtype]
            kv = KERNEL_VARIANT[variant]
            kernels = {s: lif_u8.kernel("cuda", kv, dtype, spikes=s)
                       for s in ("dense", "u8", "bits")}
            for T in Ts:
                gen = torch.Generator(device="cuda").manual_seed(200 + T)
                x = (torch.randn((T, N), device="cuda", generator=gen) * 0.5
                     + 0.8).to(tdt[dtype])
                v0 = torch.zeros(N, device="cuda", dtype=tdt[dtype])
                rec = dict(variant=variant, dtype=dtype, T=T, N=N)
                got = {}
                for s, k in kernels.items():
                    spike = torch.empty((T, N // 8 if s == "bits" else N),
                                        device="cuda",
                                        dtype=tdt[dtype] if s == "dense"
                                        else torch.uint8)
                    state = torch.empty((T, N) if variant == "inference"
                                        else (N,), device="cuda",
                                        dtype=tdt[dtype])
                    names = dict(x=x, v_init=v0, spike=spike)
                    names["v_seq" if variant == "inference"
                          else "v_final"] = state
                    ptrs = addresses(k, names)

                    def call(k=k, ptrs=ptrs):
                        k.launch(stream, T, N, 0, ptrs, 0, [])
                    ms, _ = timer.gpu_ms(call)
                    nbytes = spike_bytes(variant, T, N, es,
                                         dict(dense=es, u8=1, bits=1 / 8)[s])
                    rec[s] = dict(ms=ms, frac_copy=nbytes / (ms * 1e-3)
                                  / 1e9 / copy_gbs)
                    got[s] = (spike, state)
                rec["speedup"] = rec["dense"]["ms"] / rec["u8"]["ms"]
                rec["bits_speedup"] = rec["dense"]["ms"] / rec["bits"]["ms"]
                dense_spikes = got["dense"][0]
                rec["same"] = bool(
                    torch.equal(got["u8"][0], dense_spikes.to(torch.uint8))
                    and torch.equal(got["u8"][1], got["dense"][1])
                    and torch.equal(got["bits"][0],
                                    pack_spikes(torch, dense_spikes))
                    and torch.equal(got["bits"][1], got["dense"][1]))
                sj = SJ_BEST_MS.get((variant, dtype, T)) if N == 1 << 24 \
                    else None
                if sj:
                    rec["vs_sj_best"] = sj / rec["u8"]["ms"]
                    rec["bits_vs_sj_best"] = sj / rec["bits"]["ms"]
                print("bench_lif: LIF %s %s T=%d N=2^%d spikes dense %.4f ms "
                      "(%.1f%% of copy), u8 %.4f ms (%.1f%%): x%.3f, bits "
                      "%.4f ms (%.1f%%): x%.3f%s%s" % (
                          variant, dtype, T, N.bit_length() - 1,
                          rec["dense"]["ms"], 100 * rec["dense"]["frac_copy"],
                          rec["u8"]["ms"], 100 * rec["u8"]["frac_copy"],
                          rec["speedup"], rec["bits"]["ms"],
                          100 * rec["bits"]["frac_copy"], rec["bits_speedup"],
                          ", x%.2f / x%.2f of SpikingJelly's best"
                          % (rec["vs_sj_best"], rec["bits_vs_sj_best"])
                          if sj else "",
                          "" if rec["same"] else ", SPIKES DIFFER"))
                sys.stdout.flush()
                out.append(rec)
                del x, got
                torch.cuda.empty_cache()
    return out

# ---------------------------------------------------------------------------
# The PyTorch modules against direct launches of the same kernels


def module_calls(torch, module, T, N):
    """Callables for one module at [T, N] f32, every call from a reset
    state: name -> fn for (direct | module) x (inference | train), the
    direct ones on preallocated buffers with the module's own kernels and
    the buffers the module passes (its training forward writes v_seq: the
    final state comes from it), plus direct_train_min (the forward without
    v_seq: what a forward with a final-state output would move). Returns
    (calls, check) with check() comparing module and direct results."""
    stream = torch.cuda.current_stream().cuda_stream
    compiled = module.compiled
    kfs = compiled.kernel("cuda", "final-state", "f32")
    kf = compiled.kernel("cuda", "forward", "f32")
    kb = compiled.kernel("cuda", "backward", "f32")
    g = torch.Generator(device="cuda").manual_seed(1000 * T + N % 997)
    x = torch.randn((T, N), generator=g, device="cuda") * 0.9 + 0.8
    gs = torch.randn((T, N), generator=g, device="cuda")
    xr = x.detach().requires_grad_(True)
    spike, xg = torch.empty_like(x), torch.empty_like(x)
    vf, vg = torch.empty(N, device="cuda"), torch.empty(N, device="cuda")
    vseq = torch.empty_like(x)
    workspace = new_workspace(torch, (kf, kb), T, N)
    wp = workspace.data_ptr()
    p_inf = addresses(kfs, {"x": x, "spike": spike, "v_final": vf})
    p_fwd = addresses(kf, {"x": x, "spike": spike, "v_seq": vseq})
    p_fwd_min = addresses(kf, {"x": x, "spike": spike})
    p_bwd = addresses(kb, {"spike_grad": gs, "x_grad": xg,
                           "v_init_grad": vg})

    def direct_inference():
        kfs.launch(stream, T, N, 0, p_inf, 0)

    def direct_train():
        kf.launch(stream, T, N, 0, p_fwd, wp)
        kb.launch(stream, T, N, 0, p_bwd, wp)

    def direct_train_min():
        kf.launch(stream, T, N, 0, p_fwd_min, wp)
        kb.launch(stream, T, N, 0, p_bwd, wp)

    class FloorFunction(torch.autograd.Function):
        """The least a custom autograd op over the same two kernels costs:
        PyTorch's autograd plus the launches, no checks, no bookkeeping."""

        @staticmethod
        def forward(ctx, xin):
            kf.launch(stream, T, N, 0, p_fwd, wp)
            return torch.empty_like(xin)

        @staticmethod
        def backward(ctx, grad):
            kb.launch(stream, T, N, 0, p_bwd, wp)
            return torch.empty_like(grad)

    def floor_train():
        s = FloorFunction.apply(xr)
        return torch.autograd.grad(s, (xr,), gs)[0]

    def module_inference():
        module.reset()
        with torch.no_grad():
            return module(x)

    def module_train():
        module.reset()
        s = module(xr)
        return s, torch.autograd.grad(s, (xr,), gs)[0]

    def check():
        direct_inference()
        s = module_inference()
        torch.cuda.synchronize()
        ok_inf = bool(torch.equal(s, spike) and
                      torch.equal(module.states[0], vf))
        direct_train()
        s, gx = module_train()
        torch.cuda.synchronize()
        diff = float((gx - xg).abs().max())
        return dict(inference_equal=ok_inf,
                    train_spikes_equal=bool(torch.equal(s, spike)),
                    train_x_grad_maxdiff=diff)

    calls = dict(direct_inference=direct_inference,
                 direct_train=direct_train, direct_train_min=direct_train_min,
                 floor_train=floor_train,
                 module_inference=module_inference, module_train=module_train)
    calls["keep"] = (x, gs, xr, spike, xg, vf, vg, vseq, workspace)
    return calls, check


def host_times(torch, fns, calls, rounds=5, warmup=20):
    """Per-call host time (until the last of `calls` back-to-back calls has
    returned) and wall time (until the GPU is done too), in us, medians over
    `rounds`; the callables take turns within a round, so that drift hits
    them alike. Returns name -> (host_us, wall_us)."""
    # Half a second of calls each first: the host's clocks and caches settle
    # (the first module measured otherwise ran ~1.5x slower, direct calls
    # included).
    for fn in fns.values():
        for _ in range(warmup):
            fn()
        end = time.perf_counter() + 0.5
        while time.perf_counter() < end:
            fn()
        torch.cuda.synchronize()
    got = dict((name, ([], [])) for name in fns)
    for _ in range(rounds):
        for name, fn in fns.items():
            t0 = time.perf_counter()
            for _ in range(calls):
                fn()
            t1 = time.perf_counter()
            torch.cuda.synchronize()
            t2 = time.perf_counter()
            got[name][0].append((t1 - t0) / calls * 1e6)
            got[name][1].append((t2 - t0) / calls * 1e6)
    return dict((name, (statistics.median(h), statistics.median(w)))
                for name, (h, w) in got.items())


def event_times(torch, fns, reps=30, calls=10, rounds=3, warmup=3):
    """name -> (ms of one call between two CUDA events with the GPU idle
    before it, so that the call's host work counts: median of `reps`;
    ms per call of `calls` back-to-back calls between two events: median
    of `rounds`)."""
    out = {}
    for name, fn in fns.items():
        for _ in range(warmup):
            fn()
        torch.cuda.synchronize()
        single = []
        for _ in range(reps):
            s = torch.cuda.Event(enable_timing=True)
            e = torch.cuda.Event(enable_timing=True)
            s.record()
            fn()
            e.record()
            e.synchronize()
            single.append(s.elapsed_time(e))
        b2b = []
        for _ in range(rounds):
            s = torch.cuda.Event(enable_timing=True)
            e = torch.cuda.Event(enable_timing=True)
            s.record()
            for _ in range(calls):
                fn()
            e.record()
            e.synchronize()
            b2b.append(s.elapsed_time(e) / calls)
        out[name] = (statistics.median(single), statistics.median(b2b))
    return out


def bench_modules(torch, modules, timer):
    """The modules' host overhead (tiny N) and wall time (N = 2^24) against
    direct launches; see the module docstring. Returns a record for
    results.json (meta["modules"])."""
    res = dict(host=[], wall=[], checks=[], host_target_us=HOST_TARGET_US,
               wall_target=WALL_TARGET)
    for name, module in modules.items():
        calls, check = module_calls(torch, module, HOST_T, HOST_N)
        res["checks"].append(dict(module=name, T=HOST_T, N=HOST_N, **check()))
        with timer._held():
            for mode, n in (("inference", 1000), ("train", 300)):
                fns = {"direct": calls["direct_" + mode],
                       "module": calls["module_" + mode]}
                if mode == "train":
                    fns["floor"] = calls["floor_train"]
                t = host_times(torch, fns, n)
                (dh, dw), (mh, mw) = t["direct"], t["module"]
                # Training's baseline is the autograd floor: PyTorch's own
                # cost of any custom op, which no module can avoid.
                base = t["floor"][0] if mode == "train" else dh
                rec = dict(module=name, mode=mode, T=HOST_T, N=HOST_N,
                           calls=n, direct_host_us=dh, module_host_us=mh,
                           overhead_us=mh - dh, direct_wall_us=dw,
                           module_wall_us=mw, overhead_wall_us=mw - dw,
                           ok=mh - base < HOST_TARGET_US)
                if mode == "train":
                    rec.update(floor_host_us=base, own_us=mh - base)
                res["host"].append(rec)
                print("bench_lif: host %-11s %-9s T=%d N=%d: direct %.1f us, "
                      "module %.1f us per call: %+.1f us (wall %+.1f us)%s; "
                      "target < %.0f us: %s"
                      % (name, mode, HOST_T, HOST_N, dh, mh, mh - dh,
                         mw - dw, "" if mode != "train" else
                         "; autograd floor %.1f us, module %+.1f us over it"
                         % (base, mh - base), HOST_TARGET_US,
                         "PASS" if rec["ok"] else "FAIL"))
                sys.stdout.flush()
        del calls, check
        torch.cuda.empty_cache()

        calls, check = module_calls(torch, module, WALL_T, WALL_N)
        res["checks"].append(dict(module=name, T=WALL_T, N=WALL_N, **check()))
        with timer._held():
            for mode in ("inference", "train"):
                fns = {"direct": calls["direct_" + mode],
                       "module": calls["module_" + mode]}
                if mode == "train":
                    fns["direct_min"] = calls["direct_train_min"]
                t = event_times(torch, fns)
                (d1, db), (m1, mb) = t["direct"], t["module"]
                rec = dict(module=name, mode=mode, T=WALL_T, N=WALL_N,
                           direct_ms=d1, module_ms=m1, ratio=m1 / d1,
                           direct_b2b_ms=db, module_b2b_ms=mb,
                           ratio_b2b=mb / db,
                           # Back-to-back is what a training loop sees;
                           # one call after an idle GPU adds the host time.
                           ok=mb / db <= 1 + WALL_TARGET)
                if "direct_min" in t:
                    rec["direct_min_ms"], rec["direct_min_b2b_ms"] = \
                        t["direct_min"]
                res["wall"].append(rec)
                print("bench_lif: wall %-11s %-9s T=%d N=2^%d: direct %.3f "
                      "ms, module %.3f ms (%+.1f%%; back-to-back %.3f vs "
                      "%.3f ms, %+.1f%%)%s; target <= +%.0f%%: %s"
                      % (name, mode, WALL_T, WALL_N.bit_length() - 1, d1, m1,
                         100 * (m1 / d1 - 1), db, mb, 100 * (mb / db - 1),
                         "" if "direct_min" not in t else
                         "; direct without v_seq %.3f ms"
                         % t["direct_min"][0],
                         100 * WALL_TARGET, "PASS" if rec["ok"] else "FAIL"))
                sys.stdout.flush()
        del calls, check
        torch.cuda.empty_cache()
    for c in res["checks"]:
        if not check_ok(c):
            print("bench_lif: %s T=%d N=%d: module and direct results differ: "
                  "%s" % (c["module"], c["T"], c["N"], c))
    res["ok"] = all(r["ok"] for r in res["host"] + res["wall"])
    return res


def check_ok(c):
    """Whether a module gave the direct launches' results."""
    return (c["inference_equal"] and c["train_spikes_equal"]
            and c["train_x_grad_maxdiff"] <= 1e-6)


def modules_consistent(res):
    """Whether the module measurements ran and every module call gave the
    direct launches' results."""
    return bool(res) and "error" not in res and all(
        check_ok(c) for c in res["checks"])


def run_bench(args, lif, plif, modules, lif_u8):
    import torch
    import flexsn

    t_start = time.time()
    ns = args.ns_list
    ts = TS if not args.quick else (4, 16)
    dtypes = DTYPES if not args.quick else ("f32", "f16")
    variants = [v for v in VARIANTS if v in args.variants.split(",")]
    configure_dynamo(torch)

    # 1. The compile workers start at once (they share the GPU through the
    # lock; their compiling is CPU work).
    tasks = [(v, d, T, N) for N in ns for v in variants for d in dtypes
             for T in ts]
    workers = Workers(0 if args.no_compile else args.workers, tasks, args)

    dev = torch.device("cuda")
    torch.zeros(1, device=dev)
    lock = GpuLock(args.lock)
    timer = Timer(torch, args.reps, 3, lock)
    try:
        stream = Stream(torch)
        stream_note = "cupy %s" % stream.version
    except Exception as e:
        stream = None
        stream_note = "unavailable: %s: %s" % (type(e).__name__, e)
        print("bench_lif: same-mix stream " + stream_note)

    # 2. Copy bandwidth.
    src = torch.rand(COPY_BYTES // 4, device=dev)
    dst = torch.empty_like(src)
    copy_ms, _ = timer.gpu_ms(lambda: dst.copy_(src), reps=30)
    copy_gbs = 2 * COPY_BYTES / (copy_ms * 1e-3) / 1e9
    del src, dst
    torch.cuda.empty_cache()
    print("bench_lif: %s; copy %.1f GB/s (%.3f ms for 2 x 1 GiB); %d compile "
          "workers on %d tasks"
          % (torch.cuda.get_device_name(0), copy_gbs, copy_ms,
             len(workers.procs), len(tasks) if workers.procs else 0))
    sys.stdout.flush()

    rows, skipped = [], []
    meta = dict(
        device=torch.cuda.get_device_name(0), torch=torch.__version__,
        cuda=torch.version.cuda, stream=stream_note,
        flexsn=flexsn.__version__,
        flexsn_entries=dict(lif=entry_name(lif),
                            plif=entry_name(plif["scalar"]),
                            plif_per_channel=entry_name(plif["per_channel"]),
                            lif_u8=entry_name(lif_u8),
                            **{k: entry_name(m.compiled)
                               for k, m in modules.items()}),
        copy_bytes=2 * COPY_BYTES, copy_ms=copy_ms, copy_gbs=copy_gbs,
        copy_end_gbs=None, reps=args.reps, compile_workers=len(workers.procs),
        compile_wall_s=None, skipped=[], complete=False)
    reserve = 0.0 if args.no_compile else args.compile_reserve
    for N in ns:
        for variant in variants:
            for dtype in dtypes:
                for T in ts:
                    if time.time() - t_start > args.budget - reserve:
                        skipped.append((N, variant, dtype, T))
                        continue
                    row = bench_row(torch, lif, timer, stream, variant,
                                    dtype, T, N, copy_gbs)
                    rows.append(row)
                    print_row(row)
                    sys.stdout.flush()
                    meta["seconds"] = time.time() - t_start
                    write_outputs(args.out, meta, rows, with_plot=False)
    if skipped:
        print("bench_lif: budget of %.0f s reached: %d rows skipped"
              % (args.budget, len(skipped)))

    # 3. torch.compile results from the workers.
    if workers.procs:
        print("bench_lif: waiting for the compile workers (at most %.0f s)"
              % max(0.0, args.budget - (time.time() - t_start)))
        sys.stdout.flush()
        results, wall = workers.collect(t_start + args.budget)
        meta["compile_wall_s"] = wall
        for row in rows:
            rec = results.get((key_str(row["variant"], row["dtype"],
                                       row["T"]), row["N"]))
            if rec is None:
                row["compile_error"] = "not compiled within the budget"
            elif not rec.get("ok"):
                row["compile_error"] = rec.get("error", "?")
                row["compile_cold_s"] = rec.get("cold_s")
            else:
                row["compile_ms"] = rec["ms"]
                row["compile_cold_s"] = rec["cold_s"]
                if "wall_us" in rec:
                    row["compile_wall_us"] = rec["wall_us"]
            finish_row(row, copy_gbs)
        print("bench_lif: compile workers: %d of %d tasks in %.0f s; the rows "
              "with torch.compile:"
              % (sum(1 for r in results.values() if r.get("ok")), len(tasks),
                 wall))
        for row in rows:
            print_row(row)

    # 4. The modules, with the workers gone (host overhead is CPU time).
    if not args.no_modules:
        try:
            meta["modules"] = bench_modules(torch, modules, timer)
        except Exception as e:  # reported; the rest of the run goes on
            import traceback
            traceback.print_exc()
            meta["modules"] = dict(error="%s: %s" % (type(e).__name__,
                                                     str(e)[:500]))
        torch.cuda.empty_cache()
        write_outputs(args.out, meta, rows, with_plot=False)

    # The deterministic reduction's price (PLIF: LIF has no trainable
    # parameter), when time is left.
    if time.time() - t_start < args.budget - reserve:
        meta["deterministic"] = bench_deterministic(
            torch, plif["scalar"], timer, ns[0])
    # What a per-channel w costs over a scalar one, by channel layout.
    if time.time() - t_start < args.budget - reserve:
        meta["per_channel"] = bench_per_channel(torch, plif, timer, ns[0],
                                                copy_gbs)
    # Spikes stored as bytes against spikes in the storage type.
    if time.time() - t_start < args.budget - reserve:
        meta["spike_storage"] = bench_spike_storage(torch, lif_u8, timer,
                                                    ns[0], copy_gbs)

    # The copy again at the end: drift check.
    src = torch.rand(COPY_BYTES // 4, device=dev)
    dst = torch.empty_like(src)
    copy2_ms, _ = timer.gpu_ms(lambda: dst.copy_(src), reps=20)
    del src, dst
    meta.update(
        copy_end_gbs=2 * COPY_BYTES / (copy2_ms * 1e-3) / 1e9,
        skipped=[dict(N=a, variant=b, dtype=c, T=d) for a, b, c, d in skipped],
        seconds=time.time() - t_start, complete=True)
    return meta, rows


def bench_row(torch, lif, timer, stream, variant, dtype, T, N, copy_gbs):
    import flexsn
    es = ELEM[dtype]
    tdt = tdtypes(torch)[dtype]
    nbytes = row_bytes(variant, T, N, es)
    row = dict(N=N, T=T, dtype=dtype, variant=variant, bytes=nbytes)
    x, v0, gs = make_inputs(torch, variant, dtype, T, N)
    nan = float("nan")
    seq = lambda dt=tdt: torch.full((T, N), nan, dtype=dt,  # noqa: E731
                                    device="cuda")
    vec = lambda: torch.full((N,), nan, dtype=tdt, device="cuda")  # noqa: E731
    handle = torch.cuda.current_stream().cuda_stream

    # FlexSN.
    if variant == "train":
        kf = lif.kernel("cuda", "forward", dtype)
        kb = lif.kernel("cuda", "backward", dtype)
        spike, xg, vg = seq(), seq(), vec()
        ws = new_workspace(torch, (kf, kb), T, N)
        wp = ws.data_ptr()
        pf = addresses(kf, {"x": x, "v_init": v0, "spike": spike})
        pb = addresses(kb, {"spike_grad": gs, "x_grad": xg,
                            "v_init_grad": vg})
        outs = (spike, xg, vg)

        def flexsn_call():
            kf.launch(handle, T, N, 0, pf, wp)
            kb.launch(handle, T, N, 0, pb, wp)
    else:
        kern = lif.kernel("cuda", KERNEL_VARIANT[variant], dtype)
        spike = seq()
        state = seq() if variant == "inference" else vec()
        ptrs = addresses(kern, {"x": x, "v_init": v0, "spike": spike,
                                ("v_seq" if variant == "inference"
                                 else "v_final"): state})
        outs = (spike, state)

        def flexsn_call():
            kern.launch(handle, T, N, 0, ptrs, 0)
    try:
        flexsn_call()
        torch.cuda.synchronize()
    except flexsn.RuntimeStatusError as e:
        row.update(status=e.status, error=str(e))
        return row
    row["status"] = "FLEXSN_SUCCESS"
    row["unwritten"] = int(sum(torch.isnan(o).sum().item() for o in outs))
    ms, mn = timer.gpu_ms(flexsn_call)
    row.update(flexsn_ms=ms, flexsn_min_ms=mn)
    if N <= (1 << 20):
        row["flexsn_wall_us"] = timer.wall_us(flexsn_call)

    # Eager (also the correctness yardstick).
    loop = make_loop(torch, variant, dtype, T)
    run = peer_call(torch, loop, variant, x, v0, gs)
    res = run()
    torch.cuda.synchronize()
    e_spike = res[0] if variant != "train" else None
    if variant == "train":
        with torch.no_grad():
            e_spike = make_loop(torch, "final_state", dtype, T)(x, v0)[0]
        gx = res[0]
        row["spike_mismatch_vs_eager"] = (e_spike != spike).float().mean() \
            .item()
        d = (gx.float() - xg.float()).abs()
        scale = gx.float().abs().amax().item() or 1.0
        row["x_grad_maxdiff_vs_eager"] = d.max().item() / scale
        row["x_grad_mismatch_vs_eager"] = \
            (d > 1e-2 * scale).float().mean().item()
        del gx, d
    else:
        row["spike_mismatch_vs_eager"] = (e_spike != spike).float().mean() \
            .item()
        if dtype == "f32":
            row["state_maxdiff_vs_eager"] = float(
                (res[1].float() - state.float()).abs().max().item())
    # FlexSN's buffers go before eager's timing (memory).
    del res, e_spike, flexsn_call, outs
    if variant == "train":
        del spike, xg, vg, ws
    else:
        del spike, state
    torch.cuda.empty_cache()
    ms, _ = timer.gpu_ms(run, warmup=1)
    row["eager_ms"] = ms
    if N <= (1 << 20):
        row["eager_wall_us"] = timer.wall_us(run, calls=5)
    del run, loop
    torch.cuda.empty_cache()

    # Same-mix stream.
    if stream is not None:
        try:
            srun, sb = stream.make(variant, T, N, es)
            ms, _ = timer.gpu_ms(srun)
            row["stream_ms"] = ms
            row["stream_bytes"] = sb
            row["stream_gbs"] = sb / (ms * 1e-3) / 1e9
            row["stream_frac_copy"] = row["stream_gbs"] / copy_gbs
            del srun
        except Exception as e:
            row["stream_error"] = "%s: %s" % (type(e).__name__, str(e)[:300])
    del x, v0, gs
    torch.cuda.empty_cache()
    finish_row(row, copy_gbs)
    return row


def finish_row(row, copy_gbs):
    """Derived figures of a row (again once the compile times are in)."""
    if "flexsn_ms" not in row:
        return
    nbytes = row["bytes"]
    row["flexsn_gbs"] = nbytes / (row["flexsn_ms"] * 1e-3) / 1e9
    row["frac_copy"] = row["flexsn_gbs"] / copy_gbs
    if row.get("stream_gbs"):
        row["frac_stream"] = row["flexsn_gbs"] / row["stream_gbs"]
    for peer in ("eager", "compile"):
        if row.get(peer + "_ms"):
            row["speedup_" + peer] = row[peer + "_ms"] / row["flexsn_ms"]
            row[peer + "_frac_copy"] = nbytes / (row[peer + "_ms"] * 1e-3) \
                / 1e9 / copy_gbs
    tc, _ = TARGETS[row["variant"]]
    row["target_copy"] = tc
    row["meets_copy_target"] = row["frac_copy"] >= tc \
        if row["N"] == NS[0] else None


def fmt(v, spec, none="-"):
    return none if v is None else format(v, spec)


def print_row(r):
    if r.get("status") != "FLEXSN_SUCCESS":
        print("N=2^%-2d %-11s %-4s T=%-2d  FlexSN status %s: %s"
              % (r["N"].bit_length() - 1, r["variant"], r["dtype"], r["T"],
                 r.get("status"), r.get("error", "")))
        return
    print("N=2^%-2d %-11s %-4s T=%-2d  %8.4f ms %7.1f GB/s  %5.1f%% copy  "
          "%s stream  x%s eager  x%s compile%s"
          % (r["N"].bit_length() - 1, r["variant"], r["dtype"], r["T"],
             r["flexsn_ms"], r["flexsn_gbs"], 100 * r["frac_copy"],
             fmt(r.get("frac_stream") and 100 * r["frac_stream"], "5.1f") + "%",
             fmt(r.get("speedup_eager"), ".2f"),
             fmt(r.get("speedup_compile"), ".2f"),
             "" if not r.get("unwritten") else
             "  UNWRITTEN %d" % r["unwritten"]))


def write_outputs(out, meta, rows, with_plot=True):
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "results.json"), "w") as f:
        json.dump(dict(meta=meta, rows=rows), f, indent=1)
    lines = ["# FlexSN LIF benchmark", "",
             "%s, torch %s (CUDA %s), stream: %s. Copy bandwidth %.1f GB/s "
             "(read + write, 1 GiB; %s GB/s at the end). Median of %d runs "
             "after warm-up, CUDA events. Bytes that must move (es = element "
             "size): inference (3T+1)N es, final-state (2T+2)N es, train "
             "(forward + backward) TN(4es+8) + 2N es (x, spike, f32 "
             "workspace; spike_grad, workspace, x_grad; v_init, "
             "v_init_grad). torch.compile: static shapes, timed by compile "
             "workers under the same GPU lock; cold = its first call."
             % (meta["device"], meta["torch"], meta["cuda"], meta["stream"],
                meta["copy_gbs"], fmt(meta.get("copy_end_gbs"), ".1f"),
                meta["reps"])]
    head = ["", "| N | variant | dtype | T | FlexSN ms | GB/s | % copy "
            "| % stream | stream % copy | eager ms | compile ms | x eager "
            "| x compile | compile s (cold) | wall us/call |",
            "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for title, which in (("Inference and final state",
                          ("inference", "final_state")),
                         ("Training: forward + backward", ("train",))):
        rs = [r for r in rows if r["variant"] in which]
        if not rs:
            continue
        lines += ["", "## " + title] + head
        for r in rs:
            lines.append(md_row(r))
    if meta.get("deterministic"):
        lines += ["", "## Parameter gradients: atomic vs deterministic", "",
                  "PLIF backward (w trainable), f32, same inputs; w_grad over "
                  "5 calls.", "",
                  "| N | T | atomic ms | deterministic ms | overhead "
                  "| atomic spread | deterministic spread |",
                  "|---|---|---|---|---|---|---|"]
        for d in meta["deterministic"]:
            if d.get("status") != "FLEXSN_SUCCESS":
                lines.append("| 2^%d | %d | %s | | | | |"
                             % (d["N"].bit_length() - 1, d["T"],
                                d.get("status")))
                continue
            a = d["atomic"]["values"]
            lines.append("| 2^%d | %d | %.4f | %.4f | %+.1f%% | %.3g | %.3g |"
                         % (d["N"].bit_length() - 1, d["T"],
                            d["atomic"]["ms"], d["deterministic"]["ms"],
                            100 * d["overhead"], max(a) - min(a),
                            d["deterministic_spread"]))
    if meta.get("per_channel"):
        lines += ["", "## Parameter gradients: per-channel w", "",
                  "PLIF backward, f32, same inputs: w scalar, or one per "
                  "channel of [B, C, S] neurons (atomic sums); % of copy on "
                  "T N (3 es + 4) bytes. Deterministic: the deterministic "
                  "kernel (each neuron's sum over time) and the torch sum "
                  "over B and S after it; close: its w_grad agrees with the "
                  "atomic kernel's (rtol 1e-3).", "",
                  "| N | T | w | B, C, S | ms | % copy | x scalar "
                  "| deterministic ms | x scalar | close |",
                  "|---|---|---|---|---|---|---|---|---|---|"]
        for d in meta["per_channel"]:
            lay = d["layout"]
            shape = "" if lay is None else "%d, %d, %d" % (
                lay["B"], lay["C"], lay["S"])
            what = "scalar" if lay is None else "per-channel"
            if d.get("status") != "FLEXSN_SUCCESS":
                lines.append("| 2^%d | %d | %s | %s | %s | | |" % (
                    d["N"].bit_length() - 1, d["T"], what, shape,
                    d.get("status")))
                continue
            fixed = "| %.4f | %.3f | %s" % (
                d["deterministic_ms"], d["deterministic_vs_scalar"],
                "yes" if d["deterministic_close"] else "NO") \
                if "deterministic_vs_scalar" in d else "| | |"
            lines.append("| 2^%d | %d | %s | %s | %.4f | %.1f | %s %s |" % (
                d["N"].bit_length() - 1, d["T"], what, shape, d["ms"],
                100 * d["frac_copy"],
                "%.3f" % d["vs_scalar"] if "vs_scalar" in d else "", fixed))
    if meta.get("spike_storage"):
        lines += ["", "## Spikes stored as bytes and bits", "",
                  "LIF inference (x, spike, v_seq) and final-state (x, spike, "
                  "v_final) kernels, same inputs, spikes in the storage type, "
                  "as uint8 or bit-packed; % of copy on each call's own "
                  "bytes. x SJ: SpikingJelly's fastest kernel for the call "
                  "(measured side by side on an H200, docs/Reference.md) "
                  "over u8 / bits.", "",
                  "| N | variant | dtype | T | dense ms | % copy | u8 ms "
                  "| % copy | x dense | bits ms | % copy | x dense | x SJ "
                  "| same |",
                  "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
        for d in meta["spike_storage"]:
            sj = d.get("vs_sj_best")
            lines.append("| 2^%d | %s | %s | %d | %.4f | %.1f | %.4f | %.1f "
                         "| %.3f | %.4f | %.1f | %.3f | %s | %s |" % (
                             d["N"].bit_length() - 1, d["variant"],
                             d["dtype"], d["T"], d["dense"]["ms"],
                             100 * d["dense"]["frac_copy"], d["u8"]["ms"],
                             100 * d["u8"]["frac_copy"], d["speedup"],
                             d["bits"]["ms"], 100 * d["bits"]["frac_copy"],
                             d["bits_speedup"],
                             "%.2f / %.2f" % (sj, d["bits_vs_sj_best"])
                             if sj else "-",
                             "yes" if d["same"] else "NO"))
    if meta.get("modules"):
        lines += module_md(meta["modules"])
    if meta.get("skipped"):
        lines += ["", "%d rows skipped (time budget)." % len(meta["skipped"])]
    with open(os.path.join(out, "results.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    if not with_plot:
        return
    for name, which in (("bench.png", ("inference", "final_state")),
                        ("bench_train.png", ("train",))):
        try:
            if any(r["variant"] in which for r in rows):
                plot(out, meta, rows, which, name)
        except Exception as e:
            print("bench_lif: no %s: %s: %s" % (name, type(e).__name__, e))


def module_md(m):
    """results.md's section on the modules (meta["modules"])."""
    lines = ["", "## PyTorch modules vs direct kernel launches", ""]
    if "error" in m:
        return lines + ["Not measured: %s" % m["error"]]
    lines += ["flexsn.torch modules (f32, every call from a reset state; "
              "inference under torch.no_grad, train = forward + "
              "autograd.grad of the spikes) against GpuKernel.launch of the "
              "same kernels on preallocated buffers.", "",
              "Host time per call of back-to-back calls (until the last call "
              "returns; wall: until the GPU is done), median of 5 rounds. "
              "Target: module - baseline < %.0f us, the baseline being the "
              "direct launch for inference and, for training, the autograd "
              "floor (a bare torch.autograd.Function launching the same two "
              "kernels, plus autograd.grad: PyTorch's own cost of any custom "
              "op)." % m["host_target_us"], "",
              "| module | mode | T | N | direct us | floor us | module us "
              "| module - direct us | module - baseline us | target |",
              "|---|---|---|---|---|---|---|---|---|---|"]
    for r in m["host"]:
        base = r.get("floor_host_us", r["direct_host_us"])
        lines.append("| %s | %s | %d | %d | %.1f | %s | %.1f | %+.1f | %+.1f "
                     "| %s |" % (r["module"], r["mode"], r["T"], r["N"],
                                 r["direct_host_us"],
                                 fmt(r.get("floor_host_us"), ".1f"),
                                 r["module_host_us"], r["overhead_us"],
                                 r["module_host_us"] - base,
                                 "pass" if r["ok"] else "**fail**"))
    lines += ["", "Wall time, CUDA events: one call with the GPU idle before "
              "it (its host work counts; median of 30) and back-to-back "
              "calls (per call, median of 3 x 10). Target: module <= "
              "%.2f x direct back to back (one call after an idle GPU also "
              "counts the host time above). Direct train launches pass the module's "
              "buffers (the forward writes v_seq, which the final state comes "
              "from); direct- leaves v_seq out (what a forward with a "
              "final-state output would move)."
              % (1 + m["wall_target"]), "",
              "| module | mode | T | N | direct ms | module ms | ratio "
              "| direct b2b ms | module b2b ms | ratio b2b | direct- ms "
              "| target |",
              "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in m["wall"]:
        lines.append("| %s | %s | %d | 2^%d | %.3f | %.3f | %.3f | %.3f "
                     "| %.3f | %.3f | %s | %s |"
                     % (r["module"], r["mode"], r["T"],
                        r["N"].bit_length() - 1, r["direct_ms"],
                        r["module_ms"], r["ratio"], r["direct_b2b_ms"],
                        r["module_b2b_ms"], r["ratio_b2b"],
                        fmt(r.get("direct_min_ms"), ".3f"),
                        "pass" if r["ok"] else "**fail**"))
    bad = [c for c in m["checks"] if not check_ok(c)]
    lines += ["", "Module results equal to the direct launches' (spikes, "
              "final state, x_grad): %s." % (
                  "yes" if not bad else "**no**: " + "; ".join(
                      "%s T=%d N=%d %s" % (c["module"], c["T"], c["N"], c)
                      for c in bad))]
    return lines


def md_row(r):
    if r.get("status") != "FLEXSN_SUCCESS":
        return "| 2^%d | %s | %s | %d | %s | | | | | | | | | | |" % (
            r["N"].bit_length() - 1, r["variant"], r["dtype"], r["T"],
            r.get("status"))
    mark = ""
    if r.get("meets_copy_target") is False:
        mark = " (< %d%%)" % round(100 * r["target_copy"])
    return ("| 2^%d | %s | %s | %d | %.4f | %.0f | %.1f%s | %s | %s | %s | %s "
            "| %s | %s | %s | %s |"
            % (r["N"].bit_length() - 1, r["variant"], r["dtype"], r["T"],
               r["flexsn_ms"], r["flexsn_gbs"], 100 * r["frac_copy"], mark,
               fmt(r.get("frac_stream") and 100 * r["frac_stream"], ".1f"),
               fmt(r.get("stream_frac_copy") and 100 * r["stream_frac_copy"],
                   ".1f"),
               fmt(r.get("eager_ms"), ".3f"), fmt(r.get("compile_ms"), ".4f"),
               fmt(r.get("speedup_eager"), ".2f"),
               fmt(r.get("speedup_compile"), ".2f"),
               fmt(r.get("compile_cold_s"), ".1f"),
               fmt(r.get("flexsn_wall_us"), ".1f")))


def plot(out, meta, rows, variants, name):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    ns = sorted({r["N"] for r in rows if r["variant"] in variants},
                reverse=True)
    fig, axes = plt.subplots(len(variants), max(len(ns), 1),
                             figsize=(6 * max(len(ns), 1),
                                      4 * len(variants) + 1), squeeze=False)
    peers = [("FlexSN", "frac_copy", "tab:red"),
             ("same-mix stream", "stream_frac_copy", "tab:gray"),
             ("torch.compile", "compile_frac_copy", "tab:blue"),
             ("eager", "eager_frac_copy", "tab:green")]
    for i, variant in enumerate(variants):
        for j, N in enumerate(ns):
            ax = axes[i][j]
            rs = [r for r in rows if r["N"] == N and r["variant"] == variant
                  and r.get("status") == "FLEXSN_SUCCESS"]
            labels = ["%s T%d" % (r["dtype"], r["T"]) for r in rs]
            width = 0.8 / len(peers)
            for k, (pname, field, color) in enumerate(peers):
                vals = [r.get(field) or 0.0 for r in rs]
                ax.bar([p + (k - 1.5) * width for p in range(len(rs))], vals,
                       width, label=pname, color=color)
            ax.axhline(1.0, color="k", lw=0.8)
            ax.axhline(TARGETS[variant][0], color="tab:red", lw=0.8, ls="--")
            ax.set_xticks(range(len(rs)))
            ax.set_xticklabels(labels, rotation=60, fontsize=8)
            ax.set_ylim(0, 1.1)
            what = "training forward + backward" if variant == "train" \
                else variant
            ax.set_title("LIF %s, N = 2^%d" % (what, N.bit_length() - 1))
            if j == 0:
                ax.set_ylabel("fraction of copy bandwidth")
    handles, labels = axes[0][0].get_legend_handles_labels()
    top = 1.0 - 0.3 / fig.get_figheight()
    fig.suptitle("FlexSN LIF on %s: fraction of copy bandwidth (%.0f GB/s); "
                 "dashed: target (docs/Reference.md)"
                 % (meta["device"], meta["copy_gbs"]),
                 x=0.02, y=0.995, ha="left")
    fig.legend(handles, labels, loc="upper right", ncol=len(peers),
               fontsize=9, bbox_to_anchor=(0.995, top))
    fig.tight_layout(rect=(0, 0, 1, top - 0.3 / fig.get_figheight()))
    fig.savefig(os.path.join(out, name), dpi=110)
    plt.close(fig)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--compile-only", action="store_true",
                    help="run every flexsn.compile of the benchmark (fills "
                    "$FLEXSN_CACHE_DIR for a machine without the tools), "
                    "then exit")
    ap.add_argument("--no-modules", action="store_true",
                    help="skip the PyTorch module measurements")
    # Accepted and ignored: older callers pass the gpu_bundle.sh folder.
    ap.add_argument("--bundle", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--out", default="bench-out")
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--budget", type=float, default=200.0,
                    help="seconds after which no new row starts and the "
                    "compile workers are stopped")
    ap.add_argument("--compile-reserve", type=float, default=10.0,
                    help="stop adding rows this long before the budget, for "
                    "the compile results")
    ap.add_argument("--workers", type=int,
                    default=min(8, max(1, (os.cpu_count() or 2) // 2)))
    ap.add_argument("--worker-gib", type=float, default=72.0,
                    help="GPU memory the compile workers may hold at once")
    ap.add_argument("--ns", default=None,
                    help="comma-separated log2 N (default 24,20)")
    ap.add_argument("--variants", default=",".join(VARIANTS))
    ap.add_argument("--no-compile", action="store_true")
    ap.add_argument("--quick", action="store_true",
                    help="N = 2^20, T in {4, 16}, f32/f16 only")
    ap.add_argument("--lock", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--ledger", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.lock is None:
        args.lock = os.path.join(_CACHE, "gpu.lock")
    if args.ledger is None:
        args.ledger = os.path.join(_CACHE, "ledger.json")
    os.makedirs(_CACHE, exist_ok=True)
    if args.worker is not None:
        tasks = [tuple(k) for k in json.loads(args.worker)]
        return worker_main(tasks, args)
    import flexsn
    t0 = time.time()
    try:
        lif, plif, modules, lif_u8 = compile_all()
        if not args.compile_only:
            lif.kernel("cuda", "inference", "f32")  # loads the runtime
    except flexsn.CompileError as e:
        # ToolNotFoundError included: no tools and no cached entry, or no
        # libflexsn_runtime.so.
        print("bench_lif: %s\n(on a machine without the FlexSN tools: run "
              "'utils/bench_lif.py --compile-only' where they are, with "
              "FLEXSN_CACHE_DIR set, carry that cache and set "
              "FLEXSN_CACHE_DIR and FLEXSN_RUNTIME_LIB here)" % e)
        return 2
    if args.compile_only:
        print("bench_lif: compiled in %.1f s into %s:" % (
            time.time() - t0, flexsn.cache_dir()))
        for name, c in [("lif", lif), ("plif", plif["scalar"]),
                        ("plif (per-channel w)", plif["per_channel"]),
                        ("lif (u8 spikes)", lif_u8)] + [
                (k, m.compiled) for k, m in modules.items()]:
            print("  %-12s %s" % (name, entry_name(c)))
        return 0
    if os.path.exists(args.ledger):
        os.remove(args.ledger)
    args.reps = max(args.reps, 20)
    if args.ns:
        args.ns_list = tuple(1 << int(n) for n in args.ns.split(","))
    else:
        args.ns_list = NS if not args.quick else (1 << 20,)
    meta, rows = run_bench(args, lif, plif, modules, lif_u8)
    write_outputs(args.out, meta, rows)
    big = [r for r in rows if r["N"] == NS[0] and "frac_copy" in r]
    for variant in VARIANTS:
        vb = [r for r in big if r["variant"] == variant]
        if vb:
            worst = min(vb, key=lambda r: r["frac_copy"])
            print("bench_lif: N=2^24 %s: FlexSN %.1f%%-%.1f%% of copy (worst "
                  "%s T=%d)" % (variant, 100 * worst["frac_copy"],
                                100 * max(r["frac_copy"] for r in vb),
                                worst["dtype"], worst["T"]))
    m = meta.get("modules")
    if m and "error" not in m:
        for r in m["host"]:
            print("bench_lif: module host overhead %s %s: %+.1f us per call "
                  "(target < %.0f): %s"
                  % (r["module"], r["mode"], r["overhead_us"],
                     m["host_target_us"], "PASS" if r["ok"] else "FAIL"))
        for r in m["wall"]:
            print("bench_lif: module wall %s %s N=2^%d T=%d: x%.3f, "
                  "back-to-back x%.3f of direct (target <= x%.2f): %s"
                  % (r["module"], r["mode"], r["N"].bit_length() - 1, r["T"],
                     r["ratio"], r["ratio_b2b"], 1 + m["wall_target"],
                     "PASS" if r["ok"] else "FAIL"))
    elif m:
        print("bench_lif: module measurements failed: %s" % m["error"])
    print("bench_lif: results in %s" % args.out)
    bad = [r for r in rows if r.get("status") != "FLEXSN_SUCCESS" or
           r.get("unwritten")]
    # Missed targets are results; a module giving other results than the
    # kernels, or failing, is an error.
    if m is not None and not modules_consistent(m):
        bad.append(m)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
