#!/usr/bin/env python3
"""Benchmarks FlexSN's LIF kernels on a GPU machine (targets: docs/Reference.md).

    python3 utils/bench_lif.py [--bundle .device] [--out DIR] [--reps 20]
                               [--budget SECONDS] [--workers K] [--ns 24,20]
                               [--quick] [--no-compile]

For N in {2^24, 2^20} (--ns) x T in {4, 16, 64} x {f32, f16, bf16} x
{inference, final_state, train} it times, with CUDA events (warm-up, then the
median of --reps runs, each queued behind a short GPU sleep so that launch
latency is not counted), on fresh random inputs (never zeros):

  FlexSN   fx_lif_<variant>_<dtype> from the bundle (ctypes), v_init given;
           train = fx_lif_forward (x -> spike, v_seq NULL, the f32
           workspace) then fx_lif_backward (spike_grad given, v_seq_grad and
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
sys.path.insert(0, HERE)

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

# The loop every peer runs: SPEC 7 LIF (decay_input, v_reset = 0, hard reset
# not detached) written the way a PyTorch user would, in the storage dtype.
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
# Main benchmark


def row_bytes(variant, T, N, es):
    if variant == "inference":   # x, spike, v_seq [T, N]; v_init [N]
        return (3 * T + 1) * N * es
    if variant == "final_state":  # x, spike [T, N]; v_init, v_final [N]
        return (2 * T + 2) * N * es
    # forward: x, spike, workspace (f32); backward: spike_grad, workspace,
    # x_grad; v_init, v_init_grad.
    return T * N * (4 * es + 8) + 2 * N * es


def flexsn_pointers(kern, bufs):
    """Pointers in the kernel's argument order from a role/name -> tensor
    map (None: NULL)."""
    out = []
    for a in kern.buffers:
        t = bufs.get(a.name, bufs.get(a.role))
        out.append(None if t is None else t.data_ptr())
    return out


def bench_deterministic(torch, bundle, timer, N, Ts=(4, 16)):
    """PLIF's backward, f32: the atomic and the deterministic reduction of
    w's gradient on the same inputs. Returns one record per T: both times,
    the deterministic result's spread over 5 calls (must be 0) and its
    distance from the atomic one."""
    out = []
    if ("plif", "backward_deterministic", "f32") not in bundle.kernels:
        return out
    kf = bundle.kernels[("plif", "forward", "f32")]
    kb = bundle.kernels[("plif", "backward", "f32")]
    kd = bundle.kernels[("plif", "backward_deterministic", "f32")]
    handle = torch.cuda.current_stream().cuda_stream
    w = [-math.log(2.0 - 1.0)]                  # init_tau = 2
    for T in Ts:
        gen = torch.Generator(device="cuda").manual_seed(T)
        x = torch.randn((T, N), device="cuda", generator=gen) * 0.5 + 0.8
        gs = torch.randn((T, N), device="cuda", generator=gen)
        ws = torch.empty(kf.workspace_bytes(T, N, 0) // 4, device="cuda")
        spike, xg = torch.empty_like(x), torch.empty_like(x)
        wg = torch.zeros(1, device="cuda")
        s = kf(handle, T, N, 0, flexsn_pointers(
            kf, {"input_sequence": x, "output_sequence": spike,
                 "workspace_out": ws}), w)
        ptrs = {k: flexsn_pointers(k, {
            "spike_grad": gs, "input_sequence": x, "output_sequence": xg,
            "param_gradient": wg, "workspace_in": ws,
            "workspace_inout": ws}) for k in (kb, kd)}
        rec = dict(T=T, N=N, status=bundle.status_name(s))
        for k, name in ((kb, "atomic"), (kd, "deterministic")):
            values = []
            for _ in range(5):
                s = s or k(handle, T, N, 0, ptrs[k], w)
                torch.cuda.synchronize()
                values.append(float(wg.item()))
            ms, _ = timer.gpu_ms(lambda k=k: k(handle, T, N, 0, ptrs[k], w))
            rec[name] = dict(ms=ms, values=values)
        rec["status"] = bundle.status_name(s)
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


def run_bench(args):
    import torch
    import device_check as dc

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
    bundle = dc.Bundle(args.bundle)
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
        bundle_commit=bundle.meta.get("git_commit"),
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
                    row = bench_row(torch, bundle, timer, stream, variant,
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

    # The deterministic reduction's price (PLIF: LIF has no trainable
    # parameter), when the bundle has it and time is left.
    if time.time() - t_start < args.budget - reserve:
        meta["deterministic"] = bench_deterministic(torch, bundle, timer,
                                                    ns[0])

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


def bench_row(torch, bundle, timer, stream, variant, dtype, T, N, copy_gbs):
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
        kf = bundle.kernels[("lif", "forward", dtype)]
        kb = bundle.kernels[("lif", "backward", dtype)]
        saved = int(kf.spec.get("workspace_sequences", 1))
        spike, xg, vg = seq(), seq(), vec()
        ws = torch.full((saved * T * N,), nan, dtype=torch.float32,
                        device="cuda")
        pf = flexsn_pointers(kf, {"input_sequence": x, "initial_state": v0,
                                  "output_sequence": spike,
                                  "workspace_out": ws})
        pb = flexsn_pointers(kb, {"spike_grad": gs, "output_sequence": xg,
                                  "final_state": vg, "workspace_in": ws,
                                  "input_sequence": x})
        assert [a.role for a in kb.buffers if a.name == "spike_grad"] == \
            ["optional_input_sequence"], [a.name for a in kb.buffers]
        outs = (spike, xg, vg)

        def flexsn():
            s = kf(handle, T, N, 0, pf, [])
            if s == 0:
                s = kb(handle, T, N, 0, pb, [])
            return s
    else:
        kern = bundle.kernels[("lif", variant, dtype)]
        spike = seq()
        state = seq() if variant == "inference" else vec()
        ptrs = flexsn_pointers(kern, {"input_sequence": x,
                                      "initial_state": v0,
                                      "output_sequence": spike,
                                      "state_sequence": state,
                                      "final_state": state})
        outs = (spike, state)

        def flexsn():
            return kern(handle, T, N, 0, ptrs, [])
    status = flexsn()
    torch.cuda.synchronize()
    row["status"] = bundle.status_name(status)
    if status != 0:
        row["error"] = bundle.message(status)
        return row
    row["unwritten"] = int(sum(torch.isnan(o).sum().item() for o in outs))
    ms, mn = timer.gpu_ms(flexsn)
    row.update(flexsn_ms=ms, flexsn_min_ms=mn)
    if N <= (1 << 20):
        row["flexsn_wall_us"] = timer.wall_us(flexsn)

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
    del res, e_spike, flexsn, outs
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
            a = d["atomic"]["values"]
            lines.append("| 2^%d | %d | %.4f | %.4f | %+.1f%% | %.3g | %.3g |"
                         % (d["N"].bit_length() - 1, d["T"],
                            d["atomic"]["ms"], d["deterministic"]["ms"],
                            100 * d["overhead"], max(a) - min(a),
                            d["deterministic_spread"]))
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
                 "dashed: SPEC target" % (meta["device"], meta["copy_gbs"]),
                 x=0.02, y=0.995, ha="left")
    fig.legend(handles, labels, loc="upper right", ncol=len(peers),
               fontsize=9, bbox_to_anchor=(0.995, top))
    fig.tight_layout(rect=(0, 0, 1, top - 0.3 / fig.get_figheight()))
    fig.savefig(os.path.join(out, name), dpi=110)
    plt.close(fig)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bundle", default=".device")
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
    if os.path.exists(args.ledger):
        os.remove(args.ledger)
    args.reps = max(args.reps, 20)
    if args.ns:
        args.ns_list = tuple(1 << int(n) for n in args.ns.split(","))
    else:
        args.ns_list = NS if not args.quick else (1 << 20,)
    meta, rows = run_bench(args)
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
    print("bench_lif: results in %s" % args.out)
    bad = [r for r in rows if r.get("status") != "FLEXSN_SUCCESS" or
           r.get("unwritten")]
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
