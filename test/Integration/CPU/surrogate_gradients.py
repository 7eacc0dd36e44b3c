#!/usr/bin/env python3
"""Checks flexsn-run --variant=train with each of the 17 surrogate gradients.

    surrogate_gradients.py --neuron-file=lib/Neurons/lif.mlir --workdir=DIR

For each surrogate it writes a copy of lif.mlir whose spike uses
`#flexsn.<name>` (default parameters) instead of
`#flexsn.sigmoid<alpha = 4.0>`, runs the train variant on it (T = 7, the
LIF flags cycling from one surrogate to the next, float16 for every third
surrogate, always with an incoming spike gradient so that g(x) enters
directly) and checks every file as check_gradients.py does, against
gradients.py with that surrogate's g(x) from SPEC's table.

The inputs are drawn wide (x ~ normal(0.6, 3), wider still for
fake_numerical_gradient) so that h - v_threshold
reaches every branch of the piecewise surrogates; the test checks that
each branch (interval between the breakpoints listed in BRANCHES) was
reached by some compared neuron. Neurons within 1e-4 of a jump of g are
left out, as those near the threshold are.
"""

import argparse
import itertools
import os
import sys

import numpy as np

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import check_gradients as cg  # noqa: E402
import check_neurons as cn  # noqa: E402
import gradients  # noqa: E402
import reference  # noqa: E402
import surrogates  # noqa: E402

DRIVE = (0.6, 3.0)
# fake_numerical_gradient's branch |x| > 1/0.3 needs a wider spread.
DRIVE_FOR = {"fake_numerical_gradient": (1.0, 9.0)}
SHAPES = [(67,), (5, 13), (61,)]
# Breakpoints of g (default parameters) whose sides must all be reached.
BRANCHES = {
    "piecewise_quadratic": [-1.0, 0.0, 1.0],
    "piecewise_exp": [0.0],
    "piecewise_leaky_relu": [-1.0, 0.0, 1.0],
    "s2nn": [0.0],
    "leaky_k_relu": [0.0],
    "fake_numerical_gradient": [-1 / 0.3, 0.0, 1 / 0.3],
    "log_tailed_relu": [0.0, 1.0],
    "rect": [-0.5, 0.5],
    "q_pseudo_spike": [0.0],
}


def coverage(name, ref, valid):
    """Raises cg.Failure if some branch of g got no compared sample."""
    over = ref["traj"]["over"].astype(np.float64)
    over = over[np.broadcast_to(valid, over.shape)]
    edges = [-np.inf] + BRANCHES.get(name, []) + [np.inf]
    for lo, hi in zip(edges[:-1], edges[1:]):
        if not np.any((over > lo) & (over < hi)):
            raise cg.Failure(
                "test design: no compared h - v_threshold in "
                "(%g, %g), a branch of %s" % (lo, hi, name)
            )


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--neuron-file", required=True)
    ap.add_argument("--workdir", required=True)
    args = ap.parse_args()

    tool = cn.find_tool()
    copies = surrogates.surrogate_copies(
        args.neuron_file, args.workdir, gradients.SURROGATES
    )
    rng = np.random.default_rng(1717)
    flags = reference.flags_of("lif")
    combos = list(itertools.product((False, True), repeat=len(flags)))
    stats = cg.new_stats()
    failures = []
    assert len(gradients.SURROGATES) == 18
    for i, (name, path) in enumerate(copies):
        run = cg.GRun(
            "lif",
            path,
            dict(zip(flags, combos[i % len(combos)])),
            cn.CUSTOM["lif"] if i % 2 else {},
            7,
            SHAPES[i % len(SHAPES)],
            "float16" if i % 3 == 2 else "float32",
            with_states=True,
            with_gout=True,
            with_gstate=bool(i % 2),
            pass_neuron=True,
            spell=bool(i % 2),
            surrogate=name,
            drive=DRIVE_FOR.get(name, DRIVE),
        )
        res = cg.run_and_check(
            run, rng, tool, os.path.join(args.workdir, name), stats, failures
        )
        if res is not None:
            try:
                coverage(name, *res)
            except cg.Failure as e:
                failures.append("FAIL %s\n  %s\n" % (run.describe(), e))
    for f in failures:
        print(f)
    msg, too_near = cg.near_summary(stats, "surrogate gradients")
    if failures or too_near:
        print("surrogate gradients: FAILED")
        return 1
    print(
        "surrogate gradients: %d surrogates passed (%s)"
        % (len(gradients.SURROGATES), msg)
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
