#!/usr/bin/env python3
"""convert and fuse on SpikingJelly models the test suite does not build.

    python3 python/tests/spikingjelly_sweep.py [--models a,b,...]
        [--neurons lif_atan,if,...] [--checks convert,fuse,contract]
        [--out FILE.jsonl]

SpikingJelly must be importable (torch >= 2.4). Each model of its zoo is
built with SpikingJelly's own neurons (`--neurons`: LIF with its default
ATan surrogate, a soft-reset LIF with Sigmoid, IF, ParametricLIF, LIF
without decay_input), multi-step, on small inputs (T = 2, B = 2, 32x32
images, or the size the network's classifier needs), and checked three
ways:

  convert   flexsn.torch.convert of the model against SpikingJelly's torch
            model: one training step from the same weights and random
            numbers, the output's and every gradient's relative difference
            in norm (rounding in the neuron's kernel; a deep model
            amplifies it in its gradients), and what convert did not swap;
  fuse      how many chains flexsn.torch.fuse fused, and every line of its
            verbose report that is not a fused chain;
  contract  the fusion harness (fusion_harness.compare) over train, eval,
            train: CUDA row-major and channels-last in float32, CUDA
            row-major with AMP, and the CPU in float32.

One JSON line per check goes to --out; a summary line per check is printed.
Nothing is asserted here: the pytest modules assert what the suite covers;
this finds what it does not (docs/perf/fusion records its runs).
"""

import argparse
import contextlib
import io
import json
import os
import sys
import time
import traceback

import torch
from torch import nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from spikingjelly.activation_based import (  # noqa: E402
    functional,
    neuron,
    surrogate,
)
from spikingjelly.activation_based.model import (  # noqa: E402
    parametric_lif_net,
    sew_resnet,
    spikformer,
    spiking_resnet,
    spiking_vgg,
)

from flexsn.torch import convert, fuse  # noqa: E402
from fusion_harness import Case, compare, relative  # noqa: E402

NEURONS = {
    "lif_atan": (neuron.LIFNode, dict(tau=2.0, detach_reset=True)),
    "lif_sigmoid_soft": (
        neuron.LIFNode,
        dict(tau=2.0, v_reset=None, surrogate_function=surrogate.Sigmoid(4.0)),
    ),
    "if": (neuron.IFNode, dict(detach_reset=True)),
    "plif": (neuron.ParametricLIFNode, dict(init_tau=2.0, detach_reset=True)),
    "lif_no_decay_input": (
        neuron.LIFNode,
        dict(tau=2.0, decay_input=False, v_threshold=0.5),
    ),
}


def _images(channels, size):
    def make(call):
        gen = torch.Generator().manual_seed(call)
        return torch.rand(2, 2, channels, size, size, generator=gen)

    return make


def _zoo(constructor, **fixed):
    return lambda cls, kw: constructor(spiking_neuron=cls, **fixed, **kw)


#: name: (build(neuron class, its keywords), input of call k).
MODELS = {
    "spiking_vgg11": (
        _zoo(spiking_vgg.spiking_vgg11, num_classes=10),
        _images(3, 32),
    ),
    "spiking_vgg13_bn": (
        _zoo(spiking_vgg.spiking_vgg13_bn, num_classes=10),
        _images(3, 32),
    ),
    "spiking_resnet34": (
        _zoo(spiking_resnet.spiking_resnet34, num_classes=10),
        _images(3, 32),
    ),
    "spiking_resnet50": (
        _zoo(spiking_resnet.spiking_resnet50, num_classes=10),
        _images(3, 32),
    ),
    "spiking_resnext50_32x4d": (
        _zoo(spiking_resnet.spiking_resnext50_32x4d, num_classes=10),
        _images(3, 32),
    ),
    "sew_resnet18_and": (
        _zoo(sew_resnet.sew_resnet18, cnf="AND", num_classes=10),
        _images(3, 32),
    ),
    "sew_resnet34_add": (
        _zoo(sew_resnet.sew_resnet34, cnf="ADD", num_classes=10),
        _images(3, 32),
    ),
    "sew_resnet50_iand": (
        _zoo(sew_resnet.sew_resnet50, cnf="IAND", num_classes=10),
        _images(3, 32),
    ),
    "plif_mnist": (
        _zoo(parametric_lif_net.MNISTNet, channels=16),
        _images(1, 28),
    ),
    "plif_cifar10": (
        _zoo(parametric_lif_net.CIFAR10Net, channels=16),
        _images(3, 32),
    ),
    "plif_nmnist": (
        _zoo(parametric_lif_net.NMNISTNet, channels=16),
        _images(2, 34),
    ),
    "plif_dvsgesture": (
        _zoo(parametric_lif_net.DVSGestureNet, channels=16),
        _images(2, 128),
    ),
    "plif_cifar10dvs": (
        _zoo(parametric_lif_net.CIFAR10DVSNet, channels=16),
        _images(2, 128),
    ),
    # Hard-coded LIF neurons: --neurons does not reach them.
    "spikformer_s": (
        lambda cls, kw: spikformer.spikformer_s(
            T=2, img_size_h=32, img_size_w=32, num_classes=10
        ),
        _images(3, 32),
    ),
}

#: The fusion harness's cases: (device, layout, precision).
CASES = (
    ("cuda", "row_major", "f32"),
    ("cuda", "channels_last", "f32"),
    ("cuda", "row_major", "amp"),
    ("cpu", "row_major", "f32"),
)


