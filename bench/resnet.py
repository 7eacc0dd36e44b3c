"""End-to-end training steps of SpikingJelly's model zoo: FlexSN neurons,
unfused and fused (`flexsn.torch.fuse`), against SpikingJelly's backends.

    python3 -m bench resnet --compile-only     (here: the tools)
    python3 -m bench resnet [--models ...] [--precisions ...] [--out DIR]
    python3 -m bench resnet --plot RESULTS.json... --out DIR

On a GPU with SpikingJelly importable (PYTHONPATH), for `spiking_resnet18`
and `sew_resnet18` (cnf ADD), built by SpikingJelly's own constructors with
LIF neurons (tau = 2, hard reset to 0, detach_reset, sigmoid surrogate
alpha 4) in multi-step mode, one training step is: reset the neurons,
forward x `[T = 4, B = 32, 3, 224, 224]`, cross-entropy of the mean over T,
backward, SGD with momentum. In f32 and with AMP (float16 autocast), each
model runs in each of `--layouts` (`contiguous`: as SpikingJelly builds
it; `channels_last`: the model's weights and the input in
torch.channels_last, which GPU convolutions run faster) as:

- sj-cupy, sj-torch: SpikingJelly's LIFNode on its CuPy or torch backend;
- sj-cupy+compile, sj-torch+compile: the same under torch.compile;
- flexsn: flexsn.torch.LIFNode in SpikingJelly's model, unfused;
- flexsn-fused: that model through flexsn.torch.fuse;
- flexsn-fused+compile: the fused model under torch.compile;
- flexsn+graph, flexsn-fused+graph: the whole training step (forward,
  backward, optimizer) captured once in a CUDA graph (torch.cuda.graph)
  and replayed: no host work per step.

The variants run in the order given, the `+compile` ones last (an eager
step timed after an Inductor compile in the same process is slower).
Every variant starts from the same weights and batch; the first step's
loss of each is recorded beside the time (they agree to float tolerance).
A step is timed with CUDA events (median of --reps after warm-up); the
first step's wall time (compiles included) and, for flexsn-fused,
`fuse` + the first step are recorded too, and the host's time per step
(steps queued back to back, timed before waiting for the GPU: an eager
step whose host time nears its step time is host-bound). With --rounds N
each model, precision and layout's variants are built together and timed
in turns, N times: eager steps drift between runs (the host's speed, the
GPU's clocks), and taking turns makes the drift hit every variant alike.
Targets: flexsn-fused at least 1.3x sj-torch+compile and 1.25x flexsn,
and flexsn-fused+graph the same against sj-torch+compile and
flexsn+graph (in each layout, and the fastest layout of each against the
other's fastest); fuse + first step under 5 s.
Writes resnet_results.{json,md} to --out; `--plot` draws resnet.png from
result files.

`--compile-only` builds the FlexSN kernels the run takes (the LIF neuron
and its fused blocks, f32 and f16) into the compile cache: the GPU machine
has no compiler.
"""

import statistics
import sys
import time

from . import cli, results
from .timing import Timer

PROG = "bench resnet"
MODELS = ("sew_resnet18", "spiking_resnet18")
PRECISIONS = ("f32", "amp")
LAYOUTS = ("contiguous", "channels_last")
MEMORY_FORMATS = {
    "contiguous": "contiguous_format",
    "channels_last": "channels_last",
}
VARIANTS = (
    "sj-cupy",
    "sj-torch",
    "sj-cupy+compile",
    "sj-torch+compile",
    "flexsn",
    "flexsn-fused",
    "flexsn-fused+compile",
    "flexsn+graph",
    "flexsn-fused+graph",
)
T, B, RES, CLASSES = 4, 32, 224, 1000
TAU = 2.0
TARGETS = {
    "vs_sj_torch_compile": 1.3,
    "vs_flexsn": 1.25,
    "fuse_first_step_s": 5.0,
}


def neuron_kwargs():
    """The FlexSN LIF neuron every variant's neurons equal."""
    return dict(tau=TAU, detach_reset=True, step_mode="m")


