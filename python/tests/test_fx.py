"""flexsn.fx: Python step functions imported as neurons, against eager loops.

Every imported neuron is compiled for the CPU and run through
`flexsn.torch.FlexSN`; its outputs, state sequences and gradients (inputs,
initial states, trainable parameters) are compared with eager PyTorch
autograd of the same step function called in a plain loop over time
(`flexsn.spike` eagerly is an autograd function). The op table is covered op
by op: each op feeds an output of its own, and each output's gradient is
taken on its own. Also: every surrogate (eager gradients against
reference.py's formulas, and through the importer), a neuron with several
inputs, states and outputs and runtime/trainable parameters, const
parameters, closures and nn.Module step functions, the shipped neurons
written in Python (checked against reference.py too), and the errors for
what cannot be imported.

Everything runs on the CPU (CI); the op table, the surrogates and the
shipped neurons also on CUDA where a GPU is present (`cuda` marker).
Compiles dominate the time (about 1 s each): every neuron is compiled once,
two at a time, by a module fixture.
"""

import concurrent.futures
import math
import re
import subprocess

import pytest
import torch
from torch import nn
import torch.nn.functional as F

import flexsn
from flexsn import fx
from flexsn._tools import tool_command
from flexsn import surrogate as sg
from flexsn.fx import (
    ControlFlowError,
    Runtime,
    StepImportError,
    Trainable,
    UnsupportedOpError,
    import_step,
    trace_step,
)
from flexsn.torch import FlexSN

import reference as ref

T, N = 5, 7
# On the CPU the kernels evaluate the traced ops in order, as eager does;
# libm's and torch's exp/log/erf/... differ by an ulp, which a few steps of
# state feedback can grow. NVVM may also contract multiply-adds into FMAs.
FWD_TOL = dict(rtol=1e-5, atol=1e-5)
GRAD_TOL = {
    "cpu": dict(rtol=1e-4, atol=1e-5),
    "cuda": dict(rtol=2e-4, atol=2e-5),
}

from devices import DEVICES, HAS_CUDA  # noqa: E402

TARGETS = {"cpu": None, "cuda": None}


def close(got, want, what, **tol):
    assert (
        got.shape == want.shape
    ), f"{what}: shape {tuple(got.shape)}, expected {tuple(want.shape)}"
    torch.testing.assert_close(
        got.detach().float().cpu(),
        want.detach().float().cpu(),
        msg=lambda m: f"{what}: {m}",
        **(tol or FWD_TOL),
    )


def tensor_kwargs(params):
    """Eager parameter values: floats as f32 scalars, flags as bool ones
    (torch.where needs a tensor condition)."""
    out = {}
    for k, v in params.items():
        if isinstance(v, torch.Tensor):
            out[k] = v
        elif isinstance(v, bool):
            out[k] = torch.tensor(v)
        else:
            out[k] = torch.tensor(float(v))
    return out


def run_eager(core, inputs, inits, num_outputs, kwargs=None):
    """The step function in a loop over time: ([output_seq], [state_seq])."""
    states = list(inits)
    outs = [[] for _ in range(num_outputs)]
    seqs = [[] for _ in states]
    for t in range(inputs[0].shape[0]):
        result = core(*[x[t] for x in inputs], *states, **(kwargs or {}))
        result = result if isinstance(result, tuple) else (result,)
        for seq, value in zip(outs, result[:num_outputs]):
            seq.append(value.expand(N))
        states = list(result[num_outputs:])
        for seq, value in zip(seqs, states):
            seq.append(value)
    return [torch.stack(o) for o in outs], [torch.stack(s) for s in seqs]


def run_module(module, inputs, inits):
    module.reset()
    module.states = list(inits)
    outs = module(*inputs)
    outs = list(outs) if isinstance(outs, tuple) else [outs]
    return outs, list(module.state_seqs)


def grads(value, leaves):
    """d value / d leaves; zeros where value does not depend on a leaf."""
    if not value.requires_grad:
        return [torch.zeros_like(leaf) for leaf in leaves]
    got = torch.autograd.grad(
        value, leaves, retain_graph=True, allow_unused=True
    )
    return [
        torch.zeros_like(leaf) if g is None else g
        for g, leaf in zip(got, leaves)
    ]


def leaves_like(tensors):
    return [t.detach().clone().requires_grad_() for t in tensors]


# ---------------------------------------------------------------------------
# What the tests compile
# ---------------------------------------------------------------------------

# The op table, one op per output: `a` is signed and depends on the state,
# `p` is positive (for log, sqrt, ...).
ARITH_OPS = [
    ("a + p", lambda a, p: a + p),
    ("a + 1.5", lambda a, p: a + 1.5),
    ("1.5 + a", lambda a, p: 1.5 + a),
    ("a - p", lambda a, p: a - p),
    ("a - 0.25", lambda a, p: a - 0.25),
    ("2.0 - a", lambda a, p: 2.0 - a),
    ("a * p", lambda a, p: a * p),
    ("3.0 * a", lambda a, p: 3.0 * a),
    ("a / p", lambda a, p: a / p),
    ("a / 4.0", lambda a, p: a / 4.0),
    ("1.0 / p", lambda a, p: 1.0 / p),
    ("-a", lambda a, p: -a),
    ("+a", lambda a, p: +a),
    ("int scalars", lambda a, p: 2 * a + 1 - p * 3),
    ("torch.add alpha", lambda a, p: torch.add(a, p, alpha=2.0)),
    ("torch.sub alpha", lambda a, p: torch.sub(a, p, alpha=0.5)),
    ("torch.rsub", lambda a, p: torch.rsub(a, p, alpha=2.0)),
    ("torch.mul/div", lambda a, p: torch.mul(a, p) + torch.div(a, p)),
    ("torch.true_divide", lambda a, p: torch.true_divide(a, p)),
    (
        "aliases",
        lambda a, p: torch.subtract(a, p) * torch.multiply(a, p)
        + torch.divide(p, 2.0),
    ),
    ("torch.neg", lambda a, p: torch.neg(a) + torch.negative(p)),
    ("methods", lambda a, p: a.add(p).sub(0.5).mul(p).div(p + 1.0).neg()),
    ("clone/contiguous", lambda a, p: a.clone() * p.contiguous()),
    (
        "*_like",
        lambda a, p: a * torch.ones_like(a)
        + torch.zeros_like(p)
        + torch.full_like(a, 0.5) * p,
    ),
]

