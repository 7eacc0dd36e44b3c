"""Training a spiking block as one kernel pair: BN-apply + LIF + residual.

    python3 -m bench block-train --compile-only   (here: the tools)
    python3 -m bench block-train [--out DIR]      (on a GPU)
    python3 -m bench block-train --smoke          (tiny, on the CPU)

The block is y = s + x, s the spikes of LIF (tau = 2, threshold 1, hard
reset to 0, sigmoid surrogate, alpha 4) driven by x·scale[c] + shift[c],
over x of shape [T, B, C, H, W] (a convolution's output), with trainable
per-channel scale and shift. One training step is the forward and the
backward of the block (gradients of x, scale and shift) for an incoming
gradient of y. Four ways to run it:

- fused: `flexsn.torch.Block(LIFNode(tau=2.0), pre=Affine(C),
  post=Residual("add"))`, one forward and one backward kernel;
- unfused FlexSN: three FlexSN modules (an affine neuron with per-channel
  trainable scale and shift, LIFNode, a residual-add neuron), each with
  its own training kernels, autograd between them;
- eager PyTorch: the formulas step by step, the spike an autograd Function
  with the sigmoid surrogate (as SpikingJelly's torch backend);
- torch.compile of that eager function (inductor).

`--compile-only` builds the FlexSN kernels into the compile cache (the GPU
machine has no tools). On the GPU the benchmark first checks, on small
shapes, that the fused block's output equals the unfused one bitwise and
that its gradients and the eager ones agree; then times a training step
at N = 2^24 neurons, T in {4, 16}, against the device-to-device copy
bandwidth measured in the same run, on the fused kernels' bytes: 7 T N
floats (the forward reads x and writes y and one saved sequence, the
backward reads the incoming gradient, the saved sequence and x and writes
x's gradient). Writes block_train_results.{json,md} and block_train.png to
--out. --smoke: the same checks and a step at [4, 2, 4, 8, 16] on the
CPU, without torch.compile (it compiles for minutes there), the atomic
channel sums (a GPU kernel's) and the plot.
"""

import os
import statistics
import sys
import time

from . import cli, results, traffic
from .block import eager
from .kernels import spike_fn
from .timing import Timer

PROG = "bench block-train"
TS = (4, 16)
B, C, H, W = 32, 64, 64, 128  # N = 2^24
TAU = 2.0
SMOKE = dict(Ts=(4,), shape=(2, 4, 8, 16), reps=3, copy_bytes=8 << 20)
CHECK_SHAPES = ((5, 2, 3, 4, 6), (3, 1, 3, 7, 1))

AFFINE = """
flexsn.neuron @affine inputs(%x: f32) outputs(y)
    params(%scale: f32 = 1.0 trainable per_channel,
           %shift: f32 = 0.0 trainable per_channel) {
  %m = arith.mulf %x, %scale : f32
  %r = arith.addf %m, %shift : f32
  flexsn.yield %r : f32
}
"""

RESIDUAL = """
flexsn.neuron @residual inputs(%s: f32, %x: f32) outputs(y) {
  %r = arith.addf %s, %x : f32
  flexsn.yield %r : f32
}
"""


def flexsn_modules(num_channels, smoke=False):
    """(fused Block, [affine, lif, residual] modules), float32 kernels for
    flexsn.compile's default targets (--smoke: the CPU)."""
    from flexsn.torch import Affine, Block, FlexSN, LIFNode, Residual

    f32 = ("f32",)
    targets = dict(targets=("cpu",)) if smoke else {}
    fused = Block(
        LIFNode(step_mode="m", tau=TAU, storage_types=f32, **targets),
        pre=Affine(num_channels=num_channels),
        post=Residual("add"),
        name="bn_lif_train",
        **targets,
    )
    unfused = [
        FlexSN(
            AFFINE, num_channels=num_channels, storage_types=f32, **targets
        ),
        LIFNode(step_mode="m", tau=TAU, storage_types=f32, **targets),
        FlexSN(RESIDUAL, storage_types=f32, **targets),
    ]
    return fused, unfused


