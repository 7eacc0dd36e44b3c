"""Eager PyTorch references for FlexSN's surrogates and shipped neurons.

Independent of the `flexsn` package on purpose: the tests compare what the
compiler produces against these, so they must not share code with it.

* `surrogate_grad(mnemonic, x, **params)` evaluates every surrogate's g(x)
  from its textbook formula (the table in docs/Dialects/FlexSN.md).
* `spike(x, surrogate)` is the Heaviside step H(x) = (x >= 0), so H(0) = 1,
  whose backward multiplies the incoming gradient by g(x).
* `if_ref`, `lif_ref`, `plif_ref`, `qif_ref`, `eif_ref`, `izhikevich_ref`
  and `cuba_lif_ref` run the neurons of lib/Neurons/*.mlir in multi-step
  mode with SpikingJelly's torch-backend semantics. Their keyword arguments
  and defaults are the parameters of those files, except that a soft reset
  is asked for SpikingJelly's way, with ``v_reset=None`` (the files' i1
  ``soft_reset`` flag). Each step evaluates the same operations, in the same
  order, as the file's body, so a float32 run can be compared closely.

Everything follows the dtype of `x_seq` (float64 works) and is
differentiable with autograd; parameters may be Python numbers or tensors
(a tensor that requires grad gets a gradient).

Surrogates are given as a mnemonic (``"atan"``), a pair
(``("sigmoid", {"alpha": 4.0})``) or any object with ``mnemonic`` and
``params`` attributes (such as a ``flexsn.surrogate`` instance).
"""

import math

import torch

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
# Neurons
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


def _fire_and_reset(h, v_threshold, v_reset, detach_reset, surrogate):
    """The fire and reset tail every shipped neuron shares: (s, v')."""
    s = spike(h - v_threshold, surrogate)
    s_d = s.detach() if detach_reset else s
    if v_reset is None:  # soft reset
        return s, h - s_d * v_threshold
    return s, s_d * v_reset + (1 - s_d) * h


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


def if_ref(x_seq, v0=None, v_threshold=1.0, v_reset=0.0, detach_reset=False,
           surrogate=DEFAULT_SURROGATE):
    """IF (lib/Neurons/if.mlir): h = v + x. Returns (spike_seq, v_seq)."""

    def step(x, states):
        (v,) = states
        h = v + x
        s, v = _fire_and_reset(h, v_threshold, v_reset, detach_reset,
                               surrogate)
        return s, (v,)

    spikes, (v_seq,) = _run(x_seq, (_initial(v0, x_seq),), step)
    return spikes, v_seq


def _leaky_charge(v, x, k_div, v_reset, decay_input):
    """LIF/PLIF charge; k_div(a) is a / tau (LIF) or a * sigmoid(w) (PLIF).

    decay_input: h = v + (x - (v - V_r)) / tau; else h = v - (v - V_r) / tau
    + x, with V_r = v_reset for a hard reset and 0 for a soft one.
    """
    v_rest = 0.0 if v_reset is None else v_reset
    dv = v - v_rest
    if decay_input:
        return v + k_div(x - dv)
    return (v - k_div(dv)) + x


def lif_ref(x_seq, v0=None, tau=2.0, decay_input=True, v_threshold=1.0,
            v_reset=0.0, detach_reset=False, surrogate=DEFAULT_SURROGATE):
    """LIF (lib/Neurons/lif.mlir). Returns (spike_seq, v_seq)."""

    def step(x, states):
        (v,) = states
        h = _leaky_charge(v, x, lambda a: a / tau, v_reset, decay_input)
        s, v = _fire_and_reset(h, v_threshold, v_reset, detach_reset,
                               surrogate)
        return s, (v,)

    spikes, (v_seq,) = _run(x_seq, (_initial(v0, x_seq),), step)
    return spikes, v_seq


def plif_ref(x_seq, v0=None, w=0.0, decay_input=True, v_threshold=1.0,
             v_reset=0.0, detach_reset=False, surrogate=DEFAULT_SURROGATE):
    """PLIF (lib/Neurons/plif.mlir): LIF with 1/tau = sigmoid(w).

    `w` is normally a scalar tensor requiring grad; a number is turned into
    one of x_seq's dtype (without grad). Starting from SpikingJelly's
    init_tau, use w = init_w(init_tau). Returns (spike_seq, v_seq).
    """
    if not isinstance(w, torch.Tensor):
        w = torch.tensor(float(w), dtype=x_seq.dtype, device=x_seq.device)
    k = 1 / (1 + torch.exp(-w))  # as the file computes sigmoid(w)

    def step(x, states):
        (v,) = states
        h = _leaky_charge(v, x, lambda a: a * k, v_reset, decay_input)
        s, v = _fire_and_reset(h, v_threshold, v_reset, detach_reset,
                               surrogate)
        return s, (v,)

    spikes, (v_seq,) = _run(x_seq, (_initial(v0, x_seq),), step)
    return spikes, v_seq


