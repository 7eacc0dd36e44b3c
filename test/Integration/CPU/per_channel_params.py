#!/usr/bin/env python3
"""Checks per_channel parameters on the CPU: PLIF with a trainable
per-channel w (and a runtime per-channel v_threshold), against gradients.py.

    per_channel_params.py --neuron-file=lib/Neurons/plif.mlir --workdir=DIR \
        [--seed=S]

It writes, into DIR, two copies of plif.mlir (failing if the declarations
rewritten are not there exactly once):

  plif_w.mlir:     `%w: f32 = 0.0 trainable per_channel,`
  plif_w_th.mlir:  that, and `%v_threshold: f32 = 1.0 runtime per_channel,`

Inputs of a neuron with per_channel parameters are [T, B, C, S...]; neuron
(b, c, s) uses w[c], and grad_param_w.npy is float32 [C], dL/dw summed over
T, B and S. For every combination of soft_reset x detach_reset x
decay_input x T in {0, 1, 7} in float32, plus float16 at T = 7 for half of
the combinations and at T = 0 and T = 1 for one each (30 runs of plif_w),
and 7 runs of plif_w_th (the soft/detach combinations at T = 7, float16 at
T = 7, T = 0 and T = 1), it draws seeded random inputs, initial states
(omitted in about a third of the runs), incoming gradients of the spikes
and of the state sequence (each omitted in about a quarter), one w per
channel, uniform in [-2, 2] (and one threshold per channel in [0.6, 1.4]),
all distinct, and runs

    flexsn-run FILE --variant=train|inference|final-state --input=@x.npy
        [--state=@s0.npy] [--grad-output=@gout.npy]
        [--grad-state=@gstate0.npy] --param=w=@w.npy
        [--param=v_threshold=@th.npy] --param=FLAG=... --output-dir=DIR

with, in about half of the runs, v_reset = -0.1 (and, for plif_w, a scalar
v_threshold = 0.9). Shapes [B, C, S...] cycle through (2, 3), (2, 3, 2, 5),
(3, 1), (2, 1, 2, 5), (1, 4, 6), (2, 2, 3, 1, 2).

It checks the files written (exactly out0, state_seq0, grad_in0, grad_init0
and grad_param_w; no gradient for the runtime v_threshold), their shapes and
dtypes; that inference and final-state equal the train forward bit for bit;
and the values against references that only see scalar parameters, run one
channel x[:, :, c] at a time with w = w[c] (v_threshold = th[c]):

  forward (spikes exactly, states with check_neurons.py's tolerances),
      grad_in0, grad_init0 and grad_param_w[c]: gradients.py's float32
      Heaviside forward and float64 BPTT (sigmoid surrogate, alpha 4), with
      check_gradients.py's tolerances (grad_param_w also 1e-6 (float16:
      1e-3) x the sum of |terms| it adds up);
  grad_param_w[c]: central finite differences (float64) of the channel's
      loss of the forward with the spike replaced, around the Heaviside
      trajectory, by its surrogate linearization (the reset's spike frozen
      when detach_reset), as per_neuron_params.py does for its threshold,
      with the same tolerances; and gradients.py's BPTT run on that float64
      trajectory must match these finite differences within rtol 1e-6,
      atol 1e-8 (a check of the reference itself).

A neuron whose h came within 1e-4 (float16: 1e-3) of its threshold is
compared only before that step in the forward and left out of the input and
state gradients, and its channel's grad_param_w is not compared; fewer than
2% of the neurons, and at most a quarter of the channels, may be left out.
With T = 0 every gradient must be exactly 0.

Also:
  * w = c for every channel gives the forward of the unmodified plif.mlir
    with --param=w=c on the inputs flattened to [T, N], bit for bit, its
    grad_in0 / grad_init0 within the float32 tolerance, and sum_c
    grad_param_w[c] its grad_param_w within the summation tolerance (the
    same with v_threshold = c' per channel and --param=v_threshold=c');
  * --param=w=0.8 (one value for every channel) writes the files of w = an
    array full of 0.8, bit for bit (and likewise for v_threshold);
  * a w or v_threshold of the wrong dtype or shape, an array for a scalar
    parameter, a parameter given twice (an array, then a value), and inputs
    of rank < 3, make flexsn-run (train and inference) exit 1 with one
    error line saying so, writing nothing.

Prints one summary line; on failure one message per failing run or case
and exits 1.
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
import check_gradients as cg  # noqa: E402
import check_neurons as cn  # noqa: E402
import gradients  # noqa: E402
import per_neuron_params as pnp  # noqa: E402

NEURON = "plif"
W_DECL = ("%w: f32 = 0.0 trainable,", "%w: f32 = 0.0 trainable per_channel,")
TH_DECL = (
    "%v_threshold: f32 = 1.0,",
    "%v_threshold: f32 = 1.0 runtime per_channel,",
)
SHAPES = [
    (2, 3),
    (2, 3, 2, 5),
    (3, 1),
    (2, 1, 2, 5),
    (1, 4, 6),
    (2, 2, 3, 1, 2),
]
W_RANGE = (-2.0, 2.0)  # k = sigmoid(w) in [0.12, 0.88]
TH_RANGE = (0.6, 1.4)
TOL = cg.TOL  # gradients: (rtol, atol) by dtype
FWD_TOL = cn.TOL  # states
SUM_TOL = cg.PARAM_SUM_TOL  # x the sum of |terms| of grad_param_w
NEAR = cg.NEAR
MAX_NEAR_FRACTION = cg.MAX_NEAR_FRACTION
FD_EPS = pnp.FD_EPS
# gradients.py's BPTT against finite differences, both on the float64
# trajectory (its self-test's tolerances).
REF_FD_TOL = (1e-6, 1e-8)  # (rtol, atol)
G = pnp.G  # PLIF's surrogate too: sigmoid, alpha 4
W_FILE = "grad_param_w.npy"

Failure = cg.Failure


class CRun:
    """One --variant=train run (plus inference and final-state) of a PLIF
    with per-channel w (and, if with_th, per-channel v_threshold)."""

    def __init__(
        self,
        with_th,
        flags,
        custom,
        T,
        shape,
        dtype,
        with_states,
        with_gout,
        with_gstate,
        w_value=None,
        th_value=None,
    ):
        self.with_th, self.flags, self.custom = with_th, flags, custom
        self.T, self.shape, self.dtype = T, shape, dtype
        self.with_states, self.with_gout = with_states, with_gout
        self.with_gstate = with_gstate
        self.w_value, self.th_value = w_value, th_value  # None: random
        self.cmd = None

    @property
    def C(self):
        return self.shape[1]

    def describe(self):
        params = ["%s=%s" % (k, int(v)) for k, v in self.flags.items()]
        params += ["%s=%s" % kv for kv in self.custom.items()]
        return (
            "plif per_channel w%s: train %s T=%d [B, C, S...]=%s %s "
            "w=%s%s states=%s grad-output=%s grad-state=%s"
            % (
                " + v_threshold" if self.with_th else "",
                self.dtype,
                self.T,
                self.shape,
                " ".join(params),
                "random" if self.w_value is None else "all " + self.w_value,
                ""
                if not self.with_th
                else " v_threshold=%s"
                % (
                    "random"
                    if self.th_value is None
                    else "all " + self.th_value
                ),
                "given" if self.with_states else "zeros",
                "given" if self.with_gout else "absent",
                "given" if self.with_gstate else "absent",
            )
        )

    def overrides(self, c):
        """gradients.py's scalar parameters of channel c."""
        p = dict(self.flags)
        p.update({k: float(v) for k, v in self.custom.items()})
        p["w"] = float(self.w[c])
        if self.with_th:
            p["v_threshold"] = float(self.th[c])
        return p


