"""Training a recurrent spiking layer at the scale of the Spiking Heidelberg
Digits task: flexsn.torch.Recurrent against the per-step loops others run.

    python3 -m bench recurrent --compile-only   (here: the tools)
    python3 -m bench recurrent [--out DIR]      (on a GPU)
    python3 -m bench recurrent --smoke          (tiny, on the CPU)

The layer: 700 inputs, 256 recurrent LIF neurons (tau 2, threshold 1,
hard reset to 0, sigmoid(4) surrogate), s[t] = LIF(W_in x[t] + b +
W_rec s[t-1]) over T = 250 steps, batch 64; a readout (Linear 256 -> 20 of
the spike counts), cross-entropy, backward and an SGD step make one
training step. Every variant projects the input with one matrix product
over the sequence and runs the recurrence step by step:

- eager: the loop in PyTorch, the LIF step as SpikingJelly's torch backend
  writes it (snnTorch's RLeaky and Norse's LIFRecurrent run the same loop
  per step), the spike an autograd Function;
- compile: torch.compile of that loop (Inductor; T steps unrolled);
- flexsn: `flexsn.torch.Recurrent(700, 256, LIFNode(tau=2))`, which runs
  the neuron's coupled kernels (one forward kernel over the sequence with
  W_rec s[t-1] in its time loop, one backward kernel);
- flexsn+compile: torch.compile of that module (which steps in Python
  under tracing: Inductor sees the neuron's PyTorch step).

float32 and AMP (autocast float16). Before timing, the FlexSN layer's
spikes and gradients (input weights, bias, recurrent weights) are checked
against the eager loop's on the same weights. Reported: the median step
(CUDA events), the first step (module built, compiles, one step), and the
step's time against the device-to-device copy bandwidth measured in the
same run, on the bytes a fused kernel pair would move at least (the drive
read and the spikes and charge written forward; the spikes, charge and
incoming gradient read and the drive's gradient written backward: 6 T B H
values). Writes recurrent_results.{json,md} and recurrent.png to --out.
--smoke: T = 8, batch 2, 12 inputs, 16 neurons, on the CPU, without
torch.compile and AMP.
"""

import contextlib
import time

from . import cli, results, traffic
from .kernels import spike_fn
from .timing import Timer

PROG = "bench recurrent"
SHD = dict(T=250, B=64, inputs=700, hidden=256, classes=20)
SMOKE = dict(T=8, B=2, inputs=12, hidden=16, classes=3)
TAU, V_TH = 2.0, 1.0
INPUT_RATE = 0.1  # the input spikes' rate per step (SHD's are sparse)
VARIANTS = ("eager", "compile", "flexsn", "flexsn+compile")


def make_weights(torch, shape, device, seed=0):
    """W_in [H, I], b [H], W_rec [H, H], the readout's weight [C, H] and
    bias [C]: drives that make about a tenth of the neurons fire."""
    g = torch.Generator().manual_seed(seed)
    T, B, n_in, n_hid, n_cls = (
        shape[k] for k in ("T", "B", "inputs", "hidden", "classes")
    )

    def normal(*size, std):
        return (torch.randn(*size, generator=g) * std).to(device)

    # The drive's spread about 1.5 for inputs firing at INPUT_RATE.
    return dict(
        w_in=normal(n_hid, n_in, std=1.5 / (n_in * INPUT_RATE) ** 0.5),
        b=normal(n_hid, std=0.1) + 0.3,
        w_rec=normal(n_hid, n_hid, std=0.5 / n_hid**0.5),
        w_out=normal(n_cls, n_hid, std=1.0 / n_hid**0.5),
        b_out=torch.zeros(n_cls, device=device),
    )


