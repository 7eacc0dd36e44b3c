"""Checks the test references (reference.py) on cases worked out by hand.

The other tests trust reference.py, so it is checked here against numbers
computed by hand, against finite differences of each surrogate's primitive
(an antiderivative of g), and against the BPTT recursion for LIF written out
independently.
"""

import math

import pytest
import torch

import reference as ref

F64 = torch.float64


def t(values, dtype=F64):
    return torch.tensor(values, dtype=dtype)


def close(actual, expected, tol=1e-12):
    expected = torch.as_tensor(expected, dtype=actual.dtype)
    assert actual.shape == expected.shape, (actual.shape, expected.shape)
    assert torch.allclose(actual, expected, rtol=tol, atol=tol), (
        actual,
        expected,
    )


# --- Heaviside and surrogates ---------------------------------------------


def test_heaviside_fires_at_zero():
    x = t([-1.0, -1e-300, -0.0, 0.0, 1e-300, 2.0])
    close(ref.spike(x), [0.0, 0.0, 1.0, 1.0, 1.0, 1.0])
    x32 = t([-1e-30, 0.0], torch.float32)
    assert ref.spike(x32).dtype == torch.float32
    close(ref.spike(x32), [0.0, 1.0])


def test_spike_backward_is_grad_times_g():
    x = t([-1.0, -0.25, 0.0, 0.5, 3.0]).requires_grad_()
    upstream = t([1.0, 2.0, -1.0, 0.5, 4.0])
    ref.spike(x, ("atan", {"alpha": 3.0})).backward(upstream)
    close(x.grad, upstream * ref.surrogate_grad("atan", x.detach(), alpha=3.0))


def test_spike_accepts_every_spelling_of_a_surrogate():
    class Described:  # what a flexsn.surrogate instance looks like
        mnemonic = "rect"
        params = {"alpha": 2.0}

    x = t([0.1, 0.3])
    for surrogate in (Described(), ("rect", {"alpha": 2.0})):
        y = x.clone().requires_grad_()
        ref.spike(y, surrogate).sum().backward()
        close(y.grad, [2.0, 0.0])  # window |x| < 0.5/alpha = 0.25
    y = x.clone().requires_grad_()
    ref.spike(y, "rect").sum().backward()
    close(y.grad, [1.0, 1.0])


def test_surrogate_parameter_errors():
    with pytest.raises(KeyError):
        ref.surrogate_grad("sigmoid2", t([0.0]))
    with pytest.raises(TypeError):
        ref.surrogate_grad("sigmoid", t([0.0]), beta=1.0)


