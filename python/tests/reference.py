"""Eager PyTorch references for FlexSN's surrogates and shipped neurons.

Independent of the `flexsn` package on purpose: the tests compare what the
compiler produces against these, so they must not share code with it.

* `surrogate_grad(mnemonic, x, **params)` evaluates every surrogate's g(x)
  from its textbook formula: the numerics oracle's
  (test/Oracle/surrogate_oracle.py, docs/Semantics.md's table), on
  tensors.
* `spike(x, surrogate)` is the Heaviside step H(x) = (x >= 0), so H(0) = 1,
  whose backward multiplies the incoming gradient by g(x).
* `if_ref`, `lif_ref`, `plif_ref`, `qif_ref`, `eif_ref`, `izhikevich_ref`
  and `cuba_lif_ref` run the neurons of lib/Neurons/*.mlir in multi-step
  mode with SpikingJelly's torch-backend semantics: the step of the
  numerics oracle (test/Oracle/neuron_oracle.py, docs/Semantics.md), whose
  defaults they take, on tensors; `recurrent_ref` runs a layer of them
  whose spikes feed back through a weight matrix. A soft reset is asked
  for SpikingJelly's way, with ``v_reset=None`` (the files' i1
  ``soft_reset`` flag).

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

# The neurons' equations, the surrogates' g(x) and their defaults: the
# numerics oracle, which the lit tests' NumPy references share.
sys.path.insert(
    0, str(pathlib.Path(__file__).resolve().parents[2] / "test" / "Oracle")
)
import neuron_oracle  # noqa: E402
import surrogate_oracle  # noqa: E402

__all__ = [
    "SURROGATE_DEFAULTS",
    "surrogate_grad",
    "spike",
    "init_w",
    "if_ref",
    "lif_ref",
    "plif_ref",
    "qif_ref",
    "eif_ref",
    "izhikevich_ref",
    "cuba_lif_ref",
    "NEURONS",
    "stepper",
    "recurrent_ref",
]

# Every surrogate's parameters and defaults, in the attribute's order: the
# numerics oracle's.
SURROGATE_DEFAULTS = surrogate_oracle.DEFAULTS

DEFAULT_SURROGATE = ("sigmoid", {"alpha": 4.0})


def _heaviside(x):
    return (x >= 0).to(x.dtype)


class _SurrogateOps:
    """The surrogate oracle's ops on tensors like `x`."""

    exp, cos, abs = torch.exp, torch.cos, torch.abs
    ones_like = torch.ones_like

    def __init__(self, x):
        self.x = x

    def _tensor(self, a):
        # torch.where with Python scalars is not in every version.
        return a if isinstance(a, torch.Tensor) else torch.full_like(self.x, a)

    def where(self, condition, a, b):
        return torch.where(condition, self._tensor(a), self._tensor(b))

    @staticmethod
    def maximum(a, value):
        return torch.clamp(a, min=value)

    @staticmethod
    def minimum(a, value):
        return torch.clamp(a, max=value)


def surrogate_grad(mnemonic, x, **params):
    """g(x) of the surrogate `mnemonic` with `params` (defaults otherwise)."""
    return surrogate_oracle.g(_SurrogateOps(x), mnemonic, x, **params)


def _resolve_surrogate(surrogate):
    """(mnemonic, params dict) from any accepted spelling of a surrogate."""
    if isinstance(surrogate, str):
        mnemonic, params = surrogate, {}
    elif isinstance(surrogate, tuple):
        mnemonic, params = surrogate
    else:
        mnemonic, params = surrogate.mnemonic, surrogate.params
    return mnemonic, surrogate_oracle.resolve(mnemonic, dict(params))


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
# Neurons: the numerics oracle's step (test/Oracle/neuron_oracle.py).
# ---------------------------------------------------------------------------


def _initial(state0, x_seq):
    """A [N...] initial state: zeros for None, a filled tensor for a number."""
    shape = x_seq.shape[1:]
    if state0 is None:
        return x_seq.new_zeros(shape)
    if isinstance(state0, torch.Tensor):
        return state0
    return torch.full(
        shape, float(state0), dtype=x_seq.dtype, device=x_seq.device
    )


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
            w = torch.tensor(
                float(w), dtype=self.like.dtype, device=self.like.device
            )
        return 1 / (1 + torch.exp(-w))

    def spike(self, over):
        return spike(over, self.surrogate)

    @staticmethod
    def detach(s):
        return s.detach()