def eager_layer(torch):
    """The recurrent LIF layer as a per-step PyTorch loop: f(x, w_in, b,
    w_rec) -> spikes [T, B, H]."""
    spike = spike_fn(torch).apply

    def layer(x, w_in, b, w_rec):
        drive = torch.nn.functional.linear(x, w_in, b)
        v = torch.zeros_like(drive[0])
        s = torch.zeros_like(drive[0])
        spikes = []
        for t in range(drive.shape[0]):
            h = v + (drive[t] + s @ w_rec.t() - v) / TAU
            s = spike(h - V_TH)
            v = h * (1.0 - s)
            spikes.append(s)
        return torch.stack(spikes)

    return layer


class EagerModule(object):
    """The eager loop holding its weights as leaf tensors (the variants'
    common interface: parameters(), and a call on x)."""

    def __init__(self, torch, weights, compiled=False):
        self.params = {
            k: weights[k].clone().requires_grad_()
            for k in ("w_in", "b", "w_rec")
        }
        fn = eager_layer(torch)
        self.fn = torch.compile(fn) if compiled else fn

    def parameters(self):
        return list(self.params.values())

    def __call__(self, x):
        p = self.params
        return self.fn(x, p["w_in"], p["b"], p["w_rec"])


class FlexSNModule(object):
    """flexsn.torch.Recurrent with the given weights."""

    def __init__(self, torch, weights, shape, smoke, compiled=False):
        from flexsn.torch import LIFNode, Recurrent

        targets = dict(targets=("cpu",)) if smoke else {}
        self.layer = Recurrent(
            shape["inputs"],
            shape["hidden"],
            LIFNode(tau=TAU, step_mode="m", **targets),
        )
        self.layer.to(weights["w_in"].device)
        with torch.no_grad():
            self.layer.input.weight.copy_(weights["w_in"])
            self.layer.input.bias.copy_(weights["b"])
            self.layer.recurrent.weight.copy_(weights["w_rec"])
        self.call = torch.compile(self.layer) if compiled else self.layer

    def parameters(self):
        return list(self.layer.parameters())

    def __call__(self, x):
        self.layer.reset()
        return self.call(x)


def make_step(torch, module, readout, x, labels, amp):
    """One training step of `module` and the readout: forward, loss,
    backward, SGD."""
    params = module.parameters() + list(readout.values())
    opt = torch.optim.SGD(params, lr=1e-3)

    def precision():
        return (
            torch.autocast("cuda", dtype=torch.float16)
            if amp
            else contextlib.nullcontext()
        )

    def step():
        opt.zero_grad(set_to_none=True)
        with precision():
            spikes = module(x)
            logits = torch.nn.functional.linear(
                spikes.float().mean(0), readout["w"], readout["b"]
            )
        loss = torch.nn.functional.cross_entropy(logits.float(), labels)
        loss.backward()
        opt.step()
        return loss

    return step


def check(torch, weights, shape, x, smoke):
    """The FlexSN layer against the eager loop on the same weights: the
    fraction of spikes that agree and the gradients' relative errors."""
    eager = EagerModule(torch, weights)
    flexsn = FlexSNModule(torch, weights, shape, smoke)
    g = torch.Generator().manual_seed(1)
    upstream = torch.randn(
        x.shape[0], x.shape[1], shape["hidden"], generator=g
    ).to(x.device)
    got, want = flexsn(x), eager(x)
    (got * upstream).sum().backward()
    (want * upstream).sum().backward()
    record = dict(
        check="Recurrent against the eager loop",
        spikes_equal=float((got == want).float().mean()),
        spike_rate=float(want.float().mean()),
    )
    pairs = zip(
        ("w_in", "b", "w_rec"), flexsn.parameters(), eager.parameters()
    )
    for name, mine, ref in pairs:
        record["grad_error_" + name] = float(
            (mine.grad - ref.grad).norm() / ref.grad.norm()
        )
    # A spike that flips near the threshold (float32 sums in another
    # order) carries on through the recurrence: most must agree, and the
    # gradients closely.
    record["ok"] = record["spikes_equal"] > 0.99 and all(
        record["grad_error_" + n] < 1e-2 for n in ("w_in", "b", "w_rec")
    )
    return record