def make_neuron_file(src, workdir, name, decls):
    with open(src) as f:
        text = f.read()
    for old, new in decls:
        n = text.count(old)
        if n != 1:
            sys.exit(
                "error: %s: expected %r exactly once, found it %d times"
                % (src, old, n)
            )
        text = text.replace(old, new)
        if text.count(new) != 1:
            sys.exit(
                "error: the substitution %r -> %r did not happen" % (old, new)
            )
    path = os.path.join(workdir, name)
    with open(path, "w") as f:
        f.write(text)
    return path


def draw_distinct(rng, lo, hi, n):
    while True:
        a = rng.uniform(lo, hi, n).astype(np.float32)
        if np.unique(a).size == n:
            return a


def prepare(run, rng, tool, nfile, rundir):
    os.makedirs(rundir)
    dt = np.dtype(run.dtype)
    seq = (run.T,) + run.shape
    mean, std = cn.DRIVE[NEURON]

    def save(name, a):
        path = os.path.join(rundir, name + ".npy")
        np.save(path, a)
        return path

    run.save = save  # check_uniform saves the flattened inputs too
    run.x = rng.normal(mean, std, seq).astype(dt)
    common = ["--input=@" + save("x", run.x)]
    run.states = None
    if run.with_states:
        run.states = [rng.uniform(*cn.INIT["v"], size=run.shape).astype(dt)]
        common.append("--state=@" + save("s0", run.states[0]))
    for k, v in run.flags.items():
        common.append("--param=%s=%s" % (k, cn.spell_flag(v, False)))
    for k, v in run.custom.items():
        common.append("--param=%s=%s" % (k, v))
    # Per-channel values: random and distinct, or all equal to a given one.
    run.w = (
        draw_distinct(rng, *W_RANGE, run.C)
        if run.w_value is None
        else np.full(run.C, np.float32(run.w_value))
    )
    run.params = ["--param=w=@" + save("w", run.w)]
    if run.with_th:
        run.th = (
            draw_distinct(rng, *TH_RANGE, run.C)
            if run.th_value is None
            else np.full(run.C, np.float32(run.th_value))
        )
        run.params.append("--param=v_threshold=@" + save("th", run.th))
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
    head = [tool, nfile]
    run.cmd = (
        head
        + ["--variant=train"]
        + run.params
        + common
        + grads
        + ["--output-dir=" + run.outdir]
    )
    run.side = [
        (
            v,
            os.path.join(rundir, v),
            head
            + ["--variant=" + v]
            + run.params
            + common
            + ["--output-dir=" + os.path.join(rundir, v)],
        )
        for v in ("inference", "final-state")
    ]


