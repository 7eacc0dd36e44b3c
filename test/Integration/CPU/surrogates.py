#!/usr/bin/env python3
"""Checks that flexsn-run's forward pass does not depend on the surrogate.

    surrogates.py --neuron-file=lib/Neurons/lif.mlir --workdir=DIR

For each of the 17 surrogate gradients it writes a copy of lif.mlir whose
spike uses `#flexsn.<name>` (default parameters) instead of
`#flexsn.sigmoid<alpha = 4.0>`, runs flexsn-run on it (T = 7, the LIF flags
and population shapes cycling from one surrogate to the next) and compares
the result with the LIF reference, as check_neurons.py does.
"""

import argparse
import itertools
import os
import shlex
import shutil
import sys

import numpy as np

# Keep the source tree clean: no __pycache__ next to the tests.
sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import check_neurons as cn  # noqa: E402
import reference  # noqa: E402

SURROGATES = [
    "sigmoid",
    "atan",
    "piecewise_quadratic",
    "piecewise_exp",
    "soft_sign",
    "super_spike",
    "erf",
    "nonzero_sign_log_abs",
    "piecewise_leaky_relu",
    "squarewave_fourier_series",
    "s2nn",
    "q_pseudo_spike",
    "leaky_k_relu",
    "fake_numerical_gradient",
    "log_tailed_relu",
    "rect",
    "multi_gaussian",
    "straight_through",
]
ORIGINAL = "#flexsn.sigmoid<alpha = 4.0>"


def surrogate_copies(neuron_file, workdir, names):
    """Writes one copy of `neuron_file` per surrogate in `names`, its
    sigmoid surrogate replaced, into a fresh `workdir`: [(name, path)]."""
    text = open(neuron_file).read()
    if text.count(ORIGINAL) != 1:
        sys.exit(
            "error: %s does not use %s exactly once" % (neuron_file, ORIGINAL)
        )
    shutil.rmtree(workdir, ignore_errors=True)
    os.makedirs(workdir)
    copies = []
    for name in names:
        path = os.path.join(workdir, "lif_%s.mlir" % name)
        with open(path, "w") as f:
            f.write(text.replace(ORIGINAL, "#flexsn." + name))
        copies.append((name, path))
    return copies


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--neuron-file", required=True)
    ap.add_argument("--workdir", required=True)
    args = ap.parse_args()

    tool = cn.find_tool()
    copies = surrogate_copies(args.neuron_file, args.workdir, SURROGATES)
    rng = np.random.default_rng(17)
    flags = reference.flags_of("lif")
    combos = list(itertools.product((False, True), repeat=len(flags)))
    stats = {"neurons": 0, "cut": 0}
    failures = []
    for i, (name, path) in enumerate(copies):
        run = cn.Run(
            "lif",
            path,
            dict(zip(flags, combos[i % len(combos)])),
            cn.CUSTOM["lif"] if i % 2 else {},
            7,
            cn.SHAPES[i % len(cn.SHAPES)],
            "float16" if i % 3 == 2 else "float32",
            cn.VARIANTS[i % 2],
            with_states=True,
            pass_neuron=True,
            spell=bool(i % 2),
        )
        cn.prepare(run, rng, tool, os.path.join(args.workdir, name))
        try:
            cn.check(run, cn.execute(run), stats)
        except cn.Failure as e:
            failures.append(
                "FAIL #flexsn.%s: %s\n  %s\n  command: %s\n"
                % (name, run.describe(), e, shlex.join(run.cmd))
            )
    for f in failures:
        print(f)
    if stats["cut"] >= cn.MAX_NEAR_FRACTION * stats["neurons"]:
        failures.append("near")
        print(
            "FAIL: %d of %d neuron trajectories came within %g of the "
            "threshold" % (stats["cut"], stats["neurons"], cn.NEAR)
        )
    if failures:
        print("surrogates: FAILED")
        return 1
    print(
        "surrogates: %d runs passed (forward equals the LIF reference)"
        % len(SURROGATES)
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
