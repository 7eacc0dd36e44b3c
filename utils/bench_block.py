#!/usr/bin/env python3
"""A spiking block as one kernel: batch-norm apply + LIF + residual add.

    python3 utils/bench_block.py --compile-only --cubin FILE   (here: tools)
    python3 utils/bench_block.py --cubin FILE [--out DIR]      (on a GPU)

The block is test/Pipelines/Inputs/bn_lif_block.mlir: y = s + x where s
are the spikes of a LIF neuron (tau = 2, threshold 1, hard reset to 0)
driven by x * scale[c] + shift[c], over [T, B, C, S]; it also returns the
final membrane potential. `--compile-only` compiles it with the FlexSN
tools (the pipeline fuses it into one scan, kernel generation makes
bn_lif_inference_f32, also LIF's own final-state kernel) into FILE; on
the GPU the script loads FILE with CuPy and:

- checks the fused kernel against eager PyTorch on three shapes (one
  whose N is no multiple of 4, for the scalar kernel), bitwise;
- times it at N = 2^24 neurons ([T, 32, 64, 8192]), T in {4, 16}, against
  the same block unfused: PyTorch's addcmul for the normalization, LIF's
  final-state kernel, PyTorch's add for the residual; and against the
  device-to-device copy bandwidth measured in the same run, on the bytes
  the fused kernel must move ((2 T + 1) N floats).

Writes block_results.json and .md to --out. The kernels are launched
directly (the vector kernel where N is a multiple of 4, as the runtime
chooses), with the ABI of docs/ABI.md: buffers (x, v_init (null: zeros),
y, v, scale, shift), then T, N, ld, C, S.
"""

import argparse
import os
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
BLOCK = os.path.join(ROOT, "test", "Pipelines", "Inputs", "bn_lif_block.mlir")
TS = (4, 16)
B, C, S = 32, 64, 8192  # N = 2^24


def compile_block(cubin):
    build = os.environ.get("FLEXSN_BUILD_DIR", os.path.join(ROOT, "build"))
    toolkit = os.environ.get("FLEXSN_CUDA_TOOLKIT", "/usr/local/cuda")
    with tempfile.TemporaryDirectory() as work:
        lowered = os.path.join(work, "block.gpu.mlir")
        subprocess.run([os.path.join(build, "bin", "flexsn-opt"), BLOCK,
                        "--flexsn-lower-to-nvvm=variants=inference,final-state"
                        " storage-types=f32 toolkit=" + toolkit,
                        "-o", lowered], check=True)
        subprocess.run([os.path.join(build, "bin", "flexsn-translate"),
                        "--flexsn-to-cubin", lowered, "-o", cubin], check=True)