def expected(run):
    dt = np.dtype(run.dtype)
    seq = (run.T,) + run.shape
    return {
        "out0.npy": (seq, dt),
        "state_seq0.npy": (seq, dt),
        "grad_in0.npy": (seq, dt),
        "grad_init0.npy": (run.shape, dt),
        W_FILE: ((run.C,), np.dtype(np.float32)),
    }


def check_side(run, arrays, side_outs):
    """Inference and final-state: the train forward, bit for bit."""
    seq = ((run.T,) + run.shape, np.dtype(run.dtype))
    for (variant, d, cmd), sout in zip(run.side, side_outs):
        if variant == "inference":
            kind, shape = "state_seq0.npy", seq
        else:
            kind, shape = "final_state0.npy", (run.shape, seq[1])
        got = pnp.load_outputs(d, sout, {"out0.npy": seq, kind: shape})
        pnp.same_bits(
            "out0.npy of train and %s" % variant,
            arrays["out0.npy"],
            got["out0.npy"],
            cmd,
        )
        if variant == "inference":
            want = arrays["state_seq0.npy"]
        elif run.T:
            want = arrays["state_seq0.npy"][-1]
        else:  # T = 0: the initial state
            want = (
                np.zeros(run.shape, run.dtype)
                if run.states is None
                else run.states[0]
            )
        pnp.same_bits(
            "%s of %s and the train forward" % (kind, variant),
            got[kind],
            want,
            cmd,
        )


def channel_fd(ov, x, states, gO, gV, eps=FD_EPS):
    """dL/dw of one channel (its loss summed over its neurons) by central
    differences (float64) of the forward with the spike linearized by the
    surrogate around the Heaviside trajectory (the reset's spike frozen when
    detached). Also returns gradients.py's BPTT dL/dw on that same float64
    trajectory, and its spikes."""
    x = np.asarray(x, np.float64)
    st = None if states is None else [np.asarray(states[0], np.float64)]
    base = gradients.forward(NEURON, ov, x, st, np.float64)
    over_b, s_b = base["over"], base["s"]
    psi_b = G(over_b)

    def spike(over, t):
        return s_b[t] + psi_b[t] * (over - over_b[t])

    frozen = s_b if ov["detach_reset"] else None

    def L(w):
        traj = gradients.forward(
            NEURON, dict(ov, w=w), x, st, np.float64, spike, frozen
        )
        return float(np.sum(gradients.loss_per_neuron(traj, gO, [gV])))

    w = ov["w"]
    bptt = gradients.bptt(NEURON, ov, x, base, gO, [gV], "sigmoid")
    return (L(w + eps) - L(w - eps)) / (2 * eps), bptt["grad_param"]["w"], s_b


