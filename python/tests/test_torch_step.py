"""A neuron's PyTorch step (flexsn-translate --flexsn-to-torch, what it
runs under torch.compile) computes what its kernels compute: outputs,
states, and the gradients of the inputs, initial states and trainable
parameters, for every shipped neuron and the SpikingJelly-style modules
in their configurations. torch.compile is not needed to check this: the
tests make `compiling()` true, so a call takes the path it takes when
compiled (on torch >= 2 the CUDA tests also compile for real)."""

import pytest
import torch

import flexsn
import flexsn.torch._function as function
import flexsn.torch._fuse as fuse_module
from flexsn.torch import FlexSN, IFNode, LIFNode, ParametricLIFNode
from flexsn.torch import _torch_step

from devices import DEVICES

T, N = 5, 96


@pytest.fixture
def as_compiled(monkeypatch):
    """Calls take the path they take under torch.compile."""
    monkeypatch.setattr(function, "compiling", lambda: True)
    monkeypatch.setattr(fuse_module, "compiling", lambda: True)


MODULES = [
    (name, lambda name=name: FlexSN(name))
    for name in sorted(flexsn.shipped_neurons())
] + [
    ("IFNode", lambda: IFNode(step_mode="m")),
    ("LIFNode(soft reset)", lambda: LIFNode(step_mode="m", v_reset=None)),
    (
        "LIFNode(decay_input=False, detach_reset)",
        lambda: LIFNode(step_mode="m", decay_input=False, detach_reset=True),
    ),
    (
        "LIFNode(ATan)",
        lambda: LIFNode(
            step_mode="m", surrogate_function=flexsn.surrogate.ATan(alpha=3.0)
        ),
    ),
    (
        "ParametricLIFNode",
        lambda: ParametricLIFNode(step_mode="m", init_tau=3.0),
    ),
    ("LIFNode(store_v_seq)", lambda: LIFNode(step_mode="m", store_v_seq=True)),
]


def relative(a, b):
    scale = b.norm()
    return float((a - b).norm() / (scale if scale > 0 else 1.0))


def run(module, inputs, seed):
    """Outputs, final states, state sequences and gradients of one call
    from non-zero initial states."""
    module.reset()
    xs = [x.detach().clone().requires_grad_() for x in inputs]
    gen = torch.Generator().manual_seed(seed)
    for i in range(len(module.states)):
        module.states[i] = (
            torch.rand(inputs[0].shape[1:], generator=gen).to(inputs[0].device)
        ).requires_grad_()
    inits = [s for s in module.states]
    out = module(*xs)
    outs = list(out) if isinstance(out, (tuple, list)) else [out]
    weights = [torch.randn(o.shape, generator=gen).to(o.device) for o in outs]
    loss = sum((o * w).sum() for o, w in zip(outs, weights))
    finals = [s for s in module.states]
    loss = loss + sum(s.sum() * 0.5 for s in finals)
    params = [p for p in module.parameters()]
    grads = torch.autograd.grad(loss, xs + inits + params, allow_unused=True)
    seqs = list(module.state_seqs or [])
    return (
        [o.detach() for o in outs],
        [s.detach() for s in finals],
        [s.detach() for s in seqs],
        grads,
    )


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name,make", MODULES, ids=[m[0] for m in MODULES])
def test_step_matches_kernels(device, name, make, monkeypatch):
    module = make().to(device)
    assert (
        module.handle.torch_step is not None
    ), f"{name}: no PyTorch step was generated"
    gen = torch.Generator().manual_seed(0)
    inputs = [
        (torch.randn(T, N, generator=gen) * 1.5 + 0.6).to(device)
        for _ in module.info.inputs
    ]
    kernels = run(module, inputs, 1)
    monkeypatch.setattr(function, "compiling", lambda: True)
    calls = []
    original = _torch_step.run
    monkeypatch.setattr(
        _torch_step, "run", lambda *args: calls.append(1) or original(*args)
    )
    torch_step = run(module, inputs, 1)
    assert calls, "the call did not take the PyTorch step"
    for what, a, b in zip(
        ("outputs", "final states", "state sequences", "gradients"),
        torch_step,
        kernels,
    ):
        assert len(a) == len(b), what
        for i, (x, y) in enumerate(zip(a, b)):
            if x is None or y is None:
                assert x is None and y is None, (what, i)
                continue
            assert relative(x, y) < 1e-5, (name, what, i, relative(x, y))