def compile_only():
    """Compiles the neuron and the blocks fuse makes of it: float32 at
    fuse, one compile per model's set of blocks (SpikingJelly's ResNets,
    SEW with ADD and IAND, and VGG: this benchmark's and
    python/tests/test_fuse_spikingjelly.py's), float16 (AMP) one block
    per compile at its first call, and the neuron-and-connection blocks
    that channels-last training runs after cuDNN's batch norm."""
    import flexsn.torch
    from flexsn.torch._block import BlockShape
    from flexsn.torch._fuse import _PROGRAMS, _program, prepare

    neuron = flexsn.torch.LIFNode(**neuron_kwargs())
    alone = BlockShape("channel_affine")
    add, iand = (
        BlockShape("channel_affine", op, "skip") for op in ("add", "iand")
    )
    for blocks in ([alone], [alone, add], [alone, iand]):
        _PROGRAMS.clear()  # each set as a fresh process compiles it
        prepare([(neuron, shape) for shape in blocks], "f32")
    for shape in (alone, add):
        _program(neuron, shape, "f16")
    for dtype in ("f32", "f16"):
        _program(neuron, BlockShape("none", "add", "skip"), dtype)
    print("%s: compiled the LIF neuron and its fused blocks" % PROG)
    return 0


def build(torch, model, variant, layout):
    """SpikingJelly's `model` with the variant's neurons, on the GPU, its
    weights in `layout`."""
    import flexsn.torch
    from spikingjelly.activation_based import functional, neuron, surrogate
    from spikingjelly.activation_based.model import sew_resnet, spiking_resnet

    make = {
        "sew_resnet18": lambda **kw: sew_resnet.sew_resnet18(cnf="ADD", **kw),
        "spiking_resnet18": spiking_resnet.spiking_resnet18,
    }[model]
    torch.manual_seed(0)
    if variant.startswith("sj-"):
        backend = variant.split("+")[0][3:]
        net = make(
            spiking_neuron=neuron.LIFNode,
            tau=TAU,
            detach_reset=True,
            surrogate_function=surrogate.Sigmoid(alpha=4.0),
            backend=backend,
        )
    else:
        net = make(spiking_neuron=flexsn.torch.LIFNode, **neuron_kwargs())
    functional.set_step_mode(net, "m")
    return net.cuda().to(memory_format=getattr(torch, MEMORY_FORMATS[layout]))


def batch(torch, layout, gen):
    """The input `[T, B, 3, RES, RES]` (in `layout`: each image
    channels-last) and the labels."""
    x = torch.rand(T, B, RES, RES, 3, device="cuda", generator=gen)
    x = x.permute(0, 1, 4, 2, 3)
    if layout == "contiguous":
        x = x.contiguous()
    labels = torch.randint(0, CLASSES, (B,), device="cuda", generator=gen)
    return x, labels


def training_step(torch, model, variant, precision, layout, x, labels, losses):
    """The variant's model (fused, compiled as it says) and a function
    running one training step on (x, labels), appending its loss."""
    import flexsn.torch
    from spikingjelly.activation_based import functional

    net = build(torch, model, variant, layout)
    if "fused" in variant:
        net = flexsn.torch.fuse(net)
    if variant.endswith("+compile"):
        # FlexSN's scan op takes static shapes: the fused model's graph
        # breaks (one per block) would otherwise make them dynamic.
        net = torch.compile(
            net, dynamic=False if "flexsn" in variant else None
        )
    optimizer = torch.optim.SGD(net.parameters(), lr=1e-3, momentum=0.9)
    amp = precision == "amp"
    graph = variant.endswith("+graph")

    def step():
        functional.reset_net(net)
        optimizer.zero_grad(set_to_none=True)
        # A captured step must not reuse autocast's cached weight copies.
        with torch.autocast(
            "cuda", dtype=torch.float16, enabled=amp, cache_enabled=not graph
        ):
            loss = torch.nn.functional.cross_entropy(net(x).mean(0), labels)
        loss.backward()
        optimizer.step()
        losses.append(loss.detach())

    return net, optimizer, graphed(torch, step) if graph else step


def graphed(torch, step):
    """`step` captured in a CUDA graph after warm-up steps on a side stream
    (which also create the optimizer's state): its replay, whose first call
    is the first step."""
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for _ in range(3):
            step()
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        step()
    return graph.replay