# (mnemonic, params, x, g(x)) worked out by hand.
HAND_VALUES = [
    ("sigmoid", {}, 0.0, 1.0),  # alpha/4
    ("sigmoid", {"alpha": 2.0}, 0.0, 0.5),
    ("atan", {}, 0.0, 1.0),  # alpha/2
    ("atan", {"alpha": 2.0}, 1 / math.pi, 0.5),  # u = 1: 1 / (1 + 1)
    ("piecewise_quadratic", {}, 0.5, 0.5),
    ("piecewise_quadratic", {"alpha": 2.0}, 0.25, 1.0),
    ("piecewise_quadratic", {}, -2.0, 0.0),
    ("piecewise_exp", {"alpha": 2.0}, 0.0, 1.0),
    ("piecewise_exp", {}, -math.log(2.0), 0.25),
    ("soft_sign", {}, 0.0, 1.0),  # 1 / (2a (1/a)^2) = a/2
    ("soft_sign", {"alpha": 1.0}, -1.0, 0.125),
    ("super_spike", {}, 1.0, 0.25),
    ("super_spike", {"alpha": 3.0}, -2.0, 1 / 3),
    ("erf", {}, 0.0, 2 / math.sqrt(math.pi)),
    ("erf", {"alpha": 1.0}, 1.0, math.exp(-1.0) / math.sqrt(math.pi)),
    ("nonzero_sign_log_abs", {}, -1.0, 0.5),
    ("nonzero_sign_log_abs", {"alpha": 2.0}, 0.0, 2.0),
    ("piecewise_leaky_relu", {}, 0.0, 0.5),
    ("piecewise_leaky_relu", {}, 1.0, 0.01),  # |x| < w is strict
    ("piecewise_leaky_relu", {}, -0.999, 0.5),
    ("piecewise_leaky_relu", {"w": 0.25, "c": -0.5}, 0.3, -0.5),
    ("squarewave_fourier_series", {}, 0.0, 0.5),  # 4/T
    ("squarewave_fourier_series", {}, 2.0, 0.0),  # cos(pi/2)
    ("squarewave_fourier_series", {"n": 1}, 0.0, 0.0),  # empty sum
    ("squarewave_fourier_series", {"n": 3, "T_period": 4.0}, 0.0, 2.0),
    ("squarewave_fourier_series", {"n": 3, "T_period": 4.0}, 1.0, 0.0),
    ("s2nn", {}, 0.0, 1.0),  # beta/(0 + 1)
    ("s2nn", {"beta": 2.0}, 3.0, 0.5),
    ("s2nn", {"alpha": 4.0}, -1e-300, 1.0),  # alpha/4 left of 0
    ("q_pseudo_spike", {}, 0.0, 1.0),
    ("q_pseudo_spike", {}, 1.0, 1 / 9),
    ("q_pseudo_spike", {"alpha": 3.0}, -1.0, 1 / 8),
    ("leaky_k_relu", {}, -1.0, 0.0),
    ("leaky_k_relu", {"leak": 0.1, "k": 2.0}, 0.0, 2.0),
    ("leaky_k_relu", {"leak": 0.1, "k": 2.0}, -1e-300, 0.1),
    ("fake_numerical_gradient", {}, 0.0, 0.3),
    ("fake_numerical_gradient", {}, -0.0, 0.3),
    ("fake_numerical_gradient", {}, 10.0, 0.1),
    ("fake_numerical_gradient", {}, -10.0, 0.1),
    ("fake_numerical_gradient", {}, 1.0, 0.3),
    ("log_tailed_relu", {}, 0.0, 0.0),
    ("log_tailed_relu", {"alpha": 0.5}, -3.0, 0.5),
    ("log_tailed_relu", {}, 1.0, 1.0),
    ("log_tailed_relu", {}, 0.5, 1.0),
    ("log_tailed_relu", {}, 4.0, 0.25),
    ("rect", {}, 0.0, 1.0),
    ("rect", {}, 0.5, 0.0),  # |x| < 0.5/a is strict
    ("rect", {"alpha": 2.0}, -0.2, 2.0),
    ("straight_through", {}, -5.0, 1.0),
]


@pytest.mark.parametrize("mnemonic,params,x,expected", HAND_VALUES)
def test_surrogate_hand_values(mnemonic, params, x, expected):
    close(ref.surrogate_grad(mnemonic, t([x]), **params), [expected])


def _sign(x):
    return -1.0 if x < 0 else 1.0


def _sigmoid(z):
    return 1 / (1 + math.exp(-z))


def _normal_cdf(z):
    return (1 + math.erf(z / math.sqrt(2))) / 2


def _squarewave_primitive(x, n=2, T_period=8.0):
    omega = 2 * math.pi / T_period
    return 0.5 + 2 / math.pi * sum(
        math.sin((2 * i - 1) * omega * x) / (2 * i - 1) for i in range(1, n)
    )


def _q_tail(x, alpha):
    return 0.5 * (1 + 2 * abs(x) / (alpha - 1)) ** (1 - alpha)


def _fake_primitive(x, alpha=0.3):
    m = abs(x)
    p = alpha * m if m <= 1 / alpha else math.log(alpha * m) + 1
    return _sign(x) * p


