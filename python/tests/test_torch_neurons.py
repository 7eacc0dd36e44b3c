"""flexsn.torch against the eager references of reference.py.

* every shipped neuron through `FlexSN(name)`: outputs, state sequences and
  final states in float32, float16 and bfloat16 storage;
* gradients of inputs, initial states and PLIF's w against autograd of the
  reference loops: hard and soft reset, detach_reset on and off, every
  surrogate on LIF and a few on the other neurons, losses on the outputs,
  the state sequences, the final states or the final state alone;
* a spike-free neuron written here (two states, two trainable parameters and
  a runtime one) against its float64 formula, central finite differences of
  the module's own forward, and torch.autograd.gradcheck;
* the drop-in IFNode / LIFNode / ParametricLIFNode with SpikingJelly's
  arguments: `.v`, `.v_seq`, reset(), state carry-over between calls,
  detach(), step_mode='s';
* empty sequences (T = 0).

Every expected value comes from reference.py or from a formula written out
here, never from the package. Each case runs on CPU tensors and, where a GPU
is present, on CUDA tensors (`cuda` marker). Every module configuration is
compiled once, two at a time, by a module-scoped fixture (compiles are
cached by content on disk and memoized in the process).
"""

import concurrent.futures
import math
import warnings

import pytest
import torch

import flexsn
from flexsn import surrogate as sg
from flexsn.torch import FlexSN, IFNode, LIFNode, ParametricLIFNode

import reference as ref

from devices import AVAILABLE_DEVICES, DEVICES  # noqa: E402

# Both devices compile with flexsn.compile's default targets (CPU, plus
# CUDA where the toolkit is installed): one cache entry serves both, so a
# cache filled by running these tests on a machine with the tools also
# serves a GPU machine without them (which then has the same default).
TARGETS = {"cpu": None, "cuda": None}

NEURONS = ("if", "lif", "plif", "qif", "eif", "izhikevich", "cuba_lif")
# State names in the order of lib/Neurons/*.mlir (and of reference.py).
STATES = {
    "if": ("v",),
    "lif": ("v",),
    "plif": ("v",),
    "qif": ("v",),
    "eif": ("v",),
    "izhikevich": ("v", "w"),
    "cuba_lif": ("c", "v"),
}
# Inputs x ~ normal(mean, std) per neuron: a good fraction of the neurons
# spike and no state runs away (the drive table of
# test/Integration/CPU/reference.py); initial states ~ uniform(lo, hi).
DRIVE = {
    "if": (0.6, 0.8),
    "lif": (0.8, 0.9),
    "plif": (0.8, 0.9),
    "qif": (0.5, 0.6),
    "eif": (0.6, 0.8),
    "izhikevich": (0.6, 0.6),
    "cuba_lif": (0.3, 0.6),
}
INIT = {"v": (-0.2, 0.9), "w": (-0.2, 0.3), "c": (-0.3, 0.5)}
# Izhikevich's adaptation is off by default (a = b = 0); the gradient cases
# switch it on so that the w state feeds back.
IZHIKEVICH_ADAPTING = {"a": 0.3, "b": 0.2}
PLIF_W0 = 0.0  # plif.mlir's default w (init_tau = 2)

FLAGS = {
    "hard": {},
    "soft": {"soft_reset": True},
    "hard-detach": {"detach_reset": True},
    "soft-detach": {"soft_reset": True, "detach_reset": True},
}
# The gradient matrix (7 neurons x 4 flag settings) binds the two flags as
# runtime parameters: one compile per neuron serves the four settings, which
# are passed as params={...} all the same (then they are module attributes,
# kernel arguments). Compiles dominate this file's time (about 1 s of tool
# start-up each). The flags specialized as constants, the default, are
# differentiated by the OTHER_SURROGATES cases (a soft reset or detach_reset
# on every neuron but `if`) and the node cases (`if`, `lif`, `plif`).
RUNTIME_FLAGS = {"soft_reset": "runtime", "detach_reset": "runtime"}

# Float32 tolerances. On CPU the kernels evaluate the neuron's operations in
# the file's order, as the references do: results agree to the last bit but
# for libm's exp. NVVM may contract multiply-adds into FMAs, which moves
# results by an ulp per operation.
FWD_TOL = {
    "cpu": dict(rtol=1e-6, atol=1e-6),
    "cuda": dict(rtol=1e-5, atol=1e-5),
}
GRAD_TOL = {
    "cpu": dict(rtol=1e-4, atol=1e-5),
    "cuda": dict(rtol=2e-4, atol=2e-5),
}
# Low-precision storage: the kernels compute in float32 and round once when
# they store, so a stored value is the float32 result within half an ulp of
# the storage type (2^-11 for float16, 2^-8 for bfloat16).
LOW_TOL = {
    torch.float16: dict(rtol=1e-3, atol=1e-4),
    torch.bfloat16: dict(rtol=1e-2, atol=1e-3),
}
# Their gradients: the backward kernel re-reads the states stored in the
# storage type, so each step's surrogate and leak see a state within half an
# ulp of the float32 one; the errors stay a few ulps of the storage type,
# measured over the whole tensor (observed: 3e-4 for float16, 3e-3 for
# bfloat16).
LOW_GRAD_TOL = {torch.float16: 2e-3, torch.bfloat16: 1.5e-2}

DTYPES = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}

# ---------------------------------------------------------------------------
# The configurations the tests compile
# ---------------------------------------------------------------------------

FORWARD_CASES = [(n, {}) for n in NEURONS] + [
    ("izhikevich", dict(IZHIKEVICH_ADAPTING)),
]


def flag_params(neuron, flags):
    params = dict(FLAGS[flags])
    if neuron == "izhikevich":
        params.update(IZHIKEVICH_ADAPTING)
    return params


