#!/usr/bin/env python3
"""Checks per_neuron parameters on the CPU: LIF with a trainable per-neuron
v_threshold, against gradients.py.

    per_neuron_params.py --neuron-file=lib/Neurons/lif.mlir --workdir=DIR \
        [--seed=S]

It writes, into DIR, lif.mlir with `%v_threshold: f32 = 1.0,` rewritten to
`%v_threshold: f32 = 1.0 trainable per_neuron,` (failing if that text is not
there exactly once). Then, for every combination of soft_reset x
detach_reset x T in {0, 1, 7} in float32 (decay_input at its default), plus
per flag combination T = 7 with decay_input = false, float16 at T = 7 for
half of the combinations, at T = 0 for one and T = 1 with decay_input =
false for one (20 runs), it draws seeded random inputs, initial states
(omitted in about a third of the runs: zeros), incoming gradients of the
spikes and of the state sequence (each omitted in about a quarter of the
runs) and one threshold per neuron, uniform in [0.3, 2.0] (float32, all
distinct), and runs

    flexsn-run LIF_PN --variant=train --input=@x.npy [--state=@s0.npy]
        [--grad-output=@gout.npy] [--grad-state=@gstate0.npy]
        --param=v_threshold=@theta.npy --param=FLAG=... [--param=...]
        --output-dir=DIR

with, in about half of the runs, non-default tau and v_reset. The
population shape cycles through (5,), (33,), (3, 4), (1,), (2, 3, 2),
(67,). In about half of the runs --variant=inference, and in about a third
--variant=final-state, run on the same inputs and theta.

It checks that exactly out0.npy, state_seq0.npy, grad_in0.npy,
grad_init0.npy and grad_param_v_threshold.npy are written and named in the
output, with the right shapes and dtypes (grad_param_v_threshold.npy:
float32 of the neuron shape, whatever the inputs' dtype); that the
inference files equal the train forward files bit for bit, and final-state
the last state (the initial state when T = 0); and the values against
references that only ever see a scalar threshold, run one neuron at a time
with v_threshold = that neuron's theta:

  forward (spikes exactly, the state with the tolerances of
      check_neurons.py), grad_in0 and grad_init0: gradients.py's float32
      Heaviside forward and float64 BPTT, as check_gradients.py;
  grad_param_v_threshold: central finite differences (float64) of the
      per-neuron loss of the forward with the spike replaced, around the
      Heaviside trajectory, by its surrogate linearization
      s_b + g(over_b) (over - over_b), g = LIF's sigmoid (alpha 4), the
      reset's spike frozen at s_b when detach_reset (gradients.py's
      self_test_linearized); independent of the compiler's autodiff.

Tolerances are check_gradients.py's (float32: 1e-5 + 1e-4 |want|; float16,
against the reference on the float16-rounded inputs: 1e-3 + 2e-3 |want|).
A neuron whose h came within 1e-4 (float16: 1e-3) of its threshold at some
step is compared only before that step in the forward and left out of the
gradients; fewer than 2% of the neurons may be left out. With T = 0 every
gradient must be exactly 0.

Also:
  * theta = c for every neuron gives the spikes and states of the
    unmodified lif.mlir with --param=v_threshold=c, bit for bit (and its
    grad_in0 / grad_init0 within the float32 tolerance);
  * --param=v_threshold=0.8 (one value for every neuron) writes the files
    of theta = an array full of 0.8, bit for bit;
  * a theta of the wrong shape or dtype, and an array for a scalar
    parameter (tau here; v_threshold on the unmodified file), make
    flexsn-run exit 1 with a message naming the parameter, writing nothing.

Prints one summary line; on failure one message per failing run or case
(flags, dtype, T, N, file, first mismatching index, values, command) and
exits 1.
"""

import argparse
import os
import shlex
import shutil
import subprocess
import sys
import zlib

import numpy as np

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import check_gradients as cg  # noqa: E402
import check_neurons as cn  # noqa: E402
import gradients  # noqa: E402

