#!/usr/bin/env python3
"""How much LIF's inference rows depend on where their buffers are allocated.

    python3 utils/bench_placement.py [--out FILE]

Times the same rows as utils/bench_lif.py (its bench_row: the same
kernels, inputs, NaN-filled outputs and CUDA-event timing, against a copy
measured first), N = 2^24, T in {4, 16, 64}, f32 and f16, in three orders
in one process: as the benchmark runs them (f32, then f16), then f16 and
f32 again after torch.cuda.empty_cache(), so that the caching allocator
places the buffers anew. Only the placement differs between two
measurements of a row. Prints one line per measurement (and writes them to
--out). Needs the same compile cache as bench_lif.py (--compile-only
there).
"""

import argparse
import importlib.util
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "python"))


def load_bench():
    spec = importlib.util.spec_from_file_location(
        "bench_lif", os.path.join(HERE, "bench_lif.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def write_results(out, stem, meta, markdown):
    """Writes `meta` as OUT/<stem>.json and `markdown` as OUT/<stem>.md."""
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, stem + ".json"), "w") as f:
        json.dump(meta, f, indent=1)
    with open(os.path.join(out, stem + ".md"), "w") as f:
        f.write(markdown)


def copy_gbs(torch, bench, timer):
    """The device-to-device copy bandwidth (read + write) of 1 GiB."""
    src = torch.rand(bench.COPY_BYTES // 4, device="cuda")
    dst = torch.empty_like(src)
    ms, _ = timer.gpu_ms(lambda: dst.copy_(src))
    return 2 * bench.COPY_BYTES / (ms * 1e-3) / 1e9


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    import torch
    import flexsn
    bench = load_bench()
    lif = flexsn.compile("lif", **bench.LIF_COMPILE)
    timer = bench.Timer(torch, 20, 3)
    copy = copy_gbs(torch, bench, timer)
    lines = ["%s, copy %.0f GB/s (1 GiB)" % (torch.cuda.get_device_name(0),
                                             copy)]
    print(lines[0])
    orders = (("benchmark order", ("f32", "f16")),
              ("after empty_cache", ("f16", "f32")))
    for label, dtypes in orders:
        if label != orders[0][0]:
            torch.cuda.empty_cache()
        for dtype in dtypes:
            for T in (4, 16, 64):
                row = bench.bench_row(torch, lif, timer, None, "inference",
                                      dtype, T, 1 << 24, copy)
                frac = row["bytes"] / (row["flexsn_ms"] * 1e-3) / 1e9 / copy
                lines.append("%-18s inference %-4s T=%-3d %.4f ms  %.1f%% of "
                             "copy" % (label, dtype, T, row["flexsn_ms"],
                                       100 * frac))
                print(lines[-1])
                sys.stdout.flush()
    if args.out:
        with open(args.out, "w") as f:
            f.write("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
