#!/usr/bin/env python3
"""NumPy references of the BPTT gradients of the neurons FlexSN ships
(docs/Semantics.md); the surrogate derivatives g(x) are the numerics
oracle's (test/Oracle/surrogate_oracle.py) on NumPy arrays.

Written from docs/Semantics.md, independently of the .mlir bodies and of the
compiler's autodiff. The forward pass runs in the dtype asked for (float32
for the references: the spikes and h then are those of a float32 kernel,
bit for bit those of reference.py, which the self-test checks); the
backward pass runs in float64 on the float32 forward values.

Loss: L = sum_t <gS_t, s_t> + sum_i sum_t <gState_i_t, state_i_t> (absent
gradients are zeros). With psi_t = g(h_t - v_threshold), s_d = detach(s)
when detach_reset, the one-state neurons (IF, LIF, PLIF, QIF, EIF) follow
SPEC's recurrence, G = dL/dh carried backwards from G_T = 0:

    G_t    = gS_t psi_t + (gV_t + G_{t+1} dh_{t+1}/dv_t) dv_t/dh_t
    gX_t   = G_t dh_t/dx_t
    gVinit = G_0 dh_0/dv_init
    dL/dw  = sum_t sum_n G_t dh_t/dw            (PLIF, 1/tau = k = sigmoid(w))

    dv/dh = 1 - s + (v_reset - h) psi   hard, not detached
            1 - s                       hard, detached
            1 - v_th psi                soft, not detached
            1                           soft, detached

with the partial derivatives of the charge written out per neuron below
(partials_1state). Izhikevich (v, w) and CUBA-LIF (c, v) have their own
hand-derived adjoints (bptt_izhikevich, bptt_cuba_lif).

Run with --self-test to check the references: the float32 forward against
reference.py; the backward against central finite differences (float64) of
the forward with (a) the spike replaced by a steep sigmoid and (b) the spike
replaced, around the Heaviside trajectory, by its surrogate linearization
s_b + g(x_b) (x - x_b), for every neuron, flag combination and surrogate
(detach = the reset's spike frozen at its base value); and every g against
finite differences of its primitive or hand-computed values.
"""

import math
import os
import sys

import numpy as np

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import reference  # noqa: E402 (which puts test/Oracle on the path)
import neuron_oracle as oracle  # noqa: E402
import surrogate_oracle  # noqa: E402

STATES = reference.STATES
DEFAULTS = reference.DEFAULTS
flags_of = reference.flags_of
TRAINABLE = {"plif": ["w"]}  # trainable parameters, by neuron

# ---------------------------------------------------------------------------
# Surrogates, docs/Semantics.md table (default parameters). x: float64 array.

_SQRT_PI = math.sqrt(math.pi)
_erf = np.vectorize(math.erf, otypes=[np.float64])  # the self-test's


class _SurrogateOps:
    """The surrogate oracle's ops (test/Oracle/surrogate_oracle.py) on
    NumPy arrays."""

    exp, cos, abs = (
        staticmethod(np.exp),
        staticmethod(np.cos),
        staticmethod(np.abs),
    )
    where, maximum = staticmethod(np.where), staticmethod(np.maximum)
    minimum, ones_like = staticmethod(np.minimum), staticmethod(np.ones_like)


def _sig(z):
    return surrogate_oracle.sigmoid(_SurrogateOps, z)


def _g_sigmoid(x, a=4.0):
    return surrogate_oracle.g(
        _SurrogateOps, "sigmoid", np.asarray(x, np.float64), alpha=a
    )


SURROGATES = {
    name: (
        lambda x, name=name: surrogate_oracle.g(
            _SurrogateOps, name, np.asarray(x, np.float64)
        )
    )
    for name in surrogate_oracle.DEFAULTS
}

# Points other than x = 0 where g jumps (default parameters): a neuron whose
# h - v_threshold comes near one of them may legitimately get a different g.
DISCONTINUITIES = {
    "piecewise_leaky_relu": [-1.0, 1.0],
    "rect": [-0.5, 0.5],
}


