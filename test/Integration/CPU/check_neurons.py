#!/usr/bin/env python3
"""Checks flexsn-run's CPU numerics for one neuron against reference.py.

    check_neurons.py --neuron-file=lib/Neurons/lif.mlir --neuron=lif \
        --workdir=DIR [--quick] [--seed=S]

For every combination of the neuron's i1 flags (soft_reset x detach_reset,
x decay_input for lif/plif) x T in {0, 1, 7} x dtype in {float32, float16} x
variant in {inference, final-state}, it draws fresh seeded random inputs
(and initial states, omitted in about a third of the runs: zeros), runs

    flexsn-run FILE [--neuron=NAME] --variant=V --input=@x.npy
        [--state=@s0.npy ...] --param=FLAG=... [--param=NAME=VALUE ...]
        --output-dir=DIR

with every flag passed explicitly (spelled true/false or 1/0) and, in about
half of the runs, non-default numeric parameters; --neuron is left out in
some runs (the shipped files hold one neuron each). The population shape
cycles through (1,), (5,), (33,), (3, 4), (67,).

It then checks the files written (exactly out0.npy plus state_seq<i>.npy for
inference or final_state<i>.npy for final-state, each named in the tool's
output), their shapes and dtypes, and their values against the reference:
float32 with rtol = atol = 1e-5; float16 in float32 against the reference run
on the float16-rounded inputs, rtol = atol = 2e-3; spikes exactly. A neuron
whose h came within 1e-4 of the threshold is compared only before that step
(a 1-ulp difference there may flip the spike); fewer than 2% of the neuron
trajectories may be cut short so. With T = 0 the outputs have shape
(0, N...) and the final state equals the initial state bit for bit.

Prints one summary line per neuron; on failure, one message per failing run
(neuron, variant, dtype, T, N, parameters, file, first mismatching index,
values, command) and exits 1. --quick keeps T in {0, 7} and float32.
"""

import argparse
import itertools
import os
import shlex
import shutil
import subprocess
import sys
import zlib

import numpy as np

# Keep the source tree clean: no __pycache__ next to the tests.
sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import reference  # noqa: E402

SHAPES = [(1,), (5,), (33,), (3, 4), (67,)]
TS = (0, 1, 7)
DTYPES = ("float32", "float16")
VARIANTS = ("inference", "final-state")
TOL = {"float32": (1e-5, 1e-5), "float16": (2e-3, 2e-3)}  # (rtol, atol)
NEAR = 1e-4  # |h - v_threshold| below this: compare up to that step
MAX_NEAR_FRACTION = 0.02
MAX_REFERENCE_ABS = 1000.0  # inputs are drawn so the states stay well inside

# Input drive and initial-state ranges (shared with the gradient tests).
DRIVE, INIT = reference.DRIVE, reference.INIT

# Non-default numeric parameters, as spelled on the command line.
CUSTOM = {
    "if": {"v_threshold": "0.8", "v_reset": "-0.2"},
    "lif": {"tau": "3.0", "v_threshold": "0.9", "v_reset": "-0.1"},
    "plif": {"w": "0.5", "v_threshold": "0.9", "v_reset": "-0.1"},
    "qif": {
        "tau": "2.5",
        "v_c": "0.7",
        "a0": "0.8",
        "v_rest": "-0.05",
        "v_threshold": "1.0",
        "v_reset": "-0.2",
    },
    "eif": {
        "tau": "2.5",
        "delta_T": "0.8",
        "theta_rh": "0.7",
        "v_rest": "0.05",
        "v_threshold": "1.1",
        "v_reset": "-0.2",
    },
    "izhikevich": {
        "tau": "2.5",
        "v_c": "0.7",
        "a0": "0.8",
        "v_rest": "-0.05",
        "tau_w": "3.0",
        "a": "0.3",
        "b": "0.2",
        "v_threshold": "1.0",
        "v_reset": "0.1",
    },
    "cuba_lif": {
        "c_decay": "0.6",
        "v_decay": "0.7",
        "v_threshold": "0.6",
        "v_reset": "-0.1",
    },
}


class Failure(Exception):
    pass


def find_tool():
    tool = shutil.which("flexsn-run")
    if tool is None:
        sys.exit("error: flexsn-run is not on PATH")
    return tool


def expected_files(neuron, variant):
    n = len(reference.STATES[neuron])
    kind = "state_seq" if variant == "inference" else "final_state"
    return ["out0.npy"] + ["%s%d.npy" % (kind, i) for i in range(n)]


