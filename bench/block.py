"""A spiking block as one kernel: batch-norm apply + LIF + residual add.

    python3 -m bench block --compile-only --cubin FILE   (here: the tools)
    python3 -m bench block --cubin FILE [--out DIR]      (on a GPU)
    python3 -m bench block --smoke                       (tiny, on the CPU)

The block is test/Pipelines/Inputs/bn_lif_block.mlir: y = s + x where s
are the spikes of a LIF neuron (tau = 2, threshold 1, hard reset to 0)
driven by x * scale[c] + shift[c], over [T, B, C, S]; it also returns the
final membrane potential. `--compile-only` compiles it with the FlexSN
tools (the pipeline fuses it into one scan, kernel generation makes
bn_lif_inference_f32, also LIF's own final-state kernel) into FILE; on
the GPU the benchmark loads FILE with CuPy and:

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

--smoke compiles the block for the CPU with flexsn.compile_kernels (no
CuPy, no cubin), checks it on the same three shapes and times it at
[4, 2, 4, 512] against the unfused block (its LIF step: LIF's CPU
inference kernel, compile_kernels making no final-state one).
"""

import os
import statistics
import subprocess
import sys
import tempfile

from . import ROOT, cli, results, traffic
from .timing import Timer

PROG = "bench block"
BLOCK = os.path.join(
    str(ROOT), "test", "Pipelines", "Inputs", "bn_lif_block.mlir"
)
TS = (4, 16)
B, C, S = 32, 64, 8192  # N = 2^24
SMOKE = dict(Ts=(4,), shape=(2, 4, 512), reps=3, copy_bytes=8 << 20)
CHECK_SHAPES = ((3, 2, 5, 7), (16, 4, 8, 33), (4, 1, 3, 1))


def compile_block(cubin):
    build = os.environ.get(
        "FLEXSN_BUILD_DIR", os.path.join(str(ROOT), "build")
    )
    toolkit = os.environ.get("FLEXSN_CUDA_TOOLKIT", "/usr/local/cuda")
    with tempfile.TemporaryDirectory() as work:
        lowered = os.path.join(work, "block.gpu.mlir")
        subprocess.run(
            [
                os.path.join(build, "bin", "flexsn-opt"),
                BLOCK,
                "--flexsn-lower-to-nvvm=variants=inference,final-state"
                " storage-types=f32 toolkit=" + toolkit,
                "-o",
                lowered,
            ],
            check=True,
        )
        subprocess.run(
            [
                os.path.join(build, "bin", "flexsn-translate"),
                "--flexsn-to-cubin",
                lowered,
                "-o",
                cubin,
            ],
            check=True,
        )


def eager(torch, x, scale, shift, spike=None):
    """The block in eager PyTorch over x [T, B, C, ...]: (y, final v).
    `spike(h - threshold)` defaults to the Heaviside step; bench.block_train
    passes the surrogate-gradient one."""
    view = (1, -1) + (1,) * (x.dim() - 3)
    p = x * scale.view(view) + shift.view(view)
    v = torch.zeros_like(x[0])
    ys = []
    for t in range(x.shape[0]):
        h = v + (p[t] - v) / 2.0
        s = spike(h - 1.0) if spike else (h - 1.0 >= 0).to(x.dtype)
        v = (1.0 - s) * h
        ys.append(s + x[t])
    return torch.stack(ys), v


