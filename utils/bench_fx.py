"""Neurons written in Python (flexsn.fx) against the hand-written ones.

    python3 utils/bench_fx.py --compile-only [--out DIR]   # here, with tools
    python3 utils/bench_fx.py --out DIR                     # on the GPU machine

With the tools (--compile-only): the first call of FlexSN(core) at T = 64
from an empty cache (import, every tool run for the CPU and CUDA kernels of
all four variants in f32/f16/bf16, load, a forward + backward on the CPU),
how many tool runs it made, and that calls at other T and N run none; then
it fills $FLEXSN_CACHE_DIR with what the GPU run needs.

On the GPU (the cache filled here, FLEXSN_CACHE_DIR and FLEXSN_RUNTIME_LIB
set as for utils/device_torch.py):
  first-call   a fresh process's FlexSN(core) at T = 64, N = 2^20: from the
               module's construction (cache lookup, image load) to the
               synchronized first output;
  kernels      LIF imported from the Python step below against the shipped
               lib/Neurons/lif.mlir, N = 2^24, T = 16, f32 and f16:
               inference, final-state, forward + backward; CUDA events,
               back-to-back launches, the two interleaved; target: the
               imported kernels within 2%;
  compile      torch.compile(fullgraph=True) of a model holding FlexSN(core):
               forward + backward, no graph break, equal to eager.
Writes DIR/fx_results.json; exits 1 if a check fails.
"""

import argparse
import json
import os
import pathlib
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "python")]

import torch  # noqa: E402

import flexsn  # noqa: E402
from flexsn import fx, surrogate  # noqa: E402
from flexsn.torch import FlexSN  # noqa: E402

COMPILE = dict(variants=("inference", "final-state", "forward", "backward"),
               storage_types=("f32", "f16"), targets=("cpu", "cuda"),
               chip="sm_90")
N_KERNEL, T_KERNEL = 1 << 24, 16
TARGET = 0.02


def lif_core(x, v, tau=2.0, v_threshold=1.0, v_reset=0.0):
    """lib/Neurons/lif.mlir's step (decay_input, hard reset) in PyTorch."""
    h = v + (x - (v - v_reset)) / tau
    s = fx.spike(h - v_threshold, surrogate=surrogate.Sigmoid(alpha=4.0))
    return s, s * v_reset + (1.0 - s) * h


def imported_lif():
    text = fx.import_step(lif_core, num_inputs=1, num_states=1, name="lif")
    return flexsn.compile(text, **COMPILE)


def record(results, name, ok, **details):
    results.append(dict(check=name, ok=bool(ok), **details))
    print("%s  %s  %s" % ("PASS" if ok else "FAIL", name, details))
    sys.stdout.flush()


# ---------------------------------------------------------------------------
# Here, with the tools


def count_tool_runs():
    """Patches flexsn's tool runner to count runs: returns the counter."""
    from flexsn import _tools
    counter = {"runs": 0}
    run = _tools.run

    def counted(*args, **kwargs):
        counter["runs"] += 1
        return run(*args, **kwargs)

    _tools.run = counted
    return counter


def time_first_call(results):
    """FlexSN(core) from an empty cache in a fresh process (this one's
    compile memo and cache stay out of it)."""
    env = dict(os.environ,
               FLEXSN_CACHE_DIR=tempfile.mkdtemp(prefix="flexsn-fx-"))
    out = subprocess.run([sys.executable, __file__, "--first-call"], env=env,
                         check=True, stdout=subprocess.PIPE,
                         universal_newlines=True)
    rec = json.loads(out.stdout.splitlines()[-1])
    record(results, rec.pop("check"), rec.pop("ok"), **rec)