def channel_reference(run):
    """gradients.py run on x[:, :, c] with the scalar parameters of channel
    c, for each c: forward [T, B, C, S...], grad_in, grad_init, grad_w [C]
    (BPTT), its sum of |terms|, and grad_w by finite differences."""
    T, shape, C = run.T, run.shape, run.C
    x = run.x.astype(np.float32)
    s0 = None if run.states is None else run.states[0].astype(np.float32)

    def f64(a):
        return np.zeros((T,) + shape) if a is None else a.astype(np.float64)

    gO = f64(run.gout)
    gV = f64(None if run.gstate is None else run.gstate[0])
    r = {k: np.zeros((T,) + shape, np.float32) for k in ("s", "v", "over")}
    r.update(
        grad_in=np.zeros((T,) + shape),
        grad_init=np.zeros(shape),
        grad_w=np.zeros(C),
        grad_w_abs=np.zeros(C),
        fd_w=np.zeros(C),
        bptt64_w=np.zeros(C),
        first_near=np.full(shape, T, np.int64),
        f64_spikes_differ=np.zeros(shape, bool),
    )
    near = NEAR[run.dtype]
    for c in range(C):
        ov = run.overrides(c)
        xc = x[:, :, c]
        sc = None if s0 is None else [s0[:, c]]
        ref = gradients.reference_gradients(
            NEURON, ov, xc, sc, gO[:, :, c], [gV[:, :, c]], "sigmoid"
        )
        tr = ref["traj"]
        r["s"][:, :, c] = tr["s"]
        r["v"][:, :, c] = tr["state_seq"][0]
        r["over"][:, :, c] = tr["over"]
        r["grad_in"][:, :, c] = ref["grad_in"]
        r["grad_init"][:, c] = ref["grad_init"][0]
        r["grad_w"][c] = ref["grad_param"]["w"]
        r["grad_w_abs"][c] = ref["grad_param_abs"]["w"]
        hit = np.abs(tr["over"].astype(np.float64)) < near
        r["first_near"][:, c] = np.where(
            hit.any(axis=0), np.argmax(hit, axis=0), T
        )
        if T:
            r["fd_w"][c], r["bptt64_w"][c], s64 = channel_fd(
                ov, xc, sc, gO[:, :, c], gV[:, :, c]
            )
            r["f64_spikes_differ"][:, c] = np.any(s64 != tr["s"], axis=0)
    r["near"] = r["first_near"] < T
    return r


def compare_exact(fname, got, want, valid):
    bad = valid & (got.astype(np.float32) != want)
    if bad.any():
        idx = tuple(np.argwhere(bad)[0])
        raise Failure(
            "%s: first mismatch at index %s: got %r, expected %r "
            "(%d mismatching of %d compared)"
            % (
                fname,
                cn.fmt_index(idx),
                float(got[idx]),
                float(want[idx]),
                int(bad.sum()),
                int(valid.sum()),
            )
        )


def compare_w(what, got, want, valid, abs_terms, tol, sum_tol):
    """Per channel: |got - want| <= atol + rtol |want| + sum_tol x the sum
    of the |terms| of the reference's sum."""
    rtol, atol = tol
    lim = atol + rtol * np.abs(want) + sum_tol * abs_terms
    bad = valid & ~(np.abs(got.astype(np.float64) - want) <= lim)
    if bad.any():
        c = int(np.argmax(bad))
        raise Failure(
            "%s: first mismatch at channel %d: got %r, expected %r"
            " (limit %g; %d mismatching of %d compared)"
            % (
                what,
                c,
                float(got[c]),
                float(want[c]),
                float(lim[c]),
                int(bad.sum()),
                int(valid.sum()),
            )
        )


