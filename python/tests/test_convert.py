"""flexsn.torch.convert swaps SpikingJelly's neurons for FlexSN's.

SpikingJelly is not importable here (it needs a newer torch), and convert
recognizes its classes by module path and class name, so these tests use
stand-ins: classes named and placed as SpikingJelly's (`IFNode`, `LIFNode`,
`ParametricLIFNode`, `FlexSN` in spikingjelly.activation_based.neuron,
`Sigmoid` in ...surrogate) whose forward is SpikingJelly's torch backend
as the formulas state it, run by reference.py's independent loops. A
converted model must compute what the stand-in model computes: outputs,
input and parameter gradients, in multi-step and single-step mode.
"""

import copy

import pytest
import torch
from torch import nn

import flexsn.torch
from flexsn import surrogate as sg

import reference as ref

SJ_NEURON = "spikingjelly.activation_based.neuron"
SJ_SURROGATE = "spikingjelly.activation_based.surrogate"
#: Relative norm of the difference, float32 (reference.py evaluates each
#: step's operations in the kernels' order).
TOL = 1e-5


# ---------------------------------------------------------------------------
# SpikingJelly stand-ins
# ---------------------------------------------------------------------------


class Sigmoid(nn.Module):
    """surrogate.Sigmoid: an nn.Module with `alpha` and `spiking`; H(x)
    forward, alpha·sig(alpha·x)·(1 - sig(alpha·x)) backward."""

    def __init__(self, alpha=4.0, spiking=True):
        super().__init__()
        self.alpha, self.spiking = alpha, spiking

    def forward(self, x):
        return ref.spike(x, self.spec())

    def spec(self):
        return ("sigmoid", {"alpha": self.alpha})


class PoissonPass(nn.Module):
    """A SpikingJelly surrogate FlexSN does not have."""

    def spec(self):
        raise AssertionError("never run")


class OwnSurrogate(nn.Module):
    """A user's surrogate: neither SpikingJelly's nor FlexSN's."""

    alpha = 4.0

    def spec(self):
        raise AssertionError("never run")


Sigmoid.__module__ = PoissonPass.__module__ = SJ_SURROGATE


class _Node(nn.Module):
    """BaseNode: SpikingJelly's attributes; `v` starts at v_reset (0 for a
    soft reset); single steps are [N...], multi-step inputs [T, N...]."""

    def __init__(
        self,
        v_threshold=1.0,
        v_reset=0.0,
        surrogate_function=None,
        detach_reset=False,
        step_mode="s",
        backend="torch",
        store_v_seq=False,
    ):
        super().__init__()
        self.v_threshold, self.v_reset = v_threshold, v_reset
        self.surrogate_function = surrogate_function or Sigmoid()
        self.detach_reset, self.step_mode = detach_reset, step_mode
        self.backend, self.store_v_seq = backend, store_v_seq
        self.reset()

    def reset(self):
        self.v = 0.0 if self.v_reset is None else self.v_reset

    def forward(self, x):
        x_seq = x if self.step_mode == "m" else x.unsqueeze(0)
        spikes, v_seq = self.run(
            x_seq,
            v0=self.v,
            v_threshold=self.v_threshold,
            v_reset=self.v_reset,
            detach_reset=self.detach_reset,
            surrogate=self.surrogate_function.spec(),
        )
        self.v = v_seq[-1]
        return spikes if self.step_mode == "m" else spikes[0]


class IFNode(_Node):
    def run(self, x_seq, **kwargs):
        return ref.if_ref(x_seq, **kwargs)


class LIFNode(_Node):
    def __init__(self, tau=2.0, decay_input=True, **kwargs):
        super().__init__(**kwargs)
        self.tau, self.decay_input = tau, decay_input

    def run(self, x_seq, **kwargs):
        return ref.lif_ref(
            x_seq, tau=self.tau, decay_input=self.decay_input, **kwargs
        )


class ParametricLIFNode(_Node):
    """1/tau = sigmoid(w), w a learned scalar starting at -ln(init_tau - 1)."""

    def __init__(self, init_tau=2.0, decay_input=True, **kwargs):
        super().__init__(**kwargs)
        self.decay_input = decay_input
        self.w = nn.Parameter(torch.tensor(ref.init_w(init_tau)))

    def run(self, x_seq, **kwargs):
        return ref.plif_ref(
            x_seq, w=self.w, decay_input=self.decay_input, **kwargs
        )


