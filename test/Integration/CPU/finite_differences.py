#!/usr/bin/env python3
"""Checks flexsn-run --variant=train on smooth bodies against central finite
differences of the loss computed from --variant=inference runs.

    finite_differences.py --workdir=DIR

It writes two spike-free neurons into the workdir:

  @smooth   one input, two states (v, u), output y, two trainable
            parameters (leak, gain): tanh, exp, log, log1p, sqrt, pow, erf,
            atan, sin, cos, fma, division and negation, no select;
  @clamped  two inputs (x, z), one state, two outputs (y, m), a trainable
            floor: maximumf, minimumf, maxnumf, minnumf, absf and a
            cmpf + select, evaluated away from their ties (neurons whose
            compared operands come within MARGIN of each other, found with
            a NumPy model of the body, are dropped before the runs).

For each it draws float32 inputs, initial states and incoming gradients of
the outputs and state sequences, runs the train variant, and compares
grad_in<k>, grad_init<i> and grad_param_<name> with central differences
(L(+eps) - L(-eps)) / (actual float32 step) of

    L = sum_k <grad_output_k, out_k> + sum_s <grad_state_s, state_seq_s>

computed in float64 from the inference outputs, at eps = 2^-6 and 2^-7,
Richardson-extrapolated ((4 D(eps/2) - D(eps)) / 3, truncation error
~eps^4). The neurons are independent, so perturbing one input step (or one
initial state) for all neurons at once gives every neuron's derivative from
a few runs; a parameter is shared, its derivative is that of the summed
loss. Tolerance |fd - grad| <= 2e-4 + 1e-3 |grad| (the float32 rounding of
the outputs divided by the step dominates).
"""

import argparse
import os
import shlex
import shutil
import subprocess
import sys

import numpy as np

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import check_neurons as cn  # noqa: E402

EPS = 2.0**-6
RTOL, ATOL = 1e-3, 2e-4
MARGIN = 0.05
MIN_COMPARED = 0.3  # fraction of the neurons of @clamped kept, at least

SMOOTH = """\
// Spike-free: a leaky integrator through smooth math, two trainables.
flexsn.neuron @smooth inputs(%x: f32) states(%v: f32, %u: f32) outputs(y)
    params(%leak: f32 = 0.3 trainable, %gain: f32 = 1.5 trainable,
           %c: f32 = 0.5) {
  %one = arith.constant 1.0 : f32
  %two = arith.constant 2.0 : f32
  %tenth = arith.constant 0.1 : f32
  %quarter = arith.constant 0.25 : f32
  %gx = arith.mulf %gain, %x : f32
  %drive = math.tanh %gx : f32
  %d = arith.subf %drive, %v : f32
  %ld = arith.mulf %leak, %d : f32
  %v1 = arith.addf %v, %ld : f32
  %su = math.sin %u : f32
  %v_next = math.fma %tenth, %su, %v1 : f32
  %nl = arith.negf %leak : f32
  %e = math.exp %nl : f32
  %ue = arith.mulf %u, %e : f32
  %vv = arith.mulf %v, %v : f32
  %lp = math.log1p %vv : f32
  %xx = arith.mulf %x, %x : f32
  %xx1 = arith.addf %one, %xx : f32
  %sq = math.sqrt %xx1 : f32
  %q = arith.divf %lp, %sq : f32
  %pw = math.powf %xx1, %quarter : f32
  %lg = math.log %pw : f32
  %erfv = math.erf %v : f32
  %lge = arith.mulf %lg, %erfv : f32
  %u_next0 = arith.addf %ue, %q : f32
  %u_next = arith.subf %u_next0, %lge : f32
  %cu = arith.mulf %c, %u_next : f32
  %ncu = arith.negf %cu : f32
  %ex = math.exp %ncu : f32
  %den = arith.addf %one, %ex : f32
  %y0 = arith.divf %v_next, %den : f32
  %at = math.atan %x : f32
  %co = math.cos %v : f32
  %y1 = arith.mulf %at, %co : f32
  %y2 = arith.addf %y0, %y1 : f32
  %y = arith.mulf %y2, %two : f32
  flexsn.yield %y, %v_next, %u_next : f32, f32, f32
}
"""

