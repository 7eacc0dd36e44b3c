"""Training steps of the models people train: SpikingJelly's model zoo with
FlexSN (converted, fused, in a CUDA graph, under torch.compile) against
torch.compile of SpikingJelly's torch neurons, SpikingJelly's own FlexSN
inductor path, and the floor of the model with its neurons removed.

    python3 -m bench zoo [--models ...] [--variants ...] [--layouts ...]
                         [--precisions ...] [--batches ...] [--out DIR]
    python3 -m bench zoo --plot RESULTS.json... --out DIR   (zoo.svg)
    python3 -m bench zoo --smoke          (CPU, small in-repo models)

On a GPU with SpikingJelly importable (PYTHONPATH), for `spikformer_ti`,
`spiking_vgg16_bn`, `sew_resnet18` (cnf ADD) and `spiking_resnet18`,
built by SpikingJelly's constructors with its LIFNode (tau = 2, hard
reset to 0, detach_reset, Sigmoid(alpha = 4)) in multi-step mode, one
training step is: reset the neurons, forward x `[T = 4, B, 3, 224, 224]`,
cross-entropy of the mean over T, backward, SGD with momentum, in f32 or
AMP (float16 autocast), with the weights and input row-major
(`contiguous`) or `channels_last`. The variants:

- sj-torch+compile: SpikingJelly's torch neurons under torch.compile;
- sj-flexsn-inductor+compile: SpikingJelly's `FlexSN(core,
  backend="inductor")` under torch.compile, its own training path (not
  for Spikformer, whose neurons its constructor hard-codes);
- flexsn: the model through `flexsn.torch.convert` (FlexSN's LIFNode);
- flexsn-fused: that through `flexsn.torch.fuse`;
- flexsn+graph, flexsn-fused+graph: the whole step captured in a CUDA
  graph and replayed;
- flexsn+compile, flexsn-fused+compile: under torch.compile;
- sj-torch+compile+cudagraphs, flexsn+compile+cudagraphs: under
  torch.compile(mode="reduce-overhead"), which replays the compiled
  forward and backward as CUDA graphs (no host cost per kernel: the
  comparison of GPU time where the default mode is host-bound); FlexSN's
  with `flexsn.torch.set_compile_policy("kernels")`, as docs/Python.md
  advises for that mode;
- floor, floor+graph: every neuron replaced by nn.Identity (the step of
  everything else: what no neuron implementation can beat).

Each row: the step's median time (CUDA events, after warm-up), the host's
time per step (steps queued back to back), the first step's wall time
from the model's construction on (build: SpikingJelly's constructor and
the conversion, with a FlexSN neuron's compile; prepare: fusion, with the
blocks' compiles, or torch.compile's wrapping; the step itself, with
cuDNN's algorithm search and torch.compile's compile), the first loss,
and the peak memory of the timed steps (torch.cuda.max_memory_allocated
from the end of the first step on: the model, its optimizer's state, a
CUDA graph's pool (made at its capture) and a step's activations; not the
workspaces cuDNN tries while it picks its algorithms in a process's first
step of a shape: 107 GiB in one Spikformer run).
Compiled variants run last. With `--profile`, each row also gets the
GPU kernels of a few profiled steps (torch.profiler): their time per
step, and the kernels taking most of it. `--torch-step-max-neurons N`
moves the size below which a FlexSN neuron under torch.compile runs as
PyTorch operations rather than its kernels (a probe of that policy).
Writes zoo_results.{json,md} to --out.
"""

import sys
import time

from . import cli, results
from .resnet import graphed, host_ms
from .timing import Timer

PROG = "bench zoo"
MODELS = (
    "spikformer_ti",
    "spiking_vgg16_bn",
    "sew_resnet18",
    "spiking_resnet18",
)
VARIANTS = (
    "sj-torch+compile",
    "sj-flexsn-inductor+compile",
    "flexsn",
    "flexsn-fused",
    "flexsn+graph",
    "flexsn-fused+graph",
    "flexsn+compile",
    "flexsn-fused+compile",
    "sj-torch+compile+cudagraphs",
    "flexsn+compile+cudagraphs",
    "floor",
    "floor+graph",
)
LAYOUTS = ("contiguous", "channels_last")
PRECISIONS = ("f32", "amp")
T, RES, CLASSES = 4, 224, 1000


