#!/usr/bin/env python3
"""NumPy references for the neurons FlexSN ships (docs/Semantics.md).

Written from the equations of docs/Semantics.md, independently of the op order
of the .mlir bodies in lib/Neurons. Every step is computed in float32
(np.float32 arithmetic throughout, checked), the way a float32 kernel runs.

One step of every neuron:

    h = charge(x, state)                       (neuron specific)
    s = H(h - v_threshold),  H(z) = 1 if z >= 0 else 0
    s_d = detach(s) if detach_reset else s     (forward: s_d == s)
    hard reset: v' = s_d * v_reset + (1 - s_d) * h
    soft reset: v' = h - s_d * v_threshold

and for Izhikevich w' = w + (a (h - v_rest) - w) / tau_w + b s; for CUBA-LIF
the synaptic current c' = c c_decay + x is part of the charge.

simulate() also returns, per neuron, the smallest |h - v_threshold| over the
steps and the first step at which it came within `near` of the threshold: a
1-ulp difference there may legitimately flip the spike, after which the
trajectories diverge, so comparisons stop at that step for such neurons.

Run with --self-test to check the references on hand-computed cases.
"""

import math
import sys

import numpy as np

f32 = np.float32

# Parameter defaults, docs/Semantics.md (i1 flags as bool).
DEFAULTS = {
    "if": dict(v_threshold=1.0, v_reset=0.0,
               soft_reset=False, detach_reset=False),
    "lif": dict(tau=2.0, v_threshold=1.0, v_reset=0.0,
                soft_reset=False, detach_reset=False, decay_input=True),
    # PLIF: 1/tau = sigmoid(w), w0 = -ln(init_tau - 1) = 0 for init_tau = 2.
    "plif": dict(w=0.0, v_threshold=1.0, v_reset=0.0,
                 soft_reset=False, detach_reset=False, decay_input=True),
    "qif": dict(tau=2.0, v_c=0.8, a0=1.0, v_rest=0.0, v_threshold=1.0,
                v_reset=-0.1, soft_reset=False, detach_reset=False),
    "eif": dict(tau=2.0, delta_T=1.0, theta_rh=0.8, v_rest=0.0,
                v_threshold=1.0, v_reset=-0.1,
                soft_reset=False, detach_reset=False),
    "izhikevich": dict(tau=2.0, v_c=0.8, a0=1.0, v_rest=-0.1, tau_w=2.0,
                       a=0.0, b=0.0, v_threshold=1.0, v_reset=0.0,
                       soft_reset=False, detach_reset=False),
    "cuba_lif": dict(c_decay=0.5, v_decay=0.75, v_threshold=0.5, v_reset=0.0,
                     soft_reset=False, detach_reset=False),
}

# State names in declaration order; every neuron has one input and one
# output (the spike).
STATES = {
    "if": ["v"], "lif": ["v"], "plif": ["v"], "qif": ["v"], "eif": ["v"],
    "izhikevich": ["v", "w"], "cuba_lif": ["c", "v"],
}

FLAGS = ("soft_reset", "detach_reset", "decay_input")

# Test inputs: x ~ normal(mean, std) per neuron, chosen so that a good
# fraction of the neurons spike and no state runs away for the default and
# the tests' custom parameters; initial states ~ uniform(low, high), by state
# name.
DRIVE = {
    "if": (0.6, 0.8), "lif": (0.8, 0.9), "plif": (0.8, 0.9),
    "qif": (0.5, 0.6), "eif": (0.6, 0.8), "izhikevich": (0.6, 0.6),
    "cuba_lif": (0.3, 0.6),
}
INIT = {"v": (-0.2, 0.9), "w": (-0.2, 0.3), "c": (-0.3, 0.5)}


def flags_of(neuron):
    """The i1 parameters of `neuron`, in a fixed order."""
    return [f for f in FLAGS if f in DEFAULTS[neuron]]