def check(run, out, side_outs, stats):
    T, shape = run.T, run.shape
    arrays = pnp.load_outputs(run.outdir, out, expected(run))
    check_side(run, arrays, side_outs)
    if T == 0:
        for n, a in arrays.items():
            if n.startswith("grad") and np.any(a != 0):
                raise Failure(
                    "%s: T = 0 but it is not zero: %r" % (n, a.tolist())
                )
        return arrays, None
    ref = channel_reference(run)
    near = ref["near"]
    stats["neurons"] += near.size
    stats["cut"] += int(near.sum())
    if np.any(ref["f64_spikes_differ"] & ~near):
        idx = tuple(np.argwhere(ref["f64_spikes_differ"] & ~near)[0])
        raise Failure(
            "test design: the float64 base trajectory of the "
            "finite differences spikes differently from the "
            "float32 one at neuron %s, not near its threshold"
            % cn.fmt_index(idx)
        )

    spikes = arrays["out0.npy"]
    if not np.all((spikes == 0) | (spikes == 1)):
        idx = tuple(np.argwhere((spikes != 0) & (spikes != 1))[0])
        raise Failure(
            "out0.npy: spike %r at index %s is neither 0 nor 1"
            % (float(spikes[idx]), cn.fmt_index(idx))
        )
    # Forward: up to the first step near the threshold.
    fvalid = np.arange(T).reshape((T,) + (1,) * len(shape)) < ref["first_near"]
    compare_exact("out0.npy", spikes, ref["s"], fvalid)
    pnp.compare(
        run,
        "state_seq0.npy",
        arrays["state_seq0.npy"],
        ref["v"],
        fvalid,
        FWD_TOL[run.dtype],
    )
    valid = ~near
    tol = TOL[run.dtype]
    pnp.compare(
        run,
        "grad_in0.npy",
        arrays["grad_in0.npy"],
        ref["grad_in"],
        np.broadcast_to(valid, (T,) + shape),
        tol,
    )
    pnp.compare(
        run,
        "grad_init0.npy",
        arrays["grad_init0.npy"],
        ref["grad_init"],
        valid,
        tol,
    )
    # grad_w[c] sums over the channel's neurons: one near neuron spoils it.
    cvalid = ~np.any(np.moveaxis(near, 1, 0).reshape(run.C, -1), axis=1)
    gw, absw = arrays[W_FILE], ref["grad_w_abs"]
    # The reference's BPTT (on the float64 trajectory) against the finite
    # differences of that trajectory: no rounding between them.
    compare_w(
        "test design: gradients.py's BPTT dL/dw against its finite "
        "differences",
        ref["bptt64_w"],
        ref["fd_w"],
        cvalid,
        absw,
        REF_FD_TOL,
        0.0,
    )
    compare_w(
        W_FILE + " against the BPTT reference",
        gw,
        ref["grad_w"],
        cvalid,
        absw,
        tol,
        SUM_TOL[run.dtype],
    )
    compare_w(
        W_FILE + " against finite differences",
        gw,
        ref["fd_w"],
        cvalid,
        absw,
        tol,
        SUM_TOL[run.dtype],
    )
    stats["channels"] += run.C
    stats["w_compared"] += int(cvalid.sum())
    stats["w_nonzero"] += int(np.sum(cvalid & (ref["grad_w"] != 0)))
    return arrays, ref


def run_and_check(run, rng, tool, nfile, rundir, stats, failures):
    prepare(run, rng, tool, nfile, rundir)
    try:
        out = cg.execute(run.cmd)
        side = [cg.execute(cmd) for _, _, cmd in run.side]
        return check(run, out, side, stats)
    except Failure as e:
        failures.append(
            "FAIL %s\n  %s\n  command: %s\n"
            % (run.describe(), e, shlex.join(run.cmd))
        )
        return None


def make_runs(rng):
    """The train runs of both files; the shape cycles through SHAPES."""
    runs = []

    def add(with_th, flags, T, dtype):
        custom = {}
        if rng.random() < 0.5:
            custom = (
                {"v_reset": "-0.1"}
                if with_th
                else {"v_threshold": "0.9", "v_reset": "-0.1"}
            )
        runs.append(
            CRun(
                with_th,
                flags,
                custom,
                T,
                SHAPES[len(runs) % len(SHAPES)],
                dtype,
                with_states=rng.random() >= 0.3,
                with_gout=rng.random() >= 0.25,
                with_gstate=rng.random() >= 0.25,
            )
        )

    for c, (soft, detach, decay) in enumerate(
        itertools.product((False, True), repeat=3)
    ):
        flags = {
            "soft_reset": soft,
            "detach_reset": detach,
            "decay_input": decay,
        }
        for T in (0, 1, 7):
            add(False, flags, T, "float32")
        if c % 2 == 0:
            add(False, flags, 7, "float16")
        if c == 3:
            add(False, flags, 0, "float16")
        if c == 6:
            add(False, flags, 1, "float16")
    for c, (soft, detach) in enumerate(
        itertools.product((False, True), repeat=2)
    ):
        flags = {
            "soft_reset": soft,
            "detach_reset": detach,
            "decay_input": c % 3 == 0,
        }
        add(True, flags, 7, "float32")
        if c == 1:
            add(True, flags, 7, "float16")
        if c == 2:
            add(True, flags, 0, "float32")
        if c == 3:
            add(True, flags, 1, "float32")
    return runs


# ---------------------------------------------------------------------------
# Uniform per-channel values.