MATH_OPS = [
    ("exp", lambda a, p: torch.exp(a)),
    ("Tensor.exp", lambda a, p: (0.5 * a).exp()),
    ("log", lambda a, p: torch.log(p)),
    ("log1p", lambda a, p: torch.log1p(p)),
    ("sqrt", lambda a, p: torch.sqrt(p)),
    ("rsqrt", lambda a, p: torch.rsqrt(p)),
    ("sigmoid", lambda a, p: torch.sigmoid(3.0 * a)),
    ("Tensor.sigmoid", lambda a, p: (a - p).sigmoid()),
    ("special.expit", lambda a, p: torch.special.expit(a)),
    ("tanh", lambda a, p: torch.tanh(a)),
    ("atan", lambda a, p: torch.atan(a) + torch.arctan(p)),
    ("erf", lambda a, p: torch.erf(a) + torch.special.erf(p)),
    ("sin", lambda a, p: torch.sin(a)),
    ("cos", lambda a, p: a.cos()),
    (
        "abs",
        lambda a, p: torch.abs(a) + torch.absolute(a - p) + (a + 0.3).abs(),
    ),
    ("reciprocal", lambda a, p: torch.reciprocal(p)),
    ("square", lambda a, p: torch.square(a)),
    ("relu", lambda a, p: torch.relu(a) + F.relu(a - 0.5) + (p - 1).relu()),
    ("sign", lambda a, p: torch.sign(a) * p),
    ("a ** 2", lambda a, p: a**2),
    ("a ** 3", lambda a, p: a**3),
    ("a ** 4", lambda a, p: a**4),
    ("p ** 0.5", lambda a, p: p**0.5),
    ("p ** -0.5", lambda a, p: p**-0.5),
    ("p ** -1", lambda a, p: p**-1),
    ("p ** -2", lambda a, p: p**-2),
    ("p ** 1.7", lambda a, p: p**1.7),
    ("a ** 0 + a ** 1", lambda a, p: a**0 + a**1),
    ("2.0 ** a", lambda a, p: 2.0**a),
    ("p ** a", lambda a, p: p**a),
    ("torch.pow", lambda a, p: torch.pow(a, 2) + p.pow(1.5)),
]

SELECT_OPS = [
    ("ge.float()", lambda a, p: (a >= 0.2).float()),
    ("gt tensor", lambda a, p: (a > p - 1.0).float()),
    ("lt.to(dtype)", lambda a, p: (a < 0.1).to(a.dtype)),
    ("le.to(float32)", lambda a, p: (a <= p).to(torch.float32)),
    ("eq/ne", lambda a, p: (p == p).float() + (a != p).float()),
    (
        "torch.ge/Tensor.gt",
        lambda a, p: torch.ge(a, 0.0).float()
        + a.gt(0.3).type_as(a)
        + torch.lt(a, p).float()
        + a.le(0.5).float(),
    ),
    (
        "ties",
        lambda a, p: (a <= a).float()
        + 2.0 * (a < a).float()
        + 4.0 * (a >= a).float()
        + 8.0 * (a > a).float()
        + 16.0 * (a == a).float()
        + 32.0 * (a != a).float()
        + 64.0 * torch.le(p, p).float()
        + 128.0 * torch.gt(p, p).float(),
    ),
    ("bool * float", lambda a, p: a * (a > 0)),
    ("bool * scalar", lambda a, p: (a > 0) * 2.0 + p),
    ("1 - bool.float()", lambda a, p: 1.0 - (a > 0).float()),
    ("where", lambda a, p: torch.where(a > 0, a * 2.0, p)),
    ("where scalar", lambda a, p: torch.where(a > 0, a, 0.5)),
    ("Tensor.where", lambda a, p: a.where(a > 0, p)),
    ("masked_fill", lambda a, p: a.masked_fill(a < 0, 0.25) * p),
    (
        "& |",
        lambda a, p: torch.where((a > 0) & (p > 1.0), a, -p)
        + torch.where((a > 0.5) | (p < 0.8), a, p),
    ),
    (
        "~ ^",
        lambda a, p: torch.where(~(a > 0), a, p)
        + torch.where((a > 0) ^ (p > 1.2), p, a),
    ),
    (
        "logical_*",
        lambda a, p: torch.where(
            torch.logical_and(a > 0, torch.logical_not(p > 1.5)), a, p
        )
        + torch.where(
            torch.logical_or(a > 1, torch.logical_xor(a > 0, p > 1)), p, a
        ),
    ),
    ("Tensor.bool()", lambda a, p: torch.where(a.bool(), a, p)),
    ("clamp", lambda a, p: torch.clamp(a, -0.5, 0.5)),
    ("clamp min", lambda a, p: torch.clamp(a, min=0.0)),
    ("clamp max", lambda a, p: a.clamp(max=0.3)),
    ("clamp tensors", lambda a, p: torch.clamp(a, min=p - 1.5, max=p)),
    (
        "clamp_min/max",
        lambda a, p: torch.clamp_min(a, 0.1) + a.clamp_max(-0.1),
    ),
    ("clip", lambda a, p: torch.clip(a, -0.2, 0.2)),
    ("min/max", lambda a, p: torch.min(a, p) + torch.max(a, p - 1.0)),
    (
        "minimum/maximum",
        lambda a, p: torch.minimum(a, p)
        - torch.maximum(a, -p)
        + a.max(p - 1.2),
    ),
    ("fmax/fmin", lambda a, p: torch.fmax(a, p - 1) + torch.fmin(a, 0.5 * p)),
    ("heaviside", lambda a, p: torch.heaviside(a, torch.tensor(0.5))),
    ("detach", lambda a, p: a.detach() * p + torch.detach(a)),
]
# Ops torch cannot differentiate: the imported neuron gives them no gradient.
NO_EAGER_GRAD = {"heaviside"}


def op_core(ops):
    def core(x, y, v):
        a = x + 0.5 * v
        return tuple(fn(a, y) for _, fn in ops) + (0.6 * v + 0.4 * x,)

    return core


OP_GROUPS = {"arith": ARITH_OPS, "math": MATH_OPS, "select": SELECT_OPS}

# Every surrogate, with parameters other than the defaults.
SURROGATES = [
    sg.Sigmoid(alpha=3.0),
    sg.ATan(alpha=2.5),
    sg.PiecewiseQuadratic(alpha=0.8),
    sg.PiecewiseExp(alpha=1.5),
    sg.SoftSign(alpha=1.5),
    sg.SuperSpike(alpha=2.0),
    sg.Erf(alpha=1.5),
    sg.NonzeroSignLogAbs(alpha=2.0),
    sg.PiecewiseLeakyReLU(w=0.5, c=0.1),
    sg.SquarewaveFourierSeries(n=4, T_period=4.0),
    sg.S2NN(alpha=3.0, beta=0.5),
    sg.QPseudoSpike(alpha=3.0),
    sg.LeakyKReLU(leak=0.1, k=0.8),
    sg.FakeNumericalGradient(alpha=0.5),
    sg.LogTailedReLU(alpha=0.1),
    sg.Rect(alpha=0.8),
    sg.MultiGaussian(sigma=0.8, h=0.3, s=3.0),
    sg.DeterministicPass(),
]
assert [type(s) for s in SURROGATES] == list(sg.ALL)


def surrogate_core(x, v):
    a = x + 0.5 * v
    spikes = tuple(flexsn.spike(a, surrogate=s) for s in SURROGATES)
    # The other spellings: positional, a class, a name, the default.
    more = (
        flexsn.spike(a - 0.2, sg.ATan),
        fx.spike(a + 0.1, "erf"),
        fx.spike(a),
    )
    return spikes + more + (0.5 * v + 0.5 * x,)