def sj_model(torch, model, neuron_factory=None):
    """SpikingJelly's `model` with its LIFNode (or `neuron_factory` as
    spiking_neuron, where the constructor takes one)."""
    from spikingjelly.activation_based import functional, neuron, surrogate
    from spikingjelly.activation_based.model import (
        sew_resnet,
        spiking_resnet,
        spiking_vgg,
        spikformer,
    )

    torch.manual_seed(0)
    if model == "spikformer_ti":
        if neuron_factory is not None:
            raise ValueError(
                "Spikformer's constructor builds its own " "neurons"
            )
        net = spikformer.spikformer_ti(T=T, num_classes=CLASSES)
    else:
        make = {
            "sew_resnet18": lambda **kw: sew_resnet.sew_resnet18(
                cnf="ADD", **kw
            ),
            "spiking_resnet18": spiking_resnet.spiking_resnet18,
            "spiking_vgg16_bn": spiking_vgg.spiking_vgg16_bn,
        }[model]
        if neuron_factory is None:
            net = make(
                spiking_neuron=neuron.LIFNode,
                tau=2.0,
                detach_reset=True,
                surrogate_function=surrogate.Sigmoid(alpha=4.0),
                num_classes=CLASSES,
            )
        else:
            net = make(spiking_neuron=neuron_factory, num_classes=CLASSES)
    functional.set_step_mode(net, "m")
    return net


def sj_inductor_neuron():
    """SpikingJelly's FlexSN(core, backend="inductor") of the same LIF."""
    from spikingjelly.activation_based import surrogate
    from spikingjelly.activation_based.neuron.flexsn import FlexSN

    sg = surrogate.Sigmoid(alpha=4.0)

    def lif_core(x, v):
        h = v + (x - v) / 2.0
        s = sg(h - 1.0)
        return s, h * (1.0 - s)

    def make(**kwargs):
        return FlexSN(
            core=lif_core,
            num_inputs=1,
            num_states=1,
            num_outputs=1,
            step_mode="m",
            backend="inductor",
        )

    return make


def without_neurons(torch, net):
    """`net` with every spiking neuron (a module with a `v` state or a
    FlexSN one) replaced by nn.Identity."""
    for name, child in list(net.named_children()):
        if hasattr(child, "v_threshold") or type(child).__name__ in (
            "FlexSN",
            "LIFNode",
            "IFNode",
            "ParametricLIFNode",
        ):
            setattr(net, name, torch.nn.Identity())
        else:
            without_neurons(torch, child)
    return net


def build(
    torch, model, variant, layout, device, factory=None, recompute=False
):
    """The variant's model on `device` in `layout` (before fusing and
    compiling); with `recompute`, FlexSN's neurons recompute their saves
    in the backward (flexsn.torch.set_recompute)."""
    import flexsn.torch

    if factory is not None:  # the smoke run's in-repo models
        torch.manual_seed(0)
        net = factory()
    elif variant.startswith("sj-flexsn-inductor"):
        net = sj_model(torch, model, sj_inductor_neuron())
    else:
        net = sj_model(torch, model)
    if variant.startswith("flexsn"):
        net = flexsn.torch.convert(net)
        flexsn.torch.set_recompute(net, recompute)
    elif variant.startswith("floor"):
        net = without_neurons(torch, net)
    net = net.to(device)
    if layout == "channels_last":
        net = net.to(memory_format=torch.channels_last)
    return net


def reset(net):
    for m in net.modules():
        if hasattr(m, "reset") and m is not net:
            m.reset()