def profile(torch, model, variant, precision, layout, x, labels):
    """Prints where a step's time goes: host ms per step (queued without
    waiting), GPU kernel ms per step, the top kernels."""
    from torch.profiler import ProfilerActivity

    net, optimizer, step = training_step(
        torch, model, variant, precision, layout, x, labels, []
    )
    for _ in range(3):
        step()
    torch.cuda.synchronize()
    steps = 3
    with torch.profiler.profile(
        activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]
    ) as prof:
        t0 = time.perf_counter()
        for _ in range(steps):
            step()
        host = (time.perf_counter() - t0) / steps * 1e3
        torch.cuda.synchronize()
        wall = (time.perf_counter() - t0) / steps * 1e3
    events = prof.key_averages()
    gpu = (
        sum(
            getattr(
                e,
                "self_device_time_total",
                getattr(e, "self_cuda_time_total", 0),
            )
            for e in events
        )
        / steps
        / 1e3
    )
    print(
        "%s: profile %s %s %s %s: host %.1f ms/step (profiled), wall "
        "%.1f ms/step, GPU kernels %.1f ms/step"
        % (PROG, model, precision, layout, variant, host, wall, gpu)
    )
    key = (
        "self_device_time_total"
        if hasattr(events[0], "self_device_time_total")
        else "self_cuda_time_total"
    )
    print(events.table(sort_by=key, row_limit=45, max_name_column_width=70))
    # The host's side: Python functions by their own time.
    import cProfile
    import pstats

    host_profile = cProfile.Profile()
    host_profile.enable()
    for _ in range(steps):
        step()
    torch.cuda.synchronize()
    host_profile.disable()
    pstats.Stats(host_profile, stream=sys.stdout).sort_stats(
        "tottime"
    ).print_stats(22)
    sys.stdout.flush()
    del net, optimizer
    torch.cuda.empty_cache()


def host_ms(torch, step, steps=5):
    """The host's time per step, ms: `steps` steps queued back to back,
    timed before waiting for the GPU. Where it nears the step's time, the
    step is host-bound."""
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(steps):
        step()
    host = (time.perf_counter() - t0) / steps * 1e3
    torch.cuda.synchronize()
    return host


def start(torch, model, variant, precision, layout, x, labels):
    """(step, what keeps it alive, its row so far): the variant built and
    its first step run (compiles included in `first_step_s`)."""
    losses = []
    t0 = time.perf_counter()
    net, optimizer, step = training_step(
        torch, model, variant, precision, layout, x, labels, losses
    )
    step()
    torch.cuda.synchronize()
    row = dict(
        model=model,
        variant=variant,
        precision=precision,
        layout=layout,
        first_step_s=time.perf_counter() - t0,
        first_loss=float(losses[0]),
    )
    return step, (net, optimizer), row


def measure(torch, timer, runs, x, labels, reps, rounds=1):
    """Rows of `runs` [(model, precision, layout, variant)] sharing one
    input: each variant timed alone (`rounds` = 1: built, timed, freed),
    or all of them built first and timed in turns, `rounds` times, so that
    drift between variants (the host's, the GPU's clocks) hits them alike:
    `step_ms` is then the median of the rounds' medians, each round's in
    `rounds_ms`. A variant that fails is recorded with its error."""
    rows, started = [], []

    def failed(row, error):
        rows.append(
            dict(
                row, error="%s: %s" % (type(error).__name__, str(error)[:600])
            )
        )
        timer.free()

    def time_turns(group):
        times = [[] for _ in group]
        for _ in range(rounds):
            for (step, _, _), t in zip(group, times):
                t.append(timer.ms(step, reps=reps) + (host_ms(torch, step),))
        for (_, _, row), t in zip(group, times):
            row["step_ms"] = statistics.median(m for m, _, _ in t)
            row["min_ms"] = min(m for _, m, _ in t)
            row["host_ms"] = statistics.median(h for _, _, h in t)
            if rounds > 1:
                row["rounds_ms"] = [round(m, 3) for m, _, _ in t]
            rows.append(row)

    for model, precision, layout, variant in runs:
        row = dict(
            model=model, variant=variant, precision=precision, layout=layout
        )
        try:
            built = start(torch, model, variant, precision, layout, x, labels)
            if rounds == 1:
                time_turns([built])
                del built
                timer.free()
            else:
                started.append(built)
        except Exception as error:  # noqa: BLE001: record, go on
            failed(row, error)
    if started:
        try:
            time_turns(started)
        except Exception as error:  # noqa: BLE001: record, go on
            for _, _, row in started:
                failed(row, error)
        started.clear()
        timer.free()
    for row in rows:
        print("%s: %s" % (PROG, row))
    sys.stdout.flush()
    return rows