def surrogate_g(name, x):
    return np.asarray(SURROGATES[name](np.asarray(x, np.float64)), np.float64)


def _g_of(surrogate):
    if callable(surrogate):
        return lambda x: np.asarray(
            surrogate(np.asarray(x, np.float64)), np.float64
        )
    return lambda x: surrogate_g(surrogate, x)


# ---------------------------------------------------------------------------
# Forward pass (dtype generic).


def _params(neuron, overrides, dt):
    """Defaults updated by overrides; numbers in dtype dt, flags as bool."""
    p = dict(DEFAULTS[neuron])
    for k, v in (overrides or {}).items():
        if k not in p:
            raise KeyError("neuron %s has no parameter %r" % (neuron, k))
        p[k] = v
    dt = np.dtype(dt)
    return {
        k: (bool(v) if k in reference.FLAGS else dt.type(float(v)))
        for k, v in p.items()
    }


class _DtypeOps:
    """The oracle's ops (test/Oracle/neuron_oracle.py) in NumPy dtype `dt`."""

    def __init__(self, dt):
        self.scalar = dt.type
        self.one = dt.type(1)

    exp = staticmethod(np.exp)

    def sigmoid(self, w):
        return self.one / (self.one + np.exp(-w))


def heaviside(over, t):
    return (over >= 0).astype(over.dtype)


def forward(
    neuron,
    overrides,
    x,
    states=None,
    dtype=np.float32,
    spike=heaviside,
    frozen_sd=None,
):
    """Runs the neuron over x [T, N...] in `dtype`.

    spike(over, t) gives the spike from h - v_threshold (Heaviside by
    default); frozen_sd [T, N...], if given, replaces the reset's spike s_d
    (the detached spike, frozen for finite differences).

    Returns dict: h, over, s, sd ([T, N...]); prev: list per state of
    [T + 1, N...] (prev[i][t] = state i before step t, prev[i][T] = final);
    state_seq: list of [T, N...].
    """
    dt = np.dtype(dtype)
    p = _params(neuron, overrides, dt)
    x = np.asarray(x).astype(dt)
    T, shape = x.shape[0], x.shape[1:]
    names = STATES[neuron]
    if states is None:
        states = [np.zeros(shape, dt) for _ in names]
    st = {n: np.asarray(s0).astype(dt).copy() for n, s0 in zip(names, states)}
    for n in names:
        assert st[n].shape == shape
    prev = [np.zeros((T + 1,) + shape, dt) for _ in names]
    h_all = np.zeros((T,) + shape, dt)
    over_all = np.zeros((T,) + shape, dt)
    s_all = np.zeros((T,) + shape, dt)
    sd_all = np.zeros((T,) + shape, dt)
    ops = _DtypeOps(dt)
    for t in range(T):
        for i, n in enumerate(names):
            prev[i][t] = st[n]
        h, updated = oracle.charge(ops, neuron, p, x[t], st)
        over = h - p["v_threshold"]
        s = np.asarray(spike(over, t)).astype(dt)
        sd = s if frozen_sd is None else np.asarray(frozen_sd[t]).astype(dt)
        st = oracle.fire_and_reset(neuron, p, st, updated, h, s, sd)
        h_all[t], over_all[t], s_all[t], sd_all[t] = h, over, s, sd
        for a in (h, over, s, sd) + tuple(st.values()):
            assert a.dtype == dt, (a.dtype, dt)
    for i, n in enumerate(names):
        prev[i][T] = st[n]
    return dict(
        h=h_all,
        over=over_all,
        s=s_all,
        sd=sd_all,
        prev=prev,
        state_seq=[pr[1:] for pr in prev],
    )


def loss_per_neuron(traj, grad_out, grad_states):
    """sum over t of <gS, s> + <gState_i, state_i>, per neuron, float64."""
    L = np.sum(
        np.asarray(grad_out, np.float64) * traj["s"].astype(np.float64), axis=0
    )
    for g, seq in zip(grad_states, traj["state_seq"]):
        L = L + np.sum(
            np.asarray(g, np.float64) * seq.astype(np.float64), axis=0
        )
    return L