# Primitives (antiderivatives of g), integrated by hand from the formulas.
PRIMITIVES = {
    "sigmoid": lambda x, alpha=4.0: _sigmoid(alpha * x),
    "atan": lambda x, alpha=2.0: math.atan(math.pi / 2 * alpha * x) / math.pi
    + 0.5,
    "piecewise_quadratic": lambda x, alpha=1.0: 0.0
    if x < -1 / alpha
    else 1.0
    if x > 1 / alpha
    else alpha * x - alpha**2 * x * abs(x) / 2 + 0.5,
    "piecewise_exp": lambda x, alpha=1.0: math.exp(alpha * x) / 2
    if x < 0
    else 1 - math.exp(-alpha * x) / 2,
    "soft_sign": lambda x, alpha=2.0: (alpha * x / (1 + alpha * abs(x)) + 1)
    / 2,
    "super_spike": lambda x, alpha=1.0: alpha * x / (abs(x) + 1),
    "erf": lambda x, alpha=2.0: (math.erf(alpha * x) + 1) / 2,
    "nonzero_sign_log_abs": lambda x, alpha=1.0: _sign(x)
    * math.log1p(alpha * abs(x)),
    "piecewise_leaky_relu": lambda x, w=1.0, c=0.01: c * (x + w)
    if x < -w
    else c * (x - w) + 1
    if x > w
    else x / (2 * w) + 0.5,
    "squarewave_fourier_series": _squarewave_primitive,
    "s2nn": lambda x, alpha=4.0, beta=1.0: _sigmoid(alpha * x)
    if x < 0
    else beta * math.log1p(x) + 0.5,
    "q_pseudo_spike": lambda x, alpha=2.0: _q_tail(x, alpha)
    if x < 0
    else 1 - _q_tail(x, alpha),
    "leaky_k_relu": lambda x, leak=0.0, k=1.0: k * x if x >= 0 else leak * x,
    "fake_numerical_gradient": _fake_primitive,
    "log_tailed_relu": lambda x, alpha=0.0: alpha * x
    if x <= 0
    else x
    if x <= 1
    else math.log(x) + 1,
    "rect": lambda x, alpha=1.0: min(max(alpha * x, -0.5), 0.5) + 0.5,
    "multi_gaussian": lambda x, sigma=0.5, h=0.15, s=6.0: (1 + h)
    * _normal_cdf(x / sigma)
    - h * _normal_cdf((x - sigma) / (s * sigma))
    - h * _normal_cdf((x + sigma) / (s * sigma)),
    "straight_through": lambda x: x,
}

# (mnemonic, params, points where g is discontinuous or kinked).
FD_CASES = [
    ("sigmoid", {}, []),
    ("sigmoid", {"alpha": 1.5}, []),
    ("atan", {}, []),
    ("atan", {"alpha": 0.7}, []),
    ("piecewise_quadratic", {}, [0.0, -1.0, 1.0]),
    ("piecewise_quadratic", {"alpha": 2.5}, [0.0, -0.4, 0.4]),
    ("piecewise_exp", {}, [0.0]),
    ("piecewise_exp", {"alpha": 3.0}, [0.0]),
    ("soft_sign", {}, [0.0]),
    ("soft_sign", {"alpha": 0.5}, [0.0]),
    ("super_spike", {}, [0.0]),
    ("super_spike", {"alpha": 2.0}, [0.0]),
    ("erf", {}, []),
    ("erf", {"alpha": 0.6}, []),
    ("nonzero_sign_log_abs", {}, [0.0]),
    ("nonzero_sign_log_abs", {"alpha": 4.0}, [0.0]),
    ("piecewise_leaky_relu", {}, [-1.0, 1.0]),
    ("piecewise_leaky_relu", {"w": 0.5, "c": -0.2}, [-0.5, 0.5]),
    ("squarewave_fourier_series", {}, []),
    ("squarewave_fourier_series", {"n": 6, "T_period": 3.0}, []),
    ("s2nn", {}, [0.0]),
    ("s2nn", {"alpha": 2.0, "beta": 0.5}, [0.0]),
    ("q_pseudo_spike", {}, [0.0]),
    ("q_pseudo_spike", {"alpha": 4.0}, [0.0]),
    ("leaky_k_relu", {}, [0.0]),
    ("leaky_k_relu", {"leak": -0.3, "k": 2.0}, [0.0]),
    ("fake_numerical_gradient", {}, [-1 / 0.3, 1 / 0.3]),
    ("fake_numerical_gradient", {"alpha": 1.0}, [-1.0, 1.0]),
    ("log_tailed_relu", {}, [0.0, 1.0]),
    ("log_tailed_relu", {"alpha": 0.2}, [0.0, 1.0]),
    ("rect", {}, [-0.5, 0.5]),
    ("rect", {"alpha": 0.4}, [-1.25, 1.25]),
    ("multi_gaussian", {}, []),
    ("multi_gaussian", {"sigma": 1.0, "h": -0.5, "s": 2.0}, []),
    ("straight_through", {}, []),
]