def step_bytes(shape, es):
    """The bytes a fused forward and backward kernel pair would move at
    least: 6 T B H values (forward: drive read, spikes and charge written;
    backward: incoming gradient, spikes and charge read, the drive's
    gradient written)."""
    return 6 * shape["T"] * shape["B"] * shape["hidden"] * es


def main(argv=None):
    ap = cli.parser("recurrent", __doc__)
    ap.add_argument(
        "--compile-only",
        action="store_true",
        help="compile the layer's neuron into the cache (the "
        "GPU machine has no tools)",
    )
    cli.add_out_and_smoke(ap, "recurrent-out")
    ap.add_argument(
        "--no-compile",
        action="store_true",
        help="skip the torch.compile variants",
    )
    ap.add_argument(
        "--variants", nargs="+", choices=VARIANTS, default=list(VARIANTS)
    )
    ap.add_argument(
        "--precisions",
        nargs="+",
        choices=("f32", "amp"),
        default=["f32", "amp"],
    )
    ap.add_argument("--reps", type=int, default=10)
    args = cli.finish(ap.parse_args(argv))
    import torch

    if args.compile_only:  # the neuron's kernels, as the run builds them
        module = FlexSNModule(
            torch, make_weights(torch, SMOKE, "cpu"), SMOKE, args.smoke
        )
        return 0 if module.layer.neuron.compiled is not None else 1
    dev = cli.device(torch, args, PROG)
    if dev is None:
        return 2
    smoke = args.smoke
    shape = SMOKE if smoke else SHD
    timer = Timer(torch, dev, 3 if smoke else args.reps, 1 if smoke else 2)
    meta = dict(
        device=cli.device_name(torch, dev),
        torch=torch.__version__,
        shape=shape,
        checks=[],
        rows=[],
        skipped={},
    )
    meta["copy_gbs"], _ = traffic.copy_gbs(
        torch, timer, (8 << 20) if smoke else traffic.COPY_BYTES
    )

    weights = make_weights(torch, shape, dev)
    g = torch.Generator().manual_seed(2)
    x = (
        (
            torch.rand(shape["T"], shape["B"], shape["inputs"], generator=g)
            < INPUT_RATE
        )
        .float()
        .to(dev)
    )
    labels = torch.randint(0, shape["classes"], (shape["B"],), generator=g).to(
        dev
    )
    record = check(torch, weights, shape, x, smoke)
    meta["checks"].append(record)
    print(results.check_line(record))

    variants = list(args.variants)
    if smoke or args.no_compile or not hasattr(torch, "compile"):
        why = (
            "--smoke: it compiles for minutes"
            if smoke
            else "--no-compile"
            if args.no_compile
            else "this torch has no torch.compile"
        )
        meta["skipped"]["torch.compile"] = cli.skip(PROG, "torch.compile", why)
        variants = [v for v in variants if "compile" not in v]
    precisions = ("f32",) if smoke else args.precisions
    # The compiled variants last (each compiles for a minute or more); the
    # results are written after every row.
    for variant in variants:
        for precision in precisions:
            amp = precision == "amp"
            row = run_variant(
                torch, timer, variant, weights, shape, x, labels, amp, smoke
            )
            row.update(variant=variant, precision=precision)
            es = 2 if amp else 4
            row["frac_copy"] = traffic.frac_copy(
                step_bytes(shape, es), row["step_ms"], meta["copy_gbs"]
            )
            meta["rows"].append(row)
            print(
                "%s: %s %s: step %.2f ms (first %.1f s)"
                % (
                    PROG,
                    precision,
                    variant,
                    row["step_ms"],
                    row["first_step_s"],
                )
            )
            compare(meta["rows"])
            results.write_results(
                args.out, "recurrent_results", meta, markdown(meta)
            )
    if not smoke:
        plot(meta, args.out + "/recurrent.png")
    return 1 if not record["ok"] else 0