# (module surrogate, reference surrogate): the reference's parameters are
# written out here (an empty dict means reference.py's own defaults).
LIF_SURROGATES = [
    (sg.Sigmoid(), ("sigmoid", {})),
    (sg.ATan(), ("atan", {})),
    (sg.PiecewiseQuadratic(), ("piecewise_quadratic", {})),
    (sg.PiecewiseExp(), ("piecewise_exp", {})),
    (sg.SoftSign(), ("soft_sign", {})),
    (sg.SuperSpike(), ("super_spike", {})),
    (sg.Erf(), ("erf", {})),
    (sg.NonzeroSignLogAbs(), ("nonzero_sign_log_abs", {})),
    (sg.PiecewiseLeakyReLU(), ("piecewise_leaky_relu", {})),
    (sg.SquarewaveFourierSeries(), ("squarewave_fourier_series", {})),
    (sg.S2NN(), ("s2nn", {})),
    (sg.QPseudoSpike(), ("q_pseudo_spike", {})),
    (sg.LeakyKReLU(), ("leaky_k_relu", {})),
    (sg.FakeNumericalGradient(), ("fake_numerical_gradient", {})),
    (sg.LogTailedReLU(), ("log_tailed_relu", {})),
    (sg.Rect(), ("rect", {})),
    (sg.MultiGaussian(), ("multi_gaussian", {})),
    (sg.DeterministicPass(), ("straight_through", {})),
]
assert [s.mnemonic for s, _ in LIF_SURROGATES] == [c.mnemonic for c in sg.ALL]

# Constant flags and non-default surrogate parameters on every neuron.
OTHER_SURROGATES = [
    ("if", {}, sg.Erf(alpha=1.5), ("erf", {"alpha": 1.5})),
    (
        "lif",
        {"soft_reset": True, "detach_reset": True, "tau": 3.0},
        sg.PiecewiseQuadratic(alpha=0.8),
        ("piecewise_quadratic", {"alpha": 0.8}),
    ),
    (
        "plif",
        {"soft_reset": True},
        sg.PiecewiseLeakyReLU(w=0.5, c=0.1),
        ("piecewise_leaky_relu", {"w": 0.5, "c": 0.1}),
    ),
    (
        "qif",
        {"soft_reset": True, "detach_reset": True},
        sg.SquarewaveFourierSeries(n=4, T_period=4.0),
        ("squarewave_fourier_series", {"n": 4, "T_period": 4.0}),
    ),
    (
        "eif",
        {"soft_reset": True},
        sg.FakeNumericalGradient(alpha=0.5),
        ("fake_numerical_gradient", {"alpha": 0.5}),
    ),
    (
        "izhikevich",
        dict(IZHIKEVICH_ADAPTING, detach_reset=True),
        sg.ATan(alpha=3.0),
        ("atan", {"alpha": 3.0}),
    ),
    (
        "cuba_lif",
        {
            "soft_reset": True,
            "detach_reset": True,
            "c_decay": 0.7,
            "v_decay": 0.6,
        },
        sg.S2NN(alpha=2.0, beta=0.5),
        ("s2nn", {"alpha": 2.0, "beta": 0.5}),
    ),
]


def flexsn_module(
    neuron,
    device,
    params=None,
    surrogate=None,
    store_state_seqs=True,
    kinds=None,
):
    return FlexSN(
        neuron,
        params=params,
        surrogate_function=surrogate,
        store_state_seqs=store_state_seqs,
        kinds=kinds,
        targets=TARGETS[device],
    )


SMOOTH = """
// Spike-free: two states, two trainable parameters and a runtime one.
//   v' = a v + tanh(b x),   u' = c sin(u) + v',   y = v' u' + exp(-a) x
flexsn.neuron @smooth inputs(%x: f32) states(%v: f32, %u: f32) outputs(y)
    params(%a: f32 = 0.5 trainable, %b: f32 = 1.5 trainable,
           %c: f32 = 0.3 runtime) {
  %av = arith.mulf %a, %v : f32
  %bx = arith.mulf %b, %x : f32
  %t = math.tanh %bx : f32
  %v1 = arith.addf %av, %t : f32
  %su = math.sin %u : f32
  %csu = arith.mulf %c, %su : f32
  %u1 = arith.addf %csu, %v1 : f32
  %vu = arith.mulf %v1, %u1 : f32
  %na = arith.negf %a : f32
  %ea = math.exp %na : f32
  %eax = arith.mulf %ea, %x : f32
  %y = arith.addf %vu, %eax : f32
  flexsn.yield %y, %v1, %u1 : f32, f32, f32
}
"""


def smooth_reference(x, v0, u0, a, b, c):
    """The formula of SMOOTH, step by step: (y_seq, v_seq, u_seq)."""
    v, u, ys, vs, us = v0, u0, [], [], []
    for xt in x:
        v = a * v + torch.tanh(b * xt)
        u = c * torch.sin(u) + v
        ys.append(v * u + torch.exp(-a) * xt)
        vs.append(v)
        us.append(u)
    return torch.stack(ys), torch.stack(vs), torch.stack(us)


def smooth_module(device):
    return FlexSN(SMOOTH, store_state_seqs=True, targets=TARGETS[device])


# Drop-in nodes: (id, class, constructor arguments, reference neuron,
# reference arguments). PLIF's reference gets w = -ln(init_tau - 1).
NODE_CASES = [
    ("if", IFNode, {}, "if", {}),
    (
        "if-hard-vreset",
        IFNode,
        dict(v_threshold=1.2, v_reset=-0.3),
        "if",
        dict(v_threshold=1.2, v_reset=-0.3),
    ),
    (
        "if-soft-detach-atan",
        IFNode,
        dict(
            v_threshold=0.8,
            v_reset=None,
            detach_reset=True,
            surrogate_function=sg.ATan(alpha=3.0),
        ),
        "if",
        dict(
            v_threshold=0.8,
            v_reset=None,
            detach_reset=True,
            surrogate=("atan", {"alpha": 3.0}),
        ),
    ),
    ("lif", LIFNode, {}, "lif", {}),
    (
        "lif-plain-input",
        LIFNode,
        dict(
            tau=3.0,
            decay_input=False,
            v_threshold=0.9,
            v_reset=-0.2,
            surrogate_function=sg.PiecewiseLeakyReLU(w=0.5, c=0.1),
        ),
        "lif",
        dict(
            tau=3.0,
            decay_input=False,
            v_threshold=0.9,
            v_reset=-0.2,
            surrogate=("piecewise_leaky_relu", {"w": 0.5, "c": 0.1}),
        ),
    ),
    (
        "lif-soft-detach",
        LIFNode,
        dict(
            tau=1.5,
            v_reset=None,
            detach_reset=True,
            surrogate_function=sg.SuperSpike(),
        ),
        "lif",
        dict(
            tau=1.5, v_reset=None, detach_reset=True, surrogate="super_spike"
        ),
    ),
    ("plif", ParametricLIFNode, {}, "plif", dict(init_tau=2.0)),
    (
        "plif-custom",
        ParametricLIFNode,
        dict(
            init_tau=3.0,
            decay_input=False,
            v_threshold=0.7,
            v_reset=None,
            detach_reset=True,
            surrogate_function=sg.Erf(),
        ),
        "plif",
        dict(
            init_tau=3.0,
            decay_input=False,
            v_threshold=0.7,
            v_reset=None,
            detach_reset=True,
            surrogate="erf",
        ),
    ),
]
NODES = {case[0]: case for case in NODE_CASES}


