#!/usr/bin/env python3
"""NumPy references for the neurons FlexSN ships: the step of the numerics
oracle (test/Oracle/neuron_oracle.py, written from docs/Semantics.md) run in
float32 (np.float32 arithmetic throughout, checked), the way a float32
kernel runs.

simulate() also returns, per neuron, the smallest |h - v_threshold| over the
steps and the first step at which it came within `near` of the threshold: a
1-ulp difference there may legitimately flip the spike, after which the
trajectories diverge, so comparisons stop at that step for such neurons.

Run with --self-test to check the references on hand-computed cases.
"""

import math
import os
import sys

import numpy as np

f32 = np.float32

# The equations, defaults and drives: test/Oracle/neuron_oracle.py.
sys.path.insert(
    0,
    os.path.join(
        os.path.dirname(os.path.abspath(__file__)),
        os.pardir,
        os.pardir,
        "Oracle",
    ),
)
import neuron_oracle  # noqa: E402

DEFAULTS, STATES = neuron_oracle.DEFAULTS, neuron_oracle.STATES
FLAGS, flags_of = neuron_oracle.FLAGS, neuron_oracle.flags_of
DRIVE, INIT = neuron_oracle.DRIVE, neuron_oracle.INIT


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


class _Float32Ops:
    """The oracle's ops on NumPy float32 arrays (a NumPy scalar meeting a
    Python float would become float64: constants are float32 too)."""

    scalar = staticmethod(f32)
    exp = staticmethod(np.exp)

    @staticmethod
    def sigmoid(w):
        return f32(1) / (f32(1) + np.exp(-w))

    @staticmethod
    def spike(over):
        return (over >= f32(0)).astype(np.float32)

    @staticmethod
    def detach(s):
        return s  # the identity in the forward pass


def step(neuron, p, x, st):
    """One time step. Returns (spike, new_states dict, h - v_threshold)."""
    s, new, over = neuron_oracle.step(_Float32Ops, neuron, p, x, st)
    _check32(over, s, *new.values())
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
    return dict(
        spikes=spikes,
        state_seq=seq,
        final=[st[n].copy() for n in names],
        min_margin=min_margin,
        first_near=first_near,
    )


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
    r = simulate(
        "if",
        {"v_reset": -0.5, "detach_reset": True},
        [[1.5, 0.25]],
        [[0.0, 0.5]],
    )
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
    r = simulate(
        "if",
        {},
        np.zeros((0, 3, 2), np.float32),
        [np.arange(6, dtype=np.float32).reshape(3, 2)],
    )
    assert r["spikes"].shape == (0, 3, 2)
    assert r["state_seq"][0].shape == (0, 3, 2)
    _expect("T=0 final", r["final"][0], np.arange(6).reshape(3, 2))
    assert np.all(np.isinf(r["min_margin"])) and np.all(r["first_near"] == 0)

    # LIF, one step, v = 0.5, x = 1.5, tau = 2.
    # decay_input: h = 0.5 + (1.5 - 0.5) / 2 = 1.0 -> spike, v' = 0.
    r = simulate("lif", {}, [[1.5]], [[0.5]])
    _expect("lif decay_input", (r["spikes"], r["final"][0]), ([[1]], [0.0]))
    # not decay_input: h = 0.5 - 0.25 + 1.5 = 1.75 -> soft v' = 0.75.
    r = simulate(
        "lif", {"decay_input": False, "soft_reset": True}, [[1.5]], [[0.5]]
    )
    _expect("lif plain soft", (r["spikes"], r["final"][0]), ([[1]], [0.75]))
    # hard, v_reset = -0.5: h = 0.5 + (1.5 - 1.0) / 2 = 0.75, no spike.
    r = simulate("lif", {"v_reset": -0.5}, [[1.5]], [[0.5]])
    _expect("lif v_reset", (r["spikes"], r["final"][0]), ([[0]], [0.75]))
    # not decay_input, v_reset = -0.5: h = 0.5 - 0.5 + 0.2 = 0.2.
    r = simulate(
        "lif", {"v_reset": -0.5, "decay_input": False}, [[0.2]], [[0.5]]
    )
    _expect("lif plain v_reset", r["final"][0], [0.2])
    # soft ignores v_reset in the leak (V_r = 0): h = 0.5 + (1.5 - 0.5)/2.
    r = simulate(
        "lif", {"v_reset": -0.5, "soft_reset": True}, [[1.5]], [[0.5]]
    )
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
    r = simulate(
        "plif", {"w": math.log(3.0), "decay_input": False}, [[0.5]], [[0.2]]
    )
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
    _expect(
        "eif soft",
        (r["spikes"], r["final"][0]),
        ([[1]], [0.9 + math.e / 2 - 1.0]),
        tol=1e-5,
    )
    # delta_T = 0.5, theta_rh = 0.6: v = 0.8: exp(0.4) * 0.5.
    r = simulate("eif", {"delta_T": 0.5, "theta_rh": 0.6}, [[0.1]], [[0.8]])
    _expect(
        "eif delta_T",
        r["final"][0],
        [0.8 + (0.1 - 0.8 + 0.5 * math.exp(0.4)) / 2],
        tol=1e-5,
    )

    # Izhikevich, a = 0.5, b = 0.3: v = 0.4, w = 0.2.
    # x = 1: h = 0.4 + (1 + 0.5 * -0.4 - 0.2) / 2 = 0.7, no spike;
    #        w' = 0.2 + (0.5 * 0.8 - 0.2) / 2 = 0.3.
    p = {"a": 0.5, "b": 0.3}
    r = simulate("izhikevich", p, [[1.0]], [[0.4], [0.2]])
    _expect(
        "izh no spike",
        (r["spikes"], r["final"][0], r["final"][1]),
        ([[0]], [0.7], [0.3]),
    )
    # x = 2: h = 0.4 + (2 - 0.2 - 0.2) / 2 = 1.2, spike; v' = 0;
    #        w' = 0.2 + (0.5 * 1.3 - 0.2) / 2 + 0.3 = 0.725.
    r = simulate("izhikevich", p, [[2.0]], [[0.4], [0.2]])
    _expect(
        "izh spike",
        (r["spikes"], r["final"][0], r["final"][1]),
        ([[1]], [0.0], [0.725]),
    )
    # soft: v' = 0.2; w' unchanged by the reset kind.
    r = simulate(
        "izhikevich",
        dict(p, soft_reset=True, detach_reset=True),
        [[2.0]],
        [[0.4], [0.2]],
    )
    _expect("izh soft", (r["final"][0], r["final"][1]), ([0.2], [0.725]))
    # defaults (a = b = 0): w decays by half each step.
    r = simulate("izhikevich", {}, [[0.0], [0.0]], [[0.0], [1.0]])
    _expect("izh w decay", r["state_seq"][1], [[0.5], [0.25]])

    # CUBA-LIF: c = 0.4, v = 0.2, x = 0.3: c' = 0.5, h = 0.15 + 0.5 = 0.65,
    # spike (v_th = 0.5): hard v' = 0, soft v' = 0.15.
    r = simulate("cuba_lif", {}, [[0.3]], [[0.4], [0.2]])
    _expect(
        "cuba hard",
        (r["spikes"], r["final"][0], r["final"][1]),
        ([[1]], [0.5], [0.0]),
    )
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