def test_fd_cases_cover_every_surrogate():
    assert {m for m, _, _ in FD_CASES} == set(ref.SURROGATE_DEFAULTS)
    assert set(PRIMITIVES) == set(ref.SURROGATE_DEFAULTS)


@pytest.mark.parametrize(
    "mnemonic,params,kinks",
    FD_CASES,
    ids=["%s%s" % (m, p or "") for m, p, _ in FD_CASES],
)
def test_surrogate_matches_finite_differences(mnemonic, params, kinks):
    eps = 1e-6
    xs = [-4.0 + 0.0937 * k + 0.0123 for k in range(86)]
    xs = [x for x in xs if all(abs(x - k) > 1e-3 for k in kinks)]
    primitive = PRIMITIVES[mnemonic]
    fd = [
        (primitive(x + eps, **params) - primitive(x - eps, **params))
        / (2 * eps)
        for x in xs
    ]
    g = ref.surrogate_grad(mnemonic, t(xs), **params)
    assert torch.allclose(g, t(fd), rtol=1e-6, atol=1e-7), max(
        abs(a - b) for a, b in zip(g.tolist(), fd)
    )


def test_surrogates_keep_the_dtype():
    x = torch.linspace(-2, 2, 9, dtype=torch.float32)
    for mnemonic in ref.SURROGATE_DEFAULTS:
        g = ref.surrogate_grad(mnemonic, x)
        assert g.dtype == torch.float32 and g.shape == x.shape, mnemonic
        assert torch.isfinite(g).all(), mnemonic


# --- Neurons: forward on hand-computed cases ------------------------------


def test_if_by_hand():
    x = t([[0.6], [0.6], [0.3], [1.5]])
    s, v = ref.if_ref(x)
    # h: 0.6, 1.2 (fire, v=0), 0.3, 1.8 (fire, v=0)
    close(s, [[0.0], [1.0], [0.0], [1.0]])
    close(v, [[0.6], [0.0], [0.3], [0.0]])
    s, v = ref.if_ref(x, v_reset=None)
    # soft: h = 1.2 -> 0.2; h = 0.5; h = 2.0 -> 1.0
    close(s, [[0.0], [1.0], [0.0], [1.0]])
    close(v, [[0.6], [0.2], [0.5], [1.0]])


def test_lif_by_hand_fires_exactly_at_threshold():
    x = t([1.0, 1.5, 0.5])
    s, v = ref.lif_ref(x)
    # h1 = 0 + (1 - 0)/2 = 0.5; h2 = 0.5 + (1.5 - 0.5)/2 = 1.0 = v_th: fires
    # (H(0) = 1), v = 0; h3 = 0 + 0.5/2 = 0.25.
    close(s, [0.0, 1.0, 0.0])
    close(v, [0.5, 0.0, 0.25])


def test_lif_by_hand_hard_and_soft():
    x = t([1.0, 2.0, 0.5])
    s, v = ref.lif_ref(x)
    # h2 = 0.5 + (2 - 0.5)/2 = 1.25 fires -> 0; h3 = 0 + 0.5/2 = 0.25
    close(s, [0.0, 1.0, 0.0])
    close(v, [0.5, 0.0, 0.25])
    s, v = ref.lif_ref(x, v_reset=None)
    # soft: 1.25 - 1 = 0.25; h3 = 0.25 + (0.5 - 0.25)/2 = 0.375
    close(s, [0.0, 1.0, 0.0])
    close(v, [0.5, 0.25, 0.375])