NEURON = "lif"
PARAM = "v_threshold"
SCALAR_DECL = "%v_threshold: f32 = 1.0,"
PER_NEURON_DECL = "%v_threshold: f32 = 1.0 trainable per_neuron,"
SHAPES = [(5,), (33,), (3, 4), (1,), (2, 3, 2), (67,)]
TS = (0, 1, 7)
THETA_RANGE = (0.3, 2.0)
TOL = cg.TOL  # gradients: (rtol, atol) by dtype
FWD_TOL = cn.TOL  # states: (rtol, atol) by dtype
NEAR = cg.NEAR  # by dtype
MAX_NEAR_FRACTION = cg.MAX_NEAR_FRACTION
FD_EPS = 1e-6
SURROGATE = "sigmoid"  # LIF's #flexsn.sigmoid<alpha = 4.0>
G = gradients._g_of(lambda z: gradients._g_sigmoid(z, 4.0))
GRAD_FILE = "grad_param_%s.npy" % PARAM

Failure = cg.Failure


class PRun:
    """One --variant=train run of the per-neuron LIF, with its theta."""

    def __init__(
        self,
        flags,
        custom,
        T,
        shape,
        dtype,
        with_states,
        with_gout,
        with_gstate,
        inference,
        final_state,
        theta_value=None,
    ):
        self.flags, self.custom = flags, custom
        self.T, self.shape, self.dtype = T, shape, dtype
        self.with_states, self.with_gout = with_states, with_gout
        self.with_gstate = with_gstate
        self.inference, self.final_state = inference, final_state
        self.theta_value = theta_value  # None: random per neuron
        self.cmd = None

    def describe(self):
        params = ["%s=%s" % (k, int(v)) for k, v in self.flags.items()]
        params += ["%s=%s" % kv for kv in self.custom.items()]
        return (
            "lif per_neuron v_threshold (%s): train %s T=%d N=%s %s "
            "theta=%s states=%s grad-output=%s grad-state=%s"
            % (
                SURROGATE,
                self.dtype,
                self.T,
                self.shape,
                " ".join(params),
                "random"
                if self.theta_value is None
                else "all %s" % self.theta_value,
                "given" if self.with_states else "zeros",
                "given" if self.with_gout else "absent",
                "given" if self.with_gstate else "absent",
            )
        )

    def overrides(self, theta_j):
        p = dict(self.flags)
        p.update({k: float(v) for k, v in self.custom.items()})
        p[PARAM] = float(theta_j)
        return p


def make_neuron_file(src, workdir):
    with open(src) as f:
        text = f.read()
    n = text.count(SCALAR_DECL)
    if n != 1:
        sys.exit(
            "error: %s: expected %r exactly once, found it %d times; "
            "cannot make v_threshold per_neuron" % (src, SCALAR_DECL, n)
        )
    new = text.replace(SCALAR_DECL, PER_NEURON_DECL)
    if new == text or new.count(PER_NEURON_DECL) != 1:
        sys.exit("error: the per_neuron substitution did not happen")
    path = os.path.join(workdir, "lif_per_neuron.mlir")
    with open(path, "w") as f:
        f.write(new)
    return path


def draw_theta(rng, shape):
    while True:
        th = rng.uniform(*THETA_RANGE, size=shape).astype(np.float32)
        if np.unique(th).size == th.size:
            return th