def first_call():
    """Import, compile, load, first call at T = 64; then new T and N must
    run no tool. Prints the record as JSON."""
    results = []
    counter = count_tool_runs()
    start = time.perf_counter()
    module = FlexSN(lif_core, 1, 1, 1)  # CPU and CUDA kernels, 3 dtypes
    built = time.perf_counter()
    x = torch.randn(64, 4096) + 0.8
    module(x.requires_grad_()).sum().backward()
    first = time.perf_counter()
    runs = counter["runs"]
    for T, N in ((4, 100), (128, 7), (64, 4096)):
        module.reset()
        x = torch.randn(T, N, requires_grad=True)
        module(x).sum().backward()
    record(results, "FlexSN(core) first call from an empty cache (CPU)",
           counter["runs"] == runs, construct_s=built - start,
           first_call_s=first - start, tool_runs=runs,
           targets=list(module.compiled.targets),
           tool_runs_for_new_T_and_N=counter["runs"] - runs)
    print(json.dumps(results[0]))


# ---------------------------------------------------------------------------
# On the GPU


def first_call_on_gpu(results):
    """A fresh process: construction (cache lookup, kernels loaded on first
    use) to the synchronized first output at T = 64, N = 2^20."""
    code = (
        "import sys, time; sys.path[:0] = [%r, %r]\n"
        "t0 = time.perf_counter()\n"
        "import torch, bench_fx\n"
        "x = torch.randn(64, 1 << 20, device='cuda')\n"
        "torch.cuda.synchronize(); t1 = time.perf_counter()\n"
        "m = bench_fx.FlexSN(bench_fx.lif_core, 1, 1, 1)\n"
        "y = m(x); torch.cuda.synchronize(); t2 = time.perf_counter()\n"
        "print(t2 - t1, t1 - t0)\n" % (str(ROOT / "python"),
                                      str(ROOT / "utils")))
    out = subprocess.run([sys.executable, "-c", code], check=True,
                         stdout=subprocess.PIPE, universal_newlines=True)
    first, startup = map(float, out.stdout.split())
    record(results, "FlexSN(core) first call on the GPU (cached)", True,
           first_call_s=first, python_and_torch_startup_s=startup)


def buffers(torch_, T, N, dtype):
    g = torch_.Generator(device="cuda").manual_seed(7)
    x = (torch_.randn((T, N), generator=g, device="cuda") * 0.9 + 0.8).to(
        dtype)
    return dict(x=x, spike=torch_.empty_like(x), v_seq=torch_.empty_like(x),
                v_final=x.new_empty(N), spike_grad=torch_.randn_like(x),
                x_grad=torch_.empty_like(x), v_init_grad=x.new_empty(N))


def launcher(compiled, variant, dtype, bufs, workspace, T, N):
    """A function that launches `variant` ("train": forward, then backward)
    of `compiled` on `bufs`."""
    stream = torch.cuda.current_stream().cuda_stream
    given = {"inference": ("x", "spike", "v_seq"),
             "final-state": ("x", "spike", "v_final"),
             "forward": ("x", "spike"),
             "backward": ("spike_grad", "x_grad", "v_init_grad")}

    def args(kernel, kernel_variant):
        names = [b.name for b in kernel.spec.buffers if not b.in_workspace]
        return [bufs[n].data_ptr() if n in given[kernel_variant] else 0
                for n in names]

    if variant == "train":
        fwd = compiled.kernel("cuda", "forward", dtype)
        bwd = compiled.kernel("cuda", "backward", dtype)
        fa, ba = args(fwd, "forward"), args(bwd, "backward")
        wp = workspace.data_ptr()
        return lambda: (fwd.launch(stream, T, N, 0, fa, wp),
                        bwd.launch(stream, T, N, 0, ba, wp))
    kernel = compiled.kernel("cuda", variant, dtype)
    ka = args(kernel, variant)
    return lambda: kernel.launch(stream, T, N, 0, ka, 0)


def event_ms(fn, calls=10):
    s, e = torch.cuda.Event(True), torch.cuda.Event(True)
    s.record()
    for _ in range(calls):
        fn()
    e.record()
    e.synchronize()
    return s.elapsed_time(e) / calls