def node_module(case_id, device, **overrides):
    _, cls, ctor, _, _ = NODES[case_id]
    kwargs = dict(ctor, step_mode="m")
    kwargs.update(overrides)
    return cls(targets=TARGETS[device], **kwargs)


def reset_value(case_id):
    """Where a node's v starts: v_reset, or 0 for a soft reset
    (SpikingJelly's nodes register v with that reset value)."""
    v_reset = NODES[case_id][2].get("v_reset", 0.0)
    return 0.0 if v_reset is None else v_reset


def node_reference(case_id, x, v0, w=None):
    """(spike_seq, v_seq) of the node case's reference; `w` (PLIF) is a
    tensor to differentiate, by default one at -ln(init_tau - 1)."""
    _, _, _, neuron, kwargs = NODES[case_id]
    kwargs = dict(kwargs)
    if neuron == "plif":
        init_tau = kwargs.pop("init_tau")
        if w is None:
            w = torch.tensor(-math.log(init_tau - 1.0), device=x.device)
        kwargs["w"] = w
    return ref.NEURONS[neuron](x, v0, **kwargs)


def _compile_jobs():
    """Every module configuration of this file, as hashable specs."""
    jobs = set()
    for device in AVAILABLE_DEVICES:
        for neuron, params in FORWARD_CASES:
            jobs.add(
                ("flexsn", neuron, tuple(sorted(params.items())), None, device)
            )
        for neuron in NEURONS:
            jobs.add(
                (
                    "runtime-flags",
                    neuron,
                    tuple(sorted(flag_params(neuron, "hard").items())),
                    None,
                    device,
                )
            )
        if device == "cpu":
            for flags in FLAGS:
                jobs.add(
                    (
                        "load",
                        "if",
                        tuple(sorted(FLAGS[flags].items())),
                        None,
                        device,
                    )
                )
        for surrogate, _ in LIF_SURROGATES:
            jobs.add(("flexsn", "lif", (), surrogate, device))
        for neuron, params, surrogate, _ in OTHER_SURROGATES:
            jobs.add(
                (
                    "flexsn",
                    neuron,
                    tuple(sorted(params.items())),
                    surrogate,
                    device,
                )
            )
        for case_id in NODES:
            jobs.add(("node", case_id, (), None, device))
        jobs.add(("smooth", None, (), None, device))
    return jobs


def _build(job):
    kind, name, params, surrogate, device = job
    if kind == "flexsn":
        flexsn_module(name, device, dict(params), surrogate)
    elif kind == "runtime-flags":
        flexsn_module(name, device, dict(params), kinds=RUNTIME_FLAGS)
    elif kind == "load":
        FlexSN(name, params=dict(params), targets=("cpu",))
    elif kind == "node":
        node_module(name, device)
    else:
        smooth_module(device)


@pytest.fixture(scope="module", autouse=True)
def compiled_configurations():
    """Compiles every configuration once, two at a time (the tools are
    separate processes). Errors are left to the tests that meet them."""

    def attempt(function, *args, **kwargs):
        try:
            function(*args, **kwargs)
        except Exception:  # noqa: BLE001 - the test itself reports it
            pass

    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        # The modules' probe compiles first, so that no two threads build
        # the same entry.
        list(
            pool.map(
                lambda args: attempt(
                    flexsn.compile, args[0], targets=(), kinds=args[1]
                ),
                [(n, k) for n in NEURONS for k in (None, RUNTIME_FLAGS)]
                + [(SMOOTH, None)],
            )
        )
        list(
            pool.map(
                lambda job: attempt(_build, job),
                sorted(_compile_jobs(), key=repr),
            )
        )


# ---------------------------------------------------------------------------
# Helpers
# ---------------------------------------------------------------------------


def generator(seed):
    return torch.Generator().manual_seed(seed)


def drive(neuron, gen, shape, dtype=torch.float32, device="cpu"):
    mean, std = DRIVE[neuron]
    x = torch.randn(*shape, generator=gen) * std + mean
    return x.to(dtype).to(device)


def initial_states(neuron, gen, shape, dtype=torch.float32, device="cpu"):
    inits = []
    for name in STATES[neuron]:
        lo, hi = INIT[name]
        s = torch.rand(*shape, generator=gen) * (hi - lo) + lo
        inits.append(s.to(dtype).to(device))
    return inits


def weights(gen, shape, device):
    return (torch.randn(*shape, generator=gen)).to(device)


def reference_kwargs(params):
    """reference.py's keyword arguments for a FlexSN `params` dict: a soft
    reset is v_reset=None there."""
    kwargs = dict(params or {})
    if kwargs.pop("soft_reset", False):
        kwargs["v_reset"] = None
    return kwargs


def run_reference(neuron, x, inits, params=None, surrogate=None, w=None):
    """(spike_seq, [state_seq, ...]) of reference.py's `neuron`."""
    kwargs = reference_kwargs(params)
    if surrogate is not None:
        kwargs["surrogate"] = surrogate
    if neuron == "plif":
        kwargs["w"] = w if w is not None else PLIF_W0
    spikes, seqs = ref.NEURONS[neuron](x, *inits, **kwargs)
    if not isinstance(seqs, tuple):
        seqs = (seqs,)
    return spikes, list(seqs)


def close(got, want, what, **tol):
    assert got is not None, f"{what}: no tensor (None)"
    assert (
        got.shape == want.shape
    ), f"{what}: shape {tuple(got.shape)}, expected {tuple(want.shape)}"
    torch.testing.assert_close(
        got.detach().float().cpu(),
        want.detach().float().cpu(),
        msg=lambda m: f"{what}: {m}",
        **tol,
    )


def spikes_equal(got, want, what):
    assert (
        got.shape == want.shape
    ), f"{what}: shape {tuple(got.shape)}, expected {tuple(want.shape)}"
    got, want = got.detach().float().cpu(), want.detach().float().cpu()
    flips = (got != want).sum().item()
    assert flips == 0, f"{what}: {flips} of {got.numel()} spikes differ"


def norm_close(got, want, what, tol):
    got, want = got.detach().float().cpu(), want.detach().float().cpu()
    assert got.shape == want.shape, what
    error = (got - want).norm().item() / max(want.norm().item(), 1e-12)
    assert error <= tol, f"{what}: relative error {error:.2e} > {tol:.1e}"