def compare(rows):
    """Each row's speed-up over the eager loop and torch.compile of it, of
    the same precision, where those were timed."""

    def ms(variant, precision):
        found = [
            r["step_ms"]
            for r in rows
            if r["variant"] == variant and r["precision"] == precision
        ]
        return found[0] if found else None

    for row in rows:
        for key, variant in (("vs_eager", "eager"), ("vs_compile", "compile")):
            base = ms(variant, row["precision"])
            row[key] = None if base is None else base / row["step_ms"]


def run_variant(torch, timer, variant, weights, shape, x, labels, amp, smoke):
    """{step_ms, min_ms, first_step_s} of one variant's training step."""
    timer.sync()
    start = time.perf_counter()
    if variant.startswith("flexsn"):
        module = FlexSNModule(
            torch, weights, shape, smoke, compiled=variant.endswith("compile")
        )
    else:
        module = EagerModule(torch, weights, compiled=variant == "compile")
    readout = {
        "w": weights["w_out"].clone().requires_grad_(),
        "b": weights["b_out"].clone().requires_grad_(),
    }
    step = make_step(torch, module, readout, x, labels, amp)
    step()
    timer.sync()
    first = time.perf_counter() - start
    median, minimum = timer.ms(step)
    timer.free()
    return dict(step_ms=median, min_ms=minimum, first_step_s=first)


def markdown(meta):
    s = meta["shape"]
    lines = [
        "`python3 -m bench recurrent` on %s (torch %s), copy %.0f GB/s. "
        "One training step of a recurrent LIF layer, %d inputs, %d "
        "neurons, T = %d, batch %d (forward, readout, cross-entropy, "
        "backward, SGD). %% of copy: on 6 T B H values, what a fused "
        "kernel pair would move at least."
        % (
            meta["device"],
            meta["torch"],
            meta["copy_gbs"],
            s["inputs"],
            s["hidden"],
            s["T"],
            s["B"],
        ),
        "",
        "| precision | variant | step ms | min ms | first step s | "
        "vs eager | vs compile | % copy |",
        "|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    for r in meta["rows"]:
        lines.append(
            "| %s | %s | %.2f | %.2f | %.1f | %s | %s | %.2f |"
            % (
                r["precision"],
                r["variant"],
                r["step_ms"],
                r["min_ms"],
                r["first_step_s"],
                results.fmt(r["vs_eager"], ".2f"),
                results.fmt(r["vs_compile"], ".2f"),
                100 * r["frac_copy"],
            )
        )
    lines += [
        "",
        "Checks: " + "; ".join(results.check_line(c) for c in meta["checks"]),
    ]
    if meta["skipped"]:
        lines.append(
            "Skipped: "
            + "; ".join("%s (%s)" % kv for kv in meta["skipped"].items())
        )
    return "\n".join(lines) + "\n"


def plot(meta, path):
    plt = results.pyplot(PROG, "plot")
    if plt is None:
        return
    precisions = sorted({r["precision"] for r in meta["rows"]})
    variants = [
        v for v in VARIANTS if any(r["variant"] == v for r in meta["rows"])
    ]
    fig, ax = plt.subplots(figsize=(7, 3.6))
    width = 0.8 / len(variants)
    for i, variant in enumerate(variants):
        bars = [
            (j + i * width, r["step_ms"])
            for j, p in enumerate(precisions)
            for r in meta["rows"]
            if r["variant"] == variant and r["precision"] == p
        ]
        ax.bar(
            [b[0] for b in bars], [b[1] for b in bars], width, label=variant
        )
    ax.set_xticks([j + 0.4 - width / 2 for j in range(len(precisions))])
    ax.set_xticklabels(precisions)
    ax.set_ylabel("training step, ms (lower is better)")
    s = meta["shape"]
    ax.set_title(
        "Recurrent LIF layer, %d -> %d, T = %d, B = %d (%s)"
        % (s["inputs"], s["hidden"], s["T"], s["B"], meta["device"]),
        fontsize=9,
    )
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