def eager_block(torch):
    """The block in eager PyTorch: f(x, scale, shift) -> y."""
    spike = spike_fn(torch).apply

    def block(x, scale, shift):
        return eager(torch, x, scale, shift, spike)[0]

    return block


def main(argv=None):
    ap = cli.parser("block-train", __doc__)
    ap.add_argument("--compile-only", action="store_true")
    cli.add_out_and_smoke(ap, "block-train-out")
    ap.add_argument(
        "--no-compile", action="store_true", help="skip torch.compile"
    )
    args = cli.finish(ap.parse_args(argv))
    if args.compile_only:
        # Both channel counts the benchmark builds: the checks' and the
        # timed block's (per-channel parameters are module state, not
        # compiled in: one compile serves both).
        flexsn_modules(3, args.smoke)
        return 0

    import torch

    dev = cli.device(torch, args, PROG)
    if dev is None:
        return 2
    smoke = args.smoke
    timer = Timer(torch, dev, SMOKE["reps"] if smoke else 10, 2)
    meta = dict(
        device=cli.device_name(torch, dev),
        torch=torch.__version__,
        checks=[],
        rows=[],
    )
    eager_fn = eager_block(torch)
    gen = torch.Generator(device=dev).manual_seed(0)

    def make(num_channels):
        fused, unfused = flexsn_modules(num_channels, smoke)
        fused, unfused = fused.to(dev), [m.to(dev) for m in unfused]
        scale = torch.rand(num_channels, generator=gen, device=dev) + 0.5
        shift = torch.randn(num_channels, generator=gen, device=dev) * 0.3
        with torch.no_grad():
            for m in (fused, unfused[0]):
                m.scale.copy_(scale)
                m.shift.copy_(shift)
        return fused, unfused, scale, shift

    def run_fused(fused):
        def f(x):
            fused.reset()
            return fused(x)

        return f, [fused.scale, fused.shift]

    def run_unfused(unfused):
        affine, lif, residual = unfused

        def f(x):
            lif.reset()
            return residual(lif(affine(x)), x)

        return f, [affine.scale, affine.shift]

    def run_eager(fn, scale, shift):
        a = scale.clone().requires_grad_()
        b = shift.clone().requires_grad_()
        return (lambda x: fn(x, a, b)), [a, b]

    def step(f, params, x, g):
        x.grad = None
        for p in params:
            p.grad = None
        y = f(x)
        y.backward(g)
        return y

    # Checks on small shapes: fused == unfused bitwise forward; gradients
    # of all three close.
    for shape in CHECK_SHAPES:
        fused, unfused, scale, shift = make(shape[2])
        x = torch.randn(shape, generator=gen, device=dev) + 0.4
        g = torch.randn(shape, generator=gen, device=dev)
        got = []
        for f, params in (
            run_fused(fused),
            run_unfused(unfused),
            run_eager(eager_fn, scale, shift),
        ):
            xi = x.clone().requires_grad_()
            y = step(f, params, xi, g)
            got.append((y.detach(), xi.grad, params[0].grad, params[1].grad))
        bitwise = bool(torch.equal(got[0][0], got[1][0]))
        close = all(
            torch.allclose(a, b, rtol=1e-4, atol=1e-4)
            for other in got[1:]
            for a, b in zip(got[0], other)
        )
        meta["checks"].append(
            dict(shape=list(shape), bitwise=bitwise, gradients_close=close)
        )
        print(
            "%s: check %s fused == unfused bitwise: %s, gradients close "
            "to unfused and eager: %s" % (PROG, shape, bitwise, close)
        )

    copy, _ = traffic.copy_gbs(
        torch, timer, SMOKE["copy_bytes"] if smoke else traffic.COPY_BYTES
    )
    meta["copy_gbs"] = copy
    b, c, h, w = SMOKE["shape"] if smoke else (B, C, H, W)
    fused, unfused, scale, shift = make(c)
    compiled = None
    if smoke or not hasattr(torch, "compile"):
        cli.skip(
            PROG,
            "torch.compile",
            "--smoke: it compiles for minutes"
            if smoke
            else "this torch has no torch.compile",
        )
    elif not args.no_compile:
        compiled = torch.compile(eager_fn)
    if not timer.cuda:
        cli.skip(PROG, "atomic channel sums")

    def median_ms(fn):
        return statistics.median(timer.rounds({"": fn}, 3)[""])

    n = b * c * h * w
    for T in SMOKE["Ts"] if smoke else TS:
        x = torch.randn(
            (T, b, c, h, w), generator=gen, device=dev
        ).requires_grad_()
        g = torch.randn((T, b, c, h, w), generator=gen, device=dev)
        runs = {
            "fused": run_fused(fused),
            "unfused": run_unfused(unfused),
            "eager": run_eager(eager_fn, scale, shift),
        }
        # Where the fused step's time goes: its forward alone (the training
        # forward kernel), and the backward summing per-channel gradients
        # with atomics in the kernel instead of per-neuron sums that torch
        # adds per channel (the module's choice on a GPU, docs/Python.md).
        f, params = run_fused(fused)
        row = dict(
            T=T,
            N=n,
            shape=[T, b, c, h, w],
            fused_forward_ms=median_ms(lambda: f(x)),
        )
        if timer.cuda:
            kernels = fused.handle.kernels(x.device)
            kernels._sum_channels_here = False
            row["fused_atomic_ms"] = median_ms(lambda: step(f, params, x, g))
            kernels._sum_channels_here = True
        if compiled is not None:
            runs["compile"] = run_eager(compiled, scale, shift)
        for name, (f, params) in runs.items():
            started = time.time()
            try:
                step(f, params, x, g)  # the first call (compiles)
                timer.sync()
                first = time.time() - started
                ms = median_ms(lambda: step(f, params, x, g))
            except Exception as error:  # torch.compile may fail
                print("%s: %s T=%d failed: %s" % (PROG, name, T, error))
                row[name + "_error"] = str(error)[:300]
                continue
            row[name + "_ms"] = ms
            row[name + "_first_s"] = first
        nbytes = traffic.block_train_bytes(T, n)
        row["bytes"] = nbytes
        row["frac_copy"] = traffic.frac_copy(nbytes, row["fused_ms"], copy)
        for name in ("unfused", "eager", "compile"):
            if name + "_ms" in row:
                row["vs_" + name] = row[name + "_ms"] / row["fused_ms"]
        meta["rows"].append(row)
        print(
            "%s: T=%d fused %.3f ms (%.1f%% of copy; forward %.3f ms, "
            "with atomic channel sums %s ms), unfused %.3f ms (%.2fx), "
            "eager %.3f ms (%.2fx), compile %s"
            % (
                PROG,
                T,
                row["fused_ms"],
                100 * row["frac_copy"],
                row["fused_forward_ms"],
                results.fmt(row.get("fused_atomic_ms"), ".3f"),
                row["unfused_ms"],
                row["vs_unfused"],
                row["eager_ms"],
                row["vs_eager"],
                "%.3f ms (%.2fx)" % (row["compile_ms"], row["vs_compile"])
                if "compile_ms" in row
                else "-",
            )
        )
        sys.stdout.flush()
        x = g = None  # free them before the next T
        timer.free()

    results.write_results(
        args.out, "block_train_results", meta, markdown(meta)
    )
    if not smoke:
        plot(meta, os.path.join(args.out, "block_train.png"))
    print("%s: results in %s" % (PROG, args.out))
    ok = all(c["bitwise"] and c["gradients_close"] for c in meta["checks"])
    return 0 if ok else 1