def test_lif_by_hand_without_decay_input():
    # h = v - (v - V_r)/tau + x with V_r = v_reset = -0.5, tau = 2.
    x = t([1.0, 1.0, 0.0])
    s, v = ref.lif_ref(x, decay_input=False, v_reset=-0.5)
    # h1 = 0 - 0.25 + 1 = 0.75; h2 = 0.75 - 0.625 + 1 = 1.125 fires -> -0.5;
    # h3 = -0.5 - 0 + 0 = -0.5.
    close(s, [0.0, 1.0, 0.0])
    close(v, [0.75, -0.5, -0.5])
    # tau = 4, decay_input, V_r = -0.5: h1 = 0 + (1 - 0.5)/4 = 0.125.
    s, v = ref.lif_ref(x[:1], tau=4.0, v_reset=-0.5)
    close(v, [0.125])


def test_plif_default_is_lif_tau_2():
    gen = torch.Generator().manual_seed(1)
    x = torch.randn(6, 5, dtype=F64, generator=gen)
    for kwargs in ({}, {"v_reset": None}, {"decay_input": False}):
        s1, v1 = ref.plif_ref(x, **kwargs)
        s2, v2 = ref.lif_ref(x, tau=2.0, **kwargs)
        close(s1, s2)
        close(v1, v2)
    assert ref.init_w(2.0) == 0.0
    assert abs(ref.init_w(3.0) + math.log(2.0)) < 1e-15


def test_qif_by_hand():
    x = t([1.0, 2.0, 0.0])
    s, v = ref.qif_ref(x)
    # h1 = 0 + (1 + 1*(0 - 0)(0 - 0.8))/2 = 0.5
    # h2 = 0.5 + (2 + 0.5*(0.5 - 0.8))/2 = 1.425 fires -> v_reset = -0.1
    # h3 = -0.1 + (0 + (-0.1)(-0.9))/2 = -0.055
    close(s, [0.0, 1.0, 0.0])
    close(v, [0.5, -0.1, -0.055])


def test_eif_by_hand():
    x = t([1.0, 1.0])
    s, v = ref.eif_ref(x)
    h1 = (1 + math.exp(-0.8)) / 2  # 0 + (1 + 0 - 0 + exp((0 - 0.8)/1))/2
    h2 = h1 + (1 - h1 + math.exp(h1 - 0.8)) / 2
    assert h1 < 1 <= h2
    close(s, [0.0, 1.0])
    close(v, [h1, -0.1])
    s, v = ref.eif_ref(x[:1], delta_T=0.5, theta_rh=0.6, v_rest=0.2, tau=4.0)
    close(v, [(1 + 0.2 + 0.5 * math.exp(-0.6 / 0.5)) / 4])


def test_izhikevich_by_hand():
    x = t([1.5, 1.0, 0.0])
    s, (v, w) = ref.izhikevich_ref(x, a=0.5, b=0.3)
    # h1 = 0 + (1.5 + (0.1)(-0.8) - 0)/2 = 0.71, no spike;
    # w1 = 0 + (0.5 (0.71 + 0.1) - 0)/2 = 0.2025
    # h2 = 0.71 + (1 + 0.81*(-0.09) - 0.2025)/2 = 1.0723 fires -> v = 0
    # w2 = 0.2025 + (0.5 (1.0723 + 0.1) - 0.2025)/2 + 0.3 = 0.694325
    # h3 = 0 + (0 + 0.1*(-0.8) - 0.694325)/2 = -0.3871625
    # w3 = 0.694325 + (0.5 (-0.3871625 + 0.1) - 0.694325)/2 = 0.27537...
    w3 = 0.694325 + (0.5 * (-0.3871625 + 0.1) - 0.694325) / 2
    close(s, [0.0, 1.0, 0.0])
    close(v, [0.71, 0.0, -0.3871625])
    close(w, [0.2025, 0.694325, w3])
    # The defaults (a = b = 0) halve w every step.
    _, (_, w) = ref.izhikevich_ref(t([0.0, 0.0]), w0=t(0.8))
    close(w, [0.4, 0.2])