def main(argv):
    ap = cli.parser("resnet", __doc__)
    cli.add_out_and_smoke(ap, None)
    ap.add_argument("--compile-only", action="store_true")
    ap.add_argument(
        "--models", nargs="+", default=list(MODELS), choices=MODELS
    )
    ap.add_argument(
        "--precisions", nargs="+", default=list(PRECISIONS), choices=PRECISIONS
    )
    ap.add_argument(
        "--variants", nargs="+", default=list(VARIANTS), choices=VARIANTS
    )
    ap.add_argument(
        "--layouts", nargs="+", default=list(LAYOUTS), choices=LAYOUTS
    )
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument(
        "--rounds",
        type=int,
        default=1,
        help="with N > 1, each model, precision and layout's "
        "variants are built together and timed in turns, N "
        "times (the median of the rounds' medians): for "
        "comparing eager steps whose times drift (default 1: "
        "one variant at a time, each freed before the next)",
    )
    ap.add_argument(
        "--profile",
        action="store_true",
        help="instead of timing: per variant, the host time of "
        "a step, the GPU time its kernels take, and the "
        "kernels taking most of it (torch.profiler)",
    )
    ap.add_argument(
        "--plot",
        nargs="+",
        metavar="JSON",
        help="instead of running: draw resnet.png in --out "
        "from these result files",
    )
    args = cli.finish(ap.parse_args(argv))
    if args.rounds < 1 or args.reps < 1:
        ap.error("--rounds and --reps are at least 1")
    if args.compile_only:
        return compile_only()
    if args.plot:
        return plot(args.plot, args.out or ".")
    if args.smoke:
        cli.skip(PROG, "--smoke", "the model zoo's steps need a GPU")
        return 0
    import torch

    if not cli.gpu_with_spikingjelly(torch, args, PROG):
        return 2
    torch.backends.cudnn.benchmark = True
    timer = Timer(torch, "cuda", reps=args.reps, warmup=3)
    runs = [
        (model, precision, layout, variant)
        for model in args.models
        for precision in args.precisions
        for layout in args.layouts
        for variant in args.variants
    ]
    # Compiled variants last: eager steps timed after an Inductor compile
    # in the same process took up to twice as long (docs/perf/resnet).
    runs.sort(key=lambda run: run[3].endswith("+compile"))
    inputs = {
        layout: batch(
            torch, layout, torch.Generator(device="cuda").manual_seed(1)
        )
        for layout in args.layouts
    }
    if args.profile:
        for model, precision, layout, variant in runs:
            profile(torch, model, variant, precision, layout, *inputs[layout])
        return 0
    rows = []
    if args.rounds == 1:
        for run in runs:
            rows += measure(torch, timer, [run], *inputs[run[2]], args.reps)
    else:
        # Each (model, precision, layout)'s variants in turns; compiled
        # ones apart, after every eager one (see above).
        groups = {}
        for run in runs:
            groups.setdefault(
                (run[:3], run[3].endswith("+compile")), []
            ).append(run)
        for (group, _), members in sorted(
            groups.items(), key=lambda g: g[0][1]
        ):
            rows += measure(
                torch,
                timer,
                members,
                *inputs[group[2]],
                args.reps,
                args.rounds,
            )
    checks = judge(rows)
    meta = dict(
        device=cli.device_name(torch, "cuda"),
        torch=torch.__version__,
        T=T,
        B=B,
        resolution=RES,
        rows=rows,
        checks=checks,
    )
    if args.out:
        results.write_results(args.out, "resnet_results", meta, markdown(meta))
    print(markdown(meta))
    return 0


#: Each fused variant and the unfused FlexSN variant it is judged against:
#: eager against eager, a CUDA-graph step against a CUDA-graph step.
FUSED_VS_UNFUSED = {
    "flexsn-fused": "flexsn",
    "flexsn-fused+graph": "flexsn+graph",
}


def judge(rows):
    """The targets, per model and precision: ratios of medians in each
    layout, and of each variant's fastest layout."""
    checks = []
    timed = [r for r in rows if "step_ms" in r]
    best = {}
    for r in timed:
        key = (r["model"], r["precision"], "fastest layout", r["variant"])
        if key not in best or r["step_ms"] < best[key]["step_ms"]:
            best[key] = r
    by = {
        (r["model"], r["precision"], r["layout"], r["variant"]): r
        for r in timed
    }
    by.update(best)
    groups = sorted({key[:3] for key in by})
    for model, precision, layout in groups:
        for variant, unfused in FUSED_VS_UNFUSED.items():
            fused = by.get((model, precision, layout, variant))
            if fused is None:
                continue
            for name, other in (
                ("vs_sj_torch_compile", "sj-torch+compile"),
                ("vs_flexsn", unfused),
            ):
                base = by.get((model, precision, layout, other))
                if base is not None:
                    ratio = base["step_ms"] / fused["step_ms"]
                    checks.append(
                        dict(
                            check="%s %s %s %s %s"
                            % (model, precision, layout, variant, name),
                            ok=ratio >= TARGETS[name],
                            ratio=round(ratio, 3),
                            target=TARGETS[name],
                        )
                    )
            if layout != "fastest layout" and variant == "flexsn-fused":
                checks.append(
                    dict(
                        check="%s %s %s fuse_first_step_s"
                        % (model, precision, layout),
                        ok=fused["first_step_s"]
                        < TARGETS["fuse_first_step_s"],
                        seconds=round(fused["first_step_s"], 2),
                        target=TARGETS["fuse_first_step_s"],
                    )
                )
    return checks