CLAMPED = """\
// Spike-free, piecewise: max/min/abs/select, two inputs and two outputs.
flexsn.neuron @clamped inputs(%x: f32, %z: f32) states(%v: f32)
    outputs(y, m)
    params(%floor: f32 = -0.3 trainable, %ceil: f32 = 1.2,
           %decay: f32 = 0.8) {
  %tenth = arith.constant 0.1 : f32
  %nine = arith.constant 0.9 : f32
  %cap = arith.constant 2.0 : f32
  %vd = arith.mulf %v, %decay : f32
  %h = arith.addf %vd, %x : f32
  %lo = arith.maximumf %h, %floor : f32
  %hi = arith.minimumf %lo, %ceil : f32
  %a = math.absf %z : f32
  %m1 = arith.maxnumf %a, %hi : f32
  %m = arith.minnumf %m1, %cap : f32
  %zh = arith.mulf %z, %h : f32
  %hz = arith.subf %h, %z : f32
  %gt = arith.cmpf ogt, %z, %h : f32
  %sel = arith.select %gt, %zh, %hz : f32
  %keep = arith.mulf %hi, %nine : f32
  %v_next = math.fma %tenth, %sel, %keep : f32
  %y = arith.mulf %m, %z : f32
  flexsn.yield %y, %m, %v_next : f32, f32, f32
}
"""


PAIRS = (
    "h vs floor",
    "max(h, floor) vs ceil",
    "z vs 0",
    "|z| vs hi",
    "max(|z|, hi) vs 2",
    "z vs h",
)


def clamped_margin(x, z, v0, floor=-0.3, ceil=1.2, decay=0.8):
    """NumPy model of @clamped's body (float64). Returns ([N...] smallest
    distance between the operands of its max/min/abs/cmpf over the steps,
    {pair: [T, N...] signed difference of its operands}, [T, N...] v)."""
    v = v0.astype(np.float64)
    marg = np.full(v.shape, np.inf)
    diffs = {p: [] for p in PAIRS}
    vs = []
    for t in range(x.shape[0]):
        h = v * decay + x[t]
        lo = np.maximum(h, floor)
        hi = np.minimum(lo, ceil)
        a = np.abs(z[t])
        m1 = np.maximum(a, hi)
        for name, (p, q) in zip(
            PAIRS,
            (
                (h, floor),
                (lo, ceil),
                (z[t], 0.0),
                (a, hi),
                (m1, 2.0),
                (z[t], h),
            ),
        ):
            marg = np.minimum(marg, np.abs(p - q))
            diffs[name].append(p - q)
        sel = np.where(z[t] > h, z[t] * h, h - z[t])
        v = 0.1 * sel + hi * 0.9
        vs.append(v)
    return marg, {k: np.array(d) for k, d in diffs.items()}, np.array(vs)


class Failure(Exception):
    pass


def f32_str(val):
    return repr(float(np.float32(val)))


class Case:
    """One neuron and its drawn inputs, initial states and gradients."""

    def __init__(
        self,
        name,
        text,
        n_inputs,
        states,
        outputs,
        params,
        trainable,
        T,
        shape,
        rng,
        with_gstate,
        with_state_flag,
    ):
        self.name, self.T, self.shape = name, T, shape
        self.trainable = trainable
        self.text = text
        self.states, self.outputs = states, outputs
        self.params = {k: np.float32(v) for k, v in params.items()}
        seq = (T,) + shape
        if name == "clamped":
            x = rng.normal(0.3, 0.8, seq)
            z = rng.normal(0.0, 1.0, seq)
            z = np.sign(z) * (0.1 + np.abs(z))
            self.inputs = [x.astype(np.float32), z.astype(np.float32)]
        else:
            self.inputs = [
                rng.normal(0.0, 1.2, seq).astype(np.float32)
                for _ in range(n_inputs)
            ]
        self.with_state_flag = with_state_flag
        if with_state_flag:
            self.init = [
                rng.uniform(-0.5, 0.8, shape).astype(np.float32)
                for _ in states
            ]
        else:
            self.init = [np.zeros(shape, np.float32) for _ in states]
        if name == "clamped":
            # Keep the neurons (1-D) whose max/min/abs/cmpf operands stay
            # MARGIN apart: the finite differences then see one branch.
            assert len(shape) == 1
            marg, diffs, _ = clamped_margin(
                self.inputs[0],
                self.inputs[1],
                self.init[0],
                float(self.params["floor"]),
                float(self.params["ceil"]),
                float(self.params["decay"]),
            )
            keep = marg >= MARGIN
            if keep.mean() < MIN_COMPARED:
                raise Failure(
                    "test design: only %d of %d neurons stay %g "
                    "away from ties" % (keep.sum(), keep.size, MARGIN)
                )
            # Both sides of every max/min/abs/cmpf are taken.
            for name, d in diffs.items():
                if not (np.any(d[:, keep] > 0) and np.any(d[:, keep] < 0)):
                    raise Failure("test design: %s: one side only" % name)
            self.inputs = [
                np.ascontiguousarray(a[:, keep]) for a in self.inputs
            ]
            self.init = [a[keep] for a in self.init]
            self.shape = shape = (int(keep.sum()),)
            seq = (T,) + shape
        self.gout = [rng.normal(0, 1, seq).astype(np.float32) for _ in outputs]
        self.gstate = (
            [rng.normal(0, 1, seq).astype(np.float32) for _ in states]
            if with_gstate
            else None
        )