def test_izhikevich_adaptation_jump_ignores_detach():
    x = t([3.0]).requires_grad_()
    s, (_, w) = ref.izhikevich_ref(
        x, b=1.0, detach_reset=True, surrogate="straight_through"
    )
    close(s.detach(), [1.0])
    w.sum().backward()
    # w1 = 0 + (0 - 0)/2 + b s; h has a = 0 weight, so dw/dx = b g / tau.
    close(x.grad, [1.0 / 2.0])


def test_cuba_lif_by_hand():
    x = t([0.2, 0.3, 0.0])
    s, (c, v) = ref.cuba_lif_ref(x)
    # c1 = 0.2, h1 = 0.2; c2 = 0.1 + 0.3 = 0.4, h2 = 0.15 + 0.4 = 0.55 fires
    # -> v = 0; c3 = 0.2, h3 = 0.2.
    close(s, [0.0, 1.0, 0.0])
    close(c, [0.2, 0.4, 0.2])
    close(v, [0.2, 0.0, 0.2])
    s, (c, v) = ref.cuba_lif_ref(x, v_reset=None)
    # soft: v2 = 0.55 - 0.5 = 0.05; h3 = 0.0375 + 0.2
    close(v, [0.2, 0.05, 0.2375])


def test_shapes_dtypes_and_initial_states():
    x = torch.rand(4, 2, 3)
    for name, fn in ref.NEURONS.items():
        s, states = fn(x)
        states = states if isinstance(states, tuple) else (states,)
        assert s.shape == x.shape and s.dtype == torch.float32, name
        assert all(st.shape == x.shape for st in states), name
        assert set(s.unique().tolist()) <= {0.0, 1.0}, name
        s, states = fn(x[:0])
        assert s.shape == (0, 2, 3), name
    s, v = ref.if_ref(t([[0.5, 0.5]]), v0=t([0.5, 0.0]))
    close(s, [[1.0, 0.0]])
    s, v = ref.if_ref(t([[0.25]]), v0=0.75)
    close(s, [[1.0]])


# --- Neurons: gradients ---------------------------------------------------


def test_if_one_step_gradients_by_hand():
    # x = 0.5, v_th = 1: over = -0.5, psi = 4 sig(-2)(1 - sig(-2)).
    psi = 4 * _sigmoid(-2.0) * (1 - _sigmoid(-2.0))
    x = t([0.5]).requires_grad_()
    s, _ = ref.if_ref(x.unsqueeze(0))
    s.sum().backward()
    close(x.grad, [psi])
    # d v/dx = 1 - s + (v_reset - h) psi, s = 0, h = 0.5.
    for detach, expected in ((False, 1 - 0.5 * psi), (True, 1.0)):
        x = t([0.5]).requires_grad_()
        _, v = ref.if_ref(x.unsqueeze(0), detach_reset=detach)
        v.sum().backward()
        close(x.grad, [expected])
    # Soft reset: d v/dx = 1 - v_th psi.
    x = t([0.5]).requires_grad_()
    _, v = ref.if_ref(x.unsqueeze(0), v_reset=None)
    v.sum().backward()
    close(x.grad, [1 - psi])


def _lif_bptt(
    x,
    v0,
    s_seq,
    v_seq,
    cS,
    cV,
    tau,
    decay_input,
    v_reset,
    detach_reset,
    v_threshold=1.0,
    alpha=4.0,
):
    """The BPTT recursion for LIF, from the equations: (dL/dx, dL/dv0)."""
    T = x.shape[0]
    v_r = 0.0 if v_reset is None else v_reset
    prev = [v0] + [v_seq[t] for t in range(T - 1)]
    h = [
        prev[t] + (x[t] - (prev[t] - v_r)) / tau
        if decay_input
        else prev[t] - (prev[t] - v_r) / tau + x[t]
        for t in range(T)
    ]
    dh_dv = 1 - 1 / tau
    dh_dx = 1 / tau if decay_input else 1.0
    gX = torch.zeros_like(x)
    G_next = torch.zeros_like(v0)
    for t in reversed(range(T)):
        psi = ref.surrogate_grad("sigmoid", h[t] - v_threshold, alpha=alpha)
        s = s_seq[t]
        if v_reset is None:
            dv_dh = (
                torch.ones_like(s) if detach_reset else 1 - v_threshold * psi
            )
        else:
            dv_dh = 1 - s if detach_reset else 1 - s + (v_reset - h[t]) * psi
        G = cS[t] * psi + (cV[t] + G_next * dh_dv) * dv_dh
        gX[t] = G * dh_dx
        G_next = G
    return gX, G_next * dh_dv