def stepper(neuron, like, surrogate=DEFAULT_SURROGATE, **params):
    """One step of a shipped neuron on tensors like `like`: `step(x,
    states) -> (s, states)`, its parameters `params` (the oracle's
    defaults for the others; a soft reset as ``v_reset=None``)."""
    names = neuron_oracle.STATES[neuron]
    defaults = neuron_oracle.DEFAULTS[neuron]
    unknown = sorted(set(params) - set(defaults))
    if unknown:
        raise TypeError(f"{neuron}_ref has no parameter {unknown}")
    p = dict(defaults, **params)
    if p["v_reset"] is None:  # SpikingJelly's soft reset
        p["v_reset"], p["soft_reset"] = defaults["v_reset"], True
    ops = _TensorOps(like, surrogate)

    def step(x, states):
        st = dict(zip(names, states))
        s, new, _ = neuron_oracle.step(ops, neuron, p, x, st)
        return s, tuple(new[name] for name in names)

    return step


def recurrent_ref(
    neuron, x_seq, w_in, b_in, w_rec, surrogate=DEFAULT_SURROGATE, **params
):
    """The spikes [T, B, H] of a recurrent layer of `neuron`s over x_seq
    [T, B, I], from rest: s[t] = neuron(x[t] w_in^T + b_in + s[t-1]
    w_rec^T), s[-1] = 0 (b_in may be None)."""
    step = stepper(neuron, x_seq, surrogate, **params)
    hidden = w_rec.shape[0]
    spikes = x_seq.new_zeros(x_seq.shape[1], hidden)
    states = tuple(
        x_seq.new_zeros(x_seq.shape[1], hidden)
        for _ in neuron_oracle.STATES[neuron]
    )
    outputs = []
    for x in x_seq:
        drive = x @ w_in.T
        if b_in is not None:
            drive = drive + b_in
        spikes, states = step(drive + spikes @ w_rec.T, states)
        outputs.append(spikes)
    return (
        torch.stack(outputs)
        if outputs
        else x_seq.new_zeros((0, x_seq.shape[1], hidden))
    )


def _reference(neuron):
    """The reference of a shipped neuron: `ref(x_seq, *initial_states,
    surrogate=..., **params)`, an initial state given positionally or as
    `<state>0` (v0, w0, c0), None for zeros; params by keyword, the
    oracle's defaults for the others, a soft reset as ``v_reset=None``.
    Returns (spike_seq, v_seq), or (spike_seq, (seq, ...)) for a neuron of
    two states."""
    names = neuron_oracle.STATES[neuron]

    def ref(x_seq, *initial, surrogate=DEFAULT_SURROGATE, **params):
        if len(initial) > len(names):
            raise TypeError(
                f"{neuron}_ref takes {len(names)} initial "
                f"state(s) {names}, got {len(initial)}"
            )
        initial = list(initial) + [None] * (len(names) - len(initial))
        for i, name in enumerate(names):
            if name + "0" in params:
                initial[i] = params.pop(name + "0")
        step = stepper(neuron, x_seq, surrogate, **params)
        spikes, seqs = _run(
            x_seq, [_initial(s0, x_seq) for s0 in initial], step
        )
        return spikes, (seqs[0] if len(names) == 1 else tuple(seqs))

    ref.__name__ = ref.__qualname__ = f"{neuron}_ref"
    return ref


# The references by the neuron names of lib/Neurons.
NEURONS = {name: _reference(name) for name in neuron_oracle.STATES}
if_ref, lif_ref, plif_ref = NEURONS["if"], NEURONS["lif"], NEURONS["plif"]
qif_ref, eif_ref = NEURONS["qif"], NEURONS["eif"]
izhikevich_ref, cuba_lif_ref = NEURONS["izhikevich"], NEURONS["cuba_lif"]
