"""The PyTorch layer on a GPU: correctness, torch.compile, training.

    python3 -m bench device-torch --compile-only   # here: fill the cache
    python3 -m bench device-torch --out DIR        # on the GPU machine
    python3 -m bench device-torch --smoke          # tiny, on the CPU

The GPU machine has no FlexSN tools: set FLEXSN_CACHE_DIR to a cache filled
by --compile-only and FLEXSN_RUNTIME_LIB to libflexsn_runtime.so. Prints a
table and writes DIR/torch_results.json and DIR/digits_training.png (the
digits training's loss curves and test accuracy, FlexSN vs eager; needs
matplotlib). The modules' host overhead and wall time are measured by
`python3 -m bench lif`. --smoke checks LIF and PLIF against the eager
references and trains the digits model for two epochs on the CPU (seeded
noise without scikit-learn), FlexSN against eager; the CUDA-vs-CPU checks
and torch.compile need a GPU.
"""

import importlib.util
import json
import math
import pathlib
import sys
import time

import torch

import flexsn
from flexsn.torch import FlexSN, LIFNode, ParametricLIFNode

from . import ROOT, cli, results

PROG = "bench device-torch"
NEURONS = ["if", "lif", "plif", "qif", "eif", "izhikevich", "cuba_lif"]
DTYPES = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}
# --smoke trains this long on this many images (tested on a quarter as
# many); the losses of FlexSN's LIFNode and the eager LIF may differ by
# this much (relative: float32 sums in another order).
SMOKE_EPOCHS, SMOKE_IMAGES, SMOKE_LOSS_RTOL = 2, 200, 1e-3


def load_reference(name="flexsn_test_reference"):
    """python/tests/reference.py, the tests' eager neurons (independent of
    the flexsn package), loaded from its file: it is no package. Registered
    in sys.modules, where torch.compile looks modules up by name."""
    if name in sys.modules:
        return sys.modules[name]
    path = ROOT / "python" / "tests" / "reference.py"
    spec = importlib.util.spec_from_file_location(name, path)
    module = sys.modules[name] = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


reference = load_reference()


def modules(**options):
    """Every module configuration the run uses (compiled by --compile-only;
    `options` go to the compile: --smoke's CPU target)."""
    for name in NEURONS:
        yield name, lambda name=name: FlexSN(
            name, store_state_seqs=True, **options
        )
    yield "lif-node", lambda: LIFNode(step_mode="m", **options)
    yield "plif-node", lambda: ParametricLIFNode(
        step_mode="m", init_tau=2.0, **options
    )


def check_neurons(res, device, options):
    """On a GPU: each shipped neuron on CUDA against the CPU path (outputs,
    state sequences, input/state/parameter gradients). Everywhere: LIF and
    PLIF (f32) against the eager reference."""
    torch.manual_seed(0)
    if device == "cuda":
        check_cuda_vs_cpu(res)
    else:
        cli.skip(PROG, "the neurons on CUDA against the CPU path")
    for name in ("lif", "plif"):
        x = (torch.randn(8, 1000, device=device) * 1.5).requires_grad_()
        module = (LIFNode if name == "lif" else ParametricLIFNode)(
            step_mode="m", **options
        ).to(device)
        y = module(x)
        g = torch.randn_like(y)
        grads = torch.autograd.grad(
            (y * g).sum(), [x] + list(module.parameters())
        )
        x2 = x.detach().clone().requires_grad_()
        if name == "lif":
            ys, _ = reference.lif_ref(x2)
            ref = torch.autograd.grad((ys * g).sum(), [x2])
        else:
            w = torch.zeros((), device=device, requires_grad=True)
            ys, _ = reference.plif_ref(x2, w=w)
            ref = torch.autograd.grad((ys * g).sum(), [x2, w])
        ok = torch.equal(y, ys) and all(
            torch.allclose(a, b, rtol=1e-4, atol=1e-4)
            for a, b in zip(grads, ref)
        )
        res.append({"check": f"{name} {device} vs eager reference", "ok": ok})