def resolve_params(neuron, overrides=None):
    """Defaults updated by `overrides`; numbers as np.float32, flags as
    bool."""
    if neuron not in DEFAULTS:
        raise KeyError("unknown neuron %r" % neuron)
    p = dict(DEFAULTS[neuron])
    for k, val in (overrides or {}).items():
        if k not in p:
            raise KeyError("neuron %s has no parameter %r" % (neuron, k))
        p[k] = val
    return {k: (bool(val) if k in FLAGS else f32(val)) for k, val in p.items()}


def _check32(*arrays):
    for a in arrays:
        assert a.dtype == np.float32, "reference left float32: %s" % a.dtype


def _sigmoid(w):
    return f32(1) / (f32(1) + np.exp(-w))


def _charge(neuron, p, x, st):
    """h for one step; st is the dict of current states. Returns (h, extra)."""
    if neuron == "if":
        return st["v"] + x, {}
    if neuron in ("lif", "plif"):
        v = st["v"]
        # V_r = v_reset for a hard reset, 0 for a soft one.
        v_r = f32(0) if p["soft_reset"] else p["v_reset"]
        if neuron == "lif":
            if p["decay_input"]:
                h = v + (x - (v - v_r)) / p["tau"]
            else:
                h = v - (v - v_r) / p["tau"] + x
        else:
            k = _sigmoid(p["w"])  # 1 / tau
            if p["decay_input"]:
                h = v + (x - (v - v_r)) * k
            else:
                h = v - (v - v_r) * k + x
        return h, {}
    if neuron == "qif":
        v = st["v"]
        h = v + (x + p["a0"] * (v - p["v_rest"]) * (v - p["v_c"])) / p["tau"]
        return h, {}
    if neuron == "eif":
        v = st["v"]
        dT = p["delta_T"]
        h = v + (x + p["v_rest"] - v
                 + dT * np.exp((v - p["theta_rh"]) / dT)) / p["tau"]
        return h, {}
    if neuron == "izhikevich":
        v, w = st["v"], st["w"]
        h = v + (x + p["a0"] * (v - p["v_rest"]) * (v - p["v_c"]) - w) \
            / p["tau"]
        return h, {}
    if neuron == "cuba_lif":
        c_next = st["c"] * p["c_decay"] + x
        h = st["v"] * p["v_decay"] + c_next
        return h, {"c": c_next}
    raise KeyError(neuron)


def step(neuron, p, x, st):
    """One time step. Returns (spike, new_states dict, h - v_threshold)."""
    h, extra = _charge(neuron, p, x, st)
    over = h - p["v_threshold"]
    s = (over >= f32(0)).astype(np.float32)
    # detach() is the identity in the forward pass.
    s_d = s
    if p["soft_reset"]:
        v_next = h - s_d * p["v_threshold"]
    else:
        v_next = s_d * p["v_reset"] + (f32(1) - s_d) * h
    new = dict(st)
    new["v"] = v_next
    new.update(extra)
    if neuron == "izhikevich":
        w = st["w"]
        new["w"] = w + (p["a"] * (h - p["v_rest"]) - w) / p["tau_w"] \
            + p["b"] * s
    _check32(h, over, s, *new.values())
    return s, new, over