NUM_SURROGATE_OUTPUTS = len(SURROGATES) + 3


def two_compartment(
    x,
    i_ext,
    u,
    v,
    g=0.3,
    k=Runtime(0.8),
    w=Trainable(0.5),
    soft=Runtime(False),
):
    """Two inputs, two states, two outputs; const, runtime (f32 and i1) and
    trainable parameters."""
    u1 = u * k + w * x
    h = v + g * (u1 - v) + i_ext
    s = flexsn.spike(h - 1.0, surrogate=sg.ATan())
    v1 = torch.where(soft, h - s, h * (1.0 - s))
    return s, h, u1, v1


def const_lif(x, v, tau=2.0, v_th=1.0, v_reset=0.0):
    h = v + (x - (v - v_reset)) / tau
    s = flexsn.spike(h - v_th)
    return s, s * v_reset + (1.0 - s) * h


DECAY = 0.6
GLOBAL_W = nn.Parameter(torch.tensor(0.4))


def make_closure_core():
    threshold = 0.9  # a Python float: a constant
    scale = torch.tensor(1.5)  # a tensor without gradient: a constant
    w = nn.Parameter(torch.tensor(0.2))  # trainable, named "w"

    def core(x, v):
        k = torch.sigmoid(w)  # an op on the captured Parameter itself
        h = v * DECAY + x * k * scale
        s = flexsn.spike(h - threshold)
        return s, h * (1.0 - s) + GLOBAL_W * s

    return core, w


CLOSURE_CORE, CLOSURE_W = make_closure_core()


class Adaptive(nn.Module):
    """A module step function: its Parameters are trainable parameters
    (`beta`, `inner_gain`), its buffer a constant, nn.Tanh is traced."""

    def __init__(self):
        super().__init__()
        self.beta = nn.Parameter(torch.tensor(0.7))
        self.inner = nn.Module()
        self.inner.gain = nn.Parameter(torch.tensor(1.2))
        self.register_buffer("threshold", torch.tensor(0.8))
        self.act = nn.Tanh()

    def forward(self, x, v, a):
        h = self.beta * v + self.inner.gain * self.act(x) - a
        s = flexsn.spike(h - self.threshold, surrogate=sg.SuperSpike())
        return s, h * (1.0 - s), 0.8 * a + 0.2 * s


ADAPTIVE = Adaptive()


# The shipped neurons (lib/Neurons, docs/Semantics.md) as step functions.
def _fire_reset(h, v_threshold, v_reset, soft_reset, detach_reset):
    s = flexsn.spike(h - v_threshold)
    s_d = torch.where(detach_reset, s.detach(), s)
    v = torch.where(
        soft_reset, h - s_d * v_threshold, s_d * v_reset + (1.0 - s_d) * h
    )
    return s, v


def if_step(
    x, v, v_threshold=1.0, v_reset=0.0, soft_reset=False, detach_reset=False
):
    return _fire_reset(v + x, v_threshold, v_reset, soft_reset, detach_reset)


def lif_step(
    x,
    v,
    tau=2.0,
    v_threshold=1.0,
    v_reset=0.0,
    soft_reset=False,
    detach_reset=False,
    decay_input=True,
):
    dv = v - torch.where(soft_reset, 0.0, v_reset)
    h = torch.where(decay_input, v + (x - dv) / tau, v - dv / tau + x)
    return _fire_reset(h, v_threshold, v_reset, soft_reset, detach_reset)


def plif_step(
    x,
    v,
    w=Trainable(0.0),
    v_threshold=1.0,
    v_reset=0.0,
    soft_reset=False,
    detach_reset=False,
    decay_input=True,
):
    k = torch.sigmoid(w)
    dv = v - torch.where(soft_reset, 0.0, v_reset)
    h = torch.where(decay_input, v + (x - dv) * k, v - dv * k + x)
    return _fire_reset(h, v_threshold, v_reset, soft_reset, detach_reset)


def qif_step(
    x,
    v,
    tau=2.0,
    v_c=0.8,
    a0=1.0,
    v_rest=0.0,
    v_threshold=1.0,
    v_reset=-0.1,
    soft_reset=False,
    detach_reset=False,
):
    h = v + (x + a0 * (v - v_rest) * (v - v_c)) / tau
    return _fire_reset(h, v_threshold, v_reset, soft_reset, detach_reset)


def eif_step(
    x,
    v,
    tau=2.0,
    delta_T=1.0,
    theta_rh=0.8,
    v_rest=0.0,
    v_threshold=1.0,
    v_reset=-0.1,
    soft_reset=False,
    detach_reset=False,
):
    h = (
        v
        + (x + v_rest - v + delta_T * torch.exp((v - theta_rh) / delta_T))
        / tau
    )
    return _fire_reset(h, v_threshold, v_reset, soft_reset, detach_reset)


def izhikevich_step(
    x,
    v,
    w,
    tau=2.0,
    v_c=0.8,
    a0=1.0,
    v_rest=-0.1,
    tau_w=2.0,
    a=0.3,
    b=0.2,
    v_threshold=1.0,
    v_reset=0.0,
    soft_reset=False,
    detach_reset=False,
):
    h = v + (x + a0 * (v - v_rest) * (v - v_c) - w) / tau
    s, v_next = _fire_reset(h, v_threshold, v_reset, soft_reset, detach_reset)
    w_next = w + (a * (h - v_rest) - w) / tau_w + b * s
    return s, v_next, w_next


def cuba_lif_step(
    x,
    c,
    v,
    c_decay=0.5,
    v_decay=0.75,
    v_threshold=0.5,
    v_reset=0.0,
    soft_reset=False,
    detach_reset=False,
):
    c_next = c * c_decay + x
    h = v * v_decay + c_next
    s, v_next = _fire_reset(h, v_threshold, v_reset, soft_reset, detach_reset)
    return s, c_next, v_next


# name: (step, states, reference.py function, drive (mean, std)).
SHIPPED = {
    "if": (if_step, 1, ref.if_ref, (0.6, 0.8)),
    "lif": (lif_step, 1, ref.lif_ref, (0.8, 0.9)),
    "plif": (plif_step, 1, ref.plif_ref, (0.8, 0.9)),
    "qif": (qif_step, 1, ref.qif_ref, (0.5, 0.6)),
    "eif": (eif_step, 1, ref.eif_ref, (0.6, 0.8)),
    "izhikevich": (izhikevich_step, 2, ref.izhikevich_ref, (0.6, 0.6)),
    "cuba_lif": (cuba_lif_step, 2, ref.cuba_lif_ref, (0.3, 0.6)),
}
# LIF's flags are compiled as runtime parameters: one compile serves all.
LIF_FLAG_KINDS = {
    "soft_reset": "runtime",
    "detach_reset": "runtime",
    "decay_input": "runtime",
}


