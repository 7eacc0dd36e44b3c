"""The host's cost per call of small layers: training and inference steps
of LIFNode and of a Block, next to a custom autograd op that does nothing.

    python3 -m bench host [--device cpu|cuda] [--out DIR]
    python3 -m bench host --smoke      # the CPU, few repeats

Sizes small enough that the kernels take a few microseconds (T = 4;
LIFNode N = 8 on the CPU, 2^12 on CUDA; the Block [4, 2, 16, 4] on the
CPU, [4, 8, 16, 32] on CUDA), so that a step costs what the host does:
the module's Python, its checks and allocations, autograd, and the
kernel calls. Rows:

- floor: a torch.autograd.Function that allocates its output in forward
  and its input gradient in backward and runs nothing: what any custom
  operation costs here;
- LIFNode train: reset, forward, backward (step_mode="m", float32);
- LIFNode channels-last train: the same on `[T, B, C, H, W]` sequences
  laid out channels-last (as a channels-last convolution gives them, and
  its backward the gradient), of as many neurons per step;
- LIFNode inference: reset, forward under no_grad;
- Block train: Affine + LIF + add, reset, forward, backward.

Each row: the median over --reps of the mean time per step over a loop of
--steps steps (on CUDA the loop queues its kernels and is then
synchronized: with kernels this small, the loop is host-bound). One
thread on the CPU (torch.set_num_threads(1)).

Writes host_<device>_results.json and .md to --out (default docs/perf).
"""

import statistics
import time

from . import cli, results

PROG = "bench host"


def _steps(torch, device):
    """{row: step()} on `device`."""
    from flexsn.torch import Affine, Block, LIFNode, Residual

    gpu = device == "cuda"
    n = 1 << 12 if gpu else 8
    x = torch.rand(4, n, device=device, requires_grad=True)
    g = torch.rand(4, n, device=device)

    class Floor(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return torch.empty_like(x)

        @staticmethod
        def backward(ctx, grad):
            return torch.empty_like(ctx.saved_tensors[0])

    def floor():
        x.grad = None
        Floor.apply(x).backward(g)

    lif = LIFNode(step_mode="m").to(device)

    def lif_train():
        x.grad = None
        lif.reset()
        lif(x).backward(g)

    # [T, B, C, H, W], memory [T, B, H, W, C]: n neurons per step.
    cl_shape = (4, 2, 8, 16, 16) if gpu else (4, 1, 2, 2, 2)

    def channels_last():
        t = torch.rand(
            (cl_shape[0] * cl_shape[1],) + cl_shape[2:], device=device
        )
        return t.contiguous(memory_format=torch.channels_last).unflatten(
            0, cl_shape[:2]
        )

    xc, gc = channels_last().requires_grad_(), channels_last()

    def lif_channels_last_train():
        xc.grad = None
        lif.reset()
        lif(xc).backward(gc)

    def lif_inference():
        lif.reset()
        with torch.no_grad():
            lif(x)

    shape = (4, 8, 16, 32) if gpu else (4, 2, 16, 4)
    block = Block(
        LIFNode(step_mode="m"),
        pre=Affine(num_channels=16),
        post=Residual("add"),
        name="bench_host",
    ).to(device)
    xb = (torch.randn(shape, device=device) + 0.4).requires_grad_()
    gb = torch.randn(shape, device=device)

    def block_train():
        xb.grad = block.scale.grad = block.shift.grad = None
        block.reset()
        block(xb).backward(gb)

    return {
        "floor": floor,
        "LIFNode train": lif_train,
        "LIFNode channels-last train": lif_channels_last_train,
        "LIFNode inference": lif_inference,
        "Block train": block_train,
    }


def measure(torch, device, steps, reps):
    """[{row, us}]: the median over `reps` of the mean microseconds per
    step over loops of `steps` steps."""

    def sync():
        if device == "cuda":
            torch.cuda.synchronize()

    rows = []
    for name, step in _steps(torch, device).items():
        for _ in range(max(10, steps // 10)):
            step()
        sync()
        means = []
        for _ in range(reps):
            start = time.perf_counter()
            for _ in range(steps):
                step()
            sync()
            means.append((time.perf_counter() - start) / steps * 1e6)
        rows.append({"row": name, "us": statistics.median(means)})
    return rows


def main(argv=None):
    ap = cli.parser("host", __doc__)
    ap.add_argument(
        "--device",
        choices=("cpu", "cuda"),
        default=None,
        help="default: cuda where there is a GPU, else cpu",
    )
    ap.add_argument("--steps", type=int, default=1000)
    ap.add_argument("--reps", type=int, default=7)
    cli.add_out_and_smoke(ap, "docs/perf")
    args = cli.finish(ap.parse_args(argv))
    import torch

    torch.set_num_threads(1)
    device = (
        "cpu"
        if args.smoke
        else args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    )
    if device == "cuda" and not torch.cuda.is_available():
        print("%s: --device cuda needs a CUDA GPU" % PROG)
        return 2
    steps, reps = (20, 2) if args.smoke else (args.steps, args.reps)
    rows = measure(torch, device, steps, reps)
    floor = rows[0]["us"]
    lines = [
        "| call (%s) | us per step | training: over the floor |" % device,
        "|---|---:|---:|",
    ]
    for r in rows:
        # The floor is a training step (forward and backward).
        if r["row"].endswith(" train"):
            r["over_floor_us"] = r["us"] - floor
        lines.append(
            "| %s | %.1f | %s |"
            % (r["row"], r["us"], results.fmt(r.get("over_floor_us"), ".1f"))
        )
    print("\n".join(lines))
    meta = {
        "device": device,
        "device_name": cli.device_name(torch, device),
        "torch": torch.__version__,
        "steps": steps,
        "reps": reps,
        "rows": rows,
    }
    if args.out:
        results.write_results(
            args.out, "host_%s_results" % device, meta, "\n".join(lines) + "\n"
        )
    return 0
