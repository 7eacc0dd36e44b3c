#!/usr/bin/env python3
"""Where fused and unfused deep ResNets part on CUDA in row-major float32.

    python3 python/tests/tf32_probe.py [--out FILE.jsonl]

SpikingJelly's Spiking-ResNet-50 and SEW-ResNet-34 (ADD), converted, from
one seed (spikingjelly_sweep's models and inputs, three calls: train,
eval, train): the unfused model against a second run of itself, and the
fused model against the unfused one, under cuDNN's defaults, with
deterministic algorithms, with TF32 off, and each of those with both
models' batch norms on PyTorch's native kernels. One JSON line per model
and setting: the worst relative difference over the gradients and over
the values (docs/perf/fusion/2026-12-05_spikingjelly_sweep.md).
"""

import argparse
import contextlib
import json
import os
import sys

import torch
from torch import nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import fusion_harness as harness  # noqa: E402
import spikingjelly_sweep as sweep  # noqa: E402
from flexsn.torch import fuse  # noqa: E402

SETTINGS = (
    "default",
    "deterministic",
    "deterministic+native_bn",
    "no_tf32",
    "no_tf32+native_bn",
)


@contextlib.contextmanager
def native_batch_norms():
    """Every nn.BatchNorm (F.batch_norm) with cuDNN off for it alone."""
    batch_norm = nn.functional.batch_norm

    def native(*args, **kwargs):
        with torch.backends.cudnn.flags(enabled=False):
            return batch_norm(*args, **kwargs)

    nn.functional.batch_norm = native
    try:
        yield
    finally:
        nn.functional.batch_norm = batch_norm


@contextlib.contextmanager
def setting(name: str):
    cudnn = torch.backends.cudnn
    before = cudnn.deterministic, cudnn.benchmark, cudnn.allow_tf32
    cudnn.deterministic = name.startswith("deterministic")
    cudnn.benchmark = False
    cudnn.allow_tf32 = not name.startswith("no_tf32")
    try:
        with native_batch_norms() if name.endswith("native_bn") else (
            contextlib.nullcontext()
        ):
            yield
    finally:
        cudnn.deterministic, cudnn.benchmark, cudnn.allow_tf32 = before


def worst(want: dict, got: dict):
    """(gradients, values): the largest relative difference of each."""
    grads = [k for k in want if k.startswith("grad")]
    values = [k for k in want if not k.startswith(("grad", "terms"))]
    return tuple(
        max((harness.relative(got[k], want[k]) for k in keys), default=0.0)
        for keys in (grads, values)
    )


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", default="tf32_probe.jsonl")
    args = parser.parse_args()
    case = harness.Case("cuda", "row_major", "f32", ("train", "eval", "train"))
    with open(args.out, "w") as out:
        for model in ("spiking_resnet50", "sew_resnet34_add"):
            make = sweep.converted(model, "lif_atan")
            make_input = sweep.MODELS[model][1]
            for name in SETTINGS:
                runs = {}
                with setting(name):
                    for label in ("unfused", "unfused again", "fused"):
                        net = harness._build(
                            make, 0, "cuda", torch.float32, "row_major"
                        )
                        if label == "fused":
                            net = fuse(net)
                        runs[label] = [
                            harness._record(
                                net, make_input(c).cuda(), mode, case, c
                            )
                            for c, mode in enumerate(case.modes)
                        ]
                row = dict(model=model, setting=name)
                for label in ("unfused again", "fused"):
                    pairs = [
                        worst(a, b)
                        for a, b in zip(runs["unfused"], runs[label])
                    ]
                    row[label] = dict(
                        grad=max(p[0] for p in pairs),
                        value=max(p[1] for p in pairs),
                    )
                print(json.dumps(row), flush=True)
                out.write(json.dumps(row) + "\n")


if __name__ == "__main__":
    main()