NAMES = (
    ("fused", "FlexSN fused block"),
    ("unfused", "FlexSN, 3 kernels"),
    ("eager", "eager PyTorch"),
    ("compile", "torch.compile"),
)


def markdown(meta):
    lines = [
        "# Training a spiking block as one kernel pair",
        "",
        "`python3 -m bench block-train` on %s (torch %s), copy %.0f "
        "GB/s in the same run. One training step (forward and backward: "
        "gradients of x and of the per-channel scale and shift) of "
        "y = LIF(x·scale[c] + shift[c]) + x over [T, 32, 64, 64, 128] "
        "(N = 2^24). %% of copy on the fused kernels' 7 T N floats; "
        "median of three medians of 10 CUDA-event timings; first: the "
        "first call's wall time (torch.compile compiles then)."
        % (meta["device"], meta["torch"], meta["copy_gbs"]),
        "",
        "| T | fused ms | % copy | 3 FlexSN kernels ms | speedup | eager ms "
        "| speedup | torch.compile ms | speedup | torch.compile first s |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    rows = meta["rows"]
    for r in rows:

        def cell(name, key="_ms", fmt="%.3f"):
            return fmt % r[name + key] if name + key in r else "-"

        lines.append(
            "| %d | %.3f | %.1f | %s | %s | %s | %s | %s | %s | %s |"
            % (
                r["T"],
                r["fused_ms"],
                100 * r["frac_copy"],
                cell("unfused"),
                cell("vs_unfused", "", "%.2fx"),
                cell("eager"),
                cell("vs_eager", "", "%.2fx"),
                cell("compile"),
                cell("vs_compile", "", "%.2fx"),
                cell("compile", "_first_s", "%.1f"),
            )
        )
    lines += [
        "",
        "Where the fused step's time goes: "
        + "; ".join(
            "T = %d: forward %.3f ms (%.1f%% of copy on its 3 T N floats), "
            "with per-channel sums by atomics in the kernel %s ms"
            % (
                r["T"],
                r["fused_forward_ms"],
                100
                * traffic.frac_copy(
                    3 * r["T"] * r["N"] * 4,
                    r["fused_forward_ms"],
                    meta["copy_gbs"],
                ),
                results.fmt(r.get("fused_atomic_ms"), ".3f"),
            )
            for r in rows
        )
        + ".",
    ]
    lines += [
        "",
        "Checks (fused output bitwise equal to the unfused "
        "modules'; gradients of x, scale and shift within 1e-4 of "
        "the unfused and eager ones): "
        + ", ".join(
            "%s %s"
            % (
                c["shape"],
                "yes" if c["bitwise"] and c["gradients_close"] else "NO",
            )
            for c in meta["checks"]
        )
        + ".",
    ]
    return "\n".join(lines) + "\n"


def plot(meta, path):
    plt = results.pyplot(PROG, "plot")
    if plt is None:
        return
    fig, ax = plt.subplots(figsize=(7, 3.6))
    rows = meta["rows"]
    width = 0.2
    for i, (key, label) in enumerate(NAMES):
        xs = [j + (i - 1.5) * width for j in range(len(rows))]
        ys = [r.get(key + "_ms", 0.0) for r in rows]
        bars = ax.bar(xs, ys, width, label=label)
        for bar, r in zip(bars, rows):
            if key == "fused":
                ax.annotate(
                    "%.0f%% of copy" % (100 * r["frac_copy"]),
                    (bar.get_x() + bar.get_width() / 2, bar.get_height()),
                    ha="center",
                    va="bottom",
                    fontsize=7,
                )
    ax.set_xticks(range(len(rows)))
    ax.set_xticklabels(["T = %d" % r["T"] for r in rows])
    ax.set_ylabel("training step (ms)")
    ax.set_yscale("log")
    ax.set_title(
        "BN-apply + LIF + residual, N = 2^24, %s" % meta["device"], fontsize=9
    )
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=130)