# ---------------------------------------------------------------------------
# Backward pass (float64).


def _dv_dh(p, s, h, psi):
    """d v' / d h through the reset (docs/Semantics.md); s is the spike
    value."""
    if p["soft_reset"]:
        if p["detach_reset"]:
            return np.ones_like(h)
        return 1.0 - p["v_threshold"] * psi
    if p["detach_reset"]:
        return 1.0 - s
    return 1.0 - s + (p["v_reset"] - h) * psi


def partials_1state(neuron, p, x, v):
    """(dh/dv, dh/dx, {param: dh/dparam}) of the charge at (x, v)."""
    one = np.ones_like(v)
    if neuron == "if":
        return one, one, {}
    if neuron in ("lif", "plif"):
        v_r = 0.0 if p["soft_reset"] else p["v_reset"]
        k = 1.0 / p["tau"] if neuron == "lif" else _sig(p["w"])
        dhdv = (1.0 - k) * one
        if p["decay_input"]:
            dhdx, dhdk = k * one, x - (v - v_r)
        else:
            dhdx, dhdk = one, -(v - v_r)
        if neuron == "plif":
            return dhdv, dhdx, {"w": dhdk * k * (1.0 - k)}
        return dhdv, dhdx, {}
    if neuron == "qif":
        dhdv = 1.0 + p["a0"] * (2 * v - p["v_rest"] - p["v_c"]) / p["tau"]
        return dhdv, one / p["tau"], {}
    if neuron == "eif":
        e = np.exp((v - p["theta_rh"]) / p["delta_T"])
        return 1.0 + (e - 1.0) / p["tau"], one / p["tau"], {}
    raise KeyError(neuron)


def _zeros_or(g, shape):
    return np.zeros(shape) if g is None else np.asarray(g, np.float64)


def bptt(
    neuron,
    overrides,
    x,
    traj,
    grad_out=None,
    grad_states=None,
    surrogate="sigmoid",
):
    """Gradients of L for the forward trajectory `traj` (from forward()).

    grad_out [T, N...] or None; grad_states: list (one per state) of
    [T, N...] or None. Returns dict: grad_in [T, N...], grad_init (list of
    [N...]), grad_param {name: float}, grad_param_abs {name: sum of |terms|}
    (for a summation tolerance), all float64.
    """
    g = _g_of(surrogate)
    # The parameters as the forward pass used them (float32 rounded for a
    # float32 forward), in float64.
    p = {
        k: (v if isinstance(v, bool) else float(v))
        for k, v in _params(neuron, overrides, traj["h"].dtype).items()
    }
    x = np.asarray(x, np.float64)
    T, shape = x.shape[0], x.shape[1:]
    nst = len(STATES[neuron])
    gS = _zeros_or(grad_out, (T,) + shape)
    if grad_states is None:
        grad_states = [None] * nst
    gSt = [_zeros_or(gs, (T,) + shape) for gs in grad_states]
    h = traj["h"].astype(np.float64)
    over = traj["over"].astype(np.float64)
    s = traj["s"].astype(np.float64)
    sd = traj["sd"].astype(np.float64)
    prev = [pr.astype(np.float64) for pr in traj["prev"]]
    gX = np.zeros((T,) + shape)
    if neuron == "izhikevich":
        return _bptt_izhikevich(p, x, h, over, s, sd, prev, gS, gSt, g, gX)
    if neuron == "cuba_lif":
        return _bptt_cuba_lif(p, x, h, over, s, sd, prev, gS, gSt, g, gX)
    # One state: SPEC's recurrence.
    names = TRAINABLE.get(neuron, [])
    gP = {n: 0.0 for n in names}
    gPabs = {n: 0.0 for n in names}
    G_next = np.zeros(shape)  # G_{t+1}
    dhdv_next = np.zeros(shape)  # dh_{t+1}/dv_t
    for t in reversed(range(T)):
        psi = g(over[t])
        dvdh = _dv_dh(p, sd[t], h[t], psi)
        G = gS[t] * psi + (gSt[0][t] + G_next * dhdv_next) * dvdh
        dhdv, dhdx, dhdp = partials_1state(neuron, p, x[t], prev[0][t])
        gX[t] = G * dhdx
        for n in names:
            term = G * dhdp[n]
            gP[n] += float(np.sum(term))
            gPabs[n] += float(np.sum(np.abs(term)))
        G_next, dhdv_next = G, dhdv
    grad_init = [G_next * dhdv_next]
    return dict(
        grad_in=gX, grad_init=grad_init, grad_param=gP, grad_param_abs=gPabs
    )