def test_every_surrogate_has_its_kernel_derivative():
    """The spike's gradient is the surrogate's g(x) as the compiled
    kernels evaluate it, for every surrogate the dialect knows (their
    defaults), through the attribute text flexsn-to-torch writes."""
    x = torch.linspace(-2.0, 2.0, 41, requires_grad=True)
    for spec in flexsn._dialect.SURROGATES:
        s = _torch_step.spike(x, f"#flexsn.{spec.mnemonic}")
        assert torch.equal(s.detach(), (x >= 0).float())
        (grad,) = torch.autograd.grad(s.sum(), x)
        defaults = [p.default for p in spec.params]
        assert torch.allclose(
            grad, spec.derivative(x.detach(), *defaults)
        ), spec.mnemonic


def test_attribute_parameters_are_read():
    x = torch.tensor([0.3], requires_grad=True)
    s = _torch_step.spike(x, "#flexsn.sigmoid<alpha = 2.500000e+00>")
    (grad,) = torch.autograd.grad(s.sum(), x)
    sig = torch.sigmoid(2.5 * x.detach())
    assert torch.allclose(grad, 2.5 * sig * (1 - sig))
    with pytest.raises(ValueError, match="not a FlexSN surrogate"):
        _torch_step.spike(x, "#flexsn.no_such_surrogate")


def test_cmpf_predicates_follow_nan_rules():
    a = torch.tensor([1.0, float("nan"), 2.0])
    b = torch.tensor([1.0, 1.0, 1.0])
    F = _torch_step.F
    assert F.cmpf("oeq", a, b).tolist() == [True, False, False]
    assert F.cmpf("ueq", a, b).tolist() == [True, True, False]
    assert F.cmpf("one", a, b).tolist() == [False, False, True]
    assert F.cmpf("une", a, b).tolist() == [False, True, True]
    assert F.cmpf("ord", a, b).tolist() == [True, False, True]
    assert F.cmpf("uno", a, b).tolist() == [False, True, False]
    assert F.cmpf("ogt", a, b).tolist() == [False, False, True]
    assert F.cmpf("ule", a, b).tolist() == [True, True, False]


@pytest.mark.parametrize("device", DEVICES)
def test_compile_policy_picks_the_path(device, as_compiled, monkeypatch):
    """Under torch.compile, by size (the default policy), a call of
    TORCH_STEP_MAX_NEURONS neurons per step or more runs the kernels, a
    smaller one the PyTorch step; set_compile_policy("kernels") runs even
    a small call as the kernels, "torch_step" even a large one as the
    step; every path computes the same."""
    steps = []
    real_run = _torch_step.run

    def counted(*args, **kwargs):
        steps.append(1)
        return real_run(*args, **kwargs)

    monkeypatch.setattr(_torch_step, "run", counted)
    module = LIFNode(step_mode="m").to(device)
    x = torch.rand(T, 4, 8, device=device) * 2  # 32 neurons per step
    cases = [
        # (limit: the call is small when 32 < limit, policy, runs the step)
        (33, "by_size", True),
        (33, "kernels", False),
        (33, "torch_step", True),
        (32, "by_size", False),
        (32, "kernels", False),
        (32, "torch_step", True),
    ]
    results = []
    try:
        for limit, policy, expect_step in cases:
            monkeypatch.setattr(function, "TORCH_STEP_MAX_NEURONS", limit)
            flexsn.torch.set_compile_policy(policy)
            assert flexsn.torch.get_compile_policy() == policy
            steps.clear()
            module.reset()
            results.append(module(x))
            assert bool(steps) == expect_step, (limit, policy)
    finally:
        flexsn.torch.set_compile_policy("by_size")
    for result in results[1:]:
        assert torch.equal(results[0], result)


def test_compile_policy_refuses_an_unknown_one():
    with pytest.raises(ValueError, match="'always'.*by_size, kernels"):
        flexsn.torch.set_compile_policy("always")
    assert flexsn.torch.get_compile_policy() == "by_size"


def test_compile_policy_is_scoped():
    """compile_policy sets a policy for its block and restores the one
    before, when the block raises too; an unknown one changes nothing."""
    with flexsn.torch.compile_policy("kernels"):
        assert flexsn.torch.get_compile_policy() == "kernels"
        with pytest.raises(RuntimeError, match="inside"):
            with flexsn.torch.compile_policy("torch_step"):
                assert flexsn.torch.get_compile_policy() == "torch_step"
                raise RuntimeError("inside")
        assert flexsn.torch.get_compile_policy() == "kernels"
        with pytest.raises(ValueError, match="'always'"):
            with flexsn.torch.compile_policy("always"):
                pass
        assert flexsn.torch.get_compile_policy() == "kernels"
    assert flexsn.torch.get_compile_policy() == "by_size"