def training_step(torch, net, variant, precision, x, labels, losses):
    """A function running one training step of the variant on (x,
    labels), appending its loss."""
    import flexsn.torch

    if "fused" in variant:
        net = flexsn.torch.fuse(net)
    cudagraphs = variant.endswith("+cudagraphs")
    if variant.startswith("flexsn") and "+compile" in variant:
        # Set before torch.compile traces the model.
        flexsn.torch.set_compile_policy("kernels" if cudagraphs else "by_size")
    if "+compile" in variant:
        net = torch.compile(
            net, mode="reduce-overhead" if cudagraphs else None
        )
    optimizer = torch.optim.SGD(net.parameters(), lr=1e-3, momentum=0.9)
    amp = precision == "amp"
    graph = variant.endswith("+graph")
    device = x.device.type

    def step():
        if cudagraphs:  # a new iteration: the last one's outputs are free
            torch.compiler.cudagraph_mark_step_begin()
        reset(net)
        optimizer.zero_grad(set_to_none=True)
        with torch.autocast(
            device,
            dtype=torch.float16 if device == "cuda" else torch.bfloat16,
            enabled=amp,
            cache_enabled=not graph,
        ):
            loss = torch.nn.functional.cross_entropy(net(x).mean(0), labels)
        loss.backward()
        optimizer.step()
        losses.append(loss.detach())

    return (net, optimizer), graphed(torch, step) if graph else step


def batch(torch, layout, batch_size, resolution, device, gen):
    x = torch.rand(
        T, batch_size, resolution, resolution, 3, device=device, generator=gen
    ).permute(0, 1, 4, 2, 3)
    if layout == "contiguous":
        x = x.contiguous()
    labels = torch.randint(
        0, CLASSES, (batch_size,), device=device, generator=gen
    )
    return x, labels


def run_one(
    torch,
    timer,
    model,
    variant,
    precision,
    layout,
    batch_size,
    reps,
    factory=None,
    resolution=RES,
    profile=False,
    recompute=False,
):
    row = dict(
        model=model,
        variant=variant,
        precision=precision,
        layout=layout,
        batch=batch_size,
    )
    if recompute and variant.startswith("flexsn"):
        row["recompute"] = True
    if variant.startswith("sj-flexsn-inductor") and model == "spikformer_ti":
        return dict(row, skipped="its constructor hard-codes its neurons")
    device = "cuda" if torch.cuda.is_available() and factory is None else "cpu"
    gen = torch.Generator(device=device).manual_seed(1)
    x, labels = batch(torch, layout, batch_size, resolution, device, gen)
    losses = []
    try:
        t0 = time.perf_counter()
        net = build(torch, model, variant, layout, device, factory, recompute)
        built = time.perf_counter()
        keep, step = training_step(
            torch, net, variant, precision, x, labels, losses
        )
        if variant.startswith("flexsn") and "+compile" in variant:
            import flexsn.torch

            row["compile_policy"] = flexsn.torch.get_compile_policy()
        ready = time.perf_counter()
        step()
        if device == "cuda":
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()  # what the steps hold
        row["first_step_s"] = time.perf_counter() - t0
        # Of it: the model built and converted (a FlexSN neuron's compile),
        # then fused (the blocks' compiles) or wrapped, then the step.
        row["build_s"], row["prepare_s"] = built - t0, ready - built
        row["first_loss"] = float(losses[0])
        ms, min_ms = timer.ms(step, reps=reps)[:2]
        row.update(step_ms=ms, min_ms=min_ms)
        if device == "cuda":
            row["peak_gib"] = torch.cuda.max_memory_allocated() / 2**30
            row["host_ms"] = host_ms(torch, step)
            if profile:
                row["profile"] = kernel_profile(torch, step)
        del keep, step
    except Exception as error:  # noqa: BLE001: record, go on
        row["error"] = "%s: %s" % (type(error).__name__, str(error)[:400])
    timer.free()
    print("%s: %s" % (PROG, row))
    sys.stdout.flush()
    return row