def _bptt_izhikevich(p, x, h, over, s, sd, prev, gS, gSt, g, gX):
    """Izhikevich, states (v, w):
        h  = v + (x + a0 (v - v_rest)(v - v_c) - w) / tau
        v' = reset(h, s_d)
        w' = w + (a (h - v_rest) - w) / tau_w + b s
    With Av, Aw the total adjoints of v_t, w_t (incoming gV_t, gW_t plus
    what step t + 1 sends back):
        G_t    = gS_t psi + Av_t dv'/dh + Aw_t (a / tau_w + b psi)
        gX_t   = G_t / tau
        back to v_{t-1}: G_t (1 + a0 (2 v_{t-1} - v_rest - v_c) / tau)
        back to w_{t-1}: -G_t / tau + Aw_t (1 - 1 / tau_w)
    """
    tau, tau_w = p["tau"], p["tau_w"]
    back_v = np.zeros(gS.shape[1:])
    back_w = np.zeros(gS.shape[1:])
    for t in reversed(range(gS.shape[0])):
        Av = gSt[0][t] + back_v
        Aw = gSt[1][t] + back_w
        psi = g(over[t])
        G = (
            gS[t] * psi
            + Av * _dv_dh(p, sd[t], h[t], psi)
            + Aw * (p["a"] / tau_w + p["b"] * psi)
        )
        gX[t] = G / tau
        v = prev[0][t]
        back_v = G * (1.0 + p["a0"] * (2 * v - p["v_rest"] - p["v_c"]) / tau)
        back_w = -G / tau + Aw * (1.0 - 1.0 / tau_w)
    return dict(
        grad_in=gX,
        grad_init=[back_v, back_w],
        grad_param={},
        grad_param_abs={},
    )


def _bptt_cuba_lif(p, x, h, over, s, sd, prev, gS, gSt, g, gX):
    """CUBA-LIF, states (c, v):
        c' = c c_decay + x;  h = v v_decay + c';  v' = reset(h, s_d)
    With Ac, Av the total adjoints of c_t, v_t:
        G_t      = gS_t psi + Av_t dv'/dh
        dL/dc'_t = Ac_t + G_t  = gX_t
        back to c_{t-1}: dL/dc'_t c_decay;  back to v_{t-1}: G_t v_decay
    """
    back_c = np.zeros(gS.shape[1:])
    back_v = np.zeros(gS.shape[1:])
    for t in reversed(range(gS.shape[0])):
        Ac = gSt[0][t] + back_c
        Av = gSt[1][t] + back_v
        psi = g(over[t])
        G = gS[t] * psi + Av * _dv_dh(p, sd[t], h[t], psi)
        dc = Ac + G
        gX[t] = dc
        back_c = dc * p["c_decay"]
        back_v = G * p["v_decay"]
    return dict(
        grad_in=gX,
        grad_init=[back_c, back_v],
        grad_param={},
        grad_param_abs={},
    )


