#!/usr/bin/env python3
"""LIF training with the charge saved in f32 or in the storage type.

    python3 utils/bench_saved_storage.py [--out DIR]

For f16 and bf16, T in {4, 16, 64}, N = 2^24: times LIF's training forward
+ backward compiled as the benchmark compiles it (h saved in f32) and with
`save_in_storage_type=True` (h saved in the storage type), and with
`approximate_surrogates=True` as well (the surrogate's exp and division
approximate), on the same buffers (one workspace, sized for the f32
saves, serves all three: only the kernels differ), in turn twice and
averaging each kernel's two medians (CUDA events, as utils/bench_lif.py
times). Each is reported as a fraction of the device-to-device copy
bandwidth measured first, on its own bytes: T N (4 es + 2 saved) + 2 N es
(forward: x, spike, h; backward: spike gradient, h, x gradient; v_init and
its gradient).

The precision cost, at N = 2^20 and the same T: the kernels' input
gradients against float64 autograd of the same LIF loop on the same
(rounded) inputs, as the mean absolute error over the mean absolute
gradient, the largest error over the largest gradient, and the fraction of
elements off by more than 1% of the largest gradient; also whether all
wrote the same spikes (the forward does not depend on how h is saved).

Writes saved_storage_results.json and .md to --out. Needs the compile
cache of the bundle (utils/gpu_bundle.sh compiles them).
"""

import argparse
import os
import sys

from bench_placement import copy_gbs, load_bench, write_results

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "python"))

N_TIME, N_PRECISION = 1 << 24, 1 << 20
TS = (4, 16, 64)
DTYPES = ("f16", "bf16")
MODES = ("f32", "storage", "approx")


def compile_all(bench):
    """{mode: compiled LIF}: the benchmark's, saving in the storage type,
    and that with approximate surrogates."""
    import flexsn
    storage = dict(variants=("forward", "backward"), storage_types=DTYPES,
                   save_in_storage_type=True, **bench.COMPILE_OPTIONS)
    return {"f32": flexsn.compile("lif", **bench.LIF_COMPILE),
            "storage": flexsn.compile("lif", **storage),
            "approx": flexsn.compile("lif", approximate_surrogates=True,
                                     **storage)}


def training_call(torch, bench, kernels, dtype, T, N):
    """Buffers for one training step at [T, N] and, per mode, a function
    launching its forward and backward on them; returns (calls, outputs
    per mode: spike, x_grad, v_init_grad, each mode's own copies)."""
    x, v0, gs = bench.make_inputs(torch, "train", dtype, T, N)
    tdt = bench.tdtypes(torch)[dtype]
    handle = torch.cuda.current_stream().cuda_stream
    pairs = {m: (k.kernel("cuda", "forward", dtype),
                 k.kernel("cuda", "backward", dtype))
             for m, k in kernels.items()}
    ws = bench.new_workspace(torch, [k for p in pairs.values() for k in p],
                             T, N)
    calls, outs = {}, {}
    for mode, (kf, kb) in pairs.items():
        spike = torch.empty((T, N), dtype=tdt, device="cuda")
        xg = torch.empty((T, N), dtype=tdt, device="cuda")
        vg = torch.empty((N,), dtype=tdt, device="cuda")
        pf = bench.addresses(kf, {"x": x, "v_init": v0, "spike": spike})
        pb = bench.addresses(kb, {"spike_grad": gs, "x_grad": xg,
                                  "v_init_grad": vg})

        def call(kf=kf, kb=kb, pf=pf, pb=pb):
            kf.launch(handle, T, N, 0, pf, ws.data_ptr())
            kb.launch(handle, T, N, 0, pb, ws.data_ptr())
        calls[mode], outs[mode] = call, (spike, xg, vg)
    return calls, outs, (x, v0, gs)


def saved_bytes(mode, dtype, bench):
    return 4 if mode == "f32" else bench.ELEM[dtype]


def reference_grads(torch, bench, x, v0, gs, T):
    """float64 autograd of the benchmark's LIF loop: (x_grad, v0_grad)."""
    loop = bench.make_loop(torch, "train", "f64", T)
    xr = x.double().requires_grad_(True)
    vr = v0.double().requires_grad_(True)
    s = loop(xr, vr)
    return torch.autograd.grad(s, (xr, vr), gs.double())