def kernel_profile(torch, step, steps=3, top=25):
    """The GPU kernels of `steps` profiled steps: their total ms per step
    and the `top` kernels by time, each [name, ms per step, calls per
    step]."""
    from torch.profiler import ProfilerActivity

    with torch.profiler.profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(steps):
            step()
        torch.cuda.synchronize()
    kernels = {}
    for event in prof.events():
        if event.device_type != torch.autograd.DeviceType.CUDA:
            continue
        ms, calls = kernels.get(event.name, (0.0, 0))
        ms += event.time_range.elapsed_us() / 1e3
        kernels[event.name] = (ms, calls + 1)
    ranked = sorted(kernels.items(), key=lambda kv: -kv[1][0])
    return dict(
        gpu_ms=sum(ms for ms, _ in kernels.values()) / steps,
        kernels=[
            [name[:160], ms / steps, calls / steps]
            for name, (ms, calls) in ranked[:top]
        ],
    )


#: The targets against the row of one variant in the same model,
#: precision, layout and batch: (FlexSN's variant, the other, ratio).
TARGETS = {
    "spikformer_ti": [("best", "sj-torch+compile", 1.2)],
    "spiking_vgg16_bn": [
        ("best", "sj-torch+compile", 1.15),
        ("best", "floor", 0.97),
    ],
    "sew_resnet18": [
        ("best", "sj-torch+compile", 1.3),
        ("flexsn-fused", "flexsn", 1.0),
    ],
    "spiking_resnet18": [
        ("best", "sj-torch+compile", 1.3),
        ("flexsn-fused", "flexsn", 1.0),
    ],
}
COMPILE_TARGETS = [
    ("best+compile", "sj-torch+compile", 1.0),
    ("best+compile", "sj-flexsn-inductor+compile", 1.0),
    ("flexsn+compile+cudagraphs", "sj-torch+compile+cudagraphs", 1.0),
]
#: FlexSN's paths, "best" their fastest: eager, CUDA graphs, and under
#: torch.compile (with CUDA graphs: mode="reduce-overhead").
FLEXSN = tuple(v for v in VARIANTS if v.startswith("flexsn"))


def judge(rows):
    """Ratios other / FlexSN (> 1: FlexSN faster) per model, precision,
    layout and batch; "best" is FlexSN's fastest variant."""
    checks = []
    timed = [r for r in rows if "step_ms" in r]
    groups = sorted(
        {(r["model"], r["precision"], r["layout"], r["batch"]) for r in timed}
    )
    for group in groups:
        by = {
            r["variant"]: r
            for r in timed
            if (r["model"], r["precision"], r["layout"], r["batch"]) == group
        }
        best = min(
            (by[v] for v in FLEXSN if v in by),
            key=lambda r: r["step_ms"],
            default=None,
        )
        compiled = min(
            (
                by[v]
                for v in ("flexsn+compile", "flexsn-fused+compile")
                if v in by
            ),
            key=lambda r: r["step_ms"],
            default=None,
        )
        for mine, other, target in TARGETS.get(group[0], []) + COMPILE_TARGETS:
            a = {"best": best, "best+compile": compiled}.get(
                mine, by.get(mine)
            )
            b = by.get(other)
            if a is None or b is None:
                continue
            ratio = b["step_ms"] / a["step_ms"]
            checks.append(
                dict(
                    check="%s %s %s B=%d: %s (%s) vs %s"
                    % (group + (mine, a["variant"], other)),
                    ok=ratio >= target,
                    ratio=round(ratio, 3),
                    target=target,
                )
            )
    return checks