class Runner:
    def __init__(self, tool, case, workdir):
        self.tool, self.case, self.dir = tool, case, workdir
        self.path = os.path.join(workdir, case.name + ".mlir")
        with open(self.path, "w") as f:
            f.write(case.text)
        self.count = 0

    def run(self, variant, inputs, init, params, grads=False):
        """Runs flexsn-run; returns ({file: array}, command)."""
        c = self.case
        self.count += 1
        d = os.path.join(self.dir, "%s-%03d" % (c.name, self.count))
        out = os.path.join(d, "out")
        os.makedirs(out)
        cmd = [self.tool, self.path, "--variant=" + variant]

        def save(name, a):
            p = os.path.join(d, name + ".npy")
            np.save(p, a)
            return "@" + p

        cmd += ["--input=" + save("x%d" % k, a) for k, a in enumerate(inputs)]
        if c.with_state_flag or init is not c.init:
            cmd += [
                "--state=" + save("s%d" % i, a) for i, a in enumerate(init)
            ]
        cmd += ["--param=%s=%s" % (k, f32_str(v)) for k, v in params.items()]
        if grads:
            cmd += [
                "--grad-output=" + save("go%d" % k, g)
                for k, g in enumerate(c.gout)
            ]
            if c.gstate is not None:
                cmd += [
                    "--grad-state=" + save("gs%d" % i, g)
                    for i, g in enumerate(c.gstate)
                ]
        cmd.append("--output-dir=" + out)
        p = subprocess.run(
            cmd,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            timeout=300,
        )
        if p.returncode != 0:
            raise Failure(
                "flexsn-run exited with %d: %s\n  command: %s"
                % (p.returncode, p.stdout.strip(), shlex.join(cmd))
            )
        return (
            {
                n: np.load(os.path.join(out, n), allow_pickle=False)
                for n in os.listdir(out)
            },
            cmd,
        )

    def loss(self, inputs, init, params):
        """Per-neuron loss [N...] in float64 from an inference run."""
        c = self.case
        files, _ = self.run("inference", inputs, init, params)
        L = np.zeros(c.shape)
        for k, g in enumerate(c.gout):
            L += np.sum(
                g.astype(np.float64)
                * files["out%d.npy" % k].astype(np.float64),
                axis=0,
            )
        for i, g in enumerate(c.gstate or []):
            L += np.sum(
                g.astype(np.float64)
                * files["state_seq%d.npy" % i].astype(np.float64),
                axis=0,
            )
        return L


WORST = [0.0]  # largest |fd - grad| / (ATOL + RTOL |grad|) seen


def compare(what, got, fd, valid):
    ratio = np.abs(fd - got) / (ATOL + RTOL * np.abs(got))
    WORST[0] = max(WORST[0], float(np.max(np.where(valid, ratio, 0.0))))
    bad = valid & ~(np.abs(fd - got) <= ATOL + RTOL * np.abs(got))
    if np.any(bad):
        idx = tuple(np.argwhere(bad)[0]) if bad.ndim else ()
        raise Failure(
            "%s: first mismatch at %s: flexsn-run %r, finite "
            "difference %r (%d of %d compared mismatch)"
            % (
                what,
                cn.fmt_index(idx),
                float(got[idx]),
                float(fd[idx]),
                int(np.sum(bad)),
                int(np.sum(valid)),
            )
        )