def prepare(run, rng, tool, pn_file, rundir):
    os.makedirs(rundir)
    dt = np.dtype(run.dtype)
    seq = (run.T,) + run.shape
    mean, std = cn.DRIVE[NEURON]

    def save(name, a):
        path = os.path.join(rundir, name + ".npy")
        np.save(path, a)
        return path

    run.x = rng.normal(mean, std, seq).astype(dt)
    common = ["--input=@" + save("x", run.x)]
    run.states = None
    if run.with_states:
        run.states = [rng.uniform(*cn.INIT["v"], size=run.shape).astype(dt)]
        common.append("--state=@" + save("s0", run.states[0]))
    if run.theta_value is None:
        run.theta = draw_theta(rng, run.shape)
    else:
        run.theta = np.full(run.shape, np.float32(run.theta_value))
    run.theta_path = save("theta", run.theta)
    run.theta_arg = "--param=%s=@%s" % (PARAM, run.theta_path)
    for k, v in run.flags.items():
        common.append("--param=%s=%s" % (k, cn.spell_flag(v, False)))
    for k, v in run.custom.items():
        common.append("--param=%s=%s" % (k, v))
    run.common = common
    grads = []
    run.gout = None
    if run.with_gout:
        run.gout = rng.normal(0, 1, seq).astype(dt)
        grads.append("--grad-output=@" + save("gout", run.gout))
    run.gstate = None
    if run.with_gstate:
        run.gstate = [rng.normal(0, 1, seq).astype(dt)]
        grads.append("--grad-state=@" + save("gstate0", run.gstate[0]))
    run.grads = grads
    run.rundir = rundir
    run.outdir = os.path.join(rundir, "train")
    run.cmd = (
        [tool, pn_file, "--variant=train", run.theta_arg]
        + common
        + grads
        + ["--output-dir=" + run.outdir]
    )
    run.side = []  # (variant, outdir, command)
    for variant, wanted in (
        ("inference", run.inference),
        ("final-state", run.final_state),
    ):
        if wanted:
            d = os.path.join(rundir, variant)
            run.side.append(
                (
                    variant,
                    d,
                    [tool, pn_file, "--variant=" + variant, run.theta_arg]
                    + common
                    + ["--output-dir=" + d],
                )
            )


def expected(run):
    dt = np.dtype(run.dtype)
    seq = (run.T,) + run.shape
    return {
        "out0.npy": (seq, dt),
        "state_seq0.npy": (seq, dt),
        "grad_in0.npy": (seq, dt),
        "grad_init0.npy": (run.shape, dt),
        GRAD_FILE: (run.shape, np.dtype(np.float32)),
    }


def load_outputs(outdir, stdout, files):
    present = sorted(os.listdir(outdir))
    if present != sorted(files):
        raise Failure("wrote %s, expected %s" % (present, sorted(files)))
    arrays = {}
    for n, (shp, dt) in files.items():
        if n not in stdout:
            raise Failure("does not say it wrote %s; printed %r" % (n, stdout))
        a = np.load(os.path.join(outdir, n), allow_pickle=False)
        if a.shape != shp or a.dtype != dt:
            raise Failure(
                "%s: shape %s dtype %s, expected shape %s dtype %s"
                % (n, a.shape, a.dtype, shp, dt)
            )
        arrays[n] = a
    return arrays


def bitwise_equal(a, b):
    return (
        a.shape == b.shape
        and a.dtype == b.dtype
        and (a.size == 0 or np.array_equal(a.view(np.uint8), b.view(np.uint8)))
    )


def first_diff(a, b):
    diff = np.argwhere(
        a.view(np.uint8).reshape(a.shape + (-1,))
        != b.view(np.uint8).reshape(b.shape + (-1,))
    )
    return tuple(diff[0][: a.ndim]) if len(diff) else ()


def same_bits(what, a, b, cmd):
    if not bitwise_equal(a, b):
        if a.shape != b.shape or a.dtype != b.dtype:
            raise Failure(
                "%s: %s%s vs %s%s (command: %s)"
                % (what, a.dtype, a.shape, b.dtype, b.shape, shlex.join(cmd))
            )
        idx = first_diff(a, b)
        raise Failure(
            "%s differ at index %s: %r vs %r (command: %s)"
            % (
                what,
                cn.fmt_index(idx),
                float(a[idx]),
                float(b[idx]),
                shlex.join(cmd),
            )
        )