#: The bars of the plot: (variant, layout, label), for each model and
#: precision.
PLOTTED = (
    (
        "sj-torch+compile",
        "channels_last",
        "torch.compile of SJ torch, channels-last",
    ),
    ("flexsn+graph", "contiguous", "FlexSN unfused, row-major"),
    ("flexsn-fused+graph", "contiguous", "FlexSN fused, row-major"),
    ("flexsn+graph", "channels_last", "FlexSN unfused, channels-last"),
    ("flexsn-fused+graph", "channels_last", "FlexSN fused, channels-last"),
)


def plot(paths, out):
    """OUT/resnet.png from the rows of the result files `paths` (a later
    file's row replaces an earlier one's): the training step of each model
    and precision, FlexSN's rows captured in a CUDA graph."""
    import json
    import os

    rows, device = {}, None
    for path in paths:
        with open(path) as f:
            meta = json.load(f)
        device = device or meta["device"]
        for r in meta["rows"]:
            if "step_ms" in r:
                rows[
                    (r["model"], r["precision"], r["variant"], r["layout"])
                ] = r["step_ms"]
    plt = results.pyplot(PROG, "resnet.png")
    if plt is None:
        return 1
    groups = [(m, p) for m in MODELS for p in PRECISIONS]
    fig, ax = plt.subplots(figsize=(8, 3.8))
    width = 0.8 / len(PLOTTED)
    for i, (variant, layout, label) in enumerate(PLOTTED):
        xs = [
            j + (i - (len(PLOTTED) - 1) / 2) * width
            for j in range(len(groups))
        ]
        ys = [rows.get((m, p, variant, layout), 0.0) for m, p in groups]
        bars = ax.bar(xs, ys, width, label=label)
        for bar, y in zip(bars, ys):
            if y:
                ax.annotate(
                    "%.1f" % y,
                    (bar.get_x() + bar.get_width() / 2, y),
                    ha="center",
                    va="bottom",
                    fontsize=6,
                )
    ax.set_xticks(range(len(groups)))
    ax.set_xticklabels(
        ["%s %s" % (m, "AMP" if p == "amp" else p) for m, p in groups],
        fontsize=8,
    )
    ax.set_ylabel("training step (ms)")
    ax.set_title(
        "T = %d, B = %d, %d², one training step (FlexSN's captured "
        "in a CUDA graph), %s" % (T, B, RES, device),
        fontsize=9,
    )
    ax.legend(fontsize=7)
    fig.tight_layout()
    os.makedirs(out, exist_ok=True)
    fig.savefig(os.path.join(out, "resnet.png"), dpi=130)
    print("%s: wrote %s" % (PROG, os.path.join(out, "resnet.png")))
    return 0


def markdown(meta):
    lines = [
        "# End-to-end training step, T = %d, B = %d, %dx%d (%s, "
        "torch %s)"
        % (
            meta["T"],
            meta["B"],
            meta["resolution"],
            meta["resolution"],
            meta["device"],
            meta["torch"],
        ),
        "",
        "| model | precision | layout | variant | step ms | host ms | "
        "first step s | first loss |",
        "|---|---|---|---|---:|---:|---:|---:|",
    ]
    for r in meta["rows"]:
        if "error" in r:
            lines.append(
                "| %s | %s | %s | %s | error: %s | | | |"
                % (
                    r["model"],
                    r["precision"],
                    r["layout"],
                    r["variant"],
                    " ".join(r["error"].replace("|", "/").split())[:160],
                )
            )
            continue
        host = r.get("host_ms")
        lines.append(
            "| %s | %s | %s | %s | %.2f | %s | %.1f | %.4f |"
            % (
                r["model"],
                r["precision"],
                r["layout"],
                r["variant"],
                r["step_ms"],
                "" if host is None else "%.2f" % host,
                r["first_step_s"],
                r["first_loss"],
            )
        )
    lines += ["", "Targets:", ""]
    lines += ["- " + results.check_line(c) for c in meta["checks"]]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