def reference_gradients(
    neuron,
    overrides,
    x,
    states=None,
    grad_out=None,
    grad_states=None,
    surrogate="sigmoid",
):
    """Float32 Heaviside forward + float64 BPTT: what flexsn-run's train
    variant should write. Also returns the forward trajectory (traj)."""
    traj = forward(neuron, overrides, x, states, np.float32)
    r = bptt(neuron, overrides, x, traj, grad_out, grad_states, surrogate)
    r["traj"] = traj
    return r


def near_mask(traj, surrogate, near):
    """[N...] bool: neurons whose h - v_threshold came within `near` of 0
    (or of a jump of g) at some step; their spikes or psi may differ."""
    over = traj["over"].astype(np.float64)
    pts = [0.0] + DISCONTINUITIES.get(
        surrogate if isinstance(surrogate, str) else "", []
    )
    m = np.zeros(over.shape[1:], bool)
    for bp in pts:
        m |= np.any(np.abs(over - bp) < near, axis=0)
    return m


# ---------------------------------------------------------------------------
# Self test.

CUSTOM = {  # non-default parameters used by the self-test (and drivers)
    "if": {"v_threshold": 0.8, "v_reset": -0.2},
    "lif": {"tau": 3.0, "v_threshold": 0.9, "v_reset": -0.1},
    "plif": {"w": 0.5, "v_threshold": 0.9, "v_reset": -0.1},
    "qif": {
        "tau": 2.5,
        "v_c": 0.7,
        "a0": 0.8,
        "v_rest": -0.05,
        "v_reset": -0.2,
    },
    "eif": {
        "tau": 2.5,
        "delta_T": 0.8,
        "theta_rh": 0.7,
        "v_rest": 0.05,
        "v_threshold": 1.1,
        "v_reset": -0.2,
    },
    "izhikevich": {
        "tau": 2.5,
        "v_c": 0.7,
        "a0": 0.8,
        "v_rest": -0.05,
        "tau_w": 3.0,
        "a": 0.3,
        "b": 0.2,
        "v_reset": 0.1,
    },
    "cuba_lif": {
        "c_decay": 0.6,
        "v_decay": 0.7,
        "v_threshold": 0.6,
        "v_reset": -0.1,
    },
}
DRIVE, INIT = reference.DRIVE, reference.INIT


def flag_combos(neuron):
    fl = flags_of(neuron)
    for bits in range(2 ** len(fl)):
        yield {f: bool(bits >> i & 1) for i, f in enumerate(fl)}


def _fd_check(
    what,
    neuron,
    overrides,
    x,
    states,
    gO,
    gSt,
    run,
    want,
    eps=1e-5,
    rtol=1e-6,
    atol=1e-8,
):
    """Central differences of the per-neuron loss of run(overrides, x,
    states) against want (a bptt() result)."""

    def L(ov, xx, ss):
        return loss_per_neuron(run(ov, xx, ss), gO, gSt)

    def cmp(name, fd, w):
        fd, w = np.asarray(fd), np.asarray(w)
        bad = np.abs(fd - w) > atol + rtol * np.abs(w)
        if bad.any():
            i = tuple(np.argwhere(bad)[0]) if fd.ndim else ()
            raise AssertionError(
                "%s: %s at %s: finite difference %r, "
                "bptt %r" % (what, name, i, fd[i], w[i])
            )

    T = x.shape[0]
    for t in range(T):
        xp, xm = x.copy(), x.copy()
        xp[t] += eps
        xm[t] -= eps
        cmp(
            "grad_in[%d]" % t,
            (L(overrides, xp, states) - L(overrides, xm, states)) / (2 * eps),
            want["grad_in"][t],
        )
    for i in range(len(states)):
        sp = [s.copy() for s in states]
        sm = [s.copy() for s in states]
        sp[i] += eps
        sm[i] -= eps
        cmp(
            "grad_init[%d]" % i,
            (L(overrides, x, sp) - L(overrides, x, sm)) / (2 * eps),
            want["grad_init"][i],
        )
    for n in TRAINABLE.get(neuron, []):
        base = float(_params(neuron, overrides, np.float64)[n])
        op, om = dict(overrides), dict(overrides)
        op[n], om[n] = base + eps, base - eps
        fd = np.sum(L(op, x, states) - L(om, x, states)) / (2 * eps)
        cmp("grad_param %s" % n, fd, want["grad_param"][n])