class FlexSN(nn.Module):
    """FlexSN(core, num_inputs, num_states, num_outputs): `core` run step
    by step from zero states."""

    def __init__(
        self,
        core,
        num_inputs,
        num_states,
        num_outputs,
        step_mode="m",
        backend="triton",
        store_state_seqs=False,
    ):
        super().__init__()
        self.core = core
        self.num_inputs, self.num_states = num_inputs, num_states
        self.num_outputs, self.step_mode = num_outputs, step_mode
        self.backend, self.store_state_seqs = backend, store_state_seqs
        self.states = None

    def reset(self):
        self.states = None

    def forward(self, *inputs):
        seqs = (
            inputs
            if self.step_mode == "m"
            else [x.unsqueeze(0) for x in inputs]
        )
        states = self.states or [
            torch.zeros_like(seqs[0][0]) for _ in range(self.num_states)
        ]
        outputs = []
        for t in range(seqs[0].shape[0]):
            results = self.core(*(x[t] for x in seqs), *states)
            outputs.append(results[: self.num_outputs])
            states = list(results[self.num_outputs :])
        self.states = states
        stacked = [torch.stack(seq) for seq in zip(*outputs)]
        if self.step_mode == "s":
            stacked = [y[0] for y in stacked]
        return stacked[0] if len(stacked) == 1 else tuple(stacked)


for _cls in (IFNode, LIFNode, ParametricLIFNode, FlexSN):
    _cls.__module__ = SJ_NEURON
STAND_INS = (IFNode, LIFNode, ParametricLIFNode, FlexSN)


CORE_SURROGATE = Sigmoid(alpha=3.0)


def sj_lif_core(x, v):
    """A step function as SpikingJelly's FlexSN tutorial writes one: a
    LIF with a soft reset calling a surrogate module."""
    h = v + (x - v) / 2.0
    s = CORE_SURROGATE(h - 0.8)
    return s, h - s * 0.8


# ---------------------------------------------------------------------------
# A Spikformer-like model
# ---------------------------------------------------------------------------


class MLP(nn.Module):
    """Creates its own neurons in __init__, as Spikformer's blocks do."""

    def __init__(self, dim, hidden, step_mode):
        super().__init__()
        self.fc1 = nn.Linear(dim, hidden)
        self.neuron1 = LIFNode(tau=2.0, detach_reset=True, step_mode=step_mode)
        self.fc2 = nn.Linear(hidden, dim)
        self.neuron2 = LIFNode(
            tau=3.0,
            decay_input=False,
            v_reset=None,
            surrogate_function=Sigmoid(alpha=2.5),
            step_mode=step_mode,
        )

    def forward(self, x):
        return self.neuron2(self.fc2(self.neuron1(self.fc1(x))))


class Block(nn.Module):
    def __init__(self, dim, step_mode):
        super().__init__()
        self.norm = nn.LayerNorm(dim)
        self.neuron = IFNode(
            v_threshold=0.7, v_reset=-0.2, step_mode=step_mode
        )
        self.mlp = MLP(dim, 2 * dim, step_mode)

    def forward(self, x):
        return x + self.mlp(self.neuron(self.norm(x)))


class Net(nn.Module):
    def __init__(self, step_mode, dim=12):
        super().__init__()
        self.stem = nn.Sequential(
            nn.Linear(5, dim),
            ParametricLIFNode(init_tau=3.0, v_reset=None, step_mode=step_mode),
        )
        self.blocks = nn.ModuleList([Block(dim, step_mode) for _ in range(2)])
        self.head = nn.ModuleDict({"fc": nn.Linear(dim, 3)})

    def forward(self, x):
        x = self.stem(x)
        for block in self.blocks:
            x = block(x)
        return self.head["fc"](x)


NEURON_NAMES = ["stem.1"] + [
    f"blocks.{i}.{name}"
    for i in range(2)
    for name in ("neuron", "mlp.neuron1", "mlp.neuron2")
]


def build(step_mode):
    """The model, weights large enough that every neuron fires."""
    torch.manual_seed(0)
    model = Net(step_mode)
    for m in model.modules():
        if isinstance(m, nn.Linear):
            nn.init.normal_(m.weight, std=2.0 / m.in_features**0.5)
            nn.init.uniform_(m.bias, 0.0, 0.5)
    return model