def check_cuda_vs_cpu(res):
    for name, make in modules():
        if name.endswith("-node"):
            continue
        for dtype_name, dtype in DTYPES.items():
            T, N = 16, 4099  # N not a multiple of the vector width
            x = (torch.randn(T, N) * 1.5 + 0.5).to(dtype)
            module = make()
            got = {}
            for device in ("cuda", "cpu"):
                xd = x.to(device).requires_grad_()
                module.reset()
                y = module(xd)
                y = y[0] if isinstance(y, tuple) else y
                w = torch.linspace(-1, 1, N, device=device)
                loss = (y.float() * w).sum() + sum(
                    (s.float() * w).sum() for s in module.state_seqs
                )
                params = list(module.parameters())
                grads = torch.autograd.grad(loss, [xd] + params)
                got[device] = (
                    [y.float().cpu()]
                    + [s.float().cpu() for s in module.state_seqs]
                    + [g.float().cpu() for g in grads]
                )
            errors = [
                float((a - b).abs().max())
                for a, b in zip(got["cuda"], got["cpu"])
            ]
            flips = float((got["cuda"][0] != got["cpu"][0]).float().mean())
            tol = {"f32": 1e-4, "f16": 2e-2, "bf16": 1.5e-1}[dtype_name]
            ok = flips < 1e-3 and all(
                e <= tol * max(1.0, float(b.abs().max()))
                for e, b in zip(errors[1:], got["cpu"][1:])
            )
            res.append(
                {
                    "check": f"{name}/{dtype_name} cuda vs cpu",
                    "ok": ok,
                    "max_errors": errors,
                    "spike_flip_fraction": flips,
                }
            )


def check_compile(res):
    """torch.compile(fullgraph=True) forward + backward of a LIF model."""
    if not flexsn.torch.has_custom_op():
        res.append(
            {
                "check": "torch.compile",
                "ok": True,
                "skipped": "torch has no custom_op",
            }
        )
        return
    import torch._dynamo as dynamo

    net = torch.nn.Sequential(
        torch.nn.Linear(64, 64), LIFNode(step_mode="m")
    ).cuda()

    def model(x):
        net[1].reset()
        return net(x)

    x = torch.randn(8, 32, 64, device="cuda")
    explain = dynamo.explain(model)(x)
    compiled = torch.compile(model, fullgraph=True)
    y = compiled(x)
    y.sum().backward()
    grad_compiled = net[0].weight.grad.clone()
    net.zero_grad()
    y_eager = model(x)
    y_eager.sum().backward()
    ok = (
        explain.graph_break_count == 0
        and torch.equal(y, y_eager)
        and torch.allclose(
            grad_compiled, net[0].weight.grad, rtol=1e-4, atol=1e-5
        )
    )
    res.append(
        {
            "check": "torch.compile fullgraph fwd+bwd",
            "ok": ok,
            "graph_breaks": explain.graph_break_count,
        }
    )


class EagerLIF(torch.nn.Module):
    """LIF in eager PyTorch (the tests' reference) as a module."""

    def forward(self, x):
        spikes, _ = reference.lif_ref(x)
        return spikes


def digits_data():
    """scikit-learn's digits: images [1797, 8, 8] in [0, 1], labels, and a
    seeded split into 1400 training and 397 test indices. ImportError
    without scikit-learn."""
    from sklearn.datasets import load_digits

    digits = load_digits()
    data = torch.tensor(digits.images, dtype=torch.float32) / 16.0
    target = torch.tensor(digits.target)
    g = torch.Generator().manual_seed(0)
    order = torch.randperm(len(data), generator=g)
    return data, target, order[:1400], order[1400:]


def noise_data():
    """digits_data's shapes filled with seeded noise (images, labels,
    split): what --smoke and device-ddp train on without scikit-learn,
    where only agreement, not learning, is checked."""
    g = torch.Generator().manual_seed(0)
    data = torch.rand(1797, 8, 8, generator=g)
    target = torch.randint(0, 10, (1797,), generator=g)
    order = torch.randperm(1797, generator=g)
    return data, target, order[:1400], order[1400:]


def lif_node(**options):
    """The digits net's LIF layers: FlexSN's LIFNode over [T, B, ...]."""
    return lambda: LIFNode(step_mode="m", **options)


def make_digits_net(node, device="cuda"):
    """Conv-BN-LIF x2 + linear readout, seeded; node() makes each LIF."""
    torch.manual_seed(0)
    return torch.nn.ModuleDict(
        {
            "c1": torch.nn.Conv2d(1, 16, 3, padding=1),
            "b1": torch.nn.BatchNorm2d(16),
            "n1": node(),
            "c2": torch.nn.Conv2d(16, 32, 3, padding=1),
            "b2": torch.nn.BatchNorm2d(32),
            "n2": node(),
            "fc": torch.nn.Linear(32 * 8 * 8, 10),
        }
    ).to(device)


def run_digits_net(net, x, T=8):
    """Logits [B, 10] of images x [B, 1, 8, 8], each shown for T steps."""
    for n in ("n1", "n2"):
        if hasattr(net[n], "reset"):
            net[n].reset()
    B = x.shape[0]
    x = x.unsqueeze(0).repeat(T, 1, 1, 1, 1).flatten(0, 1)  # [T*B,1,8,8]
    h = net["b1"](net["c1"](x))
    h = net["n1"](h.view(T, B, 16, 8, 8)).flatten(0, 1)
    h = net["b2"](net["c2"](h))
    h = net["n2"](h.view(T, B, 32, 8, 8))
    return net["fc"](h.flatten(2)).mean(0)