def leaf(t):
    return t.detach().clone().requires_grad_()


def spike_rate_is_useful(spikes):
    """The inputs make some neurons spike and leave others silent."""
    rate = spikes.float().mean().item()
    assert 0.02 < rate < 0.98, f"spike rate {rate}: inputs test too little"


# ---------------------------------------------------------------------------
# 1. Forward: every shipped neuron, every storage type
# ---------------------------------------------------------------------------


def case_id(case):
    neuron, params = case
    return neuron + "".join(f"-{k}={v}" for k, v in sorted(params.items()))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", ["f32", "f16", "bf16"])
@pytest.mark.parametrize("with_inits", [False, True], ids=["zeros", "inits"])
@pytest.mark.parametrize("case", FORWARD_CASES, ids=case_id)
def test_forward_matches_reference(case, with_inits, dtype, device):
    neuron, params = case
    dtype = DTYPES[dtype]
    gen = generator(10)
    shape = (3, 5)
    x = drive(neuron, gen, (12,) + shape, dtype, device)
    inits = (
        initial_states(neuron, gen, shape, dtype, device)
        if with_inits
        else [None] * len(STATES[neuron])
    )
    # The reference runs in float32 on the values the kernel reads.
    want_spikes, want_seqs = run_reference(
        neuron,
        x.float(),
        [None if s is None else s.float() for s in inits],
        params,
    )
    spike_rate_is_useful(want_spikes)
    tol = FWD_TOL[device] if dtype == torch.float32 else LOW_TOL[dtype]

    # Inference kernel, state sequences stored.
    module = flexsn_module(neuron, device, params, store_state_seqs=True)
    if with_inits:
        module.states = list(inits)
    spikes = module(x)
    assert spikes.dtype == dtype and spikes.device.type == device
    spikes_equal(spikes, want_spikes, "spikes")
    assert len(module.state_seqs) == len(STATES[neuron])
    for name, got, want in zip(STATES[neuron], module.state_seqs, want_seqs):
        assert got.dtype == dtype and got.device.type == device
        close(got, want, f"{name}_seq", **tol)
    for name, got, want in zip(STATES[neuron], module.states, want_seqs):
        close(got, want[-1], f"final {name}", **tol)

    # Final-state kernel: only the final states.
    module = flexsn_module(neuron, device, params, store_state_seqs=False)
    if with_inits:
        module.states = list(inits)
    spikes = module(x)
    spikes_equal(spikes, want_spikes, "spikes (final-state kernel)")
    assert module.state_seqs is None
    for name, got, want in zip(STATES[neuron], module.states, want_seqs):
        assert got.dtype == dtype
        close(got, want[-1], f"final {name} (final-state kernel)", **tol)


# ---------------------------------------------------------------------------
# 2. Gradients against autograd of the reference loops
# ---------------------------------------------------------------------------

# What feeds the loss:
#   seqs:        outputs and every state sequence (random initial states)
#   final:       outputs and the final states, store_state_seqs=False
#   final_only:  module.states[0] alone (zero initial states)
#   outputs:     the outputs alone (zero initial states)
LOSSES = ("seqs", "final", "final_only", "outputs")