def gpu_kernels(torch, cubin):
    """(fused(x, scale, shift, y, v), lif_final(p, spikes, v, T, n)) from
    the cubin, launched with CuPy on torch's stream."""
    import cupy as cp

    module = cp.RawModule(path=cubin)
    vec = module.get_function("bn_lif_inference_f32_vec")
    scalar = module.get_function("bn_lif_inference_f32_scalar")
    final = module.get_function("lif_final_state_f32_vec")
    stream = cp.cuda.ExternalStream(torch.cuda.current_stream().cuda_stream)

    def grid(groups):
        return ((groups + 255) // 256,), (256,)

    def fused(x, scale, shift, y, v):
        T, b, c, s = x.shape
        n = b * c * s
        kernel, groups = (vec, n // 4) if n % 4 == 0 else (scalar, n)
        kernel(
            *grid(groups),
            (cp.uint64(x.data_ptr()), cp.uint64(0))  # v_init: zeros
            + tuple(cp.uint64(t.data_ptr()) for t in (y, v, scale, shift))
            + tuple(cp.int64(k) for k in (T, n, n, c, s)),
            stream=stream,
        )

    def lif_final(p, spikes, v, T, n):
        final(
            *grid(n // 4),
            (
                cp.uint64(p.data_ptr()),
                cp.uint64(0),
                cp.uint64(spikes.data_ptr()),
                cp.uint64(v.data_ptr()),
                cp.int64(T),
                cp.int64(n),
                cp.int64(n),
            ),
            stream=stream,
        )

    return fused, lif_final


def cpu_kernels(torch):
    """The same two callables from flexsn.compile_kernels' CPU kernels;
    the LIF step writes its state sequence into a scratch buffer."""
    import flexsn

    block = flexsn.compile_kernels(BLOCK, targets=("cpu",))
    kblock = block.kernel("cpu", "bn_lif_inference_f32")
    klif = block.kernel("cpu", "lif_inference_f32")
    scratch = {}

    def fused(x, scale, shift, y, v):
        T, b, c, s = x.shape
        kblock.launch(
            T,
            b * c * s,
            [
                x.data_ptr(),
                0,
                y.data_ptr(),
                v.data_ptr(),
                scale.data_ptr(),
                shift.data_ptr(),
            ],
            0,
            channels=(c, s),
        )

    def lif_final(p, spikes, v, T, n):
        seq = scratch.get(p.shape)
        if seq is None:
            seq = scratch[p.shape] = torch.empty(T, n)
        klif.launch(
            T, n, [p.data_ptr(), 0, spikes.data_ptr(), seq.data_ptr()], 0
        )

    return fused, lif_final


def main(argv=None):
    ap = cli.parser("block", __doc__)
    ap.add_argument(
        "--cubin", help="the compiled block (required but " "with --smoke)"
    )
    ap.add_argument("--compile-only", action="store_true")
    cli.add_out_and_smoke(ap, "block-out")
    args = cli.finish(ap.parse_args(argv))
    if not args.smoke and not args.cubin:
        ap.error("--cubin FILE is required (but with --smoke)")
    if args.compile_only:
        compile_block(args.cubin)
        return 0

    import torch

    device = cli.device(torch, args, PROG)
    if device is None:
        return 2
    smoke = args.smoke
    timer = Timer(torch, device, SMOKE["reps"] if smoke else 20, 3)
    if smoke:
        cli.skip(PROG, "the cubin's kernels (CuPy)", "CPU kernels instead")
        fused, lif_final = cpu_kernels(torch)
        b, c, s = SMOKE["shape"]
    else:
        fused, lif_final = gpu_kernels(torch, args.cubin)
        b, c, s = B, C, S

    g = torch.Generator(device=device).manual_seed(0)
    meta = dict(
        device=cli.device_name(torch, device),
        torch=torch.__version__,
        checks=[],
        rows=[],
    )
    for shape in CHECK_SHAPES:
        x = torch.randn(shape, generator=g, device=device) * 0.9 + 0.6
        scale = torch.rand(shape[2], generator=g, device=device) + 0.5
        shift = torch.randn(shape[2], generator=g, device=device) * 0.3
        y = torch.full_like(x, float("nan"))
        v = torch.full_like(x[0], float("nan"))
        fused(x, scale, shift, y, v)
        timer.sync()
        ry, rv = eager(torch, x, scale, shift)
        meta["checks"].append(
            dict(
                shape=list(shape),
                bitwise=bool(torch.equal(y, ry) and torch.equal(v, rv)),
            )
        )
        print(
            "%s: check %s bitwise equal to eager: %s"
            % (PROG, shape, meta["checks"][-1]["bitwise"])
        )

    copy, _ = traffic.copy_gbs(
        torch, timer, SMOKE["copy_bytes"] if smoke else traffic.COPY_BYTES
    )
    meta["copy_gbs"] = copy
    n = b * c * s
    for T in SMOKE["Ts"] if smoke else TS:
        x = torch.randn((T, b, c, s), generator=g, device=device)
        scale = torch.rand(c, generator=g, device=device) + 0.5
        shift = torch.randn(c, generator=g, device=device) * 0.3
        y, v = torch.empty_like(x), torch.empty_like(x[0])
        p, spikes = torch.empty_like(x), torch.empty_like(x)
        sc, sh = scale.view(1, 1, -1, 1), shift.view(1, 1, -1, 1)

        def unfused():
            torch.addcmul(sh.expand_as(x), x, sc, out=p)
            lif_final(p, spikes, v, T, n)
            torch.add(spikes, x, out=y)

        times = timer.rounds(
            {
                "fused": lambda: fused(x, scale, shift, y, v),
                "unfused": unfused,
            },
            3,
        )
        fused_ms = statistics.median(times["fused"])
        unfused_ms = statistics.median(times["unfused"])
        nbytes = traffic.block_bytes(T, n)
        row = dict(
            T=T,
            N=n,
            shape=[T, b, c, s],
            fused_ms=fused_ms,
            unfused_ms=unfused_ms,
            bytes=nbytes,
            frac_copy=traffic.frac_copy(nbytes, fused_ms, copy),
            speedup=unfused_ms / fused_ms,
        )
        meta["rows"].append(row)
        print(
            "%s: T=%d N=2^%d fused %.4f ms (%.1f%% of copy), "
            "unfused %.4f ms: %.2fx"
            % (
                PROG,
                T,
                n.bit_length() - 1,
                fused_ms,
                100 * row["frac_copy"],
                unfused_ms,
                row["speedup"],
            )
        )
        sys.stdout.flush()

    results.write_results(args.out, "block_results", meta, markdown(meta))
    print("%s: results in %s" % (PROG, args.out))
    return 0 if all(c["bitwise"] for c in meta["checks"]) else 1


def markdown(meta):
    lines = [
        "# A spiking block as one kernel (inference)",
        "",
        "`python3 -m bench block` on %s (torch %s), copy %.0f GB/s in "
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
        lines.append(
            "| %s | %.4f | %.1f | %.4f | %.2fx |"
            % (
                r["shape"],
                r["fused_ms"],
                100 * r["frac_copy"],
                r["unfused_ms"],
                r["speedup"],
            )
        )
    lines.append("")
    lines.append(
        "Bitwise equal to eager PyTorch: "
        + ", ".join(
            "%s %s" % (c["shape"], "yes" if c["bitwise"] else "NO")
            for c in meta["checks"]
        )
        + "."
    )
    return "\n".join(lines) + "\n"