def check_uniform(rng, tool, files, workdir, stats, failures):
    """A uniform w (and v_threshold) against plif.mlir's scalar --param on
    the flattened inputs; one VALUE against an array full of it. Returns
    the number of cases."""
    plain = files["plain"]
    n = 0
    cases = [
        (
            False,
            {"soft_reset": False, "detach_reset": False, "decay_input": True},
            "0.3",
            None,
            (2, 3, 2, 5),
        ),
        (
            False,
            {"soft_reset": True, "detach_reset": False, "decay_input": False},
            "-1.2",
            None,
            (2, 3),
        ),
        (
            False,
            {"soft_reset": True, "detach_reset": True, "decay_input": True},
            "1.7",
            None,
            (1, 4, 6),
        ),
        (
            True,
            {"soft_reset": False, "detach_reset": True, "decay_input": True},
            "0.6",
            "0.85",
            (2, 3, 2, 5),
        ),
    ]
    for i, (with_th, flags, w, th, shape) in enumerate(cases):
        run = CRun(
            with_th,
            flags,
            {},
            7,
            shape,
            "float32",
            True,
            True,
            True,
            w_value=w,
            th_value=th,
        )
        rundir = os.path.join(workdir, "uniform-%d" % i)
        n += 1
        nfile = files["w_th" if with_th else "w"]
        checked = run_and_check(run, rng, tool, nfile, rundir, stats, failures)
        if checked is None:
            continue
        mine, ref = checked
        # The scalar neuron sees the same neurons as [T, N] and [N].
        N = int(np.prod(shape))
        d = os.path.join(rundir, "plain")
        flat = {
            "x": run.x.reshape(run.T, N),
            "s0": run.states[0].reshape(N),
            "gout": run.gout.reshape(run.T, N),
            "gstate0": run.gstate[0].reshape(run.T, N),
        }
        args = [
            "--input=@" + run.save("flat-x", flat["x"]),
            "--state=@" + run.save("flat-s0", flat["s0"]),
            "--grad-output=@" + run.save("flat-gout", flat["gout"]),
            "--grad-state=@" + run.save("flat-gstate0", flat["gstate0"]),
        ]
        args += [
            "--param=%s=%s" % (k, cn.spell_flag(v, False))
            for k, v in flags.items()
        ]
        args.append("--param=w=" + w)
        if th is not None:
            args.append("--param=v_threshold=" + th)
        cmd = [tool, plain, "--variant=train"] + args + ["--output-dir=" + d]
        try:
            out = cg.execute(cmd)
            seq, dt = (run.T, N), np.dtype(np.float32)
            got = pnp.load_outputs(
                d,
                out,
                {
                    "out0.npy": (seq, dt),
                    "state_seq0.npy": (seq, dt),
                    "grad_in0.npy": (seq, dt),
                    "grad_init0.npy": ((N,), dt),
                    W_FILE: ((), dt),
                },
            )
            what = "of per_channel w = %s%s and of plif.mlir with --param" % (
                w,
                "" if th is None else ", v_threshold = " + th,
            )
            for fn in ("out0.npy", "state_seq0.npy"):
                pnp.same_bits(
                    "%s %s" % (fn, what),
                    mine[fn].reshape(got[fn].shape),
                    got[fn],
                    cmd,
                )
            for fn in ("grad_in0.npy", "grad_init0.npy"):
                pnp.compare(
                    run,
                    fn + " " + what,
                    mine[fn].reshape(got[fn].shape),
                    got[fn].astype(np.float64),
                    np.ones(got[fn].shape, bool),
                    TOL["float32"],
                )
            # Summation order differs: the float32 sum tolerance.
            total = mine[W_FILE].astype(np.float64).sum()
            want = float(got[W_FILE])
            lim = (
                TOL["float32"][1]
                + TOL["float32"][0] * abs(want)
                + SUM_TOL["float32"] * float(ref["grad_w_abs"].sum())
            )
            if not abs(total - want) <= lim:
                raise Failure(
                    "sum over channels of %s %s: %r vs %r "
                    "(limit %g)" % (W_FILE, what, total, want, lim)
                )
        except Failure as e:
            failures.append(
                "FAIL %s, against plif.mlir\n  %s\n  command: "
                "%s\n" % (run.describe(), e, shlex.join(cmd))
            )

    # One value on the command line = an array full of it.
    for i, (with_th, dtype, shape) in enumerate(
        [(False, "float32", (2, 1, 2, 5)), (True, "float16", (2, 3))]
    ):
        run = CRun(
            with_th,
            {"soft_reset": i == 1, "detach_reset": False, "decay_input": True},
            {},
            7,
            shape,
            dtype,
            True,
            True,
            True,
            w_value="0.8",
            th_value="0.9" if with_th else None,
        )
        rundir = os.path.join(workdir, "broadcast-%d" % i)
        n += 1
        nfile = files["w_th" if with_th else "w"]
        if (
            run_and_check(run, rng, tool, nfile, rundir, stats, failures)
            is None
        ):
            continue
        values = ["--param=w=0.8"] + (
            ["--param=v_threshold=0.9"] if with_th else []
        )
        for variant in ("train", "inference"):
            d = os.path.join(rundir, "scalar-" + variant)
            cmd = (
                [tool, nfile, "--variant=" + variant]
                + values
                + run.common
                + (run.grads if variant == "train" else [])
                + ["--output-dir=" + d]
            )
            try:
                out = cg.execute(cmd)
                want = expected(run)
                if variant == "inference":
                    want = {k: want[k] for k in ("out0.npy", "state_seq0.npy")}
                got = pnp.load_outputs(d, out, want)
                for fn in want:
                    pnp.same_bits(
                        "%s of %s (%s) and of arrays full of them"
                        % (fn, " ".join(values), variant),
                        got[fn],
                        np.load(os.path.join(run.outdir, fn)),
                        cmd,
                    )
            except Failure as e:
                failures.append(
                    "FAIL %s, against %s\n  %s\n"
                    % (run.describe(), " ".join(values), e)
                )
    return n