def train_digits(
    res,
    out=None,
    device="cuda",
    smoke=False,
    options=None,
    epochs=30,
    compile_epochs=2,
):
    """Conv-BN-LIF x2 + linear readout, T = 8, on scikit-learn's digits,
    with FlexSN's LIFNode and with an eager LIF (same seed, same data, same
    batch order): per-epoch loss and test accuracy, median step time; and
    the step time of torch.compile of the eager model over compile_epochs
    (its first step, which compiles, reported apart). Plots the curves to
    out/digits_training.png. --smoke: SMOKE_EPOCHS epochs, no
    torch.compile, no plot; the check is that FlexSN's losses are the
    eager LIF's."""
    try:
        data, target, train, test = digits_data()
        data_name = "digits"
    except ImportError:
        if not smoke:
            res.append(
                {
                    "check": "digits training",
                    "ok": True,
                    "skipped": "no scikit-learn",
                }
            )
            return
        data, target, train, test = noise_data()
        data_name = "noise (no scikit-learn)"
    if smoke:
        epochs = SMOKE_EPOCHS
        train, test = train[:SMOKE_IMAGES], test[: SMOKE_IMAGES // 4]
    make, run = make_digits_net, run_digits_net

    def sync():
        if device == "cuda":
            torch.cuda.synchronize()

    xs, ys = data[train].unsqueeze(1).to(device), target[train].to(device)
    x_test = data[test].unsqueeze(1).to(device)

    def fit(net, forward, num_epochs, evaluate):
        """Adam, batches of 100 in a seeded order (the same for every
        model): per-epoch mean loss, per-epoch test accuracy (if evaluate)
        and every step's wall time (s, device finished)."""
        opt = torch.optim.Adam(net.parameters(), lr=2e-3)
        perms = torch.Generator().manual_seed(1)
        losses, accuracies, step_times = [], [], []
        for epoch in range(num_epochs):
            perm = torch.randperm(len(xs), generator=perms)
            total = 0.0
            for i in range(0, len(xs), 100):
                idx = perm[i : i + 100]
                sync()
                t = time.perf_counter()
                loss = torch.nn.functional.cross_entropy(
                    forward(xs[idx]), ys[idx]
                )
                opt.zero_grad()
                loss.backward()
                opt.step()
                sync()
                step_times.append(time.perf_counter() - t)
                total += float(loss)
            losses.append(total / math.ceil(len(xs) / 100))
            if evaluate:
                net.eval()
                with torch.no_grad():
                    pred = forward(x_test).argmax(1).cpu()
                net.train()
                accuracies.append(float((pred == target[test]).float().mean()))
        return losses, accuracies, step_times

    def median_ms(times):
        times = sorted(times)
        return 1e3 * times[len(times) // 2] if times else None

    curves = {}
    for label, node in (
        ("flexsn", lif_node(**(options or {}))),
        ("eager", EagerLIF),
    ):
        net = make(node, device)
        losses, accuracies, step_times = fit(
            net, lambda x, net=net: run(net, x), epochs, True
        )
        curves[label] = {
            "loss": losses,
            "test_accuracy": accuracies,
            "accuracy": accuracies[-1],
            "step_ms": median_ms(step_times),
        }

    # torch.compile of the eager model: the first step compiles forward and
    # backward; the steps after it are timed as the others.
    compiled = {}
    if smoke:
        compiled["compile_error"] = cli.skip(
            PROG,
            "torch.compile of the eager digits model",
            "--smoke: it compiles for minutes",
        )
    elif not hasattr(torch, "compile"):
        compiled["compile_error"] = "torch has no torch.compile"
    else:
        try:
            net = make(EagerLIF, device)
            forward = torch.compile(lambda x, net=net: run(net, x))
            losses, _, step_times = fit(net, forward, compile_epochs, False)
            compiled.update(
                compile_s=step_times[0],
                compile_step_ms=median_ms(step_times[1:]),
                loss_compile=losses,
            )
        except Exception as error:  # reported; FlexSN's numbers stand
            compiled["compile_error"] = "%s: %s" % (
                type(error).__name__,
                str(error)[:300],
            )
    loss_diff = max(
        abs(a - b) / abs(b)
        for a, b in zip(curves["flexsn"]["loss"], curves["eager"]["loss"])
    )
    if smoke:
        check = (
            "digits training (FlexSN LIFNode): the eager LIF's losses",
            all(math.isfinite(v) for v in curves["flexsn"]["loss"])
            and loss_diff <= SMOKE_LOSS_RTOL,
        )
    else:
        check = (
            "digits training (FlexSN LIFNode)",
            curves["flexsn"]["accuracy"] >= 0.95,
        )
    record = {
        "check": check[0],
        "ok": check[1],
        "data": data_name,
        **{
            f"{k}_{m}": v[m]
            for k, v in curves.items()
            for m in ("accuracy", "step_ms")
        },
        **{k: v for k, v in compiled.items() if k != "loss_compile"},
        "epochs": epochs,
        "max_rel_loss_diff": loss_diff,
        "loss_flexsn": curves["flexsn"]["loss"],
        "loss_eager": curves["eager"]["loss"],
        "test_accuracy_flexsn": curves["flexsn"]["test_accuracy"],
        "test_accuracy_eager": curves["eager"]["test_accuracy"],
    }
    if "loss_compile" in compiled:
        record["loss_compile"] = compiled["loss_compile"]
    if out is not None and not smoke:
        try:
            plot_digits(out / "digits_training.png", curves, compiled)
            record["plot"] = "digits_training.png"
        except Exception as error:  # e.g. no matplotlib: the numbers stand
            record["plot"] = "none: %s: %s" % (type(error).__name__, error)
            print(f"{PROG}: no digits_training.png: {record['plot']}")
    res.append(record)


def plot_digits(path, curves, compiled):
    """Loss per epoch (log scale) and test accuracy per epoch, FlexSN vs
    eager; the step times in the title."""
    plt = results.pyplot(PROG, path.name)
    if plt is None:
        raise ImportError("no matplotlib")
    fig, (ax_loss, ax_acc) = plt.subplots(1, 2, figsize=(11, 4.2))
    # Dashed over solid: the curves may coincide.
    for label, name, style in (
        ("flexsn", "FlexSN LIFNode", dict(color="tab:red", lw=2.5)),
        ("eager", "eager LIF", dict(color="tab:green", lw=1.5, ls="--")),
    ):
        c = curves[label]
        epochs = range(1, len(c["loss"]) + 1)
        ax_loss.plot(
            epochs,
            c["loss"],
            **style,
            label=f"{name} ({c['step_ms']:.2f} ms/step)",
        )
        ax_acc.plot(
            epochs,
            [100 * a for a in c["test_accuracy"]],
            **style,
            label=f"{name} (final {100 * c['accuracy']:.1f}%)",
        )
    ax_loss.set_yscale("log")
    ax_loss.set_xlabel("epoch")
    ax_loss.set_ylabel("training loss (cross-entropy)")
    ax_loss.set_title("loss")
    ax_loss.legend()
    ax_acc.set_xlabel("epoch")
    ax_acc.set_ylabel("test accuracy (%)")
    ax_acc.set_title("test accuracy (held-out digits)")
    ax_acc.legend(loc="lower right")
    if compiled.get("compile_step_ms") is not None:
        comp = (
            f"torch.compile(eager) {compiled['compile_step_ms']:.2f} "
            f"ms/step (compile {compiled['compile_s']:.0f} s)"
        )
    else:
        comp = "torch.compile(eager): " + compiled.get("compile_error", "-")
    fig.suptitle(
        "Conv-BN-LIF x2 SNN on scikit-learn's digits (T = 8, batch "
        "100)\nstep time: FlexSN "
        f"{curves['flexsn']['step_ms']:.2f} ms, eager "
        f"{curves['eager']['step_ms']:.2f} ms, {comp[:80]}",
        fontsize=10,
    )
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv=None):
    ap = cli.parser("device-torch", __doc__)
    ap.add_argument("--compile-only", action="store_true")
    cli.add_out_and_smoke(ap, ".")
    args = cli.finish(ap.parse_args(argv))
    options = dict(targets=("cpu",)) if args.smoke else {}
    if args.compile_only:
        for name, make in modules(**options):
            make()
            print("compiled", name)
        return 0
    device = cli.device(torch, args, PROG)
    if device is None:
        return 2
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    res = []
    steps = (
        ("check_neurons", lambda res: check_neurons(res, device, options)),
        (
            "check_compile",
            lambda res: check_compile(res)
            if device == "cuda"
            else cli.skip(PROG, "torch.compile fullgraph fwd+bwd"),
        ),
        (
            "train_digits",
            lambda res: train_digits(res, out, device, args.smoke, options),
        ),
    )
    for name, step in steps:
        try:
            step(res)
        except Exception as error:  # report, and go on with the next step
            import traceback

            traceback.print_exc()
            res.append({"check": name, "ok": False, "error": repr(error)})
    (out / "torch_results.json").write_text(json.dumps(res, indent=1))
    for r in res:
        print(results.check_line(r, hide=("loss_", "test_accuracy_")))
    failed = results.summary(PROG, res)
    print("%s: results in %s" % (PROG, out))
    return 1 if failed else 0