def check_case(tool, case, workdir):
    r = Runner(tool, case, workdir)
    c = case
    files, cmd = r.run("train", c.inputs, c.init, c.params, grads=True)
    want = ["out%d.npy" % k for k in range(len(c.outputs))]
    want += ["state_seq%d.npy" % i for i in range(len(c.states))]
    want += ["grad_in%d.npy" % k for k in range(len(c.inputs))]
    want += ["grad_init%d.npy" % i for i in range(len(c.states))]
    want += ["grad_param_%s.npy" % n for n in c.trainable]
    if sorted(files) != sorted(want):
        raise Failure(
            "train wrote %s, expected %s\n  command: %s"
            % (sorted(files), sorted(want), shlex.join(cmd))
        )
    valid = np.ones(c.shape, bool)
    if c.name == "clamped":
        # The NumPy model that chose the neurons away from ties is the body.
        _, _, v = clamped_margin(
            c.inputs[0],
            c.inputs[1],
            c.init[0],
            float(c.params["floor"]),
            float(c.params["ceil"]),
            float(c.params["decay"]),
        )
        got = files["state_seq0.npy"].astype(np.float64)
        if not np.allclose(got, v, rtol=1e-5, atol=1e-5):
            raise Failure(
                "@clamped's v differs from its NumPy model by %g"
                % float(np.max(np.abs(got - v)))
            )

    def richardson(loss_at):
        """Central differences at EPS and EPS/2, extrapolated:
        (4 D(EPS/2) - D(EPS)) / 3. loss_at(e) returns (L(+e), L(-e),
        actual float32 step); the loss is per neuron."""
        d = []
        for e in (EPS, EPS / 2):
            Lp, Lm, step = loss_at(np.float32(e))
            d.append((Lp - Lm) / step)
        return (4 * d[1] - d[0]) / 3

    def input_loss(k, t):
        def at(e):
            xp = [a.copy() for a in c.inputs]
            xm = [a.copy() for a in c.inputs]
            xp[k][t] += e
            xm[k][t] -= e
            return (
                r.loss(xp, c.init, c.params),
                r.loss(xm, c.init, c.params),
                xp[k][t].astype(np.float64) - xm[k][t],
            )

        return at

    def state_loss(i):
        def at(e):
            sp = [a.copy() for a in c.init]
            sm = [a.copy() for a in c.init]
            sp[i] += e
            sm[i] -= e
            return (
                r.loss(c.inputs, sp, c.params),
                r.loss(c.inputs, sm, c.params),
                sp[i].astype(np.float64) - sm[i],
            )

        return at

    def param_loss(n):
        def at(e):
            pp, pm = dict(c.params), dict(c.params)
            pp[n] = np.float32(c.params[n] + e)
            pm[n] = np.float32(c.params[n] - e)
            # The parameter is shared: the derivative of the summed loss.
            return (
                np.sum(r.loss(c.inputs, c.init, pp)),
                np.sum(r.loss(c.inputs, c.init, pm)),
                float(pp[n]) - float(pm[n]),
            )

        return at

    try:
        for k in range(len(c.inputs)):
            for t in range(c.T):
                compare(
                    "grad_in%d.npy[%d]" % (k, t),
                    files["grad_in%d.npy" % k][t].astype(np.float64),
                    richardson(input_loss(k, t)),
                    valid,
                )
        for i in range(len(c.states)):
            compare(
                "grad_init%d.npy" % i,
                files["grad_init%d.npy" % i].astype(np.float64),
                richardson(state_loss(i)),
                valid,
            )
        for n in c.trainable:
            compare(
                "grad_param_%s.npy" % n,
                files["grad_param_%s.npy" % n].astype(np.float64),
                np.array(richardson(param_loss(n))),
                np.array(True),
            )
    except Failure as e:
        raise Failure("%s\n  train command: %s" % (e, shlex.join(cmd)))
    return r.count


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workdir", required=True)
    args = ap.parse_args()
    tool = cn.find_tool()
    shutil.rmtree(args.workdir, ignore_errors=True)
    os.makedirs(args.workdir)
    rng = np.random.default_rng(2024)
    try:
        cases = [
            Case(
                "smooth",
                SMOOTH,
                1,
                ["v", "u"],
                ["y"],
                {"leak": 0.3, "gain": 1.5, "c": 0.5},
                ["leak", "gain"],
                4,
                (4, 7),
                rng,
                with_gstate=True,
                with_state_flag=True,
            ),
            # No --state (zeros) and no --grad-state (zeros) in the train
            # run; the initial state is still perturbed through --state.
            Case(
                "clamped",
                CLAMPED,
                2,
                ["v"],
                ["y", "m"],
                {"floor": -0.3, "ceil": 1.2, "decay": 0.8},
                ["floor"],
                4,
                (71,),
                rng,
                with_gstate=False,
                with_state_flag=False,
            ),
        ]
    except Failure as e:
        print("FAIL: %s" % e)
        return 1
    failures = []
    runs = 0
    for c in cases:
        try:
            runs += check_case(tool, c, args.workdir)
        except Failure as e:
            failures.append(
                "FAIL @%s (T=%d N=%s): %s" % (c.name, c.T, c.shape, e)
            )
    for f in failures:
        print(f)
    if failures:
        print("finite differences: FAILED")
        return 1
    print(
        "finite differences: @smooth N=%s and @clamped N=%s gradients "
        "match (%d flexsn-run calls; largest error %.2f of the tolerance)"
        % (cases[0].shape, cases[1].shape, runs, WORST[0])
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