def _texts():
    """name -> (neuron text, FlexSN keyword arguments)."""
    texts = {}
    for group, ops in OP_GROUPS.items():
        texts[group] = (import_step(op_core(ops), 2, 1, name=group), {})
    texts["surrogates"] = (import_step(surrogate_core, 1, 1), {})
    texts["two_compartment"] = (import_step(two_compartment, 2, 2), {})
    texts["const_lif"] = (
        import_step(const_lif, 1, 1, params={"tau": 3.0}),
        {"params": {"v_th": 0.8}},
    )
    texts["closure"] = (import_step(CLOSURE_CORE, 1, 1), {})
    texts["module"] = (import_step(ADAPTIVE, 1, 2), {})
    for name, (step, states, _, _) in SHIPPED.items():
        texts["shipped-" + name] = (
            import_step(step, 1, states, name=name),
            {"kinds": LIF_FLAG_KINDS} if name == "lif" else {},
        )
    return texts


TEXTS = _texts()
MODULES = {}


# Compiled on every device: the rest on the CPU only.
ON_EVERY_DEVICE = ["arith", "math", "select", "surrogates"] + [
    "shipped-" + name for name in SHIPPED
]


def module(key, device="cpu"):
    if (key, device) not in MODULES:
        text, kwargs = TEXTS[key]
        MODULES[key, device] = FlexSN(
            text,
            store_state_seqs=True,
            targets=TARGETS[device],
            storage_types=("f32",),
            **kwargs,
        )
    return MODULES[key, device]


@pytest.fixture(scope="module", autouse=True)
def compiled_modules():
    """Compiles every neuron once, two at a time (the tools are separate
    processes). Errors are left to the tests that meet them."""

    def attempt(job):
        try:
            module(*job)
        except Exception:  # noqa: BLE001 - the test itself reports it
            pass

    jobs = [(key, "cpu") for key in sorted(TEXTS)] + [
        (key, "cuda") for key in ON_EVERY_DEVICE if HAS_CUDA
    ]
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        list(pool.map(attempt, jobs))


def generator(seed):
    return torch.Generator().manual_seed(seed)


# ---------------------------------------------------------------------------
# 1. The op table, op by op
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("group", sorted(OP_GROUPS))
def test_op_table(group, device):
    ops = OP_GROUPS[group]
    core = op_core(ops)
    gen = generator(1)
    x = torch.randn(T, N, generator=gen) * 1.2
    y = torch.rand(T, N, generator=gen) * 1.5 + 0.5  # positive
    v0 = torch.rand(N, generator=gen) - 0.5
    m = module(group, device)
    tol = GRAD_TOL[device]

    xe, ye, ve = leaves_like([x, y, v0])
    want, want_states = run_eager(core, [xe, ye], [ve], len(ops))
    xm, ym, vm = leaves_like([t.to(device) for t in (x, y, v0)])
    got, got_states = run_module(m, [xm, ym], [vm])
    assert len(got) == len(ops)
    close(got_states[0], want_states[0], f"{group}: state")
    gen_w = generator(2)
    for (name, _), g, w in zip(ops, got, want):
        close(g, w, f"{group}: {name}")
        weight = torch.randn(T, N, generator=gen_w)
        got_grads = grads((g * weight.to(device)).sum(), [xm, ym, vm])
        if name in NO_EAGER_GRAD:
            want_grads = [torch.zeros_like(t) for t in (x, y, v0)]
        else:
            want_grads = grads((w * weight).sum(), [xe, ye, ve])
        for leaf, gg, wg in zip(("x", "y", "v0"), got_grads, want_grads):
            close(gg, wg, f"{group}: d {name} / d {leaf}", **tol)
    weight = torch.randn(T, N, generator=gen_w)
    for leaf, gg, wg in zip(
        ("x", "y", "v0"),
        grads((got_states[0] * weight.to(device)).sum(), [xm, ym, vm]),
        grads((want_states[0] * weight).sum(), [xe, ye, ve]),
    ):
        close(gg, wg, f"{group}: d state / d {leaf}", **tol)


def test_op_table_text():
    """Ops map to the dialect's ops as documented."""
    text = TEXTS["math"][0] + TEXTS["select"][0] + TEXTS["arith"][0]
    for op in (
        "arith.addf",
        "arith.subf",
        "arith.mulf",
        "arith.divf",
        "arith.negf",
        "math.exp",
        "math.log",
        "math.log1p",
        "math.sqrt",
        "math.tanh",
        "math.atan",
        "math.erf",
        "math.sin",
        "math.cos",
        "math.absf",
        "math.powf",
        "arith.maximumf",
        "arith.minimumf",
        "arith.maxnumf",
        "arith.minnumf",
        "arith.cmpf oge",
        "arith.cmpf ogt",
        "arith.cmpf olt",
        "arith.cmpf ole",
        "arith.cmpf oeq",
        "arith.cmpf une",
        "arith.select",
        "arith.andi",
        "arith.ori",
        "arith.xori",
        "flexsn.detach",
        "arith.constant",
    ):
        assert op in text, op
    # Locations name the step function's line (file base name only).
    assert 'loc("test_fx.py":' in text
    assert "/" not in text.split("loc(")[1].split(")")[0]


def _op_names(body):
    """The op names of a neuron body's lines, in order."""
    return re.findall(
        r"^\s*(?:%[\w#:, %]+ = )?([a-z_]+\.[a-z_]+)", body, re.MULTILINE
    )


def _neuron(text):
    """(header, body) of the one flexsn.neuron in `text`, unindented."""
    match = re.search(
        r"^\s*(flexsn\.neuron .*?\{)\n(.*?)^\s*\}",
        text,
        re.MULTILINE | re.DOTALL,
    )
    assert match, text
    header = re.sub(r"\(\s+", "(", re.sub(r"\s+", " ", match.group(1)))
    return header, match.group(2)