@pytest.mark.parametrize("device", DEVICES)
def test_fused_model_runs_its_modules_when_compiled(device, as_compiled):
    """Under torch.compile a fused chain runs the batch norm and the
    neuron's PyTorch step (what Inductor fuses): the same results as the
    model unfused."""
    from torch import nn

    class Chain(nn.Module):
        def __init__(self):
            super().__init__()
            self.bn = nn.BatchNorm2d(3)
            self.sn = LIFNode(step_mode="m", detach_reset=True)

        def forward(self, x):
            y = self.bn(x.flatten(0, 1)).unflatten(0, (x.shape[0], x.shape[1]))
            return self.sn(y) + x

    torch.manual_seed(0)
    model = Chain().to(device)
    fused = flexsn.torch.fuse(model)
    x = torch.randn(4, 2, 3, 5, 5, device=device)
    expected = model(x)
    model.sn.reset()
    assert torch.allclose(fused(x), expected, atol=1e-6)


@pytest.mark.cuda
@pytest.mark.skipif(not hasattr(torch, "compile"), reason="torch < 2")
def test_compiled_model_has_no_graph_break():
    """A model of FlexSN neurons, fused or not, compiles into one graph
    (torch._dynamo.explain), and computes what it computes eagerly."""
    from torch import nn
    import torch._dynamo as dynamo

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(3, 8, 3, 1, 1, bias=False)
            self.bn = nn.BatchNorm2d(8)
            self.sn = LIFNode(step_mode="m", detach_reset=True)

        def forward(self, x):
            T, B = x.shape[:2]
            y = self.bn(self.conv(x.flatten(0, 1))).unflatten(0, (T, B))
            return self.sn(y).mean(0)

    torch.manual_seed(0)
    model = Net().cuda()
    x = torch.randn(4, 2, 3, 8, 8, device="cuda")
    for m in (model, flexsn.torch.fuse(model)):
        dynamo.reset()
        model.sn.reset()
        explanation = dynamo.explain(m)(x)
        assert explanation.graph_break_count == 0, explanation.break_reasons
        model.sn.reset()
        expected = m(x)
        model.sn.reset()
        got = torch.compile(m)(x)
        assert relative(got, expected) < 1e-5


@pytest.mark.cuda
@pytest.mark.skipif(
    not flexsn.torch.has_custom_op(),
    reason="torch has no torch.library.custom_op",
)
@pytest.mark.parametrize("kind", ["u8-spikes", "per-neuron-threshold"])
def test_built_neurons_on_the_custom_op_compile(kind):
    """Neurons that run their kernels as the custom op under torch.compile
    (spikes stored as uint8: no PyTorch step; a per-neuron parameter),
    two of them sharing one compiled neuron and its NeuronInfo, built (as
    convert and fuse build them) before torch.compile traces their first
    call: that call compiles and computes what the model computes eagerly,
    in training too. Before, a view of the shared NeuronInfo cached on its
    first read changed inside the traced frame, and dynamo failed its own
    guards ("Guard failed on the same frame it was created", in
    SpikingJelly's VGG-16 converted)."""
    from torch import nn

    training = kind != "u8-spikes"

    def neuron():
        if training:
            return LIFNode(
                step_mode="m", v_threshold=torch.full((2, 8, 8, 8), 0.5)
            )
        return LIFNode(step_mode="m", spike_dtype=torch.uint8)

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = nn.Conv2d(3, 8, 3, 1, 1, bias=False)
            self.bn1 = nn.BatchNorm2d(8)
            self.sn1 = neuron()
            self.conv2 = nn.Conv2d(8, 8, 3, 1, 1, bias=False)
            self.bn2 = nn.BatchNorm2d(8)
            self.sn2 = neuron()

        def forward(self, x):
            T, B = x.shape[:2]
            y = self.bn1(self.conv1(x.flatten(0, 1))).unflatten(0, (T, B))
            y = self.sn1(y).float()
            y = self.bn2(self.conv2(y.flatten(0, 1))).unflatten(0, (T, B))
            return self.sn2(y).float().mean(0)

    torch.manual_seed(0)
    model = Net().cuda()
    neurons = (model.sn1, model.sn2)
    assert neurons[0].info is neurons[1].info  # one compiled neuron
    assert (
        neurons[0].handle.has_shaped or neurons[0].handle.torch_step is None
    )  # the custom op, not the PyTorch step, under torch.compile
    x = torch.randn(4, 2, 3, 8, 8, device="cuda")
    results = []
    for m in (torch.compile(model), model):  # the compiled call first
        for n in neurons:
            n.reset()
        model.zero_grad()
        with torch.set_grad_enabled(training):
            y = m(x)
        results.append([y.detach()])
        if training:
            y.square().sum().backward()
            results[-1] += [model.conv1.weight.grad.clone()] + [
                n.v_threshold.grad.clone() for n in neurons
            ]
    for got, expected in zip(*results):
        assert relative(got, expected) < 1e-5