def qif_ref(x_seq, v0=None, tau=2.0, v_c=0.8, a0=1.0, v_rest=0.0,
            v_threshold=1.0, v_reset=-0.1, detach_reset=False,
            surrogate=DEFAULT_SURROGATE):
    """QIF (lib/Neurons/qif.mlir):
    h = v + (x + a0 (v - v_rest)(v - v_c)) / tau. Returns (spike_seq, v_seq).
    """

    def step(x, states):
        (v,) = states
        h = v + (x + (a0 * (v - v_rest)) * (v - v_c)) / tau
        s, v = _fire_and_reset(h, v_threshold, v_reset, detach_reset,
                               surrogate)
        return s, (v,)

    spikes, (v_seq,) = _run(x_seq, (_initial(v0, x_seq),), step)
    return spikes, v_seq


def eif_ref(x_seq, v0=None, tau=2.0, delta_T=1.0, theta_rh=0.8, v_rest=0.0,
            v_threshold=1.0, v_reset=-0.1, detach_reset=False,
            surrogate=DEFAULT_SURROGATE):
    """EIF (lib/Neurons/eif.mlir):
    h = v + (x + v_rest - v + delta_T exp((v - theta_rh) / delta_T)) / tau.
    Returns (spike_seq, v_seq).
    """

    def step(x, states):
        (v,) = states
        spike_current = delta_T * torch.exp((v - theta_rh) / delta_T)
        h = v + ((x + (v_rest - v)) + spike_current) / tau
        s, v = _fire_and_reset(h, v_threshold, v_reset, detach_reset,
                               surrogate)
        return s, (v,)

    spikes, (v_seq,) = _run(x_seq, (_initial(v0, x_seq),), step)
    return spikes, v_seq


def izhikevich_ref(x_seq, v0=None, w0=None, tau=2.0, v_c=0.8, a0=1.0,
                   v_rest=-0.1, tau_w=2.0, a=0.0, b=0.0, v_threshold=1.0,
                   v_reset=0.0, detach_reset=False,
                   surrogate=DEFAULT_SURROGATE):
    """Izhikevich (lib/Neurons/izhikevich.mlir), states (v, w):

        h  = v + (x + a0 (v - v_rest)(v - v_c) - w) / tau
        w' = w + (a (h - v_rest) - w) / tau_w + b s

    (w' uses the charged h and the spike itself, never the detached one.)
    Returns (spike_seq, (v_seq, w_seq)).
    """

    def step(x, states):
        v, w = states
        h = v + ((x + (a0 * (v - v_rest)) * (v - v_c)) - w) / tau
        s, v_next = _fire_and_reset(h, v_threshold, v_reset, detach_reset,
                                    surrogate)
        w_next = (w + (a * (h - v_rest) - w) / tau_w) + b * s
        return s, (v_next, w_next)

    states = (_initial(v0, x_seq), _initial(w0, x_seq))
    spikes, (v_seq, w_seq) = _run(x_seq, states, step)
    return spikes, (v_seq, w_seq)


def cuba_lif_ref(x_seq, c0=None, v0=None, c_decay=0.5, v_decay=0.75,
                 v_threshold=0.5, v_reset=0.0, detach_reset=False,
                 surrogate=DEFAULT_SURROGATE):
    """CUBA-LIF (lib/Neurons/cuba_lif.mlir), states (c, v) in that order:

        c' = c c_decay + x
        h  = v v_decay + c'

    Returns (spike_seq, (c_seq, v_seq)).
    """

    def step(x, states):
        c, v = states
        c_next = c * c_decay + x
        h = v * v_decay + c_next
        s, v_next = _fire_and_reset(h, v_threshold, v_reset, detach_reset,
                                    surrogate)
        return s, (c_next, v_next)

    states = (_initial(c0, x_seq), _initial(v0, x_seq))
    spikes, (c_seq, v_seq) = _run(x_seq, states, step)
    return spikes, (c_seq, v_seq)


# The references by the neuron names of lib/Neurons.
NEURONS = {
    "if": if_ref, "lif": lif_ref, "plif": plif_ref, "qif": qif_ref,
    "eif": eif_ref, "izhikevich": izhikevich_ref, "cuba_lif": cuba_lif_ref,
}