def markdown(meta):
    lines = [
        "# Model zoo training step, T = %d, %dx%d (%s, torch %s)"
        % (
            T,
            meta["resolution"],
            meta["resolution"],
            meta["device"],
            meta["torch"],
        ),
        "",
        "| model | precision | layout | B | variant | step ms | host ms | "
        "peak GiB | first step s (build + prepare + step) | first loss |",
        "|---|---|---|---:|---|---:|---:|---:|---:|---:|",
    ]
    for r in meta["rows"]:
        head = "| %s | %s | %s | %d | %s |" % (
            r["model"],
            r["precision"],
            r["layout"],
            r["batch"],
            r["variant"] + (" (recompute)" if r.get("recompute") else ""),
        )
        if "step_ms" not in r:
            why = r.get("error") or r.get("skipped", "")
            lines.append(
                "%s %s | | | | |"
                % (head, " ".join(why.replace("|", "/").split())[:160])
            )
            continue
        first = "%.1f" % r["first_step_s"]
        if "build_s" in r:
            first += " (%.1f + %.1f + %.1f)" % (
                r["build_s"],
                r["prepare_s"],
                r["first_step_s"] - r["build_s"] - r["prepare_s"],
            )
        lines.append(
            "%s %.2f | %s | %s | %s | %.4f |"
            % (
                head,
                r["step_ms"],
                "%.2f" % r["host_ms"] if "host_ms" in r else "",
                "%.2f" % r["peak_gib"] if "peak_gib" in r else "",
                first,
                r["first_loss"],
            )
        )
    lines += ["", "Targets (ratio: the other's step / FlexSN's):", ""]
    lines += ["- " + results.check_line(c) for c in meta["checks"]]
    return "\n".join(lines) + "\n"


#: The bars of the plot, each a variant's step relative to torch.compile
#: of SpikingJelly's torch neurons in the same model, precision and layout.
PLOTTED = (
    ("flexsn+compile", "#8fb0d9"),
    ("flexsn+compile+cudagraphs", "#1b3a75"),
    ("flexsn-fused+graph", "#2f5fb3"),
    ("sj-flexsn-inductor+compile", "#d9a05b"),
    ("floor+graph", "#999999"),
    ("floor", "#cccccc"),
)


def svg(rows):
    """A bar chart: per model and layout, torch.compile of SpikingJelly's
    step divided by each plotted variant's (> 1: faster), the floor's
    too (the most any neuron could give)."""
    by = {
        (r["model"], r["precision"], r["layout"], r["batch"], r["variant"]): r[
            "step_ms"
        ]
        for r in rows
        if "step_ms" in r
    }
    groups = sorted({k[:4] for k in by if k[4] == "sj-torch+compile"})
    bar, gap, left, top, height = 14, 18, 60, 40, 200
    width = left + len(groups) * (len(PLOTTED) * bar + gap) + 200
    scale = 2.0  # the axis ends at 2x
    y = lambda r: top + height * (1 - min(r, scale) / scale)  # noqa: E731
    out = [
        '<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" '
        'font-family="sans-serif" font-size="11">'
        % (width, top + height + 120),
        '<text x="%d" y="18" font-size="13">Training step speedup over '
        "torch.compile of SpikingJelly (T = %d, 224x224)</text>" % (left, T),
    ]
    for ratio in (0.0, 0.5, 1.0, 1.5, 2.0):
        out.append(
            '<line x1="%d" x2="%d" y1="%.1f" y2="%.1f" stroke="%s"/>'
            '<text x="%d" y="%.1f" text-anchor="end">%.1fx</text>'
            % (
                left - 5,
                width - 190,
                y(ratio),
                y(ratio),
                "#888" if ratio == 1.0 else "#ddd",
                left - 8,
                y(ratio) + 4,
                ratio,
            )
        )
    for i, group in enumerate(groups):
        x = left + i * (len(PLOTTED) * bar + gap)
        base = by[group + ("sj-torch+compile",)]
        for j, (variant, color) in enumerate(PLOTTED):
            ms = by.get(group + (variant,))
            if ms is None:
                continue
            r = base / ms
            out.append(
                '<rect x="%d" y="%.1f" width="%d" height="%.1f" '
                'fill="%s"/><text x="%d" y="%.1f" font-size="8" '
                'text-anchor="middle">%.2f</text>'
                % (
                    x + j * bar,
                    y(r),
                    bar - 1,
                    top + height - y(r),
                    color,
                    x + j * bar + bar / 2,
                    y(r) - 3,
                    r,
                )
            )
        out.append(
            '<text transform="translate(%d,%d) rotate(35)">%s %s '
            "%s B=%d</text>"
            % (
                x + 2,
                top + height + 12,
                group[0],
                group[1],
                "row-major" if group[2] == "contiguous" else "channels-last",
                group[3],
            )
        )
    for j, (variant, color) in enumerate(PLOTTED):
        out.append(
            '<rect x="%d" y="%d" width="10" height="10" fill="%s"/>'
            '<text x="%d" y="%d">%s</text>'
            % (
                width - 180,
                30 + 14 * j,
                color,
                width - 166,
                39 + 14 * j,
                variant,
            )
        )
    out.append("</svg>")
    return "\n".join(out) + "\n"