def simulate(neuron, params, x, states=None, near=1e-4):
    """Runs `neuron` over x ([T, N...]) from `states` (list, [N...] each;
    None for zeros). Everything is converted to float32 first.

    Returns a dict:
      spikes      [T, N...] float32
      state_seq   list of [T, N...] float32, state after each step
      final       list of [N...] float32 (the initial states when T = 0)
      min_margin  [N...] min over steps of |h - v_threshold| (inf if T = 0)
      first_near  [N...] int, first step with |h - v_threshold| < near
                  (T if none)
    """
    p = resolve_params(neuron, params)
    x = np.asarray(x, dtype=np.float32)
    T, shape = x.shape[0], x.shape[1:]
    names = STATES[neuron]
    if states is None:
        states = [np.zeros(shape, np.float32) for _ in names]
    assert len(states) == len(names)
    st = {}
    for n, s0 in zip(names, states):
        s0 = np.asarray(s0, dtype=np.float32)
        assert s0.shape == shape, (s0.shape, shape)
        st[n] = s0.copy()
    spikes = np.zeros((T,) + shape, np.float32)
    seq = [np.zeros((T,) + shape, np.float32) for _ in names]
    min_margin = np.full(shape, np.inf, np.float32)
    first_near = np.full(shape, T, np.int64)
    for t in range(T):
        s, st, over = step(neuron, p, x[t], st)
        spikes[t] = s
        for i, n in enumerate(names):
            seq[i][t] = st[n]
        margin = np.abs(over)
        min_margin = np.minimum(min_margin, margin)
        hit = (margin < near) & (first_near == T)
        first_near[hit] = t
    return dict(spikes=spikes, state_seq=seq,
                final=[st[n].copy() for n in names],
                min_margin=min_margin, first_near=first_near)


# ---------------------------------------------------------------------------
# Self test: hand-computed cases.

def _expect(what, got, want, tol=1e-6):
    if isinstance(got, (tuple, list)) and isinstance(want, tuple):
        assert len(got) == len(want), what
        for i, (g, w) in enumerate(zip(got, want)):
            _expect("%s [%d]" % (what, i), g, w, tol)
        return
    got = np.asarray(got, dtype=np.float64)
    want = np.asarray(want, dtype=np.float64)
    if got.shape != want.shape or not np.allclose(got, want, rtol=0, atol=tol):
        raise AssertionError("%s: got %r, want %r" % (what, got, want))