@pytest.mark.parametrize("key", sorted(TEXTS))
def test_every_text_round_trips_through_the_parser(key):
    """What the importer writes (every op of the table, parameters of each
    kind, constants, locations) is IR that flexsn-opt reads and verifies,
    and reads as written: the same header (names, types, defaults, kinds),
    the same ops in the same order, and a printed form it reads back
    unchanged."""
    tool = tool_command("flexsn-opt")
    text = TEXTS[key][0]

    def opt(source):
        done = subprocess.run(
            [*tool, "-"],
            input=source,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, done.stderr
        return done.stdout

    printed = opt(text)
    header, body = _neuron(text)
    printed_header, printed_body = _neuron(printed)
    assert printed_header == header
    assert _op_names(printed_body) == _op_names(body)
    assert len(_op_names(body)) >= 2
    assert opt(printed) == printed


def test_math_module_functions():
    """math.exp etc. on a traced value are traced (fx wraps `math`)."""

    def core(x, v):
        return math.exp(x) + math.sqrt(v) + math.tanh(x) + math.fabs(x), v

    text = import_step(core, 1, 1)
    for op in ("math.exp", "math.sqrt", "math.tanh", "math.absf"):
        assert op in text


# ---------------------------------------------------------------------------
# 2. Surrogates: eager spike, and every surrogate through the importer
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("cls", sg.ALL, ids=lambda c: c.mnemonic)
def test_eager_spike_matches_reference(cls):
    """flexsn.spike eagerly: H(x) forward (H(0) = 1), g(x) backward, with
    reference.py's independent formulas; default and other parameters."""
    surrogates = [cls(), next(s for s in SURROGATES if type(s) is cls)]
    x = torch.cat(
        [
            torch.linspace(-3.0, 3.0, 241),
            torch.tensor([0.0, -0.0, 0.5, -0.5, 1.0, 0.625, -0.625, 2.0]),
        ]
    )
    for s in surrogates:
        xs = x.clone().requires_grad_()
        out = flexsn.spike(xs, surrogate=s)
        assert out.dtype == x.dtype
        assert torch.equal(out.detach(), (x >= 0).float())
        weight = torch.linspace(0.5, 1.5, x.numel())
        (out * weight).sum().backward()
        want = ref.surrogate_grad(s.mnemonic, x, **s.params) * weight
        close(xs.grad, want, f"{s!r}: g(x)", rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("device", DEVICES)
def test_surrogates_through_importer(device):
    text = TEXTS["surrogates"][0]
    for s in SURROGATES:
        assert "surrogate(%s)" % s.mlir() in text
    gen = generator(3)
    x = torch.randn(T, N, generator=gen) * 1.5
    v0 = torch.rand(N, generator=gen) - 0.5
    m = module("surrogates", device)
    xe, ve = leaves_like([x, v0])
    want, want_states = run_eager(
        surrogate_core, [xe], [ve], NUM_SURROGATE_OUTPUTS
    )
    xm, vm = leaves_like([x.to(device), v0.to(device)])
    got, got_states = run_module(m, [xm], [vm])
    close(got_states[0], want_states[0], "state")
    names = [repr(s) for s in SURROGATES] + ["ATan class", "'erf'", "default"]
    gen_w = generator(4)
    for name, g, w in zip(names, got, want):
        assert torch.equal(
            g.detach().cpu(), w.detach()
        ), f"{name}: spikes differ"
        weight = torch.randn(T, N, generator=gen_w)
        for leaf, gg, wg in zip(
            ("x", "v0"),
            grads((g * weight.to(device)).sum(), [xm, vm]),
            grads((w * weight).sum(), [xe, ve]),
        ):
            close(gg, wg, f"{name}: d spike / d {leaf}", **GRAD_TOL[device])


def test_spike_is_one_traced_op():
    def core(x, v):
        s = flexsn.spike(x - v, surrogate=sg.Rect(alpha=0.5))
        return s, v

    info = trace_step(core, 1, 1)
    body = [line for line in info.mlir.splitlines() if " = " in line]
    assert len(body) == 2, info.mlir  # subf, spike
    assert "flexsn.spike %sub surrogate(#flexsn.rect<alpha=0.5>)" in body[1]
    assert info.outputs == ("spike",)


# ---------------------------------------------------------------------------
# 3. Several inputs, states and outputs; parameters of every kind
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("k,soft", [(0.8, False), (0.6, True)])
def test_two_compartment(k, soft):
    info = trace_step(two_compartment, 2, 2)
    assert info.inputs == ("x", "i_ext") and info.states == ("u", "v")
    assert info.outputs == ("y0", "y1")
    assert [(p.name, p.type, p.default, p.kind) for p in info.params] == [
        ("g", "f32", 0.3, "const"),
        ("k", "f32", 0.8, "runtime"),
        ("w", "f32", 0.5, "trainable"),
        ("soft", "i1", False, "runtime"),
    ]
    m = module("two_compartment")
    m.k, m.soft = k, soft
    gen = generator(5)
    x = torch.randn(T, N, generator=gen) * 0.5 + 0.3
    i_ext = torch.randn(T, N, generator=gen) * 0.3 + 0.3
    u0, v0 = torch.rand(N, generator=gen), torch.rand(N, generator=gen)
    eager_leaves = leaves_like([x, i_ext, u0, v0])
    w_eager = torch.tensor(0.5, requires_grad=True)
    want, want_states = run_eager(
        two_compartment,
        eager_leaves[:2],
        eager_leaves[2:],
        2,
        dict(tensor_kwargs({"g": 0.3, "k": k, "soft": soft}), w=w_eager),
    )
    module_leaves = leaves_like([x, i_ext, u0, v0])
    got, got_states = run_module(m, module_leaves[:2], module_leaves[2:])
    assert 0.05 < want[0].mean().item() < 0.95, "no useful spike rate"
    gen_w = generator(6)
    loss_got, loss_want = 0, 0
    for name, g, w in zip(
        ("s", "h", "u", "v"), got + got_states, want + want_states
    ):
        close(g, w, name)
        weight = torch.randn(T, N, generator=gen_w)
        loss_got = loss_got + (g * weight).sum()
        loss_want = loss_want + (w * weight).sum()
    names = ("x", "i_ext", "u0", "v0", "w")
    for name, gg, wg in zip(
        names,
        grads(loss_got, module_leaves + [m.w]),
        grads(loss_want, eager_leaves + [w_eager]),
    ):
        close(gg, wg, f"d loss / d {name}", **GRAD_TOL["cpu"])


def test_const_params():
    info = trace_step(const_lif, 1, 1, params={"tau": 3.0})
    assert [(p.name, p.default, p.kind) for p in info.params] == [
        ("tau", 3.0, "const"),
        ("v_th", 1.0, "const"),
        ("v_reset", 0.0, "const"),
    ]
    m = module("const_lif")  # compiled with v_th = 0.8
    assert [p.name for p in m.info.runtime_params] == []
    gen = generator(7)
    x = torch.randn(T, N, generator=gen) * 0.9 + 0.8
    v0 = torch.rand(N, generator=gen)
    xe, ve = leaves_like([x, v0])
    want, want_states = run_eager(
        const_lif, [xe], [ve], 1, {"tau": 3.0, "v_th": 0.8, "v_reset": 0.0}
    )
    xm, vm = leaves_like([x, v0])
    got, got_states = run_module(m, [xm], [vm])
    close(got[0], want[0], "spikes")
    close(got_states[0], want_states[0], "v")
    weight = torch.randn(T, N, generator=gen)
    for name, gg, wg in zip(
        ("x", "v0"),
        grads((got_states[0] * weight).sum(), [xm, vm]),
        grads((want_states[0] * weight).sum(), [xe, ve]),
    ):
        close(gg, wg, f"d v / d {name}", **GRAD_TOL["cpu"])


def test_params_argument_and_kinds():
    """params= sets values and kinds; Parameters given there are trainable;
    signature defaults fill in the rest."""
    w = nn.Parameter(torch.tensor(0.25))

    def core(x, v, a=1.0, *, b=True, c=2.0):
        return x * a + c, torch.where(b, v, x) * c

    info = trace_step(core, 1, 1, params={"a": Runtime(0.5), "c": w})
    assert [(p.name, p.type, p.default, p.kind) for p in info.params] == [
        ("a", "f32", 0.5, "runtime"),
        ("b", "i1", True, "const"),
        ("c", "f32", 0.25, "trainable"),
    ]
    assert info.params[2].parameter is w
    assert (
        "params(%a: f32 = 0.5 runtime, %b: i1 = true, "
        "%c: f32 = 0.25 trainable)" in info.mlir
    )
    flexsn.compile(info.mlir, targets=())  # verifies


def test_closure_parameters():
    info = trace_step(CLOSURE_CORE, 1, 1)
    assert [(p.name, p.kind) for p in info.params] == [
        ("w", "trainable"),
        ("GLOBAL_W", "trainable"),
    ]
    assert info.params[0].parameter is CLOSURE_W
    assert info.params[1].parameter is GLOBAL_W
    assert "arith.constant 0.9 : f32" in info.mlir  # the closure's float
    assert "arith.constant 1.5 : f32" in info.mlir  # the captured tensor
    assert "arith.constant 0.6 : f32" in info.mlir  # the global float
    m = module("closure")
    gen = generator(8)
    x = torch.randn(T, N, generator=gen) * 0.6 + 0.7
    v0 = torch.rand(N, generator=gen)
    xe, ve = leaves_like([x, v0])
    want, want_states = run_eager(CLOSURE_CORE, [xe], [ve], 1)
    xm, vm = leaves_like([x, v0])
    got, got_states = run_module(m, [xm], [vm])
    close(got[0], want[0], "spikes")
    close(got_states[0], want_states[0], "v")
    weight = torch.randn(T, N, generator=gen)
    loss_got = (got_states[0] * weight).sum() + got[0].sum()
    loss_want = (want_states[0] * weight).sum() + want[0].sum()
    for name, gg, wg in zip(
        ("x", "v0", "w", "GLOBAL_W"),
        grads(loss_got, [xm, vm, m.w, m.GLOBAL_W]),
        grads(loss_want, [xe, ve, CLOSURE_W, GLOBAL_W]),
    ):
        close(gg, wg, f"d loss / d {name}", **GRAD_TOL["cpu"])


def test_module_step_function():
    info = trace_step(ADAPTIVE, 1, 2)
    assert info.states == ("v", "a")
    assert [(p.name, p.kind) for p in info.params] == [
        ("beta", "trainable"),
        ("inner_gain", "trainable"),
    ]
    assert "arith.constant 0.8 : f32" in info.mlir  # the buffer
    m = module("module")
    gen = generator(9)
    x = torch.randn(T, N, generator=gen) + 1.0
    v0, a0 = torch.rand(N, generator=gen), torch.rand(N, generator=gen) * 0.2
    eager_leaves = leaves_like([x, v0, a0])
    want, want_states = run_eager(
        ADAPTIVE, eager_leaves[:1], eager_leaves[1:], 1
    )
    module_leaves = leaves_like([x, v0, a0])
    got, got_states = run_module(m, module_leaves[:1], module_leaves[1:])
    close(got[0], want[0], "spikes")
    loss_got, loss_want = got[0].sum(), want[0].sum()
    for name, g, w in zip(("v", "a"), got_states, want_states):
        close(g, w, name)
        weight = torch.randn(T, N, generator=gen)
        loss_got = loss_got + (g * weight).sum()
        loss_want = loss_want + (w * weight).sum()
    for name, gg, wg in zip(
        ("x", "v0", "a0", "beta", "inner_gain"),
        grads(loss_got, module_leaves + [m.beta, m.inner_gain]),
        grads(loss_want, eager_leaves + [ADAPTIVE.beta, ADAPTIVE.inner.gain]),
    ):
        close(gg, wg, f"d loss / d {name}", **GRAD_TOL["cpu"])


def test_single_result_and_output_names():
    def one(x):
        return torch.tanh(x)

    info = trace_step(one, 1, 0)
    assert info.outputs == ("y",) and info.states == ()
    named = trace_step(two_compartment, 2, 2, output_names=("s", "h"))
    assert named.outputs == ("s", "h")
    assert "outputs(s, h)" in named.mlir
    flexsn.compile(info.mlir, targets=())
    # A comparison as an output or state is converted to 1.0 / 0.0.
    text = import_step(lambda x, v: ((x > v), v >= 0), 1, 1)
    assert "flexsn.yield %gt_f, %ge_f : f32, f32" in text


class WithMethod(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.tensor(0.5))
        self.unused = nn.Parameter(torch.tensor(0.1))

    def step(self, x, v):
        return flexsn.spike(v * self.w + x), v * torch.sigmoid(self.w)


def test_method_of_module():
    """A method of a module: its Parameters (those used) are trainable."""
    m = WithMethod()
    info = trace_step(m.step, 1, 1)
    assert [(p.name, p.kind) for p in info.params] == [("w", "trainable")]
    assert info.params[0].parameter is m.w
    flexsn.compile(info.mlir, targets=())


def test_constants():
    """Python numbers become f32 constants (non-finite ones as bit
    patterns); a captured bool tensor is an i1 constant."""
    flag = torch.tensor(True)

    def core(x, v):
        big = torch.clamp(x, max=float("inf"), min=-1e40)  # -1e40: -inf
        h = torch.where(flag, big * 1e-5, v)
        return h + 0.1, v

    text = import_step(core, 1, 1)
    for literal in (
        "0x7F800000 : f32",
        "0xFF800000 : f32",
        "1.0e-05 : f32",
        "0.1 : f32",
        "arith.constant true",
    ):
        assert literal in text, literal
    flexsn.compile(text, targets=())


# ---------------------------------------------------------------------------
# 4. The shipped neurons, written as step functions
# ---------------------------------------------------------------------------


def shipped_inputs(name, seed):
    step, num_states, _, (mean, std) = SHIPPED[name]
    gen = generator(seed)
    x = torch.randn(T + 7, N, generator=gen) * std + mean
    inits = [
        torch.rand(N, generator=gen) * 0.6 - 0.1 for _ in range(num_states)
    ]
    return x, inits


def step_kwargs(name, flags):
    """Every parameter of the step function as an eager tensor: its
    default (read from the import), or the value in `flags`."""
    step, num_states, _, _ = SHIPPED[name]
    values = {
        p.name: p.default for p in trace_step(step, 1, num_states).params
    }
    values.update(flags)
    return tensor_kwargs(values)


def reference_kwargs(name, flags):
    kwargs = {"detach_reset": flags.get("detach_reset", False)}
    if flags.get("soft_reset"):
        kwargs["v_reset"] = None
    if "decay_input" in flags:
        kwargs["decay_input"] = flags["decay_input"]
    if name == "izhikevich":
        kwargs.update(a=0.3, b=0.2)  # the step function's defaults
    return kwargs


@pytest.mark.parametrize("name", sorted(SHIPPED))
def test_shipped_step_matches_reference(name):
    """The Python step functions are the shipped neurons: eager loops of
    them against reference.py (no compile)."""
    step, num_states, reference, _ = SHIPPED[name]
    x, inits = shipped_inputs(name, 10)
    flag_sets = [{}, {"soft_reset": True, "detach_reset": True}]
    if name == "lif":
        flag_sets.append({"decay_input": False})
    for flags in flag_sets:
        w = torch.tensor(0.3, requires_grad=True)
        kwargs = step_kwargs(name, flags)
        if name == "plif":
            kwargs["w"] = w
        xe = x.clone().requires_grad_()
        want_spikes, want_seqs = run_eager(step, [xe], inits, 1, kwargs)
        rkw = reference_kwargs(name, flags)
        if name == "plif":
            rkw["w"] = w
        spikes, seqs = reference(x, *inits, **rkw)
        seqs = seqs if isinstance(seqs, tuple) else (seqs,)
        close(want_spikes[0], spikes, f"{name} {flags}: spikes")
        for i, (a, b) in enumerate(zip(want_seqs, seqs)):
            close(a, b, f"{name} {flags}: state {i}")
        assert 0.02 < spikes.mean().item() < 0.98


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", sorted(SHIPPED))
def test_shipped_neuron_through_importer(name, device):
    step, num_states, _, _ = SHIPPED[name]
    m = module("shipped-" + name, device)
    x, inits = shipped_inputs(name, 11)
    flag_sets = [{}]
    if name == "lif":  # runtime flags: every setting on one compile
        flag_sets = [
            {"soft_reset": s, "detach_reset": d, "decay_input": i}
            for s in (False, True)
            for d in (False, True)
            for i in (True, False)
        ]
    for flags in flag_sets:
        for key, value in flags.items():
            setattr(m, key, value)
        kwargs = step_kwargs(name, flags)
        eager_leaves = leaves_like([x] + inits)
        eager_params, module_params = [], []
        if name == "plif":
            kwargs["w"] = torch.tensor(0.0, requires_grad=True)
            eager_params, module_params = [kwargs["w"]], [m.w]
        want, want_seqs = run_eager(
            step, eager_leaves[:1], eager_leaves[1:], 1, kwargs
        )
        module_leaves = leaves_like([t.to(device) for t in [x] + inits])
        got, got_seqs = run_module(m, module_leaves[:1], module_leaves[1:])
        what = f"{name} {flags}"
        assert torch.equal(
            got[0].detach().cpu(), want[0].detach()
        ), f"{what}: spikes differ"
        gen = generator(12)
        weight = torch.randn(x.shape, generator=gen)
        loss_got = (got[0] * weight.to(device)).sum()
        loss_want = (want[0] * weight).sum()
        for i, (g, w) in enumerate(zip(got_seqs, want_seqs)):
            close(g, w, f"{what}: state {i}")
            weight = torch.randn(w.shape, generator=gen)
            loss_got = loss_got + (g * weight.to(device)).sum()
            loss_want = loss_want + (w * weight).sum()
        names = (
            ["x"]
            + [f"state0 {i}" for i in range(num_states)]
            + (["w"] if name == "plif" else [])
        )
        for leaf, gg, wg in zip(
            names,
            grads(loss_got, module_leaves + module_params),
            grads(loss_want, eager_leaves + eager_params),
        ):
            close(gg, wg, f"{what}: d loss / d {leaf}", **GRAD_TOL[device])


# ---------------------------------------------------------------------------
# 5. What cannot be imported
# ---------------------------------------------------------------------------


def _data_dependent(x, v):
    h = v + x
    if h > 1.0:  # BAD: control flow on a traced value
        return h, v
    return x, v


def _builtin_max(x, v):
    return max(x, v), v  # BAD: Python's max compares traced values


def _unsupported(x, v):
    return torch.floor(x), v  # BAD: floor is not in the table


def _reduction(x, v):
    return x - x.mean(), v  # BAD: a reduction


def _torch_max_reduction(x, v):
    return x - torch.max(x), v  # BAD: torch.max of one tensor reduces


def _indexing(x, v):
    return x[0] + v, v  # BAD: indexing


def _matmul(x, v):
    return x @ v, v  # BAD: a matrix op


def _shape(x, v):
    return x * x.shape[0], v  # BAD: shapes


def _python_float(x, v):
    return x * float(v), v  # BAD: float() of a traced value


def _half(x, v):
    return x.half(), v  # BAD: the body computes in f32


def _setitem(x, v):
    y = x.clone()
    y[0] = 1.0  # BAD: indexed assignment
    return y, v


def _rounding_div(x, v):
    return torch.div(x, v, rounding_mode="floor"), v  # BAD: rounding


def _where_float_condition(x, v):
    return torch.where(x, v, x), v  # BAD: a float condition


def _flag_control_flow(x, v, soft=False):
    if soft:  # BAD: a flag parameter is traced too
        return x, v
    return v, x


def _random_draw(x, v):
    return x + 0.1 * torch.randn(()), v  # BAD: drawn once, at import


def _random_method(x, v):
    return x + torch.empty(()).uniform_(), v  # BAD: likewise


BAD = [
    (_random_draw, UnsupportedOpError, "torch.randn(())", "torch.randn"),
    (_random_method, UnsupportedOpError, "uniform_()", "Tensor.uniform_"),
    (_data_dependent, ControlFlowError, "if h > 1.0", "control flow"),
    (_builtin_max, ControlFlowError, "max(x, v)", "control flow"),
    (_unsupported, UnsupportedOpError, "torch.floor", "torch.floor"),
    (_reduction, UnsupportedOpError, "x.mean()", "Tensor.mean"),
    (_torch_max_reduction, UnsupportedOpError, "torch.max(x)", "torch.max"),
    (_indexing, UnsupportedOpError, "x[0]", "operator.getitem"),
    (_matmul, UnsupportedOpError, "x @ v", "operator.matmul"),
    (_shape, UnsupportedOpError, "x.shape", "Tensor.shape"),
    (_python_float, UnsupportedOpError, "float(v)", "Python value"),
    (_half, UnsupportedOpError, "x.half()", "Tensor.half"),
    (_setitem, UnsupportedOpError, "y[0] = 1.0", "operator.setitem"),
    (_rounding_div, UnsupportedOpError, "rounding_mode", "torch.div"),
    (
        _where_float_condition,
        UnsupportedOpError,
        "torch.where(x, v, x)",
        "torch.where",
    ),
    (_flag_control_flow, ControlFlowError, "if soft:", "control flow"),
]


@pytest.mark.parametrize(
    "core,error,line,op", BAD, ids=[b[0].__name__.strip("_") for b in BAD]
)
def test_bad_step_functions(core, error, line, op):
    with pytest.raises(error) as info:
        import_step(core, 1, 1)
    err = info.value
    assert isinstance(err, StepImportError) and isinstance(err, ValueError)
    assert err.op == op or op in str(err), str(err)
    assert op in str(err) or op == "control flow"
    assert err.filename == __file__ and line in err.source, str(err)
    assert line in str(err) and "test_fx.py:%d" % err.lineno in str(err)
    if error is ControlFlowError:
        assert "torch.where" in str(err)


def test_random_functions_are_restored_after_import():
    with pytest.raises(UnsupportedOpError):
        import_step(_random_draw, 1, 1)
    assert torch.randn(3).shape == (3,)
    assert torch.empty(2).uniform_().shape == (2,)


def test_fmax_fmin_send_the_gradient_past_nan():
    """torch.fmax/fmin ignore a NaN operand: the value and the gradient
    are the other operand's (eager torch's rule: (x >= y) | isnan(y))."""

    def core(x, v):
        return torch.fmax(x, torch.log(x)) + torch.fmin(torch.log(x), x), v

    m = FlexSN(core, num_inputs=1, num_states=1, num_outputs=1, step_mode="m")
    x = torch.tensor([[-2.0, -0.5, 0.5, 3.0]]).requires_grad_()
    y = m(x)
    y.sum().backward()
    xe = x.detach().clone().requires_grad_()
    want = torch.fmax(xe, torch.log(xe)) + torch.fmin(torch.log(xe), xe)
    want.sum().backward()
    close(y, want, "fmax + fmin")
    # At x = -2 and -0.5 log is NaN: both extrema are x, d/dx = 2.
    assert xe.grad[0, 0].item() == 2.0
    close(x.grad, xe.grad, "d (fmax + fmin) / dx")


def test_errors_in_core_name_their_line():
    def core(x, v):
        return x * undefined_name, v  # noqa: F821

    with pytest.raises(StepImportError, match="NameError") as info:
        import_step(core, 1, 1)
    assert "undefined_name" in info.value.source


def test_wrong_output_count():
    def core(x, v):
        return x + v, v, v

    with pytest.raises(StepImportError, match="returns 3 value"):
        import_step(core, 1, 1, num_outputs=1)
    with pytest.raises(StepImportError, match="no output"):
        import_step(lambda x, v: v, 1, 1)
    with pytest.raises(StepImportError, match=r"2 positional"):
        import_step(lambda x, v: (x, v), 2, 1)


def test_bad_parameters():
    with pytest.raises(StepImportError, match="'tau'.*no value"):
        import_step(lambda x, v, tau: (x / tau, v), 1, 1)
    with pytest.raises(StepImportError, match="does not take"):
        import_step(lambda x, v: (x, v), 1, 1, params={"tau": 2.0})
    with pytest.raises(TypeError, match="bool"):
        Trainable(True)
    big = nn.Parameter(torch.ones(3))
    with pytest.raises(StepImportError, match="scalars"):
        import_step(lambda x, v: (x * big, v), 1, 1)

    hidden = nn.Parameter(torch.tensor(0.5))

    def helper():
        return torch.sigmoid(hidden)  # eager: would lose the gradient

    with pytest.raises(UnsupportedOpError, match="requires grad"):
        import_step(lambda x, v: (x * helper(), v), 1, 1)


# ---------------------------------------------------------------------------
# FlexSN(core, ...): SpikingJelly's module over a Python step function
# ---------------------------------------------------------------------------


def test_flexsn_module_from_a_step_function():
    """The module imports `core`, trains the nn.Parameter `core` captures
    (the same tensor, not a copy) and matches eager autograd of `core`
    looped over T, multi-step and single-step alike."""
    w = nn.Parameter(torch.tensor(0.3))

    def core(x, v, v_threshold=0.9):
        h = v + (x - v) * torch.sigmoid(w)
        s = fx.spike(h - v_threshold, surrogate=sg.ATan(alpha=3.0))
        return s, h * (1.0 - s)

    gen = generator(91)
    x = torch.randn(6, 4, 5, generator=gen) + 0.8
    module = FlexSN(
        core,
        num_inputs=1,
        num_states=1,
        num_outputs=1,
        example_inputs=(x[0], x[0]),
        requires_grad=(True, True),
        backend="triton",
        targets=TARGETS["cpu"],
    )
    assert module.w is w and [n for n, _ in module.named_parameters()] == ["w"]
    assert module.info.name == "core"

    xm = x.clone().requires_grad_()
    spikes = module(xm)
    (spikes * torch.linspace(-1, 1, 5)).sum().backward()
    got_w = w.grad.clone()
    w.grad = None

    xe = x.clone().requires_grad_()
    v_final, spike_list = torch.zeros(4, 5), []
    for t in range(x.shape[0]):
        s, v_final = core(xe[t], v_final)
        spike_list.append(s)
    want = torch.stack(spike_list)
    (want * torch.linspace(-1, 1, 5)).sum().backward()
    assert torch.equal(spikes, want) and want.sum() > 0
    close(module.states[0], v_final, "v_final", **FWD_TOL)
    close(xm.grad, xe.grad, "x.grad", **GRAD_TOL["cpu"])
    close(got_w, w.grad, "w.grad", **GRAD_TOL["cpu"])

    # Single-step mode: one step per call, states kept between calls.
    single = FlexSN(core, 1, 1, 1, step_mode="s", targets=TARGETS["cpu"])
    with torch.no_grad():
        steps = torch.stack([single(x[t]) for t in range(x.shape[0])])
    assert torch.equal(steps, want.detach())


def test_flexsn_module_step_function_errors():
    def core(x, v):
        s = fx.spike(v + x - 1.0)
        return s, v + x - s

    with pytest.raises(ValueError, match="needs num_inputs and num_states"):
        FlexSN(core, num_inputs=1)
    with pytest.raises(ValueError, match="example_inputs has 1 tensor"):
        FlexSN(core, 1, 1, 1, example_inputs=(torch.zeros(3),))
    with pytest.raises(StepImportError, match="core returns 3 value"):
        FlexSN(
            lambda x, v: (x, x + v, v),
            1,
            1,
            num_outputs=1,
            targets=TARGETS["cpu"],
        )


def test_new_sequence_lengths_and_sizes_run_no_tool(monkeypatch):
    """Compiled once: no T or N, nor a second module of the same core,
    runs a tool again (SpikingJelly's FlexSN recompiles per T and N)."""

    def core(x, v):
        s = fx.spike(v + x - 1.0)
        return s, (v + x) * (1.0 - s)

    module = FlexSN(core, 1, 1, 1, targets=TARGETS["cpu"])
    from flexsn import _tools

    runs = []
    run = _tools.run
    monkeypatch.setattr(
        _tools, "run", lambda *a, **k: runs.append(a) or run(*a, **k)
    )
    for T, N in ((1, 3), (64, 1000), (7, 1)):
        module.reset()
        x = torch.randn(T, N, requires_grad=True)
        module(x).sum().backward()
        assert x.grad.shape == (T, N)
    FlexSN(core, 1, 1, 1, targets=TARGETS["cpu"])
    assert runs == []