def build(model, neuron_name, device="cpu"):
    """SpikingJelly's model with SpikingJelly's neurons, multi-step."""
    constructor, _ = MODELS[model]
    cls, keywords = NEURONS[neuron_name]
    torch.manual_seed(0)
    net = constructor(cls, dict(keywords, step_mode="m"))
    functional.set_step_mode(net, "m")
    return net.to(device)


def biases_before_batch_norms(net):
    """Biases whose layer only a training batch norm reads: gradient zero
    in exact arithmetic (fusion_harness's `zero_gradients`)."""
    modules = list(net.named_modules())
    return tuple(
        f"{name}.bias"
        for (name, m), (_, after) in zip(modules, modules[1:])
        if isinstance(m, (nn.Conv2d, nn.Linear))
        and m.bias is not None
        and isinstance(after, nn.modules.batchnorm._BatchNorm)
    )


def converted(model, neuron_name):
    def make():
        net = convert(build(model, neuron_name))
        net.zero_gradients = biases_before_batch_norms(net)
        return net

    return make


def check_convert(model, neuron_name, device):
    original = build(model, neuron_name, device)
    lines = []
    swapped = convert(original, report=lines)
    x = MODELS[model][1](0).to(device)
    outputs = []
    for net in (original, swapped):
        functional.reset_net(net)
        torch.manual_seed(1)  # the same dropout masks
        y = net(x)
        y.square().sum().backward()
        outputs.append(y.detach())
    worst, where = 0.0, ""
    for (name, p), q in zip(original.named_parameters(), swapped.parameters()):
        if (p.grad is None) != (q.grad is None):
            worst, where = float("inf"), f"{name} (a gradient on one side)"
        elif p.grad is not None and relative(q.grad, p.grad) > worst:
            worst, where = relative(q.grad, p.grad), name
    refused = [line for line in lines if line.startswith("not swapped")]
    return dict(
        output=relative(outputs[1], outputs[0]),
        output_norm=float(outputs[0].norm()),
        worst_gradient=worst,
        worst_gradient_of=where,
        swapped=len(lines) - len(refused),
        not_swapped=refused,
    )


def check_fuse(model, neuron_name):
    net = convert(build(model, neuron_name))
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        fused = fuse(net, verbose=True)
        functional.reset_net(fused)
        with torch.no_grad():  # chains traced at the call fuse here
            fused(MODELS[model][1](0))
    lines = printed.getvalue().splitlines()
    return dict(
        fused=sum(line.startswith("fused") for line in lines),
        other_lines=[line for line in lines if not line.startswith("fused")],
    )


def check_contract(model, neuron_name, device, layout, precision):
    report = compare(
        converted(model, neuron_name),
        MODELS[model][1],
        Case(device, layout, precision, ("train", "eval", "train")),
    )
    failures = report.failures()
    return dict(
        held=not failures,
        failures=[(r.call, r.name, r.error, r.tolerance) for r in failures],
        worst_share_of_tolerance=max(
            (r.error / r.tolerance for r in report.rows if r.tolerance),
            default=0.0,
        ),
    )


def record(out, check, function, *args):
    start = time.time()
    try:
        result = dict(status="ran", **function(*args))
    except Exception as error:  # a crash is a result here
        result = dict(
            status="error",
            error=f"{type(error).__name__}: {error}"[:600],
            traceback=traceback.format_exc()[-2000:],
        )
    result.update(
        check=check, args=list(args), s=round(time.time() - start, 1)
    )
    with open(out, "a") as log:
        log.write(json.dumps(result) + "\n")
    print(summary(result), flush=True)


def summary(r) -> str:
    head = f"{r['check']:8s} {' '.join(map(str, r['args']))}"
    if r["status"] == "error":
        return f"{head}: ERROR {r['error'][:200]}"
    if r["check"] == "convert":
        return (
            f"{head}: output {r['output']:.2g}, worst gradient "
            f"{r['worst_gradient']:.2g} ({r['worst_gradient_of']}), "
            f"{r['swapped']} swapped, {len(r['not_swapped'])} not"
        )
    if r["check"] == "fuse":
        return (
            f"{head}: {r['fused']} fused, {len(r['other_lines'])} other lines"
        )
    return (
        f"{head}: {'held' if r['held'] else 'FAILED'} (worst "
        f"{r['worst_share_of_tolerance']:.2f} of its tolerance)"
        + "".join(f"\n    {f}" for f in r["failures"][:4])
    )


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("--neurons", default="lif_atan")
    parser.add_argument("--checks", default="convert,fuse,contract")
    parser.add_argument("--out", default="spikingjelly_sweep.jsonl")
    args = parser.parse_args()
    checks = args.checks.split(",")
    cuda = torch.cuda.is_available()
    for model in args.models.split(","):
        for name in args.neurons.split(","):
            if "convert" in checks:
                device = "cuda" if cuda else "cpu"
                record(args.out, "convert", check_convert, model, name, device)
            if "fuse" in checks:
                record(args.out, "fuse", check_fuse, model, name)
            if "contract" in checks:
                for case in CASES:
                    if case[0] == "cuda" and not cuda:
                        continue
                    record(
                        args.out,
                        "contract",
                        check_contract,
                        model,
                        name,
                        *case,
                    )


if __name__ == "__main__":
    main()