def reset(model):
    for m in model.modules():
        if isinstance(m, (_Node, FlexSN, flexsn.torch.FlexSN)):
            m.reset()


def relative(got, want):
    got, want = got.detach(), want.detach()
    return float((got - want).norm() / want.norm().clamp_min(1e-30))


def inputs(seed, T=4, B=3):
    gen = torch.Generator().manual_seed(seed)
    return 3 * torch.randn(T, B, 5, generator=gen)


def run(model, x, step_mode):
    """Outputs over x's T steps, then the gradients of a weighted sum: x's
    and every parameter's (by name)."""
    x = x.clone().requires_grad_()
    if step_mode == "m":
        y = model(x)
    else:
        y = torch.stack([model(x_t) for x_t in x])
    weights = torch.linspace(-1, 1, y.numel()).reshape(y.shape)
    (y * weights).sum().backward()
    grads = {name: p.grad.clone() for name, p in model.named_parameters()}
    model.zero_grad()
    return y.detach(), x.grad, grads


def firing(model, x, step_mode):
    """Each neuron's spike rate on x: the comparison means something only
    where the neurons fire, and not always."""
    rates = {}
    hooks = [
        m.register_forward_hook(
            lambda m, _, y, name=name: rates.setdefault(name, []).append(
                y.detach().mean()
            )
        )
        for name, m in model.named_modules()
        if isinstance(m, _Node)
    ]
    with torch.no_grad():
        run_steps(model, x, step_mode)
    for hook in hooks:
        hook.remove()
    reset(model)
    return {name: float(torch.stack(r).mean()) for name, r in rates.items()}


def run_steps(model, x, step_mode):
    return model(x) if step_mode == "m" else [model(x_t) for x_t in x]


def assert_same(model, converted, x, step_mode):
    reset(model)
    reset(converted)
    want_y, want_dx, want_grads = run(model, x, step_mode)
    got_y, got_dx, got_grads = run(converted, x, step_mode)
    assert relative(got_y, want_y) < TOL
    assert relative(got_dx, want_dx) < TOL
    assert list(got_grads) == list(want_grads)
    for name, want in want_grads.items():
        assert relative(got_grads[name], want) < TOL, name


# ---------------------------------------------------------------------------
# 1. Every neuron swapped, same computation
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("step_mode", ["m", "s"])
def test_model_converts_and_computes_the_same(step_mode, capsys):
    model = build(step_mode)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    x = inputs(1)
    rates = firing(model, x, step_mode)
    assert sorted(rates) == sorted(NEURON_NAMES)
    assert all(0.0 < rate < 1.0 for rate in rates.values()), rates

    report = []
    converted = flexsn.torch.convert(model, verbose=True, report=report)
    printed = capsys.readouterr().out.splitlines()
    assert printed == report
    assert sorted(report) == sorted(
        f"swapped: {name} {type(model.get_submodule(name)).__name__} -> "
        f"flexsn.torch.{type(model.get_submodule(name)).__name__}"
        for name in NEURON_NAMES
    )

    # Each neuron is FlexSN's, with the stand-in's settings.
    for name in NEURON_NAMES:
        old, new = model.get_submodule(name), converted.get_submodule(name)
        assert type(new) is getattr(flexsn.torch, type(old).__name__)
        assert new.step_mode == step_mode
        assert new.v_threshold == old.v_threshold
        assert new.v_reset == old.v_reset
        assert new.surrogate_function == sg.Sigmoid(
            alpha=old.surrogate_function.alpha
        )
    assert converted.blocks[0].mlp.neuron1.detach_reset
    assert converted.blocks[1].mlp.neuron2.tau == 3.0
    assert not converted.blocks[1].mlp.neuron2.decay_input
    assert not any(isinstance(m, STAND_INS) for m in converted.modules())
    assert list(converted.state_dict()) == list(before)

    # The argument is unchanged (inplace=False).
    assert [type(m) for m in model.modules()] == [
        type(m) for m in build(step_mode).modules()
    ]
    for key, value in model.state_dict().items():
        assert torch.equal(value, before[key])

    for seed in (1, 2):  # two sequences, reset between
        assert_same(model, converted, inputs(seed), step_mode)