def errors(got, want):
    d = (got.double() - want).abs()
    scale = want.abs().max().item() or 1.0
    return dict(mean_rel=d.mean().item() / (want.abs().mean().item() or 1.0),
                max_rel=d.max().item() / scale,
                beyond_1pct=(d > 1e-2 * scale).double().mean().item())


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="saved-storage-out")
    args = ap.parse_args()
    import torch
    bench = load_bench()
    kernels = compile_all(bench)
    timer = bench.Timer(torch, 20, 3)
    copy = copy_gbs(torch, bench, timer)
    meta = dict(device=torch.cuda.get_device_name(0), torch=torch.__version__,
                copy_gbs=copy, rows=[], precision=[])
    print("bench_saved_storage: %s, copy %.0f GB/s" % (meta["device"], copy))

    for dtype in DTYPES:
        es = bench.ELEM[dtype]
        for T in TS:
            calls, _, _ = training_call(torch, bench, kernels, dtype, T,
                                        N_TIME)
            times = {m: [] for m in MODES}
            for _ in range(2):
                for m in MODES:
                    calls[m]()
                    times[m].append(timer.gpu_ms(calls[m])[0])
            row = dict(dtype=dtype, T=T, N=N_TIME)
            for m in MODES:
                ms = sum(times[m]) / len(times[m])
                nbytes = (T * N_TIME * (4 * es + 2 * saved_bytes(m, dtype,
                                                                  bench))
                          + 2 * N_TIME * es)
                row[m] = dict(ms=ms, medians=times[m], bytes=nbytes,
                              frac_copy=nbytes / (ms * 1e-3) / 1e9 / copy)
            for m in MODES[1:]:
                row[m]["speedup"] = row["f32"]["ms"] / row[m]["ms"]
            meta["rows"].append(row)
            print("bench_saved_storage: %s T=%d N=2^24: h in f32 %.4f ms "
                  "(%.1f%% of copy), in %s %.4f ms (%.1f%%): x%.3f, also "
                  "approximate surrogates %.4f ms (%.1f%%): x%.3f" % (
                      dtype, T, row["f32"]["ms"],
                      100 * row["f32"]["frac_copy"], dtype,
                      row["storage"]["ms"], 100 * row["storage"]["frac_copy"],
                      row["storage"]["speedup"], row["approx"]["ms"],
                      100 * row["approx"]["frac_copy"],
                      row["approx"]["speedup"]))
            sys.stdout.flush()
            del calls
            torch.cuda.empty_cache()

    for dtype in DTYPES:
        for T in TS:
            calls, outs, (x, v0, gs) = training_call(
                torch, bench, kernels, dtype, T, N_PRECISION)
            for m in MODES:
                calls[m]()
            torch.cuda.synchronize()
            gx, gv = reference_grads(torch, bench, x, v0, gs, T)
            rec = dict(dtype=dtype, T=T, N=N_PRECISION,
                       same_spikes=all(torch.equal(outs["f32"][0],
                                                   outs[m][0])
                                       for m in MODES[1:]))
            for m in MODES:
                rec[m] = dict(x_grad=errors(outs[m][1], gx),
                              v_init_grad=errors(outs[m][2], gv))
            meta["precision"].append(rec)
            print("bench_saved_storage: %s T=%d N=2^20 x_grad vs float64 "
                  "(mean, max, beyond 1%%): h in f32 %.2e %.2e %.2e; in %s "
                  "%.2e %.2e %.2e; also approximate %.2e %.2e %.2e; same "
                  "spikes: %s" % (
                      dtype, T, *rec["f32"]["x_grad"].values(), dtype,
                      *rec["storage"]["x_grad"].values(),
                      *rec["approx"]["x_grad"].values(), rec["same_spikes"]))
            sys.stdout.flush()
            del calls, outs, x, v0, gs, gx, gv
            torch.cuda.empty_cache()

    write_results(args.out, "saved_storage_results", meta, markdown(meta))
    return 0


def markdown(meta):
    lines = [
        "# LIF training: the charge saved in f32 or in the storage type",
        "",
        "From `python3 utils/bench_saved_storage.py` (docstring: method), "
        "%s, torch %s, copy %.0f GB/s measured in the same run. Forward + "
        "backward, %% of copy on each call's own bytes (h in f32: T N (4 es "
        "+ 8) + 2 N es; in the storage type: T N 6 es + 2 N es). storage: "
        "`save_in_storage_type=True`; + approx: also "
        "`approximate_surrogates=True`; x: speedup over h in f32."
        % (meta["device"], meta["torch"], meta["copy_gbs"]),
        "",
        "| dtype | T | h in f32: ms | % copy | storage: ms | % copy | x "
        "| + approx: ms | % copy | x |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in meta["rows"]:
        a, b, c = (r[m] for m in MODES)
        lines.append("| %s | %d | %.4f | %.1f | %.4f | %.1f | %.3f | %.4f "
                     "| %.1f | %.3f |" % (
                         r["dtype"], r["T"], a["ms"], 100 * a["frac_copy"],
                         b["ms"], 100 * b["frac_copy"], b["speedup"],
                         c["ms"], 100 * c["frac_copy"], c["speedup"]))
    lines += [
        "",
        "Precision, N = 2^20: the input gradient against float64 autograd "
        "of the same loop on the same inputs: mean |error| / mean "
        "|gradient|; max |error| / max |gradient|; the fraction of elements "
        "off by more than 1% of the max |gradient|. Same spikes: all three "
        "kernels wrote identical spikes.",
        "",
        "| dtype | T | h in f32: mean | max | > 1% | storage: mean | max "
        "| > 1% | + approx: mean | max | > 1% | same spikes |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in meta["precision"]:
        cells = []
        for m in MODES:
            e = r[m]["x_grad"]
            cells += ["%.2e" % e["mean_rel"], "%.2e" % e["max_rel"],
                      "%.2e" % e["beyond_1pct"]]
        lines.append("| %s | %d | %s | %s |" % (
            r["dtype"], r["T"], " | ".join(cells),
            "yes" if r["same_spikes"] else "no"))
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