def column_reference(run):
    """Per neuron (one column of the flattened population at a time, with
    the scalar v_threshold = theta[j]): the float32 forward, gradients.py's
    BPTT gradients, and the finite-difference threshold gradient."""
    T, shape = run.T, run.shape
    N = int(np.prod(shape))
    x = run.x.astype(np.float32).reshape(T, N)
    v0 = (
        None
        if run.states is None
        else run.states[0].astype(np.float32).reshape(N)
    )
    gO = (
        np.zeros((T, N))
        if run.gout is None
        else run.gout.astype(np.float64).reshape(T, N)
    )
    gV = (
        np.zeros((T, N))
        if run.gstate is None
        else run.gstate[0].astype(np.float64).reshape(T, N)
    )
    theta = run.theta.reshape(N)
    r = {k: np.zeros((T, N), np.float32) for k in ("s", "v", "over")}
    r.update(
        grad_in=np.zeros((T, N)),
        grad_init=np.zeros(N),
        grad_theta=np.zeros(N),
        first_near=np.full(N, T, np.int64),
        f64_spikes_differ=np.zeros(N, bool),
    )
    near = NEAR[run.dtype]
    for j in range(N):
        ov = run.overrides(theta[j])
        xj = x[:, j : j + 1]
        sj = None if v0 is None else [v0[j : j + 1]]
        ref = gradients.reference_gradients(
            NEURON, ov, xj, sj, gO[:, j : j + 1], [gV[:, j : j + 1]], SURROGATE
        )
        tr = ref["traj"]
        r["s"][:, j] = tr["s"][:, 0]
        r["v"][:, j] = tr["state_seq"][0][:, 0]
        r["over"][:, j] = tr["over"][:, 0]
        r["grad_in"][:, j] = ref["grad_in"][:, 0]
        r["grad_init"][j] = ref["grad_init"][0][0]
        hit = np.nonzero(np.abs(tr["over"][:, 0].astype(np.float64)) < near)[0]
        if len(hit):
            r["first_near"][j] = hit[0]
        if T:
            fd, s64 = threshold_fd(
                ov, xj, sj, gO[:, j : j + 1], gV[:, j : j + 1]
            )
            r["grad_theta"][j] = fd[0]
            r["f64_spikes_differ"][j] = not np.array_equal(s64, tr["s"][:, 0])
    r["near"] = r["first_near"] < T
    return r


def threshold_fd(ov, x, states, gO, gV, eps=FD_EPS):
    """d loss / d v_threshold of one neuron by central differences (float64)
    of the forward with the spike linearized by the surrogate around the
    Heaviside trajectory (and the reset's spike frozen when detached)."""
    x = np.asarray(x, np.float64)
    st = (
        None if states is None else [np.asarray(s, np.float64) for s in states]
    )
    base = gradients.forward(NEURON, ov, x, st, np.float64)
    over_b, s_b = base["over"], base["s"]
    psi_b = G(over_b)

    def spike(over, t):
        return s_b[t] + psi_b[t] * (over - over_b[t])

    frozen = s_b if ov["detach_reset"] else None

    def L(th):
        o = dict(ov)
        o[PARAM] = th
        return gradients.loss_per_neuron(
            gradients.forward(NEURON, o, x, st, np.float64, spike, frozen),
            gO,
            [gV],
        )

    th = ov[PARAM]
    return (L(th + eps) - L(th - eps)) / (2 * eps), s_b[:, 0]


def compare(run, fname, got, want, valid, tol):
    g = got.astype(np.float64)
    rtol, atol = tol
    with np.errstate(invalid="ignore", over="ignore"):
        ok = np.abs(g - want) <= atol + rtol * np.abs(want)
    bad = valid & ~ok
    if bad.any():
        idx = tuple(np.argwhere(bad)[0])
        extra = ""
        if fname == GRAD_FILE:
            extra = " (theta there %r)" % float(run.theta[idx])
        raise Failure(
            "%s: first mismatch (rtol %g, atol %g) at index %s: "
            "got %r, expected %r%s (%d mismatching of %d compared)"
            % (
                fname,
                rtol,
                atol,
                cn.fmt_index(idx),
                float(g[idx]),
                float(want[idx]),
                extra,
                int(np.sum(bad)),
                int(np.sum(valid)),
            )
        )