class Run:
    """One flexsn-run invocation: its inputs, command and expectations."""

    def __init__(
        self,
        neuron,
        neuron_file,
        flags,
        custom,
        T,
        shape,
        dtype,
        variant,
        with_states,
        pass_neuron,
        spell,
    ):
        self.neuron, self.neuron_file = neuron, neuron_file
        self.flags, self.custom = flags, custom
        self.T, self.shape, self.dtype = T, shape, dtype
        self.variant, self.with_states = variant, with_states
        self.pass_neuron, self.spell = pass_neuron, spell
        self.cmd = None
        self.dir = None

    def describe(self):
        params = ["%s=%s" % (k, int(v)) for k, v in self.flags.items()]
        params += ["%s=%s" % kv for kv in self.custom.items()]
        return "%s: %s %s T=%d N=%s %s states=%s" % (
            self.neuron,
            self.variant,
            self.dtype,
            self.T,
            self.shape,
            " ".join(params),
            "given" if self.with_states else "zeros",
        )

    def overrides(self):
        p = dict(self.flags)
        p.update({k: float(v) for k, v in self.custom.items()})
        return p


def spell_flag(value, spell):
    return ("1" if value else "0") if spell else ("true" if value else "false")


def prepare(run, rng, tool, rundir):
    """Writes the .npy inputs and builds the command."""
    os.makedirs(rundir)
    run.dir = rundir
    outdir = os.path.join(rundir, "out")
    os.makedirs(outdir)
    dt = np.dtype(run.dtype)
    mean, std = DRIVE[run.neuron]
    x = rng.normal(mean, std, (run.T,) + run.shape).astype(dt)
    run.x = x
    xpath = os.path.join(rundir, "x.npy")
    np.save(xpath, x)
    run.states = None
    spaths = []
    if run.with_states:
        run.states = []
        for i, name in enumerate(reference.STATES[run.neuron]):
            lo, hi = INIT[name]
            s0 = rng.uniform(lo, hi, run.shape).astype(dt)
            run.states.append(s0)
            spaths.append(os.path.join(rundir, "s%d.npy" % i))
            np.save(spaths[-1], s0)
    cmd = [tool, run.neuron_file]
    if run.pass_neuron:
        cmd.append("--neuron=" + run.neuron)
    cmd.append("--variant=" + run.variant)
    cmd.append("--input=@" + xpath)
    cmd += ["--state=@" + p for p in spaths]
    for k, v in run.flags.items():
        cmd.append("--param=%s=%s" % (k, spell_flag(v, run.spell)))
    for k, v in run.custom.items():
        cmd.append("--param=%s=%s" % (k, v))
    cmd.append("--output-dir=" + outdir)
    run.cmd = cmd
    run.outdir = outdir


def fmt_index(idx):
    return "[" + ", ".join(str(int(i)) for i in idx) + "]"


def compare(run, fname, got, want, valid, exact):
    """Raises Failure at the first element of `got` (any float dtype) that
    differs from `want` (float32) where `valid`."""
    g = got.astype(np.float32)
    rtol, atol = TOL[run.dtype]
    if exact:
        ok = g == want
    else:
        with np.errstate(invalid="ignore", over="ignore"):
            ok = np.abs(g - want) <= atol + rtol * np.abs(want)
    bad = valid & ~ok
    if bad.any():
        idx = tuple(np.argwhere(bad)[0])
        what = (
            "first mismatch"
            if exact
            else "first mismatch (rtol %g, atol %g)" % (rtol, atol)
        )
        raise Failure(
            "%s: %s at index %s: got %r, expected %r "
            "(%d mismatching of %d compared)"
            % (
                fname,
                what,
                fmt_index(idx),
                float(g[idx]),
                float(want[idx]),
                int(bad.sum()),
                int(valid.sum()),
            )
        )