@pytest.mark.parametrize("decay_input", [True, False])
@pytest.mark.parametrize("v_reset", [0.0, -0.3, None])
@pytest.mark.parametrize("detach_reset", [False, True])
def test_lif_autograd_matches_bptt_recursion(
    decay_input, v_reset, detach_reset
):
    gen = torch.Generator().manual_seed(7)
    T, N, tau = 8, 16, 1.7
    x = torch.randn(T, N, dtype=F64, generator=gen) * 0.8 + 0.7
    v0 = torch.rand(N, dtype=F64, generator=gen) * 0.8
    cS = torch.randn(T, N, dtype=F64, generator=gen)
    cV = torch.randn(T, N, dtype=F64, generator=gen)
    x.requires_grad_()
    v0.requires_grad_()
    s, v = ref.lif_ref(
        x,
        v0,
        tau=tau,
        decay_input=decay_input,
        v_reset=v_reset,
        detach_reset=detach_reset,
    )
    assert 0 < s.sum() < s.numel()  # both branches are exercised
    ((s * cS).sum() + (v * cV).sum()).backward()
    gX, gV0 = _lif_bptt(
        x.detach(),
        v0.detach(),
        s.detach(),
        v.detach(),
        cS,
        cV,
        tau,
        decay_input,
        v_reset,
        detach_reset,
    )
    close(x.grad, gX, 1e-10)
    close(v0.grad, gV0, 1e-10)


@pytest.mark.parametrize("decay_input", [True, False])
@pytest.mark.parametrize("v_reset", [0.0, None])
def test_plif_gradients_match_lif_through_the_chain_rule(decay_input, v_reset):
    # 1/tau = sigmoid(w), so tau = 1 + exp(-w) and dL/dw = -dL/dtau (tau - 1).
    gen = torch.Generator().manual_seed(3)
    x = torch.randn(6, 10, dtype=F64, generator=gen) + 0.6
    cV = torch.randn(6, 10, dtype=F64, generator=gen)
    tau0 = 3.0
    w = torch.tensor(ref.init_w(tau0), dtype=F64, requires_grad=True)
    xp = x.clone().requires_grad_()
    s1, v1 = ref.plif_ref(
        xp, None, w=w, decay_input=decay_input, v_reset=v_reset
    )
    ((s1 + v1) * cV).sum().backward()
    tau = torch.tensor(tau0, dtype=F64, requires_grad=True)
    xl = x.clone().requires_grad_()
    s2, v2 = ref.lif_ref(
        xl, None, tau=tau, decay_input=decay_input, v_reset=v_reset
    )
    ((s2 + v2) * cV).sum().backward()
    close(s1.detach(), s2.detach())
    close(v1.detach(), v2.detach(), 1e-12)
    close(xp.grad, xl.grad, 1e-10)
    assert abs(tau.grad.item()) > 1e-3
    close(w.grad, -tau.grad * (tau0 - 1), 1e-10)


def test_cuba_lif_gradient_by_hand():
    # One step, x = 0.2: c' = x, h = c' = 0.2 (no spike), v' = h.
    # dL/dx for L = v' + 2 c' = dv'/dh + 2 = (1 - 0 + (0 - 0.2) psi) + 2.
    psi = 4 * _sigmoid(4 * -0.3) * (1 - _sigmoid(4 * -0.3))
    x = t([0.2]).requires_grad_()
    _, (c, v) = ref.cuba_lif_ref(x)
    (v + 2 * c).sum().backward()
    close(x.grad, [3 - 0.2 * psi])