def _random_case(neuron, rng, T, shape):
    mean, std = DRIVE[neuron]
    x = rng.normal(mean, std, (T,) + shape)
    states = [rng.uniform(*INIT[n], size=shape) for n in STATES[neuron]]
    gO = rng.normal(0, 1, (T,) + shape)
    gSt = [rng.normal(0, 1, (T,) + shape) for _ in STATES[neuron]]
    return x, states, gO, gSt


def self_test_forward(rng):
    """The float32 forward equals reference.py bit for bit."""
    for neuron in STATES:
        for flags in flag_combos(neuron):
            for custom in ({}, CUSTOM[neuron]):
                ov = dict(flags, **custom)
                x, states, _, _ = _random_case(neuron, rng, 7, (9,))
                x = x.astype(np.float32)
                states = [s.astype(np.float32) for s in states]
                a = forward(neuron, ov, x, states, np.float32)
                b = reference.simulate(neuron, ov, x, states)
                assert np.array_equal(a["s"], b["spikes"]), (neuron, ov)
                for i in range(len(states)):
                    assert np.array_equal(
                        a["state_seq"][i], b["state_seq"][i]
                    ), (neuron, ov)
                    assert np.array_equal(a["prev"][i][-1], b["final"][i])


def self_test_smooth(rng, beta=3.0):
    """Spike replaced by sigmoid(beta over), surrogate = its derivative."""
    spike = lambda over, t: _sig(beta * over)  # noqa: E731
    g = lambda z: _g_sigmoid(z, beta)  # noqa: E731
    n = 0
    for neuron in STATES:
        for flags in flag_combos(neuron):
            ov = dict(flags, **CUSTOM[neuron])
            x, states, gO, gSt = _random_case(neuron, rng, 6, (5, 3))
            base = forward(neuron, ov, x, states, np.float64, spike)
            frozen = base["sd"] if flags["detach_reset"] else None

            def run(o, xx, ss):
                return forward(neuron, o, xx, ss, np.float64, spike, frozen)

            want = bptt(neuron, ov, x, base, gO, gSt, g)
            _fd_check(
                "smooth %s %s" % (neuron, ov),
                neuron,
                ov,
                x,
                states,
                gO,
                gSt,
                run,
                want,
            )
            n += 1
    return n


def self_test_linearized(rng):
    """Heaviside trajectory; spike linearized by the surrogate around it, so
    finite differences give exactly the surrogate gradient. Every neuron and
    flag combination with sigmoid; every surrogate on LIF and Izhikevich."""
    cases = [(nr, "sigmoid") for nr in STATES]
    cases += [
        (nr, sg)
        for nr in ("lif", "izhikevich", "cuba_lif")
        for sg in SURROGATES
    ]
    n = 0
    for neuron, sg in cases:
        gfun = _g_of(sg)
        for flags in flag_combos(neuron):
            ov = dict(flags, **CUSTOM[neuron])
            x, states, gO, gSt = _random_case(neuron, rng, 7, (11,))
            base = forward(neuron, ov, x, states, np.float64)
            over_b, s_b = base["over"], base["s"]
            psi_b = gfun(over_b)

            def spike(over, t):
                return s_b[t] + psi_b[t] * (over - over_b[t])

            frozen = s_b if flags["detach_reset"] else None

            def run(o, xx, ss):
                return forward(neuron, o, xx, ss, np.float64, spike, frozen)

            want = bptt(neuron, ov, x, base, gO, gSt, sg)
            _fd_check(
                "linearized %s %s %s" % (neuron, sg, ov),
                neuron,
                ov,
                x,
                states,
                gO,
                gSt,
                run,
                want,
            )
            n += 1
    return n


