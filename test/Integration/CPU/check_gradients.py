#!/usr/bin/env python3
"""Checks flexsn-run --variant=train (CPU) for one neuron against gradients.py.

    check_gradients.py --neuron-file=lib/Neurons/lif.mlir --neuron=lif \
        --workdir=DIR [--seed=S]

For every combination of the neuron's i1 flags (soft_reset x detach_reset,
x decay_input for lif/plif) x T in {0, 1, 7}, in float32, plus float16 at
T = 7 for half of the flag combinations (and at T = 0 for one), it draws
seeded random inputs, initial states (omitted in about a third of the runs:
zeros) and incoming gradients of the spikes and of the state sequences (each
omitted in about a quarter of the runs: zeros), and runs

    flexsn-run FILE [--neuron=NAME] --variant=train --input=@x.npy
        [--state=@s<i>.npy ...] [--grad-output=@gout.npy]
        [--grad-state=@gstate<i>.npy ...] --param=FLAG=... [--param=...]
        --output-dir=DIR

with every flag passed explicitly and, in about half of the runs,
non-default numeric parameters (Izhikevich always has a, b != 0, so that
v and w are coupled both ways). The population shape cycles through (1,),
(5,), (33,), (3, 4), (67,).

It checks that exactly out0.npy, state_seq<i>.npy, grad_in0.npy,
grad_init<i>.npy (and grad_param_<name>.npy per trainable parameter, PLIF's
w) are written and named in the output, with the right shapes and dtypes
(gradients of inputs and states in the inputs' dtype, parameter gradients
0-d float32); that the forward files are bit for bit those of
--variant=inference on the same inputs; and the gradients against
gradients.py (float32 Heaviside forward, float64 BPTT):

  float32: |got - want| <= 1e-5 + 1e-4 |want| (parameter gradients, summed
           over T and N, also get 1e-6 x the sum of the |terms|);
  float16: against the reference on the float16-rounded inputs and incoming
           gradients, 1e-3 + 2e-3 |want| (the float16 rounding of the result).

A neuron whose h came within 1e-4 (float16: 1e-3) of the threshold at some
step is left out of the gradient comparison (a rounding difference there may
flip a spike, changing the whole trajectory and its gradient), and so is a
trainable parameter's gradient in a run with such a neuron; fewer than 2% of
the neurons may be left out. With T = 0 every gradient must be exactly 0.

Prints one summary line; on failure one message per failing run (neuron,
dtype, T, N, parameters, file, first mismatching index, values, command) and
exits 1.
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

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import check_neurons as cn  # noqa: E402
import gradients  # noqa: E402
import reference  # noqa: E402

SHAPES = cn.SHAPES
TS = (0, 1, 7)
TOL = {"float32": (1e-4, 1e-5), "float16": (2e-3, 1e-3)}  # (rtol, atol)
PARAM_SUM_TOL = {"float32": 1e-6, "float16": 1e-3}
NEAR = {"float32": 1e-4, "float16": 1e-3}
MAX_NEAR_FRACTION = 0.02
# Izhikevich's adaptation coupling, always on (the defaults a = b = 0 would
# leave w out of the gradients of v).
BASE = {"izhikevich": {"a": "0.25", "b": "0.15"}}


class Failure(Exception):
    pass


class GRun:
    """One flexsn-run --variant=train invocation and its expectations."""

    def __init__(
        self,
        neuron,
        neuron_file,
        flags,
        custom,
        T,
        shape,
        dtype,
        with_states,
        with_gout,
        with_gstate,
        pass_neuron,
        spell,
        surrogate="sigmoid",
        drive=None,
    ):
        self.neuron, self.neuron_file = neuron, neuron_file
        self.drive = drive or cn.DRIVE[neuron]  # x ~ normal(mean, std)
        self.flags = flags
        self.custom = dict(BASE.get(neuron, {}), **custom)
        self.T, self.shape, self.dtype = T, shape, dtype
        self.with_states, self.with_gout = with_states, with_gout
        self.with_gstate = with_gstate
        self.pass_neuron, self.spell = pass_neuron, spell
        self.surrogate = surrogate

    def describe(self):
        params = ["%s=%s" % (k, int(v)) for k, v in self.flags.items()]
        params += ["%s=%s" % kv for kv in self.custom.items()]
        return (
            "%s (%s): train %s T=%d N=%s %s states=%s grad-output=%s "
            "grad-state=%s"
            % (
                self.neuron,
                self.surrogate,
                self.dtype,
                self.T,
                self.shape,
                " ".join(params),
                "given" if self.with_states else "zeros",
                "given" if self.with_gout else "absent",
                "given" if self.with_gstate else "absent",
            )
        )

    def overrides(self):
        p = dict(self.flags)
        p.update({k: float(v) for k, v in self.custom.items()})
        return p


def prepare(run, rng, tool, rundir):
    """Writes the .npy files; builds the train and inference commands."""
    os.makedirs(rundir)
    dt = np.dtype(run.dtype)
    seq = (run.T,) + run.shape
    mean, std = run.drive
    names = reference.STATES[run.neuron]

    def save(name, a):
        path = os.path.join(rundir, name + ".npy")
        np.save(path, a)
        return path

    run.x = rng.normal(mean, std, seq).astype(dt)
    common = ["--input=@" + save("x", run.x)]
    run.states = None
    if run.with_states:
        run.states = [
            rng.uniform(*cn.INIT[n], size=run.shape).astype(dt) for n in names
        ]
        common += [
            "--state=@" + save("s%d" % i, s) for i, s in enumerate(run.states)
        ]
    for k, v in run.flags.items():
        common.append("--param=%s=%s" % (k, cn.spell_flag(v, run.spell)))
    for k, v in run.custom.items():
        common.append("--param=%s=%s" % (k, v))
    grads = []
    run.gout = None
    if run.with_gout:
        run.gout = rng.normal(0, 1, seq).astype(dt)
        grads.append("--grad-output=@" + save("gout", run.gout))
    run.gstate = None
    if run.with_gstate:
        run.gstate = [rng.normal(0, 1, seq).astype(dt) for _ in names]
        grads += [
            "--grad-state=@" + save("gstate%d" % i, g)
            for i, g in enumerate(run.gstate)
        ]
    head = [tool, run.neuron_file]
    if run.pass_neuron:
        head.append("--neuron=" + run.neuron)
    run.outdir = os.path.join(rundir, "train")
    run.infdir = os.path.join(rundir, "inference")
    os.makedirs(run.outdir)
    os.makedirs(run.infdir)
    # The reference differentiates at the forward's exact values: float16
    # kernels save them in float32 here (saving in float16, the default,
    # has its own checks: python/tests/test_saved_storage.py).
    exact = ["--save-in-storage-type=false"] if run.dtype == "float16" else []
    run.cmd = (
        head
        + ["--variant=train"]
        + exact
        + common
        + grads
        + ["--output-dir=" + run.outdir]
    )
    run.infcmd = (
        head
        + ["--variant=inference"]
        + common
        + ["--output-dir=" + run.infdir]
    )


def execute(cmd):
    try:
        p = subprocess.run(
            cmd,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            timeout=300,
        )
    except subprocess.TimeoutExpired:
        raise Failure("flexsn-run timed out after 300 s")
    except OSError as e:
        raise Failure("cannot run flexsn-run: %s" % e)
    if p.returncode != 0:
        raise Failure(
            "flexsn-run exited with %d: %s"
            % (p.returncode, (p.stderr + p.stdout).strip())
        )
    return p.stdout + p.stderr


def expected(run):
    """{file name: (shape, dtype)} of what the train variant writes."""
    dt = np.dtype(run.dtype)
    seq = (run.T,) + run.shape
    nst = len(reference.STATES[run.neuron])
    files = {"out0.npy": (seq, dt), "grad_in0.npy": (seq, dt)}
    for i in range(nst):
        files["state_seq%d.npy" % i] = (seq, dt)
        files["grad_init%d.npy" % i] = (run.shape, dt)
    for n in gradients.TRAINABLE.get(run.neuron, []):
        files["grad_param_%s.npy" % n] = ((), np.dtype(np.float32))
    return files


def compare(run, fname, got, want, valid, extra_atol=0.0):
    g = got.astype(np.float64)
    rtol, atol = TOL[run.dtype]
    with np.errstate(invalid="ignore", over="ignore"):
        ok = np.abs(g - want) <= atol + extra_atol + rtol * np.abs(want)
    bad = valid & ~ok
    if bad.any():
        idx = tuple(np.argwhere(bad)[0]) if bad.ndim else ()
        raise Failure(
            "%s: first mismatch (rtol %g, atol %g%s) at index %s: "
            "got %r, expected %r (%d mismatching of %d compared)"
            % (
                fname,
                rtol,
                atol,
                " + %g" % extra_atol if extra_atol else "",
                cn.fmt_index(idx),
                float(g[idx]),
                float(want[idx]),
                int(np.sum(bad)),
                int(np.sum(valid)),
            )
        )


def check(run, out, infout, stats):
    neuron, T, shape = run.neuron, run.T, run.shape
    files = expected(run)
    present = sorted(os.listdir(run.outdir))
    if present != sorted(files):
        raise Failure("wrote %s, expected %s" % (present, sorted(files)))
    for n in files:
        if n not in out:
            raise Failure("does not say it wrote %s; printed %r" % (n, out))
    arrays = {}
    for n, (shp, dt) in files.items():
        a = np.load(os.path.join(run.outdir, n), allow_pickle=False)
        if a.shape != shp or a.dtype != dt:
            raise Failure(
                "%s: shape %s dtype %s, expected shape %s dtype %s"
                % (n, a.shape, a.dtype, shp, dt)
            )
        arrays[n] = a

    # The forward pass is that of --variant=inference, bit for bit.
    inf = sorted(os.listdir(run.infdir))
    fwd = sorted(n for n in files if n.startswith(("out", "state_seq")))
    if inf != fwd:
        raise Failure("inference wrote %s, expected %s" % (inf, fwd))
    for n in fwd:
        b = np.load(os.path.join(run.infdir, n), allow_pickle=False)
        a = arrays[n]
        same = a.view(np.uint8) == b.view(np.uint8) if a.size else True
        if not np.all(same):
            diff = np.argwhere(a != b)
            idx = tuple(diff[0]) if len(diff) else ()
            raise Failure(
                "%s differs from --variant=inference's at index %s:"
                " %r vs %r (inference command: %s)"
                % (
                    n,
                    cn.fmt_index(idx),
                    float(a[idx]),
                    float(b[idx]),
                    shlex.join(run.infcmd),
                )
            )

    f64 = (
        lambda a: None
        if a is None
        else (
            a.astype(np.float64)
            if not isinstance(a, list)
            else [s.astype(np.float64) for s in a]
        )
    )
    ref = gradients.reference_gradients(
        neuron,
        run.overrides(),
        run.x.astype(np.float32),
        None
        if run.states is None
        else [s.astype(np.float32) for s in run.states],
        f64(run.gout),
        f64(run.gstate),
        run.surrogate,
    )
    nst = len(reference.STATES[neuron])

    if T == 0:
        for n, a in arrays.items():
            if n.startswith("grad") and np.any(a != 0):
                raise Failure(
                    "%s: T = 0 but it is not zero: %r" % (n, a.tolist())
                )
        return ref, np.ones(shape, bool)

    near = gradients.near_mask(ref["traj"], run.surrogate, NEAR[run.dtype])
    stats["neurons"] += near.size
    stats["cut"] += int(near.sum())
    valid = ~near
    compare(
        run,
        "grad_in0.npy",
        arrays["grad_in0.npy"],
        ref["grad_in"],
        np.broadcast_to(valid, (T,) + shape),
    )
    for i in range(nst):
        n = "grad_init%d.npy" % i
        compare(run, n, arrays[n], ref["grad_init"][i], valid)
    for p in gradients.TRAINABLE.get(neuron, []):
        stats["param_runs"] += 1
        if near.any():
            stats["param_skipped"] += 1
            continue
        n = "grad_param_%s.npy" % p
        compare(
            run,
            n,
            arrays[n],
            np.array(ref["grad_param"][p]),
            np.array(True),
            PARAM_SUM_TOL[run.dtype] * ref["grad_param_abs"][p],
        )
    return ref, valid


def run_and_check(run, rng, tool, rundir, stats, failures):
    """Prepares, runs and checks `run`. Returns (reference result, [N...]
    mask of the neurons compared), or None after appending to failures."""
    prepare(run, rng, tool, rundir)
    try:
        out = execute(run.cmd)
        infout = execute(run.infcmd)
        return check(run, out, infout, stats)
    except Failure as e:
        failures.append(
            "FAIL %s\n  %s\n  command: %s\n"
            % (run.describe(), e, shlex.join(run.cmd))
        )
        return None


def new_stats():
    return {"neurons": 0, "cut": 0, "param_runs": 0, "param_skipped": 0}


def near_summary(stats, label):
    """(message, failed) about the neurons left out near the threshold."""
    frac = stats["cut"] / max(stats["neurons"], 1)
    msg = "%d of %d neurons came near the threshold and were left out" % (
        stats["cut"],
        stats["neurons"],
    )
    if stats["param_runs"]:
        msg += "; parameter gradients compared in %d of %d runs" % (
            stats["param_runs"] - stats["param_skipped"],
            stats["param_runs"],
        )
    failed = (
        frac >= MAX_NEAR_FRACTION
        or stats["param_skipped"] > stats["param_runs"] // 4
    )
    if failed:
        print(
            "FAIL %s: %s (limit %.0f%%, and 3/4 of the parameter "
            "gradients)" % (label, msg, 100 * MAX_NEAR_FRACTION)
        )
    return msg, failed


def make_runs(neuron, neuron_file, rng):
    flags = reference.flags_of(neuron)
    runs = []
    k = 0
    for c, values in enumerate(
        itertools.product((False, True), repeat=len(flags))
    ):
        combos = [(T, "float32") for T in TS]
        if c % 2 == 0:
            combos.append((7, "float16"))
        if c == 1:
            combos.append((0, "float16"))
        for T, dtype in combos:
            runs.append(
                GRun(
                    neuron,
                    neuron_file,
                    dict(zip(flags, values)),
                    cn.CUSTOM[neuron] if rng.random() < 0.5 else {},
                    T,
                    SHAPES[k % len(SHAPES)],
                    dtype,
                    with_states=rng.random() >= 0.3,
                    with_gout=rng.random() >= 0.25,
                    with_gstate=rng.random() >= 0.25,
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
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()

    tool = cn.find_tool()
    neuron = args.neuron
    shutil.rmtree(args.workdir, ignore_errors=True)
    os.makedirs(args.workdir)
    rng = np.random.default_rng([zlib.crc32(neuron.encode()), args.seed, 1])
    runs = make_runs(neuron, os.path.abspath(args.neuron_file), rng)
    stats = new_stats()
    failures = []
    for i, run in enumerate(runs):
        run_and_check(
            run,
            rng,
            tool,
            os.path.join(args.workdir, "%s-%03d" % (neuron, i)),
            stats,
            failures,
        )
    for f in failures:
        print(f)
    msg, too_near = near_summary(stats, neuron)
    if failures:
        print(
            "%s: %d of %d train runs FAILED"
            % (neuron, len(failures), len(runs))
        )
    if failures or too_near:
        return 1
    print("%s: %d train runs passed (%s)" % (neuron, len(runs), msg))
    return 0


if __name__ == "__main__":
    sys.exit(main())