def check(run, out, side_outs, stats):
    T, shape = run.T, run.shape
    files = expected(run)
    arrays = load_outputs(run.outdir, out, files)
    # Other variants on the same theta: the same forward, bit for bit.
    for (variant, d, cmd), sout in zip(run.side, side_outs):
        if variant == "inference":
            names = {
                "out0.npy": files["out0.npy"],
                "state_seq0.npy": files["state_seq0.npy"],
            }
        else:
            names = {
                "out0.npy": files["out0.npy"],
                "final_state0.npy": files["grad_init0.npy"],
            }
        got = load_outputs(d, sout, names)
        same_bits(
            "out0.npy of train and %s" % variant,
            arrays["out0.npy"],
            got["out0.npy"],
            cmd,
        )
        if variant == "inference":
            same_bits(
                "state_seq0.npy of train and inference",
                arrays["state_seq0.npy"],
                got["state_seq0.npy"],
                cmd,
            )
        else:
            dt = np.dtype(run.dtype)
            last = (
                arrays["state_seq0.npy"][-1]
                if T
                else (
                    np.zeros(shape, dt)
                    if run.states is None
                    else run.states[0]
                )
            )
            same_bits(
                "final_state0.npy and the last state of train's "
                "state_seq0.npy (T = 0: the initial state)",
                got["final_state0.npy"],
                last,
                cmd,
            )

    if T == 0:
        for n, a in arrays.items():
            if n.startswith("grad") and np.any(a != 0):
                raise Failure(
                    "%s: T = 0 but it is not zero: %r" % (n, a.tolist())
                )
        return
    ref = column_reference(run)
    N = ref["near"].size
    stats["neurons"] += N
    stats["cut"] += int(ref["near"].sum())
    if np.any(ref["f64_spikes_differ"] & ~ref["near"]):
        j = int(np.argmax(ref["f64_spikes_differ"] & ~ref["near"]))
        raise Failure(
            "test design: the float64 base trajectory of the "
            "finite differences spikes differently from the "
            "float32 one at neuron %d, not near its threshold" % j
        )

    def flat(a):
        return a.reshape((T, N))

    # Forward: before the first step near the threshold.
    fvalid = np.arange(T)[:, None] < ref["first_near"][None, :]
    spikes = flat(arrays["out0.npy"]).astype(np.float32)
    nb = ~((spikes == 0) | (spikes == 1))
    if nb.any():
        idx = tuple(np.argwhere(nb)[0])
        raise Failure(
            "out0.npy: spike %r at flat index %s is neither 0 "
            "nor 1" % (float(spikes[idx]), cn.fmt_index(idx))
        )

    def compare_flat(fn, got, want, valid, tol, exact=False):
        # got, want, valid: [T, N] or [N]; compared in the neuron shape.
        g = got.reshape(got.shape[:-1] + shape)
        w = want.reshape(g.shape)
        v = valid.reshape(g.shape)
        if exact:
            bad = v & (g.astype(np.float32) != w)
            if bad.any():
                idx = tuple(np.argwhere(bad)[0])
                raise Failure(
                    "%s: first mismatch at index %s: got %r, "
                    "expected %r (%d mismatching of %d compared)"
                    % (
                        fn,
                        cn.fmt_index(idx),
                        float(g[idx]),
                        float(w[idx]),
                        int(bad.sum()),
                        int(v.sum()),
                    )
                )
        else:
            compare(run, fn, g, w, v, tol)

    compare_flat("out0.npy", spikes, ref["s"], fvalid, None, exact=True)
    compare_flat(
        "state_seq0.npy",
        flat(arrays["state_seq0.npy"]),
        ref["v"],
        fvalid,
        FWD_TOL[run.dtype],
    )
    valid = ~ref["near"]
    tol = TOL[run.dtype]
    compare_flat(
        "grad_in0.npy",
        flat(arrays["grad_in0.npy"]),
        ref["grad_in"],
        np.broadcast_to(valid, (T, N)),
        tol,
    )
    compare_flat(
        "grad_init0.npy",
        arrays["grad_init0.npy"].reshape(N),
        ref["grad_init"],
        valid,
        tol,
    )
    compare_flat(
        GRAD_FILE, arrays[GRAD_FILE].reshape(N), ref["grad_theta"], valid, tol
    )
    stats["theta_compared"] += int(valid.sum())
    stats["theta_nonzero"] += int(np.sum(valid & (ref["grad_theta"] != 0)))


