"""Eager PyTorch references for FlexSN's surrogates and shipped neurons.

Independent of the `flexsn` package on purpose: the tests compare what the
compiler produces against these, so they must not share code with it.

* `surrogate_grad(mnemonic, x, **params)` evaluates every surrogate's g(x)
  from its textbook formula (the table in docs/Dialects/FlexSN.md).
* `spike(x, surrogate)` is the Heaviside step H(x) = (x >= 0), so H(0) = 1,
  whose backward multiplies the incoming gradient by g(x).
* `if_ref`, `lif_ref`, `plif_ref`, `qif_ref`, `eif_ref`, `izhikevich_ref`
  and `cuba_lif_ref` run the neurons of lib/Neurons/*.mlir in multi-step
  mode with SpikingJelly's torch-backend semantics: the step of the
  numerics oracle (test/Oracle/neurons.py, docs/Semantics.md), whose
  defaults they take, on tensors. A soft reset is asked for SpikingJelly's
  way, with ``v_reset=None`` (the files' i1 ``soft_reset`` flag).

Everything follows the dtype of `x_seq` (float64 works) and is
differentiable with autograd; parameters may be Python numbers or tensors
(a tensor that requires grad gets a gradient).

Surrogates are given as a mnemonic (``"atan"``), a pair
(``("sigmoid", {"alpha": 4.0})``) or any object with ``mnemonic`` and
``params`` attributes (such as a ``flexsn.surrogate`` instance).
"""

import math
import pathlib
import sys

import torch

# The neurons' equations and defaults: the numerics oracle, which the lit
# tests' NumPy references share.
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2]
                       / "test" / "Oracle"))
import neurons  # noqa: E402

__all__ = [
    "SURROGATE_DEFAULTS", "surrogate_grad", "spike", "init_w", "if_ref",
    "lif_ref", "plif_ref", "qif_ref", "eif_ref", "izhikevich_ref",
    "cuba_lif_ref", "NEURONS",
]