def plot(paths, out):
    """OUT/zoo.svg from the rows of the result files `paths`."""
    import json
    import os

    rows = []
    for path in paths:
        with open(path) as f:
            rows += json.load(f)["rows"]
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "zoo.svg"), "w") as f:
        f.write(svg(rows))
    print("%s: wrote %s" % (PROG, os.path.join(out, "zoo.svg")))
    return 0


def smoke_models():
    """Small in-repo models of the zoo's shapes for the CPU smoke run
    (SpikingJelly needs a newer torch than CI's)."""
    from torch import nn

    import flexsn.torch

    class Seq(nn.Sequential):
        def forward(self, x):
            steps, batch = x.shape[:2]
            return (
                super().forward(x.flatten(0, 1)).unflatten(0, (steps, batch))
            )

    def lif():
        return flexsn.torch.LIFNode(tau=2.0, detach_reset=True, step_mode="m")

    class Former(nn.Module):
        def __init__(self):
            super().__init__()
            self.stem = Seq(
                nn.Conv2d(3, 8, 3, 1, 1, bias=False),
                nn.BatchNorm2d(8),
                nn.MaxPool2d(3, 2, 1),
            )
            self.sn0 = lif()
            self.fc1 = Seq(nn.Conv1d(8, 16, 1, bias=False), nn.BatchNorm1d(16))
            self.sn1 = lif()
            self.fc2 = Seq(nn.Conv1d(16, 8, 1, bias=False), nn.BatchNorm1d(8))
            self.sn2 = lif()
            self.head = nn.Linear(8, CLASSES)

        def forward(self, x):
            if x.ndim != 5:
                raise ValueError("[T, B, C, H, W]")
            tokens = self.sn0(self.stem(x)).flatten(3)
            tokens = tokens + self.sn2(self.fc2(self.sn1(self.fc1(tokens))))
            return self.head(tokens.mean(-1))

    class Vgg(nn.Module):
        def __init__(self):
            super().__init__()
            self.features = Seq(nn.Conv2d(3, 8, 3, 1, 1), nn.BatchNorm2d(8))
            self.sn = lif()
            self.head = nn.Linear(8, CLASSES)

        def forward(self, x):
            return self.head(self.sn(self.features(x)).mean((3, 4)))

    return {"former": Former, "vgg": Vgg}