def test_inplace_converts_the_model_itself():
    model = build("m")
    reference = copy.deepcopy(model)
    assert flexsn.torch.convert(model, inplace=True) is model
    assert isinstance(model.blocks[1].mlp.neuron2, flexsn.torch.LIFNode)
    assert_same(reference, model, inputs(3), "m")


def test_a_neuron_model_returns_its_replacement():
    node = LIFNode(tau=4.0, step_mode="m")
    new = flexsn.torch.convert(node)
    assert type(new) is flexsn.torch.LIFNode and new.tau == 4.0
    assert type(node) is LIFNode
    assert_same(node, new, 2 * torch.randn(5, 2, 7), "m")


def test_training_flag_and_state_carry_over():
    """A model converted mid-sequence (single steps, v not reset)
    continues where it was; eval mode stays eval."""
    model = build("s").eval()
    x = inputs(4, T=6)
    with torch.no_grad():
        for x_t in x[:3]:
            model(x_t)
    converted = flexsn.torch.convert(model)
    assert not any(m.training for m in converted.modules())
    want = torch.stack([model(x_t) for x_t in x[3:]])
    got = torch.stack([converted(x_t) for x_t in x[3:]])
    assert relative(got, want) < TOL
    reset(model)
    reset(converted)
    assert_same(model, converted, x, "s")


def test_shared_neuron_gets_one_replacement():
    node = IFNode(step_mode="m")
    model = nn.Sequential(nn.Linear(4, 4), node, nn.Linear(4, 4), node)
    report = []
    converted = flexsn.torch.convert(model, report=report)
    assert converted[1] is converted[3]
    assert isinstance(converted[1], flexsn.torch.IFNode)
    assert report == ["swapped: 1 IFNode -> flexsn.torch.IFNode"]


# ---------------------------------------------------------------------------
# 2. PLIF's learned w
# ---------------------------------------------------------------------------


def test_plif_learned_w_carries_over():
    torch.manual_seed(5)
    model = nn.Sequential(nn.Linear(6, 8), ParametricLIFNode(step_mode="m"))
    with torch.no_grad():
        model[1].w.fill_(0.7)  # tau = 1 + e^-0.7, not init_tau's
    converted = flexsn.torch.convert(model)
    assert isinstance(converted[1], flexsn.torch.ParametricLIFNode)
    assert converted[1].w.shape == model[1].w.shape
    assert float(converted[1].w.detach()) == pytest.approx(0.7)
    assert converted[1].w.requires_grad
    assert_same(model, converted, 2 * torch.randn(5, 4, 6), "m")

    # v still holds the last call's graph (no reset): the copy takes it
    # detached. A frozen leak stays frozen.
    assert model[1].v.grad_fn is not None
    model[1].w.requires_grad_(False)
    frozen = flexsn.torch.convert(model)[1]
    assert not frozen.w.requires_grad
    assert frozen.v.grad_fn is None
    assert torch.equal(frozen.v, model[1].v.detach())


# ---------------------------------------------------------------------------
# SpikingJelly's FlexSN(core, ...)
# ---------------------------------------------------------------------------


def test_flexsn_core_converts():
    torch.manual_seed(6)
    model = nn.Sequential(nn.Linear(3, 6), FlexSN(sj_lif_core, 1, 1, 1))
    x = 3 * torch.randn(6, 2, 3)
    # The states carry over (copied without their graph): the converted
    # model continues.
    model(x)
    assert model[1].states[0].grad_fn is not None
    converted = flexsn.torch.convert(model)
    assert type(converted[1]) is flexsn.torch.FlexSN
    assert converted[1].step_mode == "m"
    with torch.no_grad():
        want, got = model(x), converted(x)
    assert 0.0 < float(want.mean()) < 1.0
    assert relative(got, want) < TOL
    assert_same(model, converted, x, "m")


class TrainedCore(nn.Module):
    """A core whose parameter SpikingJelly keeps as `core.decay`."""

    def __init__(self):
        super().__init__()
        self.decay = nn.Parameter(torch.tensor(0.5))

    def forward(self, x, v):
        h = self.decay * v + x
        s = Sigmoid()(h - 1.0)
        return s, h * (1.0 - s)


def test_flexsn_core_with_parameters_is_reported():
    """FlexSN's module holds a core's parameters itself (`decay`, not
    `core.decay`): a checkpoint would no longer load."""
    model = nn.Sequential(FlexSN(TrainedCore(), 1, 1, 1))
    report = []
    converted = flexsn.torch.convert(model, report=report)
    assert type(converted[0]) is FlexSN
    assert len(report) == 1 and report[0].startswith(
        "not swapped: 0 (FlexSN): its state_dict keys ['core.decay']"
    )