def reference(torch, x, scale, shift):
    """Eager PyTorch of the block: (y, final v)."""
    p = x * scale.view(1, 1, -1, 1) + shift.view(1, 1, -1, 1)
    v = torch.zeros_like(x[0])
    ys = []
    for t in range(x.shape[0]):
        h = v + (p[t] - v) / 2.0
        s = (h - 1.0 >= 0).to(x.dtype)
        v = (1.0 - s) * h
        ys.append(s + x[t])
    return torch.stack(ys), v


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cubin", required=True)
    ap.add_argument("--compile-only", action="store_true")
    ap.add_argument("--out", default="block-out")
    args = ap.parse_args()
    if args.compile_only:
        compile_block(args.cubin)
        return 0

    import torch
    import cupy as cp
    sys.path.insert(0, HERE)
    from bench_placement import copy_gbs, load_bench, write_results
    bench = load_bench()
    timer = bench.Timer(torch, 20, 3)
    module = cp.RawModule(path=args.cubin)
    vec = module.get_function("bn_lif_inference_f32_vec")
    scalar = module.get_function("bn_lif_inference_f32_scalar")
    lif_final = module.get_function("lif_final_state_f32_vec")
    stream = cp.cuda.ExternalStream(torch.cuda.current_stream().cuda_stream)

    def grid(groups):
        return ((groups + 255) // 256,), (256,)

    def fused(x, scale, shift, y, v):
        T, b, c, s = x.shape
        n = b * c * s
        kernel, groups = (vec, n // 4) if n % 4 == 0 else (scalar, n)
        kernel(*grid(groups),
               (cp.uint64(x.data_ptr()), cp.uint64(0))  # v_init: zeros
               + tuple(cp.uint64(t.data_ptr()) for t in (y, v, scale, shift))
               + tuple(cp.int64(k) for k in (T, n, n, c, s)), stream=stream)

    g = torch.Generator(device="cuda").manual_seed(0)
    meta = dict(device=torch.cuda.get_device_name(0), torch=torch.__version__,
                checks=[], rows=[])
    for shape in ((3, 2, 5, 7), (16, 4, 8, 33), (4, 1, 3, 1)):
        x = torch.randn(shape, generator=g, device="cuda") * 0.9 + 0.6
        scale = torch.rand(shape[2], generator=g, device="cuda") + 0.5
        shift = torch.randn(shape[2], generator=g, device="cuda") * 0.3
        y = torch.full_like(x, float("nan"))
        v = torch.full_like(x[0], float("nan"))
        fused(x, scale, shift, y, v)
        torch.cuda.synchronize()
        ry, rv = reference(torch, x, scale, shift)
        meta["checks"].append(dict(shape=list(shape), bitwise=bool(
            torch.equal(y, ry) and torch.equal(v, rv))))
        print("bench_block: check %s bitwise equal to eager: %s"
              % (shape, meta["checks"][-1]["bitwise"]))

    copy = copy_gbs(torch, bench, timer)
    meta["copy_gbs"] = copy
    n = B * C * S
    for T in TS:
        x = torch.randn((T, B, C, S), generator=g, device="cuda")
        scale = torch.rand(C, generator=g, device="cuda") + 0.5
        shift = torch.randn(C, generator=g, device="cuda") * 0.3
        y, v = torch.empty_like(x), torch.empty_like(x[0])
        p, spikes = torch.empty_like(x), torch.empty_like(x)
        sc, sh = scale.view(1, 1, -1, 1), shift.view(1, 1, -1, 1)

        def unfused():
            torch.addcmul(sh.expand_as(x), x, sc, out=p)
            lif_final(*grid(n // 4),
                      (cp.uint64(p.data_ptr()), cp.uint64(0),
                       cp.uint64(spikes.data_ptr()), cp.uint64(v.data_ptr()),
                       cp.int64(T), cp.int64(n), cp.int64(n)), stream=stream)
            torch.add(spikes, x, out=y)

        times = {"fused": [], "unfused": []}
        calls = {"fused": lambda: fused(x, scale, shift, y, v),
                 "unfused": unfused}
        for _ in range(3):
            for k, fn in calls.items():
                times[k].append(timer.gpu_ms(fn)[0])
        fused_ms = statistics.median(times["fused"])
        unfused_ms = statistics.median(times["unfused"])
        nbytes = (2 * T * n + n) * 4
        row = dict(T=T, N=n, shape=[T, B, C, S], fused_ms=fused_ms,
                   unfused_ms=unfused_ms, bytes=nbytes,
                   frac_copy=nbytes / (fused_ms * 1e-3) / 1e9 / copy,
                   speedup=unfused_ms / fused_ms)
        meta["rows"].append(row)
        print("bench_block: T=%d N=2^24 fused %.4f ms (%.1f%% of copy), "
              "unfused %.4f ms: %.2fx" % (T, fused_ms, 100 * row["frac_copy"],
                                          unfused_ms, row["speedup"]))
        sys.stdout.flush()

    write_results(args.out, "block_results", meta, markdown(meta))
    return 0 if all(c["bitwise"] for c in meta["checks"]) else 1


def markdown(meta):
    lines = [
        "# A spiking block as one kernel (inference)",
        "",
        "`python3 utils/bench_block.py` on %s (torch %s), copy %.0f GB/s in "
        "the same run. The block (batch-norm apply with per-channel scale "
        "and shift, LIF, residual add; test/Pipelines/Inputs/"
        "bn_lif_block.mlir) compiled to one kernel by the pipeline's "
        "fusion, against the same block unfused (torch.addcmul, LIF's "
        "final-state kernel, torch.add). %% of copy on the fused kernel's "
        "bytes, (2T + 1) N floats; median of three medians of 20 CUDA-event "
        "timings." % (meta["device"], meta["torch"], meta["copy_gbs"]),
        "",
        "| [T, B, C, S] | fused ms | % copy | unfused ms | speedup |",
        "|---|---|---|---|---|",
    ]
    for r in meta["rows"]:
        lines.append("| %s | %.4f | %.1f | %.4f | %.2fx |" % (
            r["shape"], r["fused_ms"], 100 * r["frac_copy"], r["unfused_ms"],
            r["speedup"]))
    lines.append("")
    lines.append("Bitwise equal to eager PyTorch: " + ", ".join(
        "%s %s" % (c["shape"], "yes" if c["bitwise"] else "NO")
        for c in meta["checks"]) + ".")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