def compare_kernels(results):
    hand = flexsn.compile("lif", **COMPILE)
    imported = imported_lif()
    T, N = T_KERNEL, N_KERNEL
    dtypes = {"f32": torch.float32, "f16": torch.float16}
    for dtype_name, dtype in dtypes.items():
        bufs = buffers(torch, T, N, dtype)
        nbytes = max(c.kernel("cuda", "forward", dtype_name).spec
                     .workspace_size(T, N, N) for c in (hand, imported))
        workspace = torch.empty((nbytes + 3) // 4, device="cuda")
        for variant in ("inference", "final-state", "train"):
            fns = {name: launcher(c, variant, dtype_name, bufs, workspace, T,
                                  N)
                   for name, c in (("hand", hand), ("imported", imported))}
            for fn in fns.values():
                for _ in range(3):
                    fn()
            torch.cuda.synchronize()
            times = {name: [] for name in fns}
            for _ in range(15):  # interleaved: drift hits both alike
                for name, fn in fns.items():
                    times[name].append(event_ms(fn))
            hand_ms = statistics.median(times["hand"])
            imp_ms = statistics.median(times["imported"])
            ratio = imp_ms / hand_ms
            record(results, "imported LIF %s %s N=2^24 T=%d" % (
                variant, dtype_name, T), ratio <= 1 + TARGET,
                hand_ms=hand_ms, imported_ms=imp_ms, ratio=ratio)
        # Same results, too (the same arithmetic, up to contraction).
        out = {}
        for name, c in (("hand", hand), ("imported", imported)):
            launcher(c, "inference", dtype_name, bufs, workspace, T, N)()
            torch.cuda.synchronize()
            out[name] = (bufs["spike"].clone(), bufs["v_seq"].clone())
        flips = float((out["hand"][0] != out["imported"][0]).float().mean())
        dv = float((out["hand"][1].float() - out["imported"][1].float())
                   .abs().max())
        record(results, "imported LIF inference %s equals the shipped one"
               % dtype_name, flips < 1e-5, spike_flip_fraction=flips,
               v_seq_max_abs_diff=dv)


def compile_check(results):
    try:
        torch._dynamo.reset()
        lin = torch.nn.Linear(32, 64).cuda()
        node = FlexSN(lif_core, 1, 1, 1)

        def f(x):
            node.reset()
            return node(lin(x))

        x = torch.randn(8, 16, 32, device="cuda", requires_grad=True)
        compiled = torch.compile(f, fullgraph=True)
        y = compiled(x)
        y.sum().backward()
        g = x.grad.clone()
        x.grad = None
        y_eager = f(x)
        y_eager.sum().backward()
        explain = torch._dynamo.explain(f)(x)
        ok = (torch.equal(y, y_eager) and torch.allclose(g, x.grad)
              and explain.graph_break_count == 0)
        record(results, "torch.compile(fullgraph) with FlexSN(core)", ok,
               graph_breaks=explain.graph_break_count,
               grad_max_diff=float((g - x.grad).abs().max()))
    except Exception as e:  # a failure to compile is the finding
        record(results, "torch.compile(fullgraph) with FlexSN(core)", False,
               error="%s: %s" % (type(e).__name__, str(e)[:500]))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--compile-only", action="store_true",
                    help="here: time the first call with the tools, then fill "
                         "the cache")
    ap.add_argument("--out", help="write fx_results.json here")
    ap.add_argument("--first-call", action="store_true",
                    help=argparse.SUPPRESS)  # time_first_call's process
    args = ap.parse_args()
    results = []
    if args.first_call:
        return first_call()
    if args.compile_only:
        time_first_call(results)
        flexsn.compile("lif", **COMPILE)
        imported_lif()
        FlexSN(lif_core, 1, 1, 1)  # the default targets, as on the GPU
    else:
        if not torch.cuda.is_available():
            sys.exit("bench_fx.py: no CUDA GPU (use --compile-only here)")
        first_call_on_gpu(results)
        compare_kernels(results)
        compile_check(results)
    failed = sum(not r["ok"] for r in results)
    print("bench_fx: %d passed, %d failed" % (len(results) - failed, failed))
    if args.out:
        pathlib.Path(args.out).mkdir(parents=True, exist_ok=True)
        name = "fx_compile.json" if args.compile_only else "fx_results.json"
        (pathlib.Path(args.out) / name).write_text(json.dumps(
            dict(torch=torch.__version__, results=results), indent=1))
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
