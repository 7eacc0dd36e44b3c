#!/usr/bin/env python3
"""Checks that the CPU kernels give bitwise the same results for any thread
count: flexsn-run --num-threads=1, 2, 3 and 0 (OpenMP's default) write
byte-identical .npy files.

    thread_counts.py --neuron-file=lib/Neurons/plif.mlir --workdir=DIR

Runs, each with N spanning several 4096-neuron chunks and a ragged last one:
  * PLIF train, scalar trainable w: dL/dw is a sum over every neuron (summed
    per chunk, then over chunks in order), plus the forward's outputs and
    states and the input and initial-state gradients;
  * PLIF train with w per channel, inputs [T, B, C, S] with S spanning two
    chunks: dL/dw[c] sums chunks at several (b, c);
  * PLIF inference.
The results must also be non-trivial (some spikes, a nonzero dL/dw), so a
kernel that wrote nothing would not pass as "identical".
"""

import argparse
import os
import subprocess
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import check_neurons as cn  # noqa: E402

COUNTS = ("1", "2", "3", "0")


def run(tool, args, outdir):
    result = subprocess.run(
        [tool] + args + ["--output-dir=" + outdir],
        capture_output=True,
        text=True,
    )
    if result.returncode != 0:
        sys.exit("flexsn-run failed: %s\n%s" % (" ".join(args), result.stderr))
    return {
        name: open(os.path.join(outdir, name), "rb").read()
        for name in sorted(os.listdir(outdir))
    }


def check(name, tool, args, workdir, nonzero):
    runs = {
        n: run(
            tool,
            args + ["--num-threads=" + n],
            os.path.join(workdir, name, "threads-" + n),
        )
        for n in COUNTS
    }
    first = runs[COUNTS[0]]
    for file in nonzero:
        values = np.load(os.path.join(workdir, name, "threads-1", file))
        if not np.any(values != 0):
            sys.exit("%s: %s is all zeros" % (name, file))
    for n in COUNTS[1:]:
        if sorted(runs[n]) != sorted(first):
            sys.exit(
                "%s: %s threads wrote %s, 1 thread %s"
                % (name, n, sorted(runs[n]), sorted(first))
            )
        for file, data in first.items():
            if runs[n][file] != data:
                sys.exit(
                    "%s: %s differs between 1 and %s threads" % (name, file, n)
                )
    print(
        "ok %s: %d files identical for threads %s"
        % (name, len(first), ", ".join(COUNTS))
    )


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--neuron-file", required=True)
    parser.add_argument("--workdir", required=True)
    args = parser.parse_args()
    tool = cn.find_tool()
    rng = np.random.default_rng(7)
    os.makedirs(args.workdir, exist_ok=True)

    def save(name, array):
        path = os.path.join(args.workdir, name)
        np.save(path, array.astype(np.float32))
        return "@" + path

    T, N = 5, 3 * 4096 + 17
    x = save("x.npy", rng.uniform(-0.5, 2.0, (T, N)))
    v0 = save("v0.npy", rng.uniform(-0.5, 0.5, (N,)))
    gy = save("gy.npy", rng.normal(size=(T, N)))
    gv = save("gv.npy", rng.normal(size=(T, N)))
    common = [
        args.neuron_file,
        "--neuron=plif",
        "--input=" + x,
        "--state=" + v0,
        "--param=w=0.3",
    ]
    check(
        "scalar-w",
        tool,
        common
        + ["--variant=train", "--grad-output=" + gy, "--grad-state=" + gv],
        args.workdir,
        ["out0.npy", "grad_param_w.npy"],
    )
    check(
        "inference",
        tool,
        common + ["--variant=inference"],
        args.workdir,
        ["out0.npy"],
    )

    # w per channel: [T, B, C, S] with S = 6000 (two chunks, the second
    # ragged), so each dL/dw[c] adds chunks from both b.
    source = open(args.neuron_file).read()
    if "%w: f32 = 0.0 trainable," not in source:
        sys.exit("plif.mlir no longer declares %w: f32 = 0.0 trainable")
    per_channel = os.path.join(args.workdir, "plif_w.mlir")
    with open(per_channel, "w") as f:
        f.write(
            source.replace(
                "%w: f32 = 0.0 trainable,",
                "%w: f32 = 0.0 trainable per_channel,",
            )
        )
    shape = (T, 2, 3, 6000)
    xc = save("xc.npy", rng.uniform(-0.5, 2.0, shape))
    gyc = save("gyc.npy", rng.normal(size=shape))
    w = save("w.npy", rng.uniform(-2.0, 2.0, (3,)))
    check(
        "per-channel-w",
        tool,
        [
            per_channel,
            "--neuron=plif",
            "--variant=train",
            "--input=" + xc,
            "--param=w=" + w,
            "--grad-output=" + gyc,
        ],
        args.workdir,
        ["out0.npy", "grad_param_w.npy"],
    )


if __name__ == "__main__":
    main()