# Primitives S with S' = g, for the surrogates that have a smooth one.
_PRIMITIVES = {
    "sigmoid": lambda x: _sig(4.0 * x),
    "atan": lambda x: np.arctan(math.pi / 2 * 2.0 * x) / math.pi + 0.5,
    "piecewise_exp": lambda x: np.where(
        x < 0, np.exp(x) / 2, 1 - np.exp(-x) / 2
    ),
    "soft_sign": lambda x: 0.5 * (2.0 * x / (1 + 2.0 * np.abs(x)) + 1),
    "super_spike": lambda x: x / (1 + np.abs(x)),
    "erf": lambda x: (1 + _erf(2.0 * x)) / 2,
    "nonzero_sign_log_abs": lambda x: np.sign(x) * np.log1p(np.abs(x)),
    "q_pseudo_spike": lambda x: np.where(
        x < 0, 0.5 * (1 - 2 * x) ** (-1.0), 1 - 0.5 * (1 + 2 * x) ** (-1.0)
    ),
    "squarewave_fourier_series": lambda x: 0.5
    * np.sin(math.pi / 4 * x)
    / (math.pi / 4),
    "s2nn": lambda x: np.where(
        x < 0, _sig(4.0 * x), np.log1p(np.abs(x)) + 0.5
    ),
    "piecewise_quadratic": lambda x: np.where(
        x < -1,
        0.0,
        np.where(
            x < 0, (x + 1) ** 2 / 2, np.where(x < 1, 1 - (1 - x) ** 2 / 2, 1.0)
        ),
    ),
}

# Hand-computed values g(x), SPEC's table at the defaults.
_SPOT = {
    "sigmoid": [(0.0, 1.0)],
    "atan": [(0.0, 1.0), (1 / math.pi, 0.5)],
    "piecewise_quadratic": [(0.0, 1.0), (0.5, 0.5), (-0.25, 0.75), (1.5, 0.0)],
    "piecewise_exp": [(0.0, 0.5), (-1.0, 0.5 / math.e)],
    "soft_sign": [(0.0, 1.0), (0.5, 0.25)],
    "super_spike": [(0.0, 1.0), (1.0, 0.25), (-1.0, 0.25)],
    "erf": [(0.0, 2 / _SQRT_PI), (0.5, 2 / _SQRT_PI / math.e)],
    "nonzero_sign_log_abs": [(0.0, 1.0), (-1.0, 0.5)],
    "piecewise_leaky_relu": [
        (0.0, 0.5),
        (0.99, 0.5),
        (-0.99, 0.5),
        (1.0, 0.01),
        (-1.5, 0.01),
    ],
    "squarewave_fourier_series": [(0.0, 0.5), (2.0, 0.0), (4.0, -0.5)],
    "s2nn": [
        (0.0, 1.0),
        (3.0, 0.25),
        (-0.0001, 4 * _sig(-0.0004) * (1 - _sig(-0.0004))),
    ],
    "q_pseudo_spike": [(0.0, 1.0), (0.5, 0.25), (-1.5, 1 / 16)],
    "leaky_k_relu": [(0.0, 1.0), (2.0, 1.0), (-0.1, 0.0)],
    "fake_numerical_gradient": [
        (0.0, 0.3),
        (1.0, 0.3),
        (-3.0, 0.3),
        (5.0, 0.2),
        (-5.0, 0.2),
    ],
    "log_tailed_relu": [
        (-1.0, 0.0),
        (0.0, 0.0),
        (0.5, 1.0),
        (1.0, 1.0),
        (4.0, 0.25),
    ],
    "rect": [(0.0, 1.0), (0.49, 1.0), (-0.49, 1.0), (0.5, 0.0), (-0.6, 0.0)],
    # (1 + h)/(σ√(2π)) − 2h·exp(−1/(2s²))/(sσ√(2π)) at x = 0.
    "multi_gaussian": [
        (
            0.0,
            (1.15 / 0.5 - 0.3 * math.exp(-1 / 72) / 3)
            / math.sqrt(2 * math.pi),
        )
    ],
    "straight_through": [(0.0, 1.0), (-7.0, 1.0)],
}