def run_and_check(run, rng, tool, pn_file, rundir, stats, failures):
    prepare(run, rng, tool, pn_file, rundir)
    try:
        out = cg.execute(run.cmd)
        side = [cg.execute(cmd) for _, _, cmd in run.side]
        check(run, out, side, stats)
        return True
    except Failure as e:
        failures.append(
            "FAIL %s\n  %s\n  command: %s\n"
            % (run.describe(), e, shlex.join(run.cmd))
        )
        return False


def make_runs(rng):
    runs = []
    k = 0
    combos = [
        (soft, detach) for soft in (False, True) for detach in (False, True)
    ]
    for c, (soft, detach) in enumerate(combos):
        flags = {"soft_reset": soft, "detach_reset": detach}
        cases = [(T, "float32", None) for T in TS]
        cases.append((7, "float32", False))  # decay_input = false
        if c % 2 == 0:
            cases.append((7, "float16", None))
        if c == 1:
            cases.append((0, "float16", None))
        if c == 3:
            cases.append((1, "float32", False))
        for T, dtype, decay in cases:
            f = dict(flags)
            if decay is not None:
                f["decay_input"] = decay
            custom = (
                {"tau": "3.0", "v_reset": "-0.1"} if rng.random() < 0.5 else {}
            )
            runs.append(
                PRun(
                    f,
                    custom,
                    T,
                    SHAPES[k % len(SHAPES)],
                    dtype,
                    with_states=rng.random() >= 0.3,
                    with_gout=rng.random() >= 0.25,
                    with_gstate=rng.random() >= 0.25,
                    inference=rng.random() < 0.5,
                    final_state=rng.random() < 0.35,
                )
            )
            k += 1
    return runs


# ---------------------------------------------------------------------------
# The same theta for every neuron.


def check_uniform(rng, tool, pn_file, plain_file, workdir, stats, failures):
    """theta = c everywhere against the unmodified file with --param=c, and
    --param=v_threshold=0.8 against an array full of 0.8. Returns the number
    of cases."""
    n = 0
    cases = [
        ({"soft_reset": False, "detach_reset": False}, "0.7", (33,)),
        ({"soft_reset": True, "detach_reset": False}, "1.3", (3, 4)),
        (
            {"soft_reset": True, "detach_reset": True, "decay_input": False},
            "0.45",
            (67,),
        ),
    ]
    for i, (flags, c, shape) in enumerate(cases):
        run = PRun(
            flags,
            {},
            7,
            shape,
            "float32",
            True,
            True,
            True,
            inference=True,
            final_state=False,
            theta_value=c,
        )
        rundir = os.path.join(workdir, "uniform-%d" % i)
        n += 1
        if not run_and_check(run, rng, tool, pn_file, rundir, stats, failures):
            continue
        d = os.path.join(rundir, "plain")
        cmd = (
            [tool, plain_file, "--variant=train", "--param=%s=%s" % (PARAM, c)]
            + run.common
            + run.grads
            + ["--output-dir=" + d]
        )
        try:
            out = cg.execute(cmd)
            files = expected(run)
            del files[GRAD_FILE]
            plain = load_outputs(d, out, files)
            mine = {fn: np.load(os.path.join(run.outdir, fn)) for fn in files}
            for fn in ("out0.npy", "state_seq0.npy"):
                same_bits(
                    "%s of per_neuron theta = %s and of lif.mlir with "
                    "--param=%s=%s" % (fn, c, PARAM, c),
                    mine[fn],
                    plain[fn],
                    cmd,
                )
            for fn in ("grad_in0.npy", "grad_init0.npy"):
                compare(
                    run,
                    fn + " (against lif.mlir's)",
                    mine[fn],
                    plain[fn].astype(np.float64),
                    np.ones(plain[fn].shape, bool),
                    TOL["float32"],
                )
        except Failure as e:
            failures.append(
                "FAIL %s, against lif.mlir --param=%s=%s\n  %s\n"
                "  command: %s\n"
                % (run.describe(), PARAM, c, e, shlex.join(cmd))
            )

    # One value on the command line = an array full of it.
    for i, (flags, T, dtype, shape) in enumerate(
        [
            ({"soft_reset": False, "detach_reset": True}, 7, "float32", (5,)),
            (
                {"soft_reset": True, "detach_reset": False},
                7,
                "float16",
                (2, 3, 2),
            ),
        ]
    ):
        run = PRun(
            flags,
            {},
            T,
            shape,
            dtype,
            True,
            True,
            True,
            inference=False,
            final_state=False,
            theta_value="0.8",
        )
        rundir = os.path.join(workdir, "broadcast-%d" % i)
        n += 1
        if not run_and_check(run, rng, tool, pn_file, rundir, stats, failures):
            continue
        for variant in ("train", "inference"):
            d = os.path.join(rundir, "scalar-" + variant)
            cmd = (
                [
                    tool,
                    pn_file,
                    "--variant=" + variant,
                    "--param=%s=0.8" % PARAM,
                ]
                + run.common
                + (run.grads if variant == "train" else [])
                + ["--output-dir=" + d]
            )
            try:
                out = cg.execute(cmd)
                files = expected(run)
                if variant == "inference":
                    files = {
                        k: files[k] for k in ("out0.npy", "state_seq0.npy")
                    }
                got = load_outputs(d, out, files)
                for fn in files:
                    a = np.load(os.path.join(run.outdir, fn))
                    same_bits(
                        "%s of --param=%s=0.8 (%s) and of an array "
                        "full of 0.8" % (fn, PARAM, variant),
                        got[fn],
                        a,
                        cmd,
                    )
            except Failure as e:
                failures.append(
                    "FAIL %s, against --param=%s=0.8\n  %s\n"
                    % (run.describe(), PARAM, e)
                )
    return n