def check_gradients(
    neuron,
    params,
    device,
    loss,
    surrogate=None,
    ref_surrogate=None,
    dtype=torch.float32,
    seed=20,
    T=8,
    shape=(4, 6),
    kinds=None,
):
    gen = generator(seed)
    x = drive(neuron, gen, (T,) + shape, dtype, device)
    given = loss in ("seqs", "final")
    inits = initial_states(neuron, gen, shape, dtype, device)
    n_states = len(STATES[neuron])
    w_out = weights(gen, (T,) + shape, device)
    w_seqs = [weights(gen, (T,) + shape, device) for _ in range(n_states)]
    w_final = [weights(gen, shape, device) for _ in range(n_states)]

    def total(spikes, seqs, finals):
        value = 0
        if loss in ("seqs", "final", "outputs"):
            value = value + (spikes.float() * w_out).sum()
        if loss == "seqs":
            value = value + sum(
                (s.float() * w).sum() for s, w in zip(seqs, w_seqs)
            )
        if loss == "final":
            value = value + sum(
                (s.float() * w).sum() for s, w in zip(finals, w_final)
            )
        if loss == "final_only":
            value = value + (finals[0].float() * w_final[0]).sum()
        return value

    # The module.
    module = flexsn_module(
        neuron,
        device,
        params,
        surrogate,
        store_state_seqs=(loss == "seqs"),
        kinds=kinds,
    )
    for name in kinds or {}:
        assert getattr(module, name) == bool(params.get(name, False))
    x_m = leaf(x)
    inits_m = [leaf(s) for s in inits]
    if given:
        module.states = list(inits_m)
    spikes = module(x_m)
    seqs = module.state_seqs
    assert (seqs is not None) == (loss == "seqs")
    total(spikes, seqs, module.states).backward()

    # The reference, in float32 on the same values.
    x_r = leaf(x.float())
    inits_r = [leaf(s.float()) for s in inits]
    w_r = torch.tensor(PLIF_W0, device=device, requires_grad=True)
    want_spikes, want_seqs = run_reference(
        neuron,
        x_r,
        inits_r if given else [None] * n_states,
        params,
        ref_surrogate,
        w_r,
    )
    spike_rate_is_useful(want_spikes)
    total(want_spikes, want_seqs, [s[-1] for s in want_seqs]).backward()

    spikes_equal(spikes, want_spikes, "spikes")
    if seqs is not None:
        tol = FWD_TOL[device] if dtype == torch.float32 else LOW_TOL[dtype]
        for name, got, want in zip(STATES[neuron], seqs, want_seqs):
            close(got, want, f"{name}_seq", **tol)
    if dtype == torch.float32:

        def compare(got, want, what):
            close(got, want, what, **GRAD_TOL[device])

    else:

        def compare(got, want, what):
            norm_close(got, want, what, LOW_GRAD_TOL[dtype])

    assert x_m.grad.dtype == dtype
    compare(x_m.grad, x_r.grad, "x.grad")
    if given:
        for name, got, want in zip(STATES[neuron], inits_m, inits_r):
            compare(got.grad, want.grad, f"{name}0.grad")
    if neuron == "plif":
        assert module.w.grad is not None, "w got no gradient"
        close(
            module.w.grad,
            w_r.grad,
            "w.grad",
            rtol=GRAD_TOL[device]["rtol"]
            if dtype == torch.float32
            else LOW_GRAD_TOL[dtype],
            atol=1e-5,
        )
    # A loss that reaches them must give some non-zero gradient.
    assert x_r.grad.abs().sum() > 0


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("loss", LOSSES)
@pytest.mark.parametrize("flags", list(FLAGS))
@pytest.mark.parametrize("neuron", NEURONS)
def test_gradients_match_reference(neuron, flags, loss, device):
    check_gradients(
        neuron, flag_params(neuron, flags), device, loss, kinds=RUNTIME_FLAGS
    )


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", ["f16", "bf16"])
@pytest.mark.parametrize("neuron", NEURONS)
def test_gradients_low_precision(neuron, dtype, device):
    check_gradients(
        neuron,
        flag_params(neuron, "hard"),
        device,
        "seqs",
        dtype=DTYPES[dtype],
    )


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize(
    "surrogates", LIF_SURROGATES, ids=lambda s: s[0].mlir()[len("#flexsn.") :]
)
def test_lif_gradients_every_surrogate(surrogates, device):
    module_surrogate, reference_surrogate = surrogates
    check_gradients(
        "lif",
        {},
        device,
        "seqs",
        module_surrogate,
        reference_surrogate,
        T=6,
        shape=(20,),
    )


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize(
    "case", OTHER_SURROGATES, ids=lambda c: f"{c[0]}-{c[3][0]}"
)
def test_gradients_other_surrogates(case, device):
    neuron, params, module_surrogate, reference_surrogate = case
    check_gradients(
        neuron, params, device, "seqs", module_surrogate, reference_surrogate
    )


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("neuron", ["izhikevich", "cuba_lif"])
@pytest.mark.parametrize("given", [0, 1])
def test_gradients_one_of_two_initial_states(neuron, given, device):
    """One initial state given (and differentiated), the other zeros."""
    params = flag_params(neuron, "soft")
    gen = generator(30)
    shape = (16,)
    x = drive(neuron, gen, (7,) + shape, device=device)
    init = initial_states(neuron, gen, shape, device=device)[given]
    w_out = weights(gen, (7,) + shape, device)
    w_seq = weights(gen, (7,) + shape, device)

    module = flexsn_module(neuron, device, params, kinds=RUNTIME_FLAGS)
    x_m, init_m = leaf(x), leaf(init)
    states = [None, None]
    states[given] = init_m
    module.states = states
    spikes = module(x_m)
    (
        (spikes * w_out).sum() + (module.state_seqs[1 - given] * w_seq).sum()
    ).backward()

    x_r, init_r = leaf(x), leaf(init)
    inits = [None, None]
    inits[given] = init_r
    want_spikes, want_seqs = run_reference(neuron, x_r, inits, params)
    (
        (want_spikes * w_out).sum() + (want_seqs[1 - given] * w_seq).sum()
    ).backward()
    spikes_equal(spikes, want_spikes, "spikes")
    for got, want, name in zip(module.state_seqs, want_seqs, STATES[neuron]):
        close(got, want, f"{name}_seq", **FWD_TOL[device])
    close(x_m.grad, x_r.grad, "x.grad", **GRAD_TOL[device])
    close(
        init_m.grad,
        init_r.grad,
        f"{STATES[neuron][given]}0.grad",
        **GRAD_TOL[device],
    )
    assert init_r.grad.abs().sum() > 0


# ---------------------------------------------------------------------------
# 3. A spike-free neuron: formula, finite differences, gradcheck
# ---------------------------------------------------------------------------


def smooth_inputs(device, T=5, n=3):
    gen = generator(40)
    x = (torch.randn(T, n, generator=gen)).to(device)
    v0 = (torch.rand(n, generator=gen) - 0.5).to(device)
    u0 = (torch.rand(n, generator=gen) - 0.5).to(device)
    return x, v0, u0


@pytest.mark.parametrize("device", DEVICES)
def test_smooth_neuron_matches_formula(device):
    x, v0, u0 = smooth_inputs(device, T=9, n=7)
    module = smooth_module(device)
    assert [p for p, _ in module.named_parameters()] == ["a", "b"]
    assert module.c == pytest.approx(0.3)
    module.c = 0.7  # a runtime parameter: no recompile
    with torch.no_grad():
        module.a.fill_(0.6)
        module.b.fill_(1.2)
    gen = generator(41)
    w_y, w_v, w_u = (weights(gen, x.shape, device) for _ in range(3))
    x_m, v0_m, u0_m = leaf(x), leaf(v0), leaf(u0)
    module.states = [v0_m, u0_m]
    y = module(x_m)
    (
        (y * w_y).sum()
        + (module.state_seqs[0] * w_v).sum()
        + (module.state_seqs[1] * w_u).sum()
    ).backward()

    d = torch.float64
    x_r, v0_r, u0_r = leaf(x.to(d)), leaf(v0.to(d)), leaf(u0.to(d))
    a_r = torch.tensor(0.6, dtype=d, device=device, requires_grad=True)
    b_r = torch.tensor(1.2, dtype=d, device=device, requires_grad=True)
    want = smooth_reference(x_r, v0_r, u0_r, a_r, b_r, 0.7)
    (
        (want[0] * w_y.to(d)).sum()
        + (want[1] * w_v.to(d)).sum()
        + (want[2] * w_u.to(d)).sum()
    ).backward()

    tol = dict(rtol=1e-5, atol=1e-5)
    for got, expected, name in zip(
        [y] + module.state_seqs, want, ["y", "v_seq", "u_seq"]
    ):
        close(got, expected, name, **tol)
    tol = dict(rtol=1e-4, atol=1e-4)
    close(x_m.grad, x_r.grad, "x.grad", **tol)
    close(v0_m.grad, v0_r.grad, "v0.grad", **tol)
    close(u0_m.grad, u0_r.grad, "u0.grad", **tol)
    close(module.a.grad, a_r.grad, "a.grad", **tol)
    close(module.b.grad, b_r.grad, "b.grad", **tol)