def main(argv):
    ap = cli.parser("zoo", __doc__)
    cli.add_out_and_smoke(ap, None)
    ap.add_argument(
        "--models", nargs="+", default=list(MODELS), choices=MODELS
    )
    ap.add_argument(
        "--variants", nargs="+", default=list(VARIANTS), choices=VARIANTS
    )
    ap.add_argument(
        "--layouts", nargs="+", default=list(LAYOUTS), choices=LAYOUTS
    )
    ap.add_argument(
        "--precisions", nargs="+", default=list(PRECISIONS), choices=PRECISIONS
    )
    ap.add_argument("--batches", nargs="+", type=int, default=[16, 32])
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument(
        "--profile",
        action="store_true",
        help="also profile each row's GPU kernels (torch.profiler)",
    )
    ap.add_argument(
        "--recompute",
        action="store_true",
        help="FlexSN's neurons keep their inputs and recompute what their "
        "backward reads (flexsn.torch.set_recompute): less memory",
    )
    ap.add_argument(
        "--activation-memory-budget",
        type=float,
        metavar="F",
        help="torch._functorch.config.activation_memory_budget for the "
        "compiled variants (below 1, torch.compile's partitioner "
        "recomputes more in the backward to save memory)",
    )
    ap.add_argument(
        "--torch-step-max-neurons",
        type=int,
        metavar="N",
        help="under torch.compile, run a FlexSN neuron's kernels from N "
        "neurons per step on (default: the package's threshold)",
    )
    ap.add_argument(
        "--plot",
        nargs="+",
        metavar="JSON",
        help="instead of running: draw zoo.svg in --out from "
        "these result files",
    )
    args = cli.finish(ap.parse_args(argv))
    if args.plot:
        return plot(args.plot, args.out or ".")
    import torch

    if args.smoke:
        return smoke(torch, args.out)
    if not cli.gpu_with_spikingjelly(torch, args, PROG):
        return 2
    torch.backends.cudnn.benchmark = True
    if args.activation_memory_budget is not None:
        import torch._functorch.config

        torch._functorch.config.activation_memory_budget = (
            args.activation_memory_budget
        )
    if args.torch_step_max_neurons is not None:
        from flexsn.torch import _function

        _function.TORCH_STEP_MAX_NEURONS = args.torch_step_max_neurons
    timer = Timer(torch, "cuda", reps=args.reps, warmup=3)
    runs = [
        (m, v, p, lay, b)
        for m in args.models
        for b in args.batches
        for p in args.precisions
        for lay in args.layouts
        for v in args.variants
    ]
    runs.sort(key=lambda run: "+compile" in run[1])
    rows = [
        run_one(
            torch,
            timer,
            *run,
            args.reps,
            profile=args.profile,
            recompute=args.recompute,
        )
        for run in runs
    ]
    meta = dict(
        device=cli.device_name(torch, "cuda"),
        torch=torch.__version__,
        torch_step_max_neurons=args.torch_step_max_neurons,
        activation_memory_budget=args.activation_memory_budget,
        T=T,
        resolution=RES,
        rows=rows,
        checks=judge(rows),
    )
    if args.out:
        results.write_results(args.out, "zoo_results", meta, markdown(meta))
    print(markdown(meta))
    return 0


def smoke(torch, out):
    """The CPU run: the in-repo models' FlexSN variants and floor, tiny
    shapes; the fused model's first loss must be the unfused one's."""
    timer = Timer(torch, "cpu", reps=2, warmup=1)
    rows = []
    for name, factory in smoke_models().items():
        for variant in ("flexsn", "flexsn-fused", "floor"):
            rows.append(
                run_one(
                    torch,
                    timer,
                    name,
                    variant,
                    "f32",
                    "contiguous",
                    2,
                    2,
                    factory,
                    resolution=16,
                )
            )
    meta = dict(
        device=cli.device_name(torch, "cpu"),
        torch=torch.__version__,
        T=T,
        resolution=16,
        rows=rows,
        checks=judge(rows),
    )
    for name in smoke_models():
        by = {r["variant"]: r for r in rows if r["model"] == name}
        unfused, fused = by["flexsn"], by["flexsn-fused"]
        meta["checks"].append(
            dict(
                check="%s: fused first loss equals unfused" % name,
                ok=abs(fused["first_loss"] - unfused["first_loss"])
                <= 1e-5 * abs(unfused["first_loss"]),
                fused=fused["first_loss"],
                unfused=unfused["first_loss"],
            )
        )
    results.write_results(out, "zoo_results", meta, markdown(meta))
    print(markdown(meta))
    return (
        0
        if all(c["ok"] for c in meta["checks"])
        and not any("error" in r for r in rows)
        else 1
    )


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
