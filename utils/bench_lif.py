#!/usr/bin/env python3
"""Benchmarks FlexSN's LIF kernels on the device machine (SPEC section 8).

    python3 utils/bench_lif.py [--bundle .device] [--out DIR] [--reps 20]
                               [--budget SECONDS] [--workers K] [--quick]

For N in {2^24, 2^20, 2^16} x T in {4, 16, 64} x {f32, f16, bf16} x
{inference, final_state} it times, with CUDA events (warm-up, then the median
of --reps runs, each queued behind a short GPU sleep so that launch latency is
not counted), on fresh random inputs (never zeros):

  FlexSN        fx_lif_<variant>_<dtype> from the bundle (ctypes), v_init given;
  stream        a same-mix stream, a CuPy RawKernel with 16-byte accesses:
                inference reads one [T, N] array and writes two, final-state
                reads one and writes one;
  eager         the plain PyTorch LIF loop (storage dtype), torch.stack'ed;
  compile       torch.compile (mode default) of the same loop; its compile
                time is excluded from the timings but reported: the graphs are
                compiled ahead by --workers parallel processes (filling the
                Inductor/Triton caches) and loaded from the cache in this one;

plus, in the same run, the device-to-device copy bandwidth (a torch copy of
1 GiB; bytes = read + write). For every row: the time, the bytes that must
move (inference: read x + write spike + write v_seq + read v_init;
final-state: read x + write spike + read v_init + write v_final), the achieved
bandwidth, the fraction of the copy bandwidth and of the same-mix stream, the
speedups over eager and torch.compile, and (N <= 2^20) the host wall time per
call of back-to-back calls. f32 spikes are checked against eager's.

Writes results.json, results.md and bench.png (fraction of copy bandwidth per
configuration, FlexSN vs its peers) to --out. Stops adding rows when --budget
seconds have passed (the rows done are still written).
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
import zlib

# The Inductor and Triton caches are shared with the compile workers; set
# before torch is imported.
_CACHE = os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR",
                               "/tmp/flexsn_bench_inductor_%d" % os.getuid())
os.environ.setdefault("TRITON_CACHE_DIR", os.path.join(_CACHE, "triton"))
os.environ.setdefault("TORCHINDUCTOR_FX_GRAPH_CACHE", "1")
os.environ.setdefault("TORCHINDUCTOR_AUTOGRAD_CACHE", "1")
# Compile in-process (no worker pool to start): the graphs come from the
# cache the compile workers filled.
os.environ.setdefault("TORCHINDUCTOR_COMPILE_THREADS", "1")

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

NS = (1 << 24, 1 << 20, 1 << 16)
TS = (4, 16, 64)
DTYPES = ("f32", "f16", "bf16")
VARIANTS = ("inference", "final_state")
ELEM = {"f32": 4, "f16": 2, "bf16": 2}
TAU, V_TH = 2.0, 1.0            # lib/Neurons/lif.mlir defaults (hard reset to 0)
COPY_BYTES = 1 << 30
SLEEP_CYCLES = 200000           # ~0.1 ms of GPU sleep ahead of each timed run
TARGETS = {"inference": (0.93, 0.97), "final_state": (0.95, None)}

# The loop every peer runs: SPEC 7 LIF (decay_input, v_reset = 0, hard reset)
# written the way a PyTorch user would, in the storage dtype. One copy of the
# source per (variant, dtype, T), so that each has its own code object (its
# own Dynamo cache and automatic-dynamic state, identical in the workers).
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
}


def make_loop(torch, variant, dtype, T):
    src = LOOP_SRC[variant].format(T=T, tau=TAU, v_th=V_TH)
    name = "<flexsn-bench lif_loop %s %s T=%d>" % (variant, dtype, T)
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


# ---------------------------------------------------------------------------
# Compile workers: compile each key's graphs (N = 2^24 static, then the
# automatic-dynamic one for the other N) into the shared caches.

def worker_main(keys, ns):
    import torch
    configure_dynamo(torch)
    tdt = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}
    dev = torch.device("cuda")
    torch.zeros(1, device=dev)
    for variant, dtype, T in keys:
        rec = dict(key=key_str(variant, dtype, T), calls=[])
        try:
            fn = torch.compile(make_loop(torch, variant, dtype, T))
            for N in ns:
                x = torch.empty((T, N), dtype=tdt[dtype], device=dev)
                v = torch.empty((N,), dtype=tdt[dtype], device=dev)
                t0 = time.time()
                with torch.no_grad():
                    out = fn(x, v)
                torch.cuda.synchronize()
                rec["calls"].append(dict(N=N, seconds=time.time() - t0))
                del x, v, out
            rec["ok"] = True
        except Exception as e:  # reported; the main process compiles itself
            rec["ok"] = False
            rec["error"] = "%s: %s" % (type(e).__name__, str(e)[:300])
        print("WORKER " + json.dumps(rec))
        sys.stdout.flush()
    return 0


def start_workers(count, keys, ns, timeout):
    """Returns {key: record} after the workers finish (or time out)."""
    if count <= 0:
        return {}, 0.0
    cost = {4: 1.0, 16: 1.6, 64: 3.5}
    order = sorted(keys, key=lambda k: -cost.get(k[2], 1.0))
    bins = [[] for _ in range(count)]
    load = [0.0] * count
    for k in order:
        i = load.index(min(load))
        bins[i].append(k)
        load[i] += cost.get(k[2], 1.0)
    env = dict(os.environ)
    env["TORCHINDUCTOR_COMPILE_THREADS"] = "1"
    procs = []
    t0 = time.time()
    for b in bins:
        if not b:
            continue
        procs.append(subprocess.Popen(
            [sys.executable, os.path.abspath(__file__), "--worker",
             json.dumps([list(k) for k in b]), "--worker-ns",
             ",".join(str(n) for n in ns)],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
            env=env))
    results = {}
    for p in procs:
        left = max(1.0, timeout - (time.time() - t0))
        try:
            out, _ = p.communicate(timeout=left)
        except subprocess.TimeoutExpired:
            p.kill()
            out, _ = p.communicate()
        for line in out.splitlines():
            if line.startswith("WORKER "):
                rec = json.loads(line[len("WORKER "):])
                results[rec["key"]] = rec
        if p.returncode not in (0, None) and not any(
                l.startswith("WORKER ") for l in out.splitlines()):
            print("bench_lif: a compile worker failed:\n" + out[-2000:])
    return results, time.time() - t0


# ---------------------------------------------------------------------------
# Timing


class Timer(object):
    def __init__(self, torch, reps, warmup):
        self.torch, self.reps, self.warmup = torch, reps, warmup
        self.sleep = getattr(torch.cuda, "_sleep", None)

    def gpu_ms(self, fn, reps=None, warmup=None):
        """Median and minimum GPU time of fn() in ms, CUDA events."""
        torch = self.torch
        reps = reps or self.reps
        for _ in range(self.warmup if warmup is None else warmup):
            fn()
        torch.cuda.synchronize()
        evs = [(torch.cuda.Event(enable_timing=True),
                torch.cuda.Event(enable_timing=True)) for _ in range(reps)]
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
        fn()
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        torch.cuda.synchronize()
        return (time.perf_counter() - t0) / calls * 1e6


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
'''


class Stream(object):
    """The same-mix stream kernels (CuPy RawKernel), on torch's stream."""

    def __init__(self, torch):
        import cupy as cp
        self.cp, self.torch = cp, torch
        mod = cp.RawModule(code=STREAM_SRC)
        self.k12 = mod.get_function("stream_1r2w")
        self.k11 = mod.get_function("stream_1r1w")
        self.version = cp.__version__

    def make(self, nbytes, writes):
        """A callable running the stream over arrays of nbytes each (a
        multiple of 16), reading one and writing `writes` of them."""
        torch, cp = self.torch, self.cp
        n = nbytes // 16
        a = torch.rand(nbytes // 4, device="cuda")
        outs = [torch.empty(nbytes // 4, device="cuda") for _ in range(writes)]
        ca = cp.from_dlpack(a)
        co = [cp.from_dlpack(o) for o in outs]
        grid = ((n + 255) // 256,)
        kern = self.k12 if writes == 2 else self.k11
        args = tuple([ca] + co + [cp.int64(n)])
        handle = torch.cuda.current_stream().cuda_stream
        ext = cp.cuda.ExternalStream(handle) if handle else None

        def run():
            if ext is not None:
                with ext:
                    kern(grid, (256,), args)
            else:
                kern(grid, (256,), args)
        run.keep = (a, outs, ca, co)
        return run


# ---------------------------------------------------------------------------
# Main benchmark


def row_bytes(variant, T, N, es):
    if variant == "inference":   # x, spike, v_seq [T, N]; v_init [N]
        return (3 * T + 1) * N * es
    return (2 * T + 2) * N * es   # x, spike [T, N]; v_init, v_final [N]


def stream_bytes(variant, T, N, es):
    return (3 if variant == "inference" else 2) * T * N * es


def run_bench(args):
    import numpy as np
    import torch
    import device_check as dc

    t_start = time.time()
    configure_dynamo(torch)
    ns = NS if not args.quick else (1 << 20, 1 << 16)
    ts = TS if not args.quick else (4, 16)
    dtypes = DTYPES if not args.quick else ("f32", "f16")
    keys = [(v, d, T) for v in VARIANTS for d in dtypes for T in ts]

    # 1. Compile workers first (the GPU is otherwise idle meanwhile).
    worker_recs, worker_s = ({}, 0.0)
    if not args.no_compile:
        worker_recs, worker_s = start_workers(args.workers, keys, ns,
                                              args.worker_timeout)
        print("bench_lif: %d compile workers compiled %d of %d keys in %.1f s"
              % (args.workers, sum(1 for r in worker_recs.values() if r["ok"]),
                 len(keys), worker_s))
        sys.stdout.flush()

    dev = torch.device("cuda")
    torch.zeros(1, device=dev)
    tdt = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}
    bundle = dc.Bundle(args.bundle)
    timer = Timer(torch, args.reps, 3)
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
    copy_ms, copy_min = timer.gpu_ms(lambda: dst.copy_(src), reps=30)
    copy_gbs = 2 * COPY_BYTES / (copy_ms * 1e-3) / 1e9
    del src, dst
    print("bench_lif: %s; copy %.1f GB/s (%.3f ms for 2 x 1 GiB)"
          % (torch.cuda.get_device_name(0), copy_gbs, copy_ms))
    sys.stdout.flush()

    compiled = {}
    compile_main = {}
    rows = []
    skipped = []
    meta = dict(
        device=torch.cuda.get_device_name(0), torch=torch.__version__,
        cuda=torch.version.cuda, stream=stream_note,
        bundle_commit=bundle.meta.get("git_commit"),
        copy_bytes=2 * COPY_BYTES, copy_ms=copy_ms, copy_gbs=copy_gbs,
        copy_end_gbs=None, reps=args.reps, compile_workers=args.workers,
        compile_worker_wall_s=worker_s,
        compile_workers_results=list(worker_recs.values()), skipped=[],
        complete=False)
    for N in ns:
        for variant in VARIANTS:
            for dtype in dtypes:
                for T in ts:
                    if time.time() - t_start > args.budget:
                        skipped.append((N, variant, dtype, T))
                        continue
                    key = key_str(variant, dtype, T)
                    row = bench_row(torch, np, bundle, timer, stream, tdt,
                                    variant, dtype, T, N, copy_gbs,
                                    compiled, compile_main, args, t_start)
                    w = worker_recs.get(key)
                    if w and w.get("ok") and w["calls"]:
                        row["compile_cold_s"] = w["calls"][0]["seconds"]
                        if len(w["calls"]) > 1:
                            row["compile_cold_dynamic_s"] = w["calls"][1][
                                "seconds"]
                    rows.append(row)
                    print_row(row)
                    sys.stdout.flush()
                    # Written as it goes: a run cut short keeps its rows.
                    meta["seconds"] = time.time() - t_start
                    write_outputs(args.out, meta, rows, with_plot=False)
    if skipped:
        print("bench_lif: budget of %.0f s reached: %d rows skipped"
              % (args.budget, len(skipped)))
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


def bench_row(torch, np, bundle, timer, stream, tdt, variant, dtype, T, N,
              copy_gbs, compiled, compile_main, args, t_start):
    es = ELEM[dtype]
    nbytes = row_bytes(variant, T, N, es)
    row = dict(N=N, T=T, dtype=dtype, variant=variant, bytes=nbytes)
    g = torch.Generator(device="cuda")
    g.manual_seed(zlib.crc32(("%d/%d/%s/%s" % (N, T, dtype, variant))
                             .encode()))
    x = (torch.randn((T, N), generator=g, device="cuda") * 0.9 + 0.8) \
        .to(tdt[dtype])
    v0 = (torch.rand((N,), generator=g, device="cuda") * 1.1 - 0.2) \
        .to(tdt[dtype])

    # FlexSN.
    kern = bundle.kernels[("lif", variant, dtype)]
    spike = torch.full((T, N), float("nan"), dtype=tdt[dtype], device="cuda")
    if variant == "inference":
        state = torch.full((T, N), float("nan"), dtype=tdt[dtype],
                           device="cuda")
    else:
        state = torch.full((N,), float("nan"), dtype=tdt[dtype], device="cuda")
    ptrs = [x.data_ptr(), v0.data_ptr(), spike.data_ptr(), state.data_ptr()]
    assert [b.role for b in kern.buffers] == [
        "input_sequence", "initial_state", "output_sequence",
        "state_sequence" if variant == "inference" else "final_state"]
    handle = torch.cuda.current_stream().cuda_stream
    status = kern(handle, T, N, 0, ptrs, [])
    torch.cuda.synchronize()
    row["status"] = bundle.status_name(status)
    if status != 0:
        row["error"] = bundle.message(status)
        return row
    row["unwritten"] = int(torch.isnan(spike).sum().item() +
                           torch.isnan(state).sum().item())

    def flexsn():
        kern(handle, T, N, 0, ptrs, [])
    ms, mn = timer.gpu_ms(flexsn)
    row.update(flexsn_ms=ms, flexsn_min_ms=mn)
    row["flexsn_gbs"] = nbytes / (ms * 1e-3) / 1e9
    row["frac_copy"] = row["flexsn_gbs"] / copy_gbs
    if N <= (1 << 20):
        row["flexsn_wall_us"] = timer.wall_us(flexsn)

    # Eager (also the f32 correctness yardstick).
    loop = make_loop(torch, variant, dtype, T)
    with torch.no_grad():
        e_spike, e_state = loop(x, v0)
        torch.cuda.synchronize()
        diff = (e_spike != spike).float().mean().item()
        row["spike_mismatch_vs_eager"] = diff
        if dtype == "f32":
            row["state_maxdiff_vs_eager"] = float(
                (e_state.float() - state.float()).abs().max().item())
        del e_spike, e_state
        ms, _ = timer.gpu_ms(lambda: loop(x, v0), warmup=1)
        row["eager_ms"] = ms
        if N <= (1 << 20):
            row["eager_wall_us"] = timer.wall_us(lambda: loop(x, v0), calls=5)
    del spike, state

    # torch.compile (first call per key and N here loads from the cache the
    # workers filled, or compiles).
    if not args.no_compile and \
            time.time() - t_start < args.budget - args.compile_reserve:
        key = key_str(variant, dtype, T)
        if key not in compiled:
            compiled[key] = torch.compile(loop)
        cfn = compiled[key]
        try:
            with torch.no_grad():
                t0 = time.time()
                out = cfn(x, v0)
                torch.cuda.synchronize()
                row["compile_first_call_s"] = time.time() - t0
                del out
                ms, _ = timer.gpu_ms(lambda: cfn(x, v0))
                row["compile_ms"] = ms
                if N <= (1 << 20):
                    row["compile_wall_us"] = timer.wall_us(lambda: cfn(x, v0))
        except Exception as e:
            row["compile_error"] = "%s: %s" % (type(e).__name__, str(e)[:300])

    # Same-mix stream.
    if stream is not None:
        sb = stream_bytes(variant, T, N, es)
        try:
            run = stream.make(T * N * es, 2 if variant == "inference" else 1)
            ms, _ = timer.gpu_ms(run)
            row["stream_ms"] = ms
            row["stream_bytes"] = sb
            row["stream_gbs"] = sb / (ms * 1e-3) / 1e9
            row["stream_frac_copy"] = row["stream_gbs"] / copy_gbs
            row["frac_stream"] = row["flexsn_gbs"] / row["stream_gbs"]
            del run
        except Exception as e:
            row["stream_error"] = "%s: %s" % (type(e).__name__, str(e)[:300])
    del x, v0

    for peer in ("eager", "compile"):
        if row.get(peer + "_ms"):
            row["speedup_" + peer] = row[peer + "_ms"] / row["flexsn_ms"]
            row[peer + "_frac_copy"] = nbytes / (row[peer + "_ms"] * 1e-3) \
                / 1e9 / copy_gbs
    tc, ts_ = TARGETS[variant]
    row["target_copy"] = tc
    row["meets_copy_target"] = row["frac_copy"] >= tc if N == NS[0] else None
    return row


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
             "after warm-up, CUDA events. Bytes that must move: inference "
             "(3T+1)N, final-state (2T+2)N elements."
             % (meta["device"], meta["torch"], meta["cuda"], meta["stream"],
                meta["copy_gbs"], fmt(meta.get("copy_end_gbs"), ".1f"),
                meta["reps"]), "",
             "| N | variant | dtype | T | FlexSN ms | GB/s | % copy | % stream "
             "| stream % copy | eager ms | compile ms | x eager | x compile "
             "| compile s (cold) | wall us/call |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        if r.get("status") != "FLEXSN_SUCCESS":
            lines.append("| 2^%d | %s | %s | %d | %s | | | | | | | | | | |"
                         % (r["N"].bit_length() - 1, r["variant"], r["dtype"],
                            r["T"], r.get("status")))
            continue
        mark = ""
        if r.get("meets_copy_target") is False:
            mark = " (< %d%%)" % round(100 * r["target_copy"])
        lines.append(
            "| 2^%d | %s | %s | %d | %.4f | %.0f | %.1f%s | %s | %s | %s | %s "
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
    if meta.get("skipped"):
        lines += ["", "%d rows skipped (time budget)." % len(meta["skipped"])]
    with open(os.path.join(out, "results.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    if not with_plot:
        return
    try:
        plot(out, meta, rows)
    except Exception as e:
        print("bench_lif: no plot: %s: %s" % (type(e).__name__, e))


def plot(out, meta, rows):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    ns = sorted({r["N"] for r in rows}, reverse=True)
    fig, axes = plt.subplots(len(VARIANTS), max(len(ns), 1),
                             figsize=(6 * max(len(ns), 1), 8), squeeze=False)
    peers = [("FlexSN", "frac_copy", "tab:red"),
             ("same-mix stream", "stream_frac_copy", "tab:gray"),
             ("torch.compile", "compile_frac_copy", "tab:blue"),
             ("eager", "eager_frac_copy", "tab:green")]
    for i, variant in enumerate(VARIANTS):
        for j, N in enumerate(ns):
            ax = axes[i][j]
            rs = [r for r in rows if r["N"] == N and r["variant"] == variant
                  and r.get("status") == "FLEXSN_SUCCESS"]
            labels = ["%s T%d" % (r["dtype"], r["T"]) for r in rs]
            width = 0.8 / len(peers)
            for k, (name, field, color) in enumerate(peers):
                vals = [r.get(field) or 0.0 for r in rs]
                ax.bar([p + (k - 1.5) * width for p in range(len(rs))], vals,
                       width, label=name, color=color)
            ax.axhline(1.0, color="k", lw=0.8)
            ax.axhline(TARGETS[variant][0], color="tab:red", lw=0.8, ls="--")
            ax.set_xticks(range(len(rs)))
            ax.set_xticklabels(labels, rotation=60, fontsize=8)
            ax.set_ylim(0, 1.1)
            ax.set_title("LIF %s, N = 2^%d" % (variant, N.bit_length() - 1))
            if j == 0:
                ax.set_ylabel("fraction of copy bandwidth")
    handles, labels = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="upper right", ncol=len(peers),
               fontsize=9)
    fig.suptitle("FlexSN LIF on %s: fraction of copy bandwidth (%.0f GB/s); "
                 "dashed: SPEC target" % (meta["device"], meta["copy_gbs"]),
                 x=0.02, ha="left")
    fig.tight_layout(rect=(0, 0, 1, 0.95))
    fig.savefig(os.path.join(out, "bench.png"), dpi=110)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bundle", default=".device")
    ap.add_argument("--out", default="bench-out")
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--budget", type=float, default=200.0,
                    help="seconds after which no new row starts")
    ap.add_argument("--compile-reserve", type=float, default=15.0,
                    help="skip torch.compile when less than this is left")
    ap.add_argument("--workers", type=int,
                    default=min(8, max(1, (os.cpu_count() or 2) // 2)))
    ap.add_argument("--worker-timeout", type=float, default=120.0)
    ap.add_argument("--no-compile", action="store_true")
    ap.add_argument("--quick", action="store_true",
                    help="N in {2^20, 2^16}, T in {4, 16}, f32/f16 only")
    ap.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--worker-ns", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker is not None:
        keys = [tuple(k) for k in json.loads(args.worker)]
        ns = [int(n) for n in args.worker_ns.split(",")]
        return worker_main(keys, ns)
    args.reps = max(args.reps, 20)
    meta, rows = run_bench(args)
    write_outputs(args.out, meta, rows)
    big = [r for r in rows if r["N"] == NS[0] and "frac_copy" in r]
    if big:
        worst = min(big, key=lambda r: r["frac_copy"])
        print("bench_lif: N=2^24: FlexSN %.1f%%-%.1f%% of copy (worst %s %s "
              "T=%d); results in %s"
              % (100 * worst["frac_copy"],
                 100 * max(r["frac_copy"] for r in big), worst["variant"],
                 worst["dtype"], worst["T"], args.out))
    bad = [r for r in rows if r.get("status") != "FLEXSN_SUCCESS" or
           r.get("unwritten")]
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