def self_test():
    # IF, T = 2, hard and soft: 0 -> 0.6 (no spike) -> 1.2 (spike).
    r = simulate("if", {}, [[0.6], [0.6]], [[0.0]])
    _expect("if hard spikes", r["spikes"], [[0], [1]])
    _expect("if hard v", r["state_seq"][0], [[0.6], [0.0]])
    r = simulate("if", {"soft_reset": True}, [[0.6], [0.6]])
    _expect("if soft spikes", r["spikes"], [[0], [1]])
    _expect("if soft v", r["state_seq"][0], [[0.6], [0.2]])
    _expect("if soft final", r["final"][0], [0.2])
    _expect("if min margin", r["min_margin"], [0.2])
    # v_reset != 0 and detach (forward unchanged).
    r = simulate("if", {"v_reset": -0.5, "detach_reset": True},
                 [[1.5, 0.25]], [[0.0, 0.5]])
    _expect("if v_reset spikes", r["spikes"], [[1, 0]])
    _expect("if v_reset v", r["final"][0], [-0.5, 0.75])
    # The threshold itself spikes: H(0) = 1; margin 0, near at step 0.
    r = simulate("if", {}, [[1.0]])
    _expect("if at threshold", r["spikes"], [[1]])
    _expect("if at threshold margin", r["min_margin"], [0.0])
    _expect("if at threshold first_near", r["first_near"], [0])
    # ... and just below it does not.
    r = simulate("if", {}, [[np.nextafter(f32(1), f32(0))]])
    _expect("if below threshold", r["spikes"], [[0]])
    # T = 0: empty outputs, final state = initial state.
    r = simulate("if", {}, np.zeros((0, 3, 2), np.float32),
                 [np.arange(6, dtype=np.float32).reshape(3, 2)])
    assert r["spikes"].shape == (0, 3, 2)
    assert r["state_seq"][0].shape == (0, 3, 2)
    _expect("T=0 final", r["final"][0], np.arange(6).reshape(3, 2))
    assert np.all(np.isinf(r["min_margin"])) and np.all(r["first_near"] == 0)

    # LIF, one step, v = 0.5, x = 1.5, tau = 2.
    # decay_input: h = 0.5 + (1.5 - 0.5) / 2 = 1.0 -> spike, v' = 0.
    r = simulate("lif", {}, [[1.5]], [[0.5]])
    _expect("lif decay_input", (r["spikes"], r["final"][0]), ([[1]], [0.0]))
    # not decay_input: h = 0.5 - 0.25 + 1.5 = 1.75 -> soft v' = 0.75.
    r = simulate("lif", {"decay_input": False, "soft_reset": True},
                 [[1.5]], [[0.5]])
    _expect("lif plain soft", (r["spikes"], r["final"][0]), ([[1]], [0.75]))
    # hard, v_reset = -0.5: h = 0.5 + (1.5 - 1.0) / 2 = 0.75, no spike.
    r = simulate("lif", {"v_reset": -0.5}, [[1.5]], [[0.5]])
    _expect("lif v_reset", (r["spikes"], r["final"][0]), ([[0]], [0.75]))
    # not decay_input, v_reset = -0.5: h = 0.5 - 0.5 + 0.2 = 0.2.
    r = simulate("lif", {"v_reset": -0.5, "decay_input": False},
                 [[0.2]], [[0.5]])
    _expect("lif plain v_reset", r["final"][0], [0.2])
    # soft ignores v_reset in the leak (V_r = 0): h = 0.5 + (1.5 - 0.5)/2.
    r = simulate("lif", {"v_reset": -0.5, "soft_reset": True},
                 [[1.5]], [[0.5]])
    _expect("lif soft V_r", (r["spikes"], r["final"][0]), ([[1]], [0.0]))
    # tau = 4: h = 0 + 2/4 = 0.5, then 0.5 + (2 - 0.5)/4 = 0.875.
    r = simulate("lif", {"tau": 4.0}, [[2.0], [2.0]])
    _expect("lif tau", r["state_seq"][0], [[0.5], [0.875]])

    # PLIF: w = 0 is LIF(tau = 2); w = ln 3 gives 1/tau = 0.75.
    x = np.array([[1.5, 0.3], [0.9, 2.0], [0.1, 0.7]], np.float32)
    for di in (True, False):
        for soft in (True, False):
            a = simulate("plif", {"decay_input": di, "soft_reset": soft}, x)
            b = simulate("lif", {"decay_input": di, "soft_reset": soft}, x)
            _expect("plif w=0 == lif", a["state_seq"][0], b["state_seq"][0])
    r = simulate("plif", {"w": math.log(3.0)}, [[1.0]], [[0.2]])
    _expect("plif w=ln3", r["final"][0], [0.2 + 0.8 * 0.75])
    r = simulate("plif", {"w": math.log(3.0), "decay_input": False},
                 [[0.5]], [[0.2]])
    _expect("plif w=ln3 plain", r["final"][0], [0.2 - 0.2 * 0.75 + 0.5])

    # QIF: v = 0.5, x = 0.2: h = 0.5 + (0.2 + 0.5 * -0.3) / 2 = 0.525.
    r = simulate("qif", {}, [[0.2]], [[0.5]])
    _expect("qif", (r["spikes"], r["final"][0]), ([[0]], [0.525]))
    # QIF spike, hard reset to -0.1: v = 1, x = 1: h = 1 + (1 + 0.2)/2 = 1.6.
    r = simulate("qif", {}, [[1.0]], [[1.0]])
    _expect("qif spike", (r["spikes"], r["final"][0]), ([[1]], [-0.1]))
    r = simulate("qif", {"soft_reset": True}, [[1.0]], [[1.0]])
    _expect("qif soft", r["final"][0], [0.6])

    # EIF: v = 0.8, x = 0: h = 0.8 + (0 - 0.8 + exp(0)) / 2 = 0.9.
    r = simulate("eif", {}, [[0.0]], [[0.8]])
    _expect("eif", (r["spikes"], r["final"][0]), ([[0]], [0.9]))
    # v = 1.8, x = 0: h = 1.8 + (-1.8 + e) / 2 = 0.9 + e/2 -> spike.
    r = simulate("eif", {"soft_reset": True}, [[0.0]], [[1.8]])
    _expect("eif soft", (r["spikes"], r["final"][0]),
            ([[1]], [0.9 + math.e / 2 - 1.0]), tol=1e-5)
    # delta_T = 0.5, theta_rh = 0.6: v = 0.8: exp(0.4) * 0.5.
    r = simulate("eif", {"delta_T": 0.5, "theta_rh": 0.6}, [[0.1]], [[0.8]])
    _expect("eif delta_T", r["final"][0],
            [0.8 + (0.1 - 0.8 + 0.5 * math.exp(0.4)) / 2], tol=1e-5)

    # Izhikevich, a = 0.5, b = 0.3: v = 0.4, w = 0.2.
    # x = 1: h = 0.4 + (1 + 0.5 * -0.4 - 0.2) / 2 = 0.7, no spike;
    #        w' = 0.2 + (0.5 * 0.8 - 0.2) / 2 = 0.3.
    p = {"a": 0.5, "b": 0.3}
    r = simulate("izhikevich", p, [[1.0]], [[0.4], [0.2]])
    _expect("izh no spike", (r["spikes"], r["final"][0], r["final"][1]),
            ([[0]], [0.7], [0.3]))
    # x = 2: h = 0.4 + (2 - 0.2 - 0.2) / 2 = 1.2, spike; v' = 0;
    #        w' = 0.2 + (0.5 * 1.3 - 0.2) / 2 + 0.3 = 0.725.
    r = simulate("izhikevich", p, [[2.0]], [[0.4], [0.2]])
    _expect("izh spike", (r["spikes"], r["final"][0], r["final"][1]),
            ([[1]], [0.0], [0.725]))
    # soft: v' = 0.2; w' unchanged by the reset kind.
    r = simulate("izhikevich", dict(p, soft_reset=True, detach_reset=True),
                 [[2.0]], [[0.4], [0.2]])
    _expect("izh soft", (r["final"][0], r["final"][1]), ([0.2], [0.725]))
    # defaults (a = b = 0): w decays by half each step.
    r = simulate("izhikevich", {}, [[0.0], [0.0]], [[0.0], [1.0]])
    _expect("izh w decay", r["state_seq"][1], [[0.5], [0.25]])

    # CUBA-LIF: c = 0.4, v = 0.2, x = 0.3: c' = 0.5, h = 0.15 + 0.5 = 0.65,
    # spike (v_th = 0.5): hard v' = 0, soft v' = 0.15.
    r = simulate("cuba_lif", {}, [[0.3]], [[0.4], [0.2]])
    _expect("cuba hard", (r["spikes"], r["final"][0], r["final"][1]),
            ([[1]], [0.5], [0.0]))
    r = simulate("cuba_lif", {"soft_reset": True}, [[0.3]], [[0.4], [0.2]])
    _expect("cuba soft", r["final"], [[0.5], [0.15]])
    # Two steps, no input: c 1 -> 0.5 -> 0.25; v 0 -> 0.5 (spike) -> 0.25.
    r = simulate("cuba_lif", {}, [[0.0], [0.0]], [[1.0], [0.0]])
    _expect("cuba c", r["state_seq"][0], [[0.5], [0.25]])
    _expect("cuba spikes", r["spikes"], [[1], [0]])
    _expect("cuba v", r["state_seq"][1], [[0.0], [0.25]])

    # Unknown parameters are refused.
    try:
        simulate("if", {"tau": 2.0}, [[0.0]])
    except KeyError:
        pass
    else:
        raise AssertionError("simulate accepted an unknown parameter")
    print("reference.py: self-test passed")


if __name__ == "__main__":
    if sys.argv[1:] == ["--self-test"]:
        self_test()
    else:
        sys.exit("usage: reference.py --self-test")