# ---------------------------------------------------------------------------
# Bad arguments.


def check_errors(tool, files, workdir, failures):
    d = os.path.join(workdir, "errors")
    os.makedirs(d)

    def save(name, a):
        p = os.path.join(d, name + ".npy")
        np.save(p, a)
        return p

    # Inputs (and their incoming gradients, for train).
    x = {
        name: (
            save("x-" + name, np.full(shp, 0.9, dt)),
            save("g-" + name, np.ones(shp, dt)),
        )
        for name, shp, dt in [
            ("btc", (4, 2, 3), np.float32),
            ("btc16", (4, 2, 3), np.float16),
            ("bchw", (4, 2, 3, 2, 5), np.float32),
            ("tn", (4, 6), np.float32),
            ("t", (4,), np.float32),
        ]
    }
    w3 = np.linspace(-1, 1, 3).astype(np.float32)
    ok3 = save("w3", w3)
    expect = "expected float32(3,) (one value per channel), got "
    rank = (
        "has per_channel parameters, so its inputs are [T, B, C, ...] "
        "(the channel is dimension 2), got "
    )
    scalar = ": an array is for per_neuron and per_channel parameters; "
    cases = [  # (what, file, input, [--param...], message)
        (
            "float16 w, float32 inputs",
            "w",
            "btc",
            ["w=@" + save("w16", w3.astype(np.float16))],
            "--param w: " + expect + "float16(3,)",
        ),
        (
            "float16 w, float16 inputs",
            "w",
            "btc16",
            ["w=@" + os.path.join(d, "w16.npy")],
            "--param w: " + expect + "float16(3,)",
        ),
        (
            "uint8 w",
            "w",
            "btc",
            ["w=@" + save("wu8", np.ones(3, np.uint8))],
            "--param w: " + expect + "uint8(3,)",
        ),
        (
            "w of shape [C + 1]",
            "w",
            "btc",
            ["w=@" + save("w4", np.zeros(4, np.float32))],
            "--param w: " + expect + "float32(4,)",
        ),
        (
            "w of shape [1] for C = 3",
            "w",
            "btc",
            ["w=@" + save("w1", np.zeros(1, np.float32))],
            "--param w: " + expect + "float32(1,)",
        ),
        (
            "w of shape [B, C]",
            "w",
            "btc",
            ["w=@" + save("w23", np.zeros((2, 3), np.float32))],
            "--param w: " + expect + "float32(2, 3)",
        ),
        (
            "w of the neuron shape [B, C, H, W]",
            "w",
            "bchw",
            ["w=@" + save("w2325", np.zeros((2, 3, 2, 5), np.float32))],
            "--param w: " + expect + "float32(2, 3, 2, 5)",
        ),
        (
            "0-d w",
            "w",
            "btc",
            ["w=@" + save("w0d", np.float32(0.5))],
            "--param w: " + expect + "float32()",
        ),
        (
            "an array for the scalar v_reset",
            "w",
            "btc",
            ["v_reset=@" + ok3],
            "--param v_reset" + scalar + "'v_reset' is a scalar",
        ),
        (
            "an array for w of the unmodified plif.mlir",
            "plain",
            "btc",
            ["w=@" + ok3],
            "--param w" + scalar + "'w' is a scalar",
        ),
        (
            "inputs [T, N], w array",
            "w",
            "tn",
            ["w=@" + ok3],
            "--input #0: @plif " + rank + "(4, 6)",
        ),
        (
            "inputs [T, N], w default",
            "w",
            "tn",
            [],
            "--input #0: @plif " + rank + "(4, 6)",
        ),
        (
            "inputs [T]",
            "w",
            "t",
            ["w=0.5"],
            "--input #0: @plif " + rank + "(4,)",
        ),
        (
            "v_threshold of shape [C + 1]",
            "w_th",
            "btc",
            ["w=@" + ok3, "v_threshold=@" + os.path.join(d, "w4.npy")],
            "--param v_threshold: " + expect + "float32(4,)",
        ),
        (
            "float16 v_threshold",
            "w_th",
            "btc",
            ["v_threshold=@" + os.path.join(d, "w16.npy")],
            "--param v_threshold: " + expect + "float16(3,)",
        ),
        (
            "inputs [T, N], v_threshold VALUE",
            "w_th",
            "tn",
            ["v_threshold=0.9"],
            "--input #0: @plif " + rank + "(4, 6)",
        ),
        (
            "w given twice, an array then a value",
            "w",
            "btc",
            ["w=@" + ok3, "w=0.8"],
            "--param w: given twice ('w=@" + ok3 + "' and 'w=0.8')",
        ),
    ]
    n = 0
    for i, (what, fkey, xin, params, message) in enumerate(cases):
        xpath, gpath = x[xin]
        for variant in ("train", "inference"):
            n += 1
            outdir = os.path.join(d, "out-%d-%s" % (i, variant))
            os.makedirs(outdir)
            cmd = (
                [
                    tool,
                    files[fkey],
                    "--variant=" + variant,
                    "--input=@" + xpath,
                ]
                + ["--param=" + p for p in params]
                + (["--grad-output=@" + gpath] if variant == "train" else [])
                + ["--output-dir=" + outdir]
            )
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
            elif message not in errs[0]:
                problem = "the error does not say %r" % message
            elif os.listdir(outdir):
                problem = "wrote %s" % sorted(os.listdir(outdir))
            if problem:
                failures.append(
                    "FAIL %s, %s: %s; output %r\n  command: %s\n"
                    % (what, variant, problem, msg, shlex.join(cmd))
                )
    return n


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--neuron-file", required=True, help="lib/Neurons/plif.mlir"
    )
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()

    tool = cn.find_tool()
    shutil.rmtree(args.workdir, ignore_errors=True)
    os.makedirs(args.workdir)
    plain = os.path.abspath(args.neuron_file)
    files = {
        "plain": plain,
        "w": make_neuron_file(plain, args.workdir, "plif_w.mlir", [W_DECL]),
        "w_th": make_neuron_file(
            plain, args.workdir, "plif_w_th.mlir", [W_DECL, TH_DECL]
        ),
    }
    rng = np.random.default_rng([zlib.crc32(b"per_channel"), args.seed])
    stats = {
        "neurons": 0,
        "cut": 0,
        "channels": 0,
        "w_compared": 0,
        "w_nonzero": 0,
    }
    failures = []
    runs = make_runs(rng)
    for i, run in enumerate(runs):
        run_and_check(
            run,
            rng,
            tool,
            files["w_th" if run.with_th else "w"],
            os.path.join(args.workdir, "run-%03d" % i),
            stats,
            failures,
        )
    n_uniform = check_uniform(rng, tool, files, args.workdir, stats, failures)
    n_errors = check_errors(tool, files, args.workdir, failures)
    for f in failures:
        print(f)
    msg = (
        "%d of %d neurons came near their threshold and were left out; "
        "dL/dw compared in %d of %d channels, %d of them non-zero"
        % (
            stats["cut"],
            stats["neurons"],
            stats["w_compared"],
            stats["channels"],
            stats["w_nonzero"],
        )
    )
    too_near = (
        stats["cut"] >= MAX_NEAR_FRACTION * stats["neurons"]
        or 4 * stats["w_compared"] < 3 * stats["channels"]
    )
    if too_near:
        print(
            "FAIL per_channel: %s (limits: %.0f%% of the neurons, a "
            "quarter of the channels)" % (msg, 100 * MAX_NEAR_FRACTION)
        )
    total = len(runs) + n_uniform + n_errors
    if failures:
        print(
            "per_channel w: %d of %d runs and cases FAILED"
            % (len(failures), total)
        )
    if failures or too_near:
        return 1
    print(
        "per_channel w: %d train runs (each with inference and "
        "final-state), %d uniform-value runs and %d bad-argument cases "
        "passed (%s)" % (len(runs), n_uniform, n_errors, msg)
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
