#!/usr/bin/env python3
"""fuse and the fusion contract on SpikingJelly patterns the suite does
not build.

    python3 python/tests/spikingjelly_patterns.py [--out FILE.jsonl]

A single-step model its user calls once per time step, SeqToANNContainer
chains, and layer wrappers put in multi-step mode by set_step_mode; each
converted, fused (what fuse's verbose report says) and put through the
fusion harness on CUDA row-major and channels-last in float32, CUDA with
AMP and the CPU in float32 (train, eval, train; T = 3, B = 2, 8x8
images). One JSON line per model; nothing is asserted here
(docs/perf/fusion/2026-12-05_spikingjelly_sweep.md records its run).
"""

import argparse
import contextlib
import io
import json
import os
import sys
import traceback

import torch
from torch import nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from spikingjelly.activation_based import (  # noqa: E402
    functional,
    layer,
    neuron,
    surrogate,
)

from flexsn.torch import convert, fuse  # noqa: E402
from fusion_harness import Case, compare  # noqa: E402
from spikingjelly_sweep import biases_before_batch_norms  # noqa: E402


def lif(**kw):
    return neuron.LIFNode(tau=2.0, detach_reset=True, v_threshold=0.5, **kw)


class Looped(nn.Module):
    """A single-step network called once per time step by its user."""

    def __init__(self, net):
        super().__init__()
        self.net = net

    def forward(self, x):
        steps = [self.net(x[t]) for t in range(x.shape[0])]
        return torch.stack(steps).mean(0)


class MeanOverSteps(nn.Module):
    def __init__(self, net):
        super().__init__()
        self.net = net

    def forward(self, x):
        return self.net(x).mean(0)


def single_step():
    return Looped(
        nn.Sequential(
            layer.Conv2d(3, 8, 3, padding=1),
            layer.BatchNorm2d(8),
            lif(),
            layer.Conv2d(8, 8, 3, padding=1),
            layer.BatchNorm2d(8),
            lif(),
            layer.Flatten(),
            layer.Linear(8 * 8 * 8, 10),
        )
    )


def seq_to_ann():
    return MeanOverSteps(
        nn.Sequential(
            layer.SeqToANNContainer(
                nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8)
            ),
            lif(step_mode="m"),
            layer.SeqToANNContainer(
                nn.Conv2d(8, 8, 3, padding=1),
                nn.BatchNorm2d(8),
                nn.AvgPool2d(2),
            ),
            neuron.ParametricLIFNode(
                init_tau=2.0, detach_reset=True, step_mode="m"
            ),
            layer.SeqToANNContainer(nn.Flatten(), nn.Linear(8 * 4 * 4, 10)),
        )
    )


def set_step_mode_m():
    net = nn.Sequential(
        layer.Conv2d(3, 8, 3, padding=1, bias=False),
        layer.BatchNorm2d(8),
        neuron.IFNode(detach_reset=True),
        layer.Flatten(start_dim=1),
        layer.Linear(8 * 8 * 8, 32),
        layer.BatchNorm1d(32),
        neuron.LIFNode(
            tau=2.0, surrogate_function=surrogate.Sigmoid(4.0), v_reset=None
        ),
        layer.Linear(32, 10),
    )
    functional.set_step_mode(net, "m")
    return MeanOverSteps(net)


MODELS = dict(
    single_step=single_step,
    seq_to_ann=seq_to_ann,
    set_step_mode_m=set_step_mode_m,
)
CASES = [
    Case("cuda", "row_major", "f32", ("train", "eval", "train")),
    Case("cuda", "channels_last", "f32", ("train", "eval", "train")),
    Case("cuda", "row_major", "amp", ("train", "eval", "train")),
    Case("cpu", "row_major", "f32", ("train", "eval", "train")),
]


def images(call):
    gen = torch.Generator().manual_seed(call)
    return torch.rand(3, 2, 3, 8, 8, generator=gen)


def check(build) -> dict:
    def make():
        torch.manual_seed(0)
        net = convert(build())
        net.zero_gradients = biases_before_batch_norms(net)
        return net

    row = {}
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        fused = fuse(make(), verbose=True)
        functional.reset_net(fused)
        with torch.no_grad():  # chains traced at the call fuse here
            fused(images(0))
    lines = printed.getvalue().splitlines()
    row["fused"] = sum(line.startswith("fused") for line in lines)
    row["other"] = [line for line in lines if not line.startswith("fused")]
    for case in CASES:
        try:
            report = compare(make, images, case)
        except Exception as error:  # a crash is a result here
            row[str(case)] = dict(
                error=f"{type(error).__name__}: {error}"[:400],
                traceback=traceback.format_exc()[-800:],
            )
            continue
        failures = report.failures()
        row[str(case)] = dict(
            held=not failures,
            failures=[
                (r.call, r.name, r.error, r.tolerance) for r in failures
            ],
            worst=max(
                (r.error / r.tolerance for r in report.rows if r.tolerance),
                default=0.0,
            ),
        )
    return row


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", default="spikingjelly_patterns.jsonl")
    args = parser.parse_args()
    with open(args.out, "w") as out:
        for name, build in MODELS.items():
            row = dict(model=name, **check(build))
            print(json.dumps(row), flush=True)
            out.write(json.dumps(row) + "\n")


if __name__ == "__main__":
    main()