# ---------------------------------------------------------------------------
# 3. What is not swapped, and why
# ---------------------------------------------------------------------------


class MyLIF(LIFNode):
    """A user's subclass: its own code (here none) would be lost."""


class QIFNode(_Node):
    """A SpikingJelly neuron without a FlexSN drop-in."""


QIFNode.__module__ = SJ_NEURON + ".nonlinear_if"


def unsupported_model():
    model = build("m")
    mlp0, mlp1 = model.blocks[0].mlp, model.blocks[1].mlp
    mlp0.neuron1 = MyLIF(step_mode="m")
    mlp0.neuron2.v_threshold = torch.tensor(1.0)
    mlp1.neuron1.surrogate_function = PoissonPass()
    mlp1.neuron2.surrogate_function = OwnSurrogate()
    model.blocks[0].neuron.store_v_seq = 1
    model.blocks[1].neuron = QIFNode(step_mode="m")
    model.stem[1].surrogate_function = Sigmoid(spiking=False)
    return model


WHY = {
    "stem.1": "(ParametricLIFNode): surrogate_function: Sigmoid(spiking="
    "False) is not supported",
    "blocks.0.neuron": "(IFNode): store_v_seq is 1, not a bool",
    "blocks.0.mlp.neuron1": "(MyLIF): a subclass of SpikingJelly's LIFNode",
    "blocks.0.mlp.neuron2": "(LIFNode): v_threshold is a tensor of shape ()",
    "blocks.1.neuron": "(QIFNode): FlexSN has no drop-in for it",
    "blocks.1.mlp.neuron1": "(LIFNode): FlexSN has no surrogate PoissonPass",
    "blocks.1.mlp.neuron2": "(LIFNode): surrogate_function OwnSurrogate is "
    "neither SpikingJelly's nor FlexSN's",
}


def test_unsupported_neurons_are_reported_not_swapped(capsys):
    model = unsupported_model()
    report = []
    converted = flexsn.torch.convert(model, verbose=True, report=report)
    assert capsys.readouterr().out.splitlines() == report
    assert len(report) == len(WHY)
    for name, why in WHY.items():
        line = next(
            line
            for line in report
            if line.startswith(f"not swapped: {name} (")
        )
        assert line.startswith(f"not swapped: {name} {why}"), line
        kept = converted.get_submodule(name).__class__
        assert kept is model.get_submodule(name).__class__
    assert list(converted.state_dict()) == list(model.state_dict())


def test_hooks_and_float64_are_reported():
    hooked = LIFNode(step_mode="m")
    hooked.register_forward_hook(lambda *args: None)
    double = ParametricLIFNode(step_mode="m").double()
    report = []
    model = nn.ModuleDict(
        {"hooked": hooked, "f64": double, "plain": LIFNode()}
    )
    converted = flexsn.torch.convert(model, report=report)
    assert report[0].startswith(
        "not swapped: hooked (LIFNode): it has " "hooks (_forward_hooks)"
    )
    assert report[1].startswith("not swapped: f64 (ParametricLIFNode):")
    assert "float64" in report[1]
    assert report[2] == "swapped: plain LIFNode -> flexsn.torch.LIFNode"
    assert type(converted["f64"]) is ParametricLIFNode


# ---------------------------------------------------------------------------
# 4. Nothing to swap
# ---------------------------------------------------------------------------


def test_model_without_spikingjelly_neurons_is_unchanged(capsys):
    torch.manual_seed(0)
    model = nn.Sequential(
        nn.Linear(4, 4), nn.ReLU(), flexsn.torch.LIFNode(step_mode="m")
    )
    report = []
    converted = flexsn.torch.convert(model, verbose=True, report=report)
    assert report == []
    assert "no SpikingJelly neuron" in capsys.readouterr().out
    assert converted is not model
    assert [type(m) for m in converted.modules()] == [
        type(m) for m in model.modules()
    ]
    for (key, want), (got_key, got) in zip(
        model.state_dict().items(), converted.state_dict().items()
    ):
        assert key == got_key and torch.equal(got, want)
    assert flexsn.torch.convert(model, inplace=True) is model