def self_test_surrogates():
    assert len(SURROGATES) == 18 and set(_SPOT) == set(SURROGATES)
    for name, pts in _SPOT.items():
        for xv, want in pts:
            got = float(surrogate_g(name, np.array(xv)))
            assert abs(got - want) < 1e-12, (name, xv, got, want)
    xs = np.concatenate(
        [np.linspace(-3.1, -0.013, 97), np.linspace(0.017, 3.3, 101)]
    )
    eps = 1e-6
    for name, S in _PRIMITIVES.items():
        fd = (S(xs + eps) - S(xs - eps)) / (2 * eps)
        g = surrogate_g(name, xs)
        assert np.allclose(fd, g, rtol=1e-6, atol=1e-8), (
            name,
            float(np.max(np.abs(fd - g))),
        )


def self_test_hand():
    """A few gradients computed by hand."""
    # IF, T = 1, hard, v0 = 0.2, x = 0.5: h = 0.7, no spike. psi = g(-0.3).
    # L = gS s + gV v': G = gS psi + gV (1 - 0 + (0 - 0.7) psi).
    psi = float(_g_sigmoid(np.array(-0.3)))
    r = reference_gradients("if", {}, [[0.5]], [[0.2]], [[2.0]], [[3.0]])
    G = 2.0 * psi + 3.0 * (1 - 0.7 * psi)
    assert abs(r["grad_in"][0, 0] - G) < 1e-6
    assert abs(r["grad_init"][0][0] - G) < 1e-6
    # Soft, detached: dv/dh = 1, G = gS psi + gV.
    r = reference_gradients(
        "if",
        {"soft_reset": True, "detach_reset": True},
        [[0.5]],
        [[0.2]],
        [[2.0]],
        [[3.0]],
    )
    assert abs(r["grad_in"][0, 0] - (2.0 * psi + 3.0)) < 1e-6
    # LIF decay_input, T = 2, only gV_1 = 1, no spikes (x = 0): v_t = v0/2^t,
    # dv_2/dv0 = 1/4 (hard, detached: dv/dh = 1), dv_2/dx_0 = 1/4, dx_1 1/2.
    r = reference_gradients(
        "lif",
        {"detach_reset": True},
        [[0.0], [0.0]],
        [[0.4]],
        None,
        [[[0.0], [1.0]]],
    )
    assert np.allclose(r["grad_in"][:, 0], [0.25, 0.5])
    assert np.allclose(r["grad_init"][0], [0.25])
    # PLIF, w = 0 (k = 1/2), T = 1, decay_input, no spike, gV = 1:
    # h = v + (x - v) k, dh/dw = (x - v) k (1 - k) = (0.3 - 0.1) / 4.
    r = reference_gradients(
        "plif", {"detach_reset": True}, [[0.3]], [[0.1]], None, [[[1.0]]]
    )
    assert abs(r["grad_param"]["w"] - 0.05) < 1e-7, r["grad_param"]
    # T = 0: everything zero, shapes (0, N...) and (N...).
    r = reference_gradients(
        "izhikevich", {}, np.zeros((0, 3)), [np.ones(3), np.ones(3)]
    )
    assert r["grad_in"].shape == (0, 3)
    assert all(np.all(gi == 0) and gi.shape == (3,) for gi in r["grad_init"])


def self_test():
    rng = np.random.default_rng(7)
    self_test_surrogates()
    self_test_hand()
    self_test_forward(rng)
    n1 = self_test_smooth(rng)
    n2 = self_test_linearized(rng)
    print(
        "gradients.py: self-test passed (%d smooth-spike and %d "
        "linearized-spike finite-difference cases)" % (n1, n2)
    )


if __name__ == "__main__":
    if sys.argv[1:] == ["--self-test"]:
        self_test()
    else:
        sys.exit("usage: gradients.py --self-test")