def check(run, stdout, stats):
    neuron, T, shape, dt = run.neuron, run.T, run.shape, np.dtype(run.dtype)
    names = expected_files(neuron, run.variant)
    present = sorted(os.listdir(run.outdir))
    if present != sorted(names):
        raise Failure("wrote %s, expected %s" % (present, sorted(names)))
    for n in names:
        if n not in stdout:
            raise Failure("does not say it wrote %s; printed %r" % (n, stdout))
    arrays = {}
    for n in names:
        a = np.load(os.path.join(run.outdir, n), allow_pickle=False)
        want_shape = shape if n.startswith("final_state") else (T,) + shape
        if a.shape != want_shape or a.dtype != dt:
            raise Failure(
                "%s: shape %s dtype %s, expected shape %s dtype %s"
                % (n, a.shape, a.dtype, want_shape, dt)
            )
        arrays[n] = a

    # Reference on exactly the values the tool read (float16 rounded).
    xr = run.x.astype(np.float32)
    sr = (
        None
        if run.states is None
        else [s.astype(np.float32) for s in run.states]
    )
    ref = reference.simulate(neuron, run.overrides(), xr, sr, near=NEAR)
    for a in [ref["spikes"]] + ref["state_seq"] + ref["final"]:
        if not np.all(np.abs(a) < MAX_REFERENCE_ABS):
            raise Failure(
                "test design: the reference left |value| < %g; "
                "draw smaller inputs" % MAX_REFERENCE_ABS
            )

    first_near = ref["first_near"]
    seq_valid = np.arange(T).reshape((T,) + (1,) * len(shape)) < first_near
    final_valid = first_near == T
    if T > 0:
        stats["neurons"] += first_near.size
        stats["cut"] += int((first_near < T).sum())

    spikes = arrays["out0.npy"]
    notbinary = ~((spikes == 0) | (spikes == 1))
    if notbinary.any():
        idx = tuple(np.argwhere(notbinary)[0])
        raise Failure(
            "out0.npy: spike %r at index %s is neither 0 nor 1"
            % (float(spikes[idx]), fmt_index(idx))
        )
    compare(run, "out0.npy", spikes, ref["spikes"], seq_valid, exact=True)
    for i in range(len(reference.STATES[neuron])):
        if run.variant == "inference":
            n = "state_seq%d.npy" % i
            compare(
                run, n, arrays[n], ref["state_seq"][i], seq_valid, exact=False
            )
        else:
            n = "final_state%d.npy" % i
            if T == 0:
                init = (
                    np.zeros(shape, dt)
                    if run.states is None
                    else run.states[i]
                )
                same = arrays[n].view(np.uint8) == init.view(np.uint8)
                if not same.all():
                    raise Failure(
                        "%s: with T = 0 it differs from the "
                        "initial state: got %r, expected %r"
                        % (n, arrays[n].tolist(), init.tolist())
                    )
            compare(
                run, n, arrays[n], ref["final"][i], final_valid, exact=False
            )


def execute(run):
    try:
        p = subprocess.run(
            run.cmd,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            timeout=300,
        )
    except subprocess.TimeoutExpired:
        raise Failure("flexsn-run timed out after 300 s")
    if p.returncode != 0:
        raise Failure(
            "flexsn-run exited with %d: %s"
            % (p.returncode, (p.stderr + p.stdout).strip())
        )
    return p.stdout + p.stderr


def make_runs(neuron, neuron_file, quick, rng):
    flags = reference.flags_of(neuron)
    Ts = (0, 7) if quick else TS
    dtypes = ("float32",) if quick else DTYPES
    runs = []
    k = 0
    for values in itertools.product((False, True), repeat=len(flags)):
        for T in Ts:
            for dtype in dtypes:
                for variant in VARIANTS:
                    runs.append(
                        Run(
                            neuron,
                            neuron_file,
                            dict(zip(flags, values)),
                            CUSTOM[neuron] if rng.random() < 0.5 else {},
                            T,
                            SHAPES[k % len(SHAPES)],
                            dtype,
                            variant,
                            with_states=rng.random() >= 0.3,
                            pass_neuron=rng.random() >= 0.2,
                            spell=bool(rng.random() < 0.5),
                        )
                    )
                    k += 1
    return runs


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--neuron-file", required=True)
    ap.add_argument(
        "--neuron", required=True, choices=sorted(reference.DEFAULTS)
    )
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()

    tool = find_tool()
    neuron = args.neuron
    shutil.rmtree(args.workdir, ignore_errors=True)
    os.makedirs(args.workdir)
    rng = np.random.default_rng([zlib.crc32(neuron.encode()), args.seed])
    runs = make_runs(
        neuron, os.path.abspath(args.neuron_file), args.quick, rng
    )
    stats = {"neurons": 0, "cut": 0}
    failures = []
    for i, run in enumerate(runs):
        rundir = os.path.join(args.workdir, "%s-%03d" % (neuron, i))
        prepare(run, rng, tool, rundir)
        try:
            check(run, execute(run), stats)
        except Failure as e:
            failures.append(
                "FAIL %s\n  %s\n  command: %s\n"
                % (run.describe(), e, shlex.join(run.cmd))
            )
    for f in failures:
        print(f)
    frac = stats["cut"] / max(stats["neurons"], 1)
    near_msg = (
        "%d of %d neuron trajectories came within %g of the "
        "threshold and were compared only up to that step"
        % (stats["cut"], stats["neurons"], NEAR)
    )
    too_near = frac >= MAX_NEAR_FRACTION
    if too_near:
        print(
            "FAIL %s: %s (%.1f%%, limit %.0f%%)"
            % (neuron, near_msg, 100 * frac, 100 * MAX_NEAR_FRACTION)
        )
    if failures:
        print("%s: %d of %d runs FAILED" % (neuron, len(failures), len(runs)))
    if failures or too_near:
        return 1
    print("%s: %d runs passed (%s)" % (neuron, len(runs), near_msg))
    return 0


if __name__ == "__main__":
    sys.exit(main())