@pytest.mark.parametrize("device", DEVICES)
def test_smooth_neuron_finite_differences(device):
    """Backward kernels against central differences (in float64) of the
    forward kernels, for every input, initial state and parameter."""
    x, v0, u0 = smooth_inputs(device)
    module = smooth_module(device)
    gen = generator(42)
    w_y, w_v, w_u = (weights(gen, x.shape, device).double() for _ in range(3))

    def loss(x, v0, u0):
        module.reset()
        module.states = [v0, u0]
        y = module(x)
        v_seq, u_seq = module.state_seqs
        return (
            (y.double() * w_y).sum()
            + (v_seq.double() * w_v).sum()
            + (u_seq.double() * w_u).sum()
        )

    x_m, v0_m, u0_m = leaf(x), leaf(v0), leaf(u0)
    loss(x_m, v0_m, u0_m).backward()
    analytic = [x_m.grad, v0_m.grad, u0_m.grad, module.a.grad, module.b.grad]

    eps = 1e-2
    numeric = []
    with torch.no_grad():
        for i, t in enumerate((x, v0, u0)):
            g = torch.zeros_like(t, dtype=torch.float64)
            for j in range(t.numel()):
                args = [x, v0, u0]
                plus, minus = t.clone(), t.clone()
                plus.view(-1)[j] += eps
                minus.view(-1)[j] -= eps
                args[i] = plus
                f_plus = loss(*args)
                args[i] = minus
                f_minus = loss(*args)
                g.view(-1)[j] = (f_plus - f_minus) / (2 * eps)
            numeric.append(g)
        for p in (module.a, module.b):
            p0 = p.item()
            p.fill_(p0 + eps)
            f_plus = loss(x, v0, u0)
            p.fill_(p0 - eps)
            f_minus = loss(x, v0, u0)
            p.fill_(p0)
            numeric.append((f_plus - f_minus) / (2 * eps))
    for got, want, name in zip(analytic, numeric, ["x", "v0", "u0", "a", "b"]):
        close(
            got,
            want,
            f"{name}.grad vs finite differences",
            rtol=1e-2,
            atol=1e-3,
        )
    assert all(g.abs().sum() > 0 for g in numeric)


@pytest.mark.parametrize("device", DEVICES)
def test_smooth_neuron_gradcheck(device):
    x, v0, u0 = smooth_inputs(device)
    module = smooth_module(device)

    def function(x, v0, u0):
        module.reset()
        module.states = [v0, u0]
        y = module(x)
        return (y,) + tuple(module.state_seqs)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # float32 inputs
        assert torch.autograd.gradcheck(
            function,
            (leaf(x), leaf(v0), leaf(u0)),
            eps=1e-3,
            atol=1e-2,
            rtol=1e-2,
        )


# ---------------------------------------------------------------------------
# 4. Drop-in nodes with SpikingJelly's arguments
# ---------------------------------------------------------------------------