# ---------------------------------------------------------------------------
# Bad parameters.


def check_errors(tool, pn_file, plain_file, workdir, failures):
    d = os.path.join(workdir, "errors")
    os.makedirs(d)

    def save(name, a):
        p = os.path.join(d, name + ".npy")
        np.save(p, a)
        return p

    x = save("x", np.full((4, 5), 0.9, np.float32))
    x16 = save("x16", np.full((4, 5), 0.9, np.float16))
    x34 = save("x34", np.full((4, 3, 4), 0.9, np.float32))
    grad = {
        x: save("g", np.ones((4, 5), np.float32)),
        x34: save("g34", np.ones((4, 3, 4), np.float32)),
        x16: save("g16", np.ones((4, 5), np.float16)),
    }
    th = np.linspace(0.5, 1.5, 5).astype(np.float32)
    ok5 = save("theta5", th)
    cases = [
        ("shape (4,) for N = (5,)", x, save("theta4", th[:4]), PARAM, pn_file),
        (
            "shape (6,) for N = (5,)",
            x,
            save("theta6", np.linspace(0.5, 1.5, 6).astype(np.float32)),
            PARAM,
            pn_file,
        ),
        (
            "shape (1, 5) for N = (5,)",
            x,
            save("theta15", th[None]),
            PARAM,
            pn_file,
        ),
        (
            "0-d array for N = (5,)",
            x,
            save("theta0d", np.float32(0.8)),
            PARAM,
            pn_file,
        ),
        (
            "shape (12,) for N = (3, 4)",
            x34,
            save("theta12", np.linspace(0.5, 1.5, 12).astype(np.float32)),
            PARAM,
            pn_file,
        ),
        (
            "shape (4, 3) for N = (3, 4)",
            x34,
            save(
                "theta43",
                np.linspace(0.5, 1.5, 12).astype(np.float32).reshape(4, 3),
            ),
            PARAM,
            pn_file,
        ),
        ("float64", x, save("theta64", th.astype(np.float64)), PARAM, pn_file),
        (
            "float16 (float32 inputs)",
            x,
            save("theta16", th.astype(np.float16)),
            PARAM,
            pn_file,
        ),
        (
            "float16 (float16 inputs)",
            x16,
            os.path.join(d, "theta16.npy"),
            PARAM,
            pn_file,
        ),
        ("int32", x, save("theta_i32", np.ones(5, np.int32)), PARAM, pn_file),
        ("uint8", x, save("theta_u8", np.ones(5, np.uint8)), PARAM, pn_file),
        ("a missing file", x, os.path.join(d, "missing.npy"), PARAM, pn_file),
        ("an array for the scalar tau", x, ok5, "tau", pn_file),
        ("an array for the scalar v_reset", x, ok5, "v_reset", pn_file),
        (
            "an array for v_threshold of the unmodified lif.mlir (scalar)",
            x,
            ok5,
            PARAM,
            plain_file,
        ),
    ]
    n = 0
    for i, (what, xin, path, name, nfile) in enumerate(cases):
        for variant in ("train", "inference"):
            n += 1
            outdir = os.path.join(d, "out-%d-%s" % (i, variant))
            os.makedirs(outdir)
            cmd = [
                tool,
                nfile,
                "--variant=" + variant,
                "--input=@" + xin,
                "--param=%s=@%s" % (name, path),
                "--output-dir=" + outdir,
            ]
            if variant == "train":
                cmd.insert(-1, "--grad-output=@" + grad[xin])
            p = subprocess.run(
                cmd,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
                errors="replace",
                timeout=300,
            )
            msg = p.stdout.strip()
            errs = [ln for ln in msg.splitlines() if "error:" in ln]
            problem = None
            if p.returncode != 1:
                problem = "exited with %d, expected 1" % p.returncode
            elif len(errs) != 1:
                problem = "printed %d error lines, expected 1" % len(errs)
            elif "--param " + name not in errs[0]:
                problem = "the error does not name --param %s" % name
            elif os.listdir(outdir):
                problem = "wrote %s" % sorted(os.listdir(outdir))
            if problem:
                failures.append(
                    "FAIL bad --param %s (%s), %s: %s; output "
                    "%r\n  command: %s\n"
                    % (name, what, variant, problem, msg, shlex.join(cmd))
                )
    return n


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--neuron-file", required=True, help="lib/Neurons/lif.mlir"
    )
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()

    tool = cn.find_tool()
    shutil.rmtree(args.workdir, ignore_errors=True)
    os.makedirs(args.workdir)
    plain_file = os.path.abspath(args.neuron_file)
    pn_file = make_neuron_file(plain_file, args.workdir)
    rng = np.random.default_rng([zlib.crc32(b"per_neuron"), args.seed])
    stats = {"neurons": 0, "cut": 0, "theta_compared": 0, "theta_nonzero": 0}
    failures = []
    runs = make_runs(rng)
    for i, run in enumerate(runs):
        run_and_check(
            run,
            rng,
            tool,
            pn_file,
            os.path.join(args.workdir, "run-%03d" % i),
            stats,
            failures,
        )
    n_uniform = check_uniform(
        rng, tool, pn_file, plain_file, args.workdir, stats, failures
    )
    n_errors = check_errors(tool, pn_file, plain_file, args.workdir, failures)
    for f in failures:
        print(f)
    frac = stats["cut"] / max(stats["neurons"], 1)
    msg = (
        "%d of %d neurons came near their threshold and were left out; "
        "%d threshold gradients compared, %d of them non-zero"
        % (
            stats["cut"],
            stats["neurons"],
            stats["theta_compared"],
            stats["theta_nonzero"],
        )
    )
    too_near = frac >= MAX_NEAR_FRACTION
    if too_near:
        print(
            "FAIL per_neuron: %s (%.1f%%, limit %.0f%%)"
            % (msg, 100 * frac, 100 * MAX_NEAR_FRACTION)
        )
    total = len(runs) + n_uniform + n_errors
    if failures:
        print(
            "per_neuron v_threshold: %d of %d runs and cases FAILED"
            % (len(failures), total)
        )
    if failures or too_near:
        return 1
    print(
        "per_neuron v_threshold: %d train runs, %d same-theta runs and %d "
        "bad-parameter cases passed (%s)"
        % (len(runs), n_uniform, n_errors, msg)
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