# Every surrogate's parameters and defaults, in the attribute's order.
SURROGATE_DEFAULTS = {
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

DEFAULT_SURROGATE = ("sigmoid", {"alpha": 4.0})


def _normal_density(x, mean, sd):
    """The density of N(mean, sd²) at x."""
    return (torch.exp(-((x - mean) / sd) ** 2 / 2)
            / (sd * math.sqrt(2 * math.pi)))


def _full(x, value):
    # torch.where with Python scalars is not available in every version.
    return torch.full_like(x, value)


def _heaviside(x):
    return (x >= 0).to(x.dtype)


def _sigmoid_grad(x, alpha):
    s = torch.sigmoid(alpha * x)
    return alpha * s * (1 - s)


def _squarewave_grad(x, n, T_period):
    total = torch.zeros_like(x)
    for i in range(1, n):
        total = total + torch.cos((2 * i - 1) * (2 * math.pi / T_period) * x)
    return (4 / T_period) * total


def _fake_numerical_grad(x, alpha):
    # (2H(x) - 1)/x is 1/|x| away from 0; at 0 (either sign) g is alpha.
    ratio = (2 * _heaviside(x) - 1) / x
    return torch.where(x == 0, _full(x, alpha), torch.clamp(ratio, max=alpha))


def _log_tailed_grad(x, alpha):
    tail = 1 / torch.clamp(x, min=1.0)  # 1/x where it is taken
    return torch.where(x <= 0, _full(x, alpha),
                       torch.where(x <= 1, _full(x, 1.0), tail))


_GRADS = {
    "sigmoid": _sigmoid_grad,
    "atan": lambda x, alpha:
        (alpha / 2) / (1 + (math.pi / 2 * alpha * x) ** 2),
    "piecewise_quadratic": lambda x, alpha:
        torch.clamp(alpha - alpha ** 2 * x.abs(), min=0.0),
    "piecewise_exp": lambda x, alpha:
        (alpha / 2) * torch.exp(-alpha * x.abs()),
    "soft_sign": lambda x, alpha:
        1 / (2 * alpha * (1 / alpha + x.abs()) ** 2),
    "super_spike": lambda x, alpha: alpha / (x.abs() + 1) ** 2,
    "erf": lambda x, alpha:
        (alpha / math.sqrt(math.pi)) * torch.exp(-(alpha * x) ** 2),
    "nonzero_sign_log_abs": lambda x, alpha: 1 / (1 / alpha + x.abs()),
    "piecewise_leaky_relu": lambda x, w, c:
        torch.where(x.abs() < w, _full(x, 1 / (2 * w)), _full(x, c)),
    "squarewave_fourier_series": _squarewave_grad,
    "s2nn": lambda x, alpha, beta:
        torch.where(x < 0, _sigmoid_grad(x, alpha),
                    beta / (torch.clamp(x, min=0.0) + 1)),
    "q_pseudo_spike": lambda x, alpha:
        (1 + 2 * x.abs() / (alpha - 1)) ** (-alpha),
    "leaky_k_relu": lambda x, leak, k:
        torch.where(x >= 0, _full(x, k), _full(x, leak)),
    "fake_numerical_gradient": _fake_numerical_grad,
    "log_tailed_relu": _log_tailed_grad,
    "rect": lambda x, alpha:
        torch.where(x.abs() < 0.5 / alpha, _full(x, alpha), _full(x, 0.0)),
    "multi_gaussian": lambda x, sigma, h, s:
        (1 + h) * _normal_density(x, 0.0, sigma)
        - h * _normal_density(x, sigma, s * sigma)
        - h * _normal_density(x, -sigma, s * sigma),
    "straight_through": lambda x: torch.ones_like(x),
}


def _surrogate_params(mnemonic, params):
    """Defaults of `mnemonic` updated by `params`; unknown names raise."""
    if mnemonic not in SURROGATE_DEFAULTS:
        raise KeyError("unknown surrogate %r" % (mnemonic,))
    merged = dict(SURROGATE_DEFAULTS[mnemonic])
    for name, value in params.items():
        if name not in merged:
            raise TypeError("surrogate %r has no parameter %r"
                            % (mnemonic, name))
        merged[name] = value
    return merged


def surrogate_grad(mnemonic, x, **params):
    """g(x) of the surrogate `mnemonic` with `params` (defaults otherwise)."""
    return _GRADS[mnemonic](x, **_surrogate_params(mnemonic, params))


def _resolve_surrogate(surrogate):
    """(mnemonic, params dict) from any accepted spelling of a surrogate."""
    if isinstance(surrogate, str):
        mnemonic, params = surrogate, {}
    elif isinstance(surrogate, tuple):
        mnemonic, params = surrogate
    else:
        mnemonic, params = surrogate.mnemonic, surrogate.params
    return mnemonic, _surrogate_params(mnemonic, dict(params))


class _Spike(torch.autograd.Function):
    """H(x) forward, grad * g(x) backward."""

    @staticmethod
    def forward(ctx, x, mnemonic, params):
        ctx.save_for_backward(x)
        ctx.surrogate = (mnemonic, params)
        return _heaviside(x)

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        mnemonic, params = ctx.surrogate
        return grad * surrogate_grad(mnemonic, x, **params), None, None


def spike(x, surrogate=DEFAULT_SURROGATE):
    """Heaviside spike of `x` (1 where x >= 0) with a surrogate backward."""
    mnemonic, params = _resolve_surrogate(surrogate)
    return _Spike.apply(x, mnemonic, params)


def init_w(init_tau=2.0):
    """PLIF's initial w for `init_tau`: sigmoid(w) = 1/init_tau."""
    return -math.log(init_tau - 1.0)


# ---------------------------------------------------------------------------
# Neurons: the numerics oracle's step (test/Oracle/neurons.py) on tensors.
# ---------------------------------------------------------------------------


def _initial(state0, x_seq):
    """A [N...] initial state: zeros for None, a filled tensor for a number."""
    shape = x_seq.shape[1:]
    if state0 is None:
        return x_seq.new_zeros(shape)
    if isinstance(state0, torch.Tensor):
        return state0
    return torch.full(shape, float(state0), dtype=x_seq.dtype,
                      device=x_seq.device)


def _run(x_seq, states, step):
    """Runs `step(x, states) -> (s, states)` over time.

    Returns (spike_seq, [state_seq, ...]); a state_seq holds the state after
    each step (after the reset, as SpikingJelly's v_seq does).
    """
    shape = x_seq.shape[1:]
    spikes, seqs = [], [[] for _ in states]
    for x in x_seq:
        s, states = step(x, states)
        spikes.append(s)
        for seq, state in zip(seqs, states):
            seq.append(state)

    def stack(items):
        return torch.stack(items) if items else x_seq.new_zeros((0,) + shape)

    return stack(spikes), [stack(seq) for seq in seqs]


class _TensorOps:
    """The oracle's ops on x_seq's dtype and device, spiking with
    `surrogate`'s backward."""

    def __init__(self, x_seq, surrogate):
        self.like, self.surrogate = x_seq, surrogate

    @staticmethod
    def scalar(value):
        return value

    @staticmethod
    def exp(a):
        return torch.exp(a)

    def sigmoid(self, w):
        # PLIF's w: normally a tensor requiring grad; a number becomes one
        # of x_seq's dtype (without grad).
        if not isinstance(w, torch.Tensor):
            w = torch.tensor(float(w), dtype=self.like.dtype,
                             device=self.like.device)
        return 1 / (1 + torch.exp(-w))

    def spike(self, over):
        return spike(over, self.surrogate)

    @staticmethod
    def detach(s):
        return s.detach()


def _reference(neuron):
    """The reference of a shipped neuron: `ref(x_seq, *initial_states,
    surrogate=..., **params)`, an initial state given positionally or as
    `<state>0` (v0, w0, c0), None for zeros; params by keyword, the
    oracle's defaults for the others, a soft reset as ``v_reset=None``.
    Returns (spike_seq, v_seq), or (spike_seq, (seq, ...)) for a neuron of
    two states."""
    names = neurons.STATES[neuron]
    defaults = neurons.DEFAULTS[neuron]

    def ref(x_seq, *initial, surrogate=DEFAULT_SURROGATE, **params):
        if len(initial) > len(names):
            raise TypeError(f"{neuron}_ref takes {len(names)} initial "
                            f"state(s) {names}, got {len(initial)}")
        initial = list(initial) + [None] * (len(names) - len(initial))
        for i, name in enumerate(names):
            if name + "0" in params:
                initial[i] = params.pop(name + "0")
        unknown = sorted(set(params) - set(defaults))
        if unknown:
            raise TypeError(f"{neuron}_ref has no parameter {unknown}")
        p = dict(defaults, **params)
        if p["v_reset"] is None:  # SpikingJelly's soft reset
            p["v_reset"], p["soft_reset"] = defaults["v_reset"], True
        ops = _TensorOps(x_seq, surrogate)

        def step(x, states):
            s, new, _ = neurons.step(ops, neuron, p, x, dict(zip(names,
                                                                 states)))
            return s, tuple(new[name] for name in names)

        spikes, seqs = _run(x_seq, [_initial(s0, x_seq) for s0 in initial],
                            step)
        return spikes, (seqs[0] if len(names) == 1 else tuple(seqs))

    ref.__name__ = ref.__qualname__ = f"{neuron}_ref"
    return ref


# The references by the neuron names of lib/Neurons.
NEURONS = {name: _reference(name) for name in neurons.STATES}
if_ref, lif_ref, plif_ref = NEURONS["if"], NEURONS["lif"], NEURONS["plif"]
qif_ref, eif_ref = NEURONS["qif"], NEURONS["eif"]
izhikevich_ref, cuba_lif_ref = NEURONS["izhikevich"], NEURONS["cuba_lif"]