def plif_w(case_id):
    _, _, _, neuron, kwargs = NODES[case_id]
    return -math.log(kwargs["init_tau"] - 1.0) if neuron == "plif" else None


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize(
    "store_v_seq", [False, True], ids=["no_v_seq", "v_seq"]
)
@pytest.mark.parametrize("case", list(NODES))
def test_node_matches_reference(case, store_v_seq, device):
    neuron = NODES[case][3]
    gen = generator(50)
    shape = (2, 9)
    x = drive(neuron, gen, (8,) + shape, device=device)
    v0 = initial_states(neuron, gen, shape, device=device)[0]
    w_out, w_seq = (weights(gen, x.shape, device) for _ in range(2))
    w_v = weights(gen, shape, device)

    node = node_module(case, device, store_v_seq=store_v_seq)
    assert node.v == reset_value(case) and node.v_seq is None
    x_m, v0_m = leaf(x), leaf(v0)
    node.v = v0_m
    spikes = node(x_m)
    loss = (spikes * w_out).sum() + (node.v * w_v).sum()
    if store_v_seq:
        loss = loss + (node.v_seq * w_seq).sum()
    else:
        assert node.v_seq is None
    loss.backward()

    x_r, v0_r = leaf(x), leaf(v0)
    w_r = None
    if neuron == "plif":
        assert node.w.item() == pytest.approx(plif_w(case), rel=1e-6)
        w_r = torch.tensor(plif_w(case), device=device, requires_grad=True)
    want_spikes, want_v_seq = node_reference(case, x_r, v0_r, w_r)
    spike_rate_is_useful(want_spikes)
    loss = (want_spikes * w_out).sum() + (want_v_seq[-1] * w_v).sum()
    if store_v_seq:
        loss = loss + (want_v_seq * w_seq).sum()
    loss.backward()

    spikes_equal(spikes, want_spikes, "spikes")
    close(node.v, want_v_seq[-1], "v", **FWD_TOL[device])
    if store_v_seq:
        close(node.v_seq, want_v_seq, "v_seq", **FWD_TOL[device])
    close(x_m.grad, x_r.grad, "x.grad", **GRAD_TOL[device])
    close(v0_m.grad, v0_r.grad, "v0.grad", **GRAD_TOL[device])
    if w_r is not None:
        close(node.w.grad, w_r.grad, "w.grad", rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("case", ["if", "lif-soft-detach", "plif"])
def test_node_two_calls_equal_one(case, device):
    """Two calls of T = 3 carry the state: they equal one call of T = 6 (and
    the reference over all six steps), gradients included."""
    neuron = NODES[case][3]
    gen = generator(51)
    x = drive(neuron, gen, (6, 12), device=device)
    w_out, w_seq = (weights(gen, (6, 12), device) for _ in range(2))
    w_v = weights(gen, (12,), device)

    def run(node, pieces):
        leaves = [leaf(p) for p in pieces]
        spikes = torch.cat([node(p) for p in leaves])
        # v_seq holds the last call's steps; the loss weighs the last three.
        loss = (
            (spikes * w_out).sum()
            + (node.v * w_v).sum()
            + (node.v_seq[-3:] * w_seq[3:]).sum()
        )
        loss.backward()
        grad_x = torch.cat([p.grad for p in leaves])
        grad_w = node.w.grad.clone() if neuron == "plif" else None
        return spikes, node.v, node.v_seq, grad_x, grad_w

    split = run(node_module(case, device, store_v_seq=True), [x[:3], x[3:]])
    whole = run(node_module(case, device, store_v_seq=True), [x])

    x_r = leaf(x)
    w_r = None
    if neuron == "plif":
        w_r = torch.tensor(plif_w(case), device=device, requires_grad=True)
    want_spikes, want_v_seq = node_reference(case, x_r, None, w_r)
    spike_rate_is_useful(want_spikes)
    (
        (want_spikes * w_out).sum()
        + (want_v_seq[-1] * w_v).sum()
        + (want_v_seq[3:] * w_seq[3:]).sum()
    ).backward()

    spikes, v, v_seq, grad_x, grad_w = split
    assert v_seq.shape[0] == 3
    spikes_equal(spikes, want_spikes, "spikes of two calls")
    close(v, want_v_seq[-1], "v after two calls", **FWD_TOL[device])
    close(v_seq, want_v_seq[3:], "v_seq of the second call", **FWD_TOL[device])
    close(grad_x, x_r.grad, "x.grad over two calls", **GRAD_TOL[device])
    if grad_w is not None:
        close(grad_w, w_r.grad, "w.grad over two calls", rtol=1e-4, atol=1e-5)
    # And the one call (whose v_seq has six steps) agrees with the split.
    assert whole[2].shape[0] == 6
    spikes_equal(whole[0], spikes, "one call vs two calls")
    close(whole[1], v, "v, one call vs two", **FWD_TOL[device])
    close(whole[2][3:], v_seq, "v_seq, one call vs two", **FWD_TOL[device])
    close(whole[3], grad_x, "x.grad, one call vs two", **GRAD_TOL[device])
    if grad_w is not None:
        close(
            whole[4], grad_w, "w.grad, one call vs two", rtol=1e-4, atol=1e-5
        )


@pytest.mark.cuda
@pytest.mark.skipif(
    not torch.cuda.is_available() or torch.cuda.device_count() < 2,
    reason="needs two CUDA GPUs",
)
@pytest.mark.parametrize("case", ["lif", "plif"])
def test_node_on_a_gpu_that_is_not_current(case):
    """A module on cuda:1 runs while cuda:0 is the current device, as
    torch's own operators do: training (forward and backward) and
    inference give the reference's results, and the current device is
    left as it was."""
    neuron = NODES[case][3]
    gen = generator(53)
    x = drive(neuron, gen, (5, 33), device="cuda:1")
    w_out = weights(gen, (5, 33), "cuda:1")
    x_r = leaf(x.cpu())
    w_r = None
    if neuron == "plif":
        w_r = torch.tensor(plif_w(case), requires_grad=True)
    want_spikes, want_v_seq = node_reference(case, x_r, None, w_r)
    spike_rate_is_useful(want_spikes)
    (want_spikes * w_out.cpu()).sum().backward()
    with torch.cuda.device(0):
        node = node_module(case, "cuda").to("cuda:1")
        x1 = leaf(x)
        spikes = node(x1)
        (spikes * w_out).sum().backward()
        assert torch.cuda.current_device() == 0
        node.reset()
        with torch.no_grad():
            again = node(x)
        assert torch.cuda.current_device() == 0
    assert spikes.device == torch.device("cuda:1")
    spikes_equal(spikes, want_spikes, "spikes on cuda:1")
    spikes_equal(again, want_spikes, "inference spikes on cuda:1")
    close(node.v, want_v_seq[-1], "v on cuda:1", **FWD_TOL["cuda"])
    close(x1.grad, x_r.grad, "x.grad on cuda:1", **GRAD_TOL["cuda"])
    if w_r is not None:
        close(node.w.grad, w_r.grad, "w.grad on cuda:1", rtol=1e-4, atol=1e-5)


def test_launch_makes_the_tensors_device_current(monkeypatch):
    """The dispatch the two-GPU test checks on hardware, anywhere: a CUDA
    launch for another device than the current one runs inside
    torch.cuda.device(that device), on that device's stream; a launch on
    the current device enters no guard."""
    from flexsn.torch import _kernels

    entered, launched = [], []

    class Guard:
        def __init__(self, index):
            self.index = index

        def __enter__(self):
            entered.append(self.index)

        def __exit__(self, *exc):
            entered.append(-1)

    class Kernel:
        @staticmethod
        def launch(stream, *args):
            launched.append((stream, list(entered)))

    class Compiled:
        info = LIFNode(tau=2.0, step_mode="m").compiled.info

    monkeypatch.setattr(_kernels, "_current_device", lambda: 0)
    monkeypatch.setattr(_kernels, "current_stream", lambda i: 100 + i)
    monkeypatch.setattr(_kernels.torch.cuda, "device", Guard)
    kernels = _kernels.NeuronKernels(Compiled, "cuda")
    kernels._launch(Kernel, 4, 8, 0, [], 0, [], torch.device("cuda", 1))
    assert launched == [(101, [1])] and entered == [1, -1]
    launched.clear()
    entered.clear()
    kernels._launch(Kernel, 4, 8, 0, [], 0, [], 0)
    assert launched == [(100, [])] and entered == []


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("case", ["lif", "plif", "lif-plain-input"])
def test_node_reset_starts_from_v_reset(case, device):
    """After reset() v reads v_reset, and the next call starts there."""
    neuron = NODES[case][3]
    gen = generator(52)
    first = drive(neuron, gen, (5, 10), device=device)
    second = drive(neuron, gen, (4, 10), device=device)
    node = node_module(case, device, store_v_seq=True)
    node(first)
    assert node.v is not None and node.v_seq is not None
    node.reset()
    v0 = reset_value(case)
    assert node.v == v0 and node.v_seq is None
    spikes = node(second)
    want_spikes, want_v_seq = node_reference(case, second, v0)
    # Carrying the first call's state would change the result.
    carried_spikes, _ = node_reference(case, torch.cat([first, second]), v0)
    assert not torch.equal(carried_spikes[5:], want_spikes)
    spikes_equal(spikes, want_spikes, "spikes after reset()")
    close(node.v_seq, want_v_seq, "v_seq after reset()", **FWD_TOL[device])


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("case", ["lif", "plif"])
def test_node_detach_cuts_the_graph(case, device):
    """After detach() the second call's loss reaches only its own inputs
    (and w through the second call alone)."""
    neuron = NODES[case][3]
    gen = generator(53)
    first = drive(neuron, gen, (4, 10), device=device)
    second = drive(neuron, gen, (4, 10), device=device)
    w_out = weights(gen, (4, 10), device)
    w_v = weights(gen, (10,), device)

    node = node_module(case, device)
    a, b = leaf(first), leaf(second)
    node(a)
    assert node.v.requires_grad
    node.detach()
    assert not node.v.requires_grad
    v_mid = node.v.clone()
    ((node(b) * w_out).sum() + (node.v * w_v).sum()).backward()
    assert a.grad is None, "the gradient crossed detach()"

    b_r = leaf(second)
    w_r = None
    if neuron == "plif":
        w_r = torch.tensor(plif_w(case), device=device, requires_grad=True)
    with torch.no_grad():
        _, v_first = node_reference(case, first, None)
    close(v_mid, v_first[-1], "v after the first call", **FWD_TOL[device])
    want_spikes, want_v_seq = node_reference(case, b_r, v_first[-1], w_r)
    ((want_spikes * w_out).sum() + (want_v_seq[-1] * w_v).sum()).backward()
    close(b.grad, b_r.grad, "second call's x.grad", **GRAD_TOL[device])
    if w_r is not None:
        close(
            node.w.grad,
            w_r.grad,
            "w.grad after detach()",
            rtol=1e-4,
            atol=1e-5,
        )

    # Without detach() the gradient reaches the first call's inputs.
    node = node_module(case, device)
    a = leaf(first)
    node(a)
    ((node(second) * w_out).sum() + (node.v * w_v).sum()).backward()
    assert a.grad is not None and a.grad.abs().sum() > 0


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("case", ["if", "lif-plain-input", "plif-custom"])
def test_node_single_step_mode(case, device):
    """step_mode='s': one [N...] step a call; over T calls the spikes, v and
    the gradients (through the carried states) are the reference's."""
    neuron = NODES[case][3]
    gen = generator(54)
    T, shape = 6, (3, 4)
    x = drive(neuron, gen, (T,) + shape, device=device)
    w_out = weights(gen, (T,) + shape, device)
    w_v = weights(gen, shape, device)

    node = node_module(case, device, step_mode="s")
    x_m = leaf(x)
    steps = []
    for t in range(T):
        s = node(x_m[t])
        assert s.shape == shape
        steps.append(s)
    spikes = torch.stack(steps)
    ((spikes * w_out).sum() + (node.v * w_v).sum()).backward()

    x_r = leaf(x)
    w_r = None
    if neuron == "plif":
        w_r = torch.tensor(plif_w(case), device=device, requires_grad=True)
    want_spikes, want_v_seq = node_reference(case, x_r, reset_value(case), w_r)
    spike_rate_is_useful(want_spikes)
    ((want_spikes * w_out).sum() + (want_v_seq[-1] * w_v).sum()).backward()
    spikes_equal(spikes, want_spikes, "single-step spikes")
    close(node.v, want_v_seq[-1], "v", **FWD_TOL[device])
    close(x_m.grad, x_r.grad, "x.grad", **GRAD_TOL[device])
    if w_r is not None:
        close(node.w.grad, w_r.grad, "w.grad", rtol=1e-4, atol=1e-5)


# ---------------------------------------------------------------------------
# 5. Empty sequences
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize(
    "store", [False, True], ids=["final_states", "state_seqs"]
)
@pytest.mark.parametrize("neuron", NEURONS)
def test_empty_sequence_without_initial_states(neuron, store, device):
    module = flexsn_module(neuron, device, store_state_seqs=store)
    x = torch.zeros(0, 5, device=device)
    spikes = module(x)
    assert spikes.shape == (0, 5) and spikes.dtype == torch.float32
    if store:
        assert [tuple(s.shape) for s in module.state_seqs] == [(0, 5)] * len(
            STATES[neuron]
        )
    for state in module.states:
        assert state is not None, "final state is None, not zeros"
        assert torch.equal(state.cpu(), torch.zeros(5))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize(
    "store", [False, True], ids=["final_states", "state_seqs"]
)
@pytest.mark.parametrize("neuron", NEURONS)
def test_empty_sequence_with_initial_states(neuron, store, device):
    """T = 0: outputs empty, the final states are the initial ones (so a
    loss on them gives the initial states its weights as gradients), and
    nothing else gets a gradient."""
    gen = generator(60)
    shape = (5,)
    inits = initial_states(neuron, gen, shape, device=device)
    w_final = [weights(gen, shape, device) for _ in inits]

    # Without autograd (inference kernels).
    module = flexsn_module(neuron, device, store_state_seqs=store)
    module.states = list(inits)
    spikes = module(torch.zeros(0, *shape, device=device))
    assert spikes.shape == (0,) + shape
    for got, want in zip(module.states, inits):
        assert torch.equal(got, want)

    # With autograd: a loss on the outputs reaches nothing.
    module = flexsn_module(neuron, device, store_state_seqs=store)
    x = torch.zeros(0, *shape, device=device, requires_grad=True)
    leaves = [leaf(s) for s in inits]
    module.states = list(leaves)
    spikes = module(x)
    assert spikes.shape == (0,) + shape
    if store:
        assert [tuple(s.shape) for s in module.state_seqs] == [
            (0,) + shape
        ] * len(inits)
    for got, want in zip(module.states, inits):
        assert torch.equal(got.detach(), want)
    loss = spikes.sum() + sum(
        (s * w).sum() for s, w in zip(module.states, w_final)
    )
    loss.backward()
    assert x.grad is None or x.grad.shape == (0,) + shape
    for got, w in zip(leaves, w_final):
        assert torch.equal(got.grad, w), "d final / d initial is not 1"
    if neuron == "plif":
        assert module.w.grad is None or module.w.grad.item() == 0.0

    module = flexsn_module(neuron, device, store_state_seqs=store)
    leaves = [leaf(s) for s in inits]
    module.states = list(leaves)
    spikes = module(x)
    (spikes * 3.0).sum().backward()
    for got in leaves:
        assert got.grad is None or torch.count_nonzero(got.grad) == 0
    if neuron == "plif":
        assert module.w.grad is None or module.w.grad.item() == 0.0


# ---------------------------------------------------------------------------
# bf16 CPU kernels of every flag combination link and load
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("flags", list(FLAGS))
def test_if_cpu_kernels_load_with_bf16(flags):
    """`if` with FlexSN's default storage types (f32, f16, bf16): every
    variant and dtype of the CPU library loads (no call to a conversion
    routine the C runtime lacks, such as __truncsfbf2), and the module
    runs."""
    params = FLAGS[flags]
    module = FlexSN(
        "if", params=params, targets=("cpu",), store_state_seqs=True
    )
    for variant in flexsn.ALL_VARIANTS:
        for dtype in flexsn.STORAGE_TYPES:
            module.compiled.kernel("cpu", variant, dtype)
    x = drive("if", generator(70), (4, 6))
    spikes = module(x)
    want_spikes, want_seqs = run_reference("if", x, [None], params)
    spikes_equal(spikes, want_spikes, "spikes")
    close(module.state_seqs[0], want_seqs[0], "v_seq", **FWD_TOL["cpu"])
    x_bf16 = leaf(x.to(torch.bfloat16))
    module.reset()
    module(x_bf16).float().sum().backward()
    assert x_bf16.grad.dtype == torch.bfloat16