@pytest.mark.cuda
@pytest.mark.skipif(
    not torch.cuda.is_available() or not flexsn.torch.has_custom_op(),
    reason="CUDA and torch.library.custom_op",
)
@pytest.mark.parametrize("copied", [False, True], ids=["built", "deepcopy"])
def test_custom_op_with_dynamic_shapes(copied):
    """torch.compile with dynamic shapes (as its automatic dynamic makes
    them after a shape changes) traces the custom op: its fake builds the
    workspace's size from the symbolic sizes, and each shape computes
    what the eager module computes, outputs and input gradients. A deep
    copy shares its original's compiled neuron, so its first call
    compiles nothing inside the traced frame (fullgraph: no break)."""
    import copy

    with flexsn.torch.compile_policy("kernels"):
        lif = LIFNode(step_mode="m").cuda()
        lif(torch.zeros(1, 1, device="cuda"))  # compiled here
        neuron = copy.deepcopy(lif) if copied else lif
        compiled = torch.compile(neuron, dynamic=True, fullgraph=True)
        for shape in ((4, 2, 8), (4, 3, 8), (6, 3, 40)):
            gen = torch.Generator().manual_seed(sum(shape))
            x0 = (torch.randn(shape, generator=gen) + 1.0).cuda()
            results = []
            for run in (compiled, neuron):
                neuron.reset()
                x = x0.clone().requires_grad_(True)
                y = run(x)
                y.sum().backward()
                results.append((y.detach(), x.grad, neuron.v.detach()))
            for got, want in zip(*results):
                assert relative(got, want) < 1e-6, shape


@pytest.mark.cuda
@pytest.mark.skipif(
    not torch.cuda.is_available() or not flexsn.torch.has_custom_op(),
    reason="CUDA and torch.library.custom_op",
)
@pytest.mark.parametrize(
    "make",
    [
        lambda: LIFNode(step_mode="m"),
        lambda: ParametricLIFNode(step_mode="m"),
        lambda: FlexSN("izhikevich", store_state_seqs=True),
    ],
    ids=["lif", "plif", "izhikevich-state-seqs"],
)
def test_custom_op_recomputing(make, monkeypatch):
    """Under torch.compile (the kernels' custom op), a recomputing neuron
    computes what the eager saving one does: outputs, final states, the
    input's and the parameters' gradients, from a given initial state
    too. Turning `recompute` on after a compiled call takes effect: each
    call's backward then recomputes its workspace, once."""
    from flexsn.torch._kernels import NeuronKernels

    recomputed = []
    real_forward = NeuronKernels.forward

    def counting(self, *args, **kwargs):
        recomputed.append(not kwargs.get("results", True))
        return real_forward(self, *args, **kwargs)

    monkeypatch.setattr(NeuronKernels, "forward", counting)
    with flexsn.torch.compile_policy("kernels"):
        torch._dynamo.reset()
        neuron = make().cuda()
        compiled = torch.compile(neuron, fullgraph=True)
        gen = torch.Generator().manual_seed(3)
        x0 = (torch.rand((6, 3, 40), generator=gen) * 12.0).cuda()
        weights = torch.randn(x0.shape, generator=gen).cuda()

        def call(run, recompute, pieces):
            neuron.recompute = recompute
            neuron.reset()
            for p in neuron.parameters():
                p.grad = None
            x = x0.clone().requires_grad_(True)
            ys = [run(x[:3]), run(x[3:])] if pieces else [run(x)]
            y = torch.cat([y if torch.is_tensor(y) else y[0] for y in ys])
            (y * weights).sum().backward()
            states = [s for s in neuron.states if torch.is_tensor(s)]
            return (
                [y.detach(), x.grad]
                + [s.detach() for s in states]
                + [p.grad for p in neuron.parameters()]
            )

        for pieces in (False, True):
            want = call(neuron, False, pieces)
            for recompute in (False, True):
                recomputed.clear()
                got = call(compiled, recompute, pieces)
                calls = 2 if pieces else 1
                assert recomputed == [recompute] * calls, recompute
                assert len(got) == len(want)
                for k, (g, w) in enumerate(zip(got, want)):
                    assert relative(g, w) < 1e-6, (pieces, recompute, k)
