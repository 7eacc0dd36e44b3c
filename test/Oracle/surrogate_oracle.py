"""The numerics oracle's surrogates: every shipped surrogate's g(x) and
defaults, written once, from the surrogate table of docs/Semantics.md (not
from FlexSN's ODS), for the NumPy tests (test/Integration/CPU/gradients.py)
and the torch ones (python/tests/reference.py).

g runs on whatever `ops` the caller gives:

    ops.exp(a), ops.cos(a), ops.abs(a)
    ops.where(condition, a, b)   a and b arrays or numbers
    ops.maximum(a, number), ops.minimum(a, number)
    ops.ones_like(a)

and + - * / ** besides. This file imports nothing but math.
"""

import math

# Every surrogate's parameters and defaults, in the attribute's order.
DEFAULTS = {
    "sigmoid": {"alpha": 4.0},
    "atan": {"alpha": 2.0},
    "piecewise_quadratic": {"alpha": 1.0},
    "piecewise_exp": {"alpha": 1.0},
    "soft_sign": {"alpha": 2.0},
    "super_spike": {"alpha": 1.0},
    "erf": {"alpha": 2.0},
    "nonzero_sign_log_abs": {"alpha": 1.0},
    "piecewise_leaky_relu": {"w": 1.0, "c": 0.01},
    "squarewave_fourier_series": {"n": 2, "T_period": 8.0},
    "s2nn": {"alpha": 4.0, "beta": 1.0},
    "q_pseudo_spike": {"alpha": 2.0},
    "leaky_k_relu": {"leak": 0.0, "k": 1.0},
    "fake_numerical_gradient": {"alpha": 0.3},
    "log_tailed_relu": {"alpha": 0.0},
    "rect": {"alpha": 1.0},
    "multi_gaussian": {"sigma": 0.5, "h": 0.15, "s": 6.0},
    "straight_through": {},
}


def resolve(mnemonic, params):
    """The defaults of `mnemonic` updated by `params`; an unknown surrogate
    is a KeyError, an unknown parameter a TypeError."""
    if mnemonic not in DEFAULTS:
        raise KeyError("unknown surrogate %r" % (mnemonic,))
    merged = dict(DEFAULTS[mnemonic])
    for name, value in params.items():
        if name not in merged:
            raise TypeError(
                "surrogate %r has no parameter %r" % (mnemonic, name)
            )
        merged[name] = value
    return merged


def sigmoid(ops, z):
    return 1 / (1 + ops.exp(-z))


def _sigmoid(ops, x, alpha):
    s = sigmoid(ops, alpha * x)
    return alpha * s * (1 - s)


def _normal_density(ops, x, mean, sd):
    """The density of N(mean, sd^2) at x."""
    z = (x - mean) / sd
    return ops.exp(-z * z / 2) / (sd * math.sqrt(2 * math.pi))


def _squarewave(ops, x, n, T_period):
    total = 0 * x
    for i in range(1, n):
        total = total + ops.cos((2 * i - 1) * (2 * math.pi / T_period) * x)
    return (4 / T_period) * total


def _fake_numerical_gradient(ops, x, alpha):
    # (2H(x) - 1)/x is 1/|x| away from 0; at 0 (either sign) g is alpha.
    sign = ops.where(x >= 0, 1.0, -1.0)
    ratio = sign / ops.where(x == 0, 1.0, x)
    return ops.where(x == 0, alpha, ops.minimum(ratio, alpha))


def _log_tailed_relu(ops, x, alpha):
    tail = 1 / ops.maximum(x, 1.0)  # 1/x where it is taken
    return ops.where(x <= 0, alpha, ops.where(x <= 1, 1.0, tail))


_G = {
    "sigmoid": _sigmoid,
    "atan": lambda ops, x, alpha: (alpha / 2)
    / (1 + (math.pi / 2 * alpha * x) ** 2),
    "piecewise_quadratic": lambda ops, x, alpha: ops.maximum(
        alpha - alpha**2 * ops.abs(x), 0.0
    ),
    "piecewise_exp": lambda ops, x, alpha: (alpha / 2)
    * ops.exp(-alpha * ops.abs(x)),
    "soft_sign": lambda ops, x, alpha: 1
    / (2 * alpha * (1 / alpha + ops.abs(x)) ** 2),
    "super_spike": lambda ops, x, alpha: alpha / (ops.abs(x) + 1) ** 2,
    "erf": lambda ops, x, alpha: (alpha / math.sqrt(math.pi))
    * ops.exp(-((alpha * x) ** 2)),
    "nonzero_sign_log_abs": lambda ops, x, alpha: 1 / (1 / alpha + ops.abs(x)),
    "piecewise_leaky_relu": lambda ops, x, w, c: ops.where(
        ops.abs(x) < w, 1 / (2 * w), c
    ),
    "squarewave_fourier_series": _squarewave,
    "s2nn": lambda ops, x, alpha, beta: ops.where(
        x < 0, _sigmoid(ops, x, alpha), beta / (ops.maximum(x, 0.0) + 1)
    ),
    "q_pseudo_spike": lambda ops, x, alpha: (1 + 2 * ops.abs(x) / (alpha - 1))
    ** (-alpha),
    "leaky_k_relu": lambda ops, x, leak, k: ops.where(x >= 0, k, leak),
    "fake_numerical_gradient": _fake_numerical_gradient,
    "log_tailed_relu": _log_tailed_relu,
    "rect": lambda ops, x, alpha: ops.where(
        ops.abs(x) < 0.5 / alpha, alpha, 0.0
    ),
    "multi_gaussian": lambda ops, x, sigma, h, s: (1 + h)
    * _normal_density(ops, x, 0.0, sigma)
    - h * _normal_density(ops, x, sigma, s * sigma)
    - h * _normal_density(ops, x, -sigma, s * sigma),
    "straight_through": lambda ops, x: ops.ones_like(x),
}


def g(ops, mnemonic, x, **params):
    """g(x) of the surrogate `mnemonic` with `params` (its defaults
    otherwise)."""
    return _G[mnemonic](ops, x, **resolve(mnemonic, params))
