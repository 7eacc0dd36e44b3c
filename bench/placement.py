"""How much LIF's inference rows depend on where their buffers are allocated.

    python3 -m bench placement [--out FILE]
    python3 -m bench placement --smoke [--out FILE]   # tiny, on the CPU

Times the same rows as `python3 -m bench lif` (its bench_row: the same
kernels, inputs, NaN-filled outputs and timing, against a copy measured
first), N = 2^24, T in {4, 16, 64}, f32 and f16, in three orders in one
process: as the benchmark runs them (f32, then f16), then f16 and f32 again
after torch.cuda.empty_cache(), so that the caching allocator places the
buffers anew. Only the placement differs between two measurements of a
row. Prints one line per measurement (and writes them to --out). Needs the
same compile cache as lif (its --compile-only). --smoke: N = 2^12, T = 4,
f32 and bf16 on the CPU, into placement_results.txt in a temporary folder
unless --out is given.
"""

import os
import sys
import tempfile

from . import cli, kernels, traffic
from .lif import bench_row, size_text
from .timing import Timer

PROG = "bench placement"


def main(argv=None):
    ap = cli.parser("placement", __doc__)
    ap.add_argument("--out", default=None, help="also write the lines here")
    ap.add_argument(
        "--smoke",
        action="store_true",
        help="tiny shapes on the CPU, few repeats",
    )
    args = ap.parse_args(argv)
    if args.smoke and args.out is None:
        args.out = os.path.join(
            tempfile.mkdtemp(prefix="flexsn-bench-"), "placement_results.txt"
        )
    import torch
    import flexsn

    device = cli.device(torch, args, PROG)
    if device is None:
        return 2
    smoke = args.smoke
    lif = flexsn.compile("lif", **kernels.lif_compile(smoke))
    timer = Timer(torch, device, 3 if smoke else 20, 1 if smoke else 3)
    copy, _ = traffic.copy_gbs(
        torch, timer, 8 << 20 if smoke else traffic.COPY_BYTES
    )
    N, Ts = (1 << 12, (4,)) if smoke else (1 << 24, (4, 16, 64))
    dtypes = ("f32", "bf16") if smoke else ("f32", "f16")
    lines = [
        "%s, copy %.0f GB/s (%s)"
        % (
            cli.device_name(torch, device),
            copy,
            size_text(8 << 20 if smoke else traffic.COPY_BYTES),
        )
    ]
    print(lines[0])
    orders = (("benchmark order", dtypes), ("after empty_cache", dtypes[::-1]))
    for label, order in orders:
        if label != orders[0][0]:
            timer.free()
        for dtype in order:
            for T in Ts:
                row = bench_row(
                    torch, lif, timer, None, "inference", dtype, T, N, copy
                )
                frac = traffic.frac_copy(row["bytes"], row["flexsn_ms"], copy)
                lines.append(
                    "%-18s inference %-4s T=%-3d %.4f ms  %.1f%% of "
                    "copy" % (label, dtype, T, row["flexsn_ms"], 100 * frac)
                )
                print(lines[-1])
                sys.stdout.flush()
    if args.out:
        with open(args.out, "w") as f:
            f.write("\n".join(lines) + "\n")
        print("%s: results in %s" % (PROG, args.out))
    return 0
