"""The drop-in neurons behave as SpikingJelly's documented neurons do.

Each case states one SpikingJelly behaviour and checks FlexSN's IFNode,
LIFNode or ParametricLIFNode against it; the expected values come from the
neuron formulas of reference.py (float64 loops written independently of
the package) or from the rule itself:

* the membrane potential starts, and `reset()` returns it, at `v_reset`
  (0 for a soft reset); a new batch size starts again from there;
* every neuron parameter is an attribute read at the next call;
* modules survive pickling, deepcopy and torch.save/torch.load, in this
  process and in another, and train with their own kernels;
* states follow `.to()`, `.half()`, `.bfloat16()`; `.double()` is refused;
* `v` may be assigned a number (broadcast) or a tensor of the neuron shape;
* single-step mode by default; unknown modes are refused;
* SpikingJelly's surrogate objects are accepted (duck typing), by the
  modules and in a step function's core;
* printing shows SpikingJelly's fields;
* `check_finite=True` names the first non-finite tensor, step and neuron.
"""

import copy
import io
import os
import pathlib
import pickle
import subprocess
import sys
import textwrap

import pytest
import torch

import flexsn
from flexsn import surrogate as sg
from flexsn.torch import (
    Affine,
    Block,
    FlexSN,
    IFNode,
    LIFNode,
    ParametricLIFNode,
)

import reference as ref
from devices import DEVICES

CPU = ("cpu",)
TOL = dict(rtol=1e-6, atol=1e-6)


def lif_expected(x, v0, **kwargs):
    """(spikes, v sequence) of the LIF formula in float64, from v0."""
    s, v = ref.lif_ref(x.double(), v0, **kwargs)
    return s, v


def assert_lif_gradient(node, seed, v0=0.0, **formula):
    """x.grad of sum(node(x)) is the LIF formula's (float64 autograd)."""
    x = drive(6, 30, seed=seed).requires_grad_()
    node(x).sum().backward()
    xr = x.detach().double().requires_grad_()
    s, _ = ref.lif_ref(xr, v0, **formula)
    s.sum().backward()
    torch.testing.assert_close(x.grad.double(), xr.grad, rtol=1e-5, atol=1e-6)


def drive(*shape, seed=0, mean=0.6, std=0.6):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g) * std + mean


# ---------------------------------------------------------------------------
# A. Initial state
# ---------------------------------------------------------------------------


def test_if_starts_at_v_reset():
    """IF with v_reset = -0.2 from v = -0.2: -0.2 + 0.6 + 0.5 = 0.9 never
    reaches 1; from 0 it would fire at the second step."""
    x = torch.tensor([[0.6], [0.5]])
    node = IFNode(v_reset=-0.2, step_mode="m", targets=CPU)
    assert node(x).flatten().tolist() == [0.0, 0.0]
    assert node.v.item() == pytest.approx(-0.2 + 0.6 + 0.5)
    at_zero = IFNode(v_reset=0.0, step_mode="m", targets=CPU)
    assert at_zero(x).flatten().tolist() == [0.0, 1.0]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("v_reset", [0.0, None, -0.2, 0.3])
def test_lif_starts_and_resets_at_v_reset(device, v_reset):
    """The first call, the call after reset() and the call after a batch
    size change all start from v_reset (0 when soft)."""
    node = LIFNode(v_reset=v_reset, step_mode="m", targets=None).to(device)
    v0 = 0.0 if v_reset is None else v_reset
    assert node.v == v0  # a number until the first call, as in SpikingJelly
    x = drive(8, 4, 64).to(device)
    s_want, v_want = lif_expected(x.cpu(), v0, v_reset=v_reset)
    for _ in range(2):
        s = node(x)
        torch.testing.assert_close(s.cpu().double(), s_want, rtol=0, atol=0)
        torch.testing.assert_close(node.v.cpu().double(), v_want[-1], **TOL)
        node.reset()
        assert node.v == v0
    node(x)
    other = drive(8, 3, 64, seed=1).to(device)  # batch 4 -> 3, no reset
    s_want, _ = lif_expected(other.cpu(), v0, v_reset=v_reset)
    torch.testing.assert_close(
        node(other).cpu().double(), s_want, rtol=0, atol=0
    )


def test_gradient_from_v_reset():
    """The initial v_reset takes part in training: gradients equal those
    of the formula started at v_reset."""
    node = LIFNode(v_reset=-0.3, step_mode="m", targets=CPU)
    assert_lif_gradient(node, 2, -0.3, v_reset=-0.3)


def test_block_starts_at_v_reset():
    """A Block's neuron starts from v_reset too (x·1 + 0 is x exactly)."""
    x = drive(6, 2, 3, 8, seed=3)
    block = Block(
        LIFNode(v_reset=-0.2, step_mode="m", targets=CPU),
        pre=Affine(),
        targets=CPU,
    )
    s_want, v_want = lif_expected(x, -0.2, v_reset=-0.2)
    torch.testing.assert_close(block(x).double(), s_want, rtol=0, atol=0)
    block.reset()
    torch.testing.assert_close(block(x).double(), s_want, rtol=0, atol=0)
    # A const write to the neuron rebuilds the block at the next call.
    block.neuron.tau = 3.0
    block.reset()
    s_want, _ = lif_expected(x, -0.2, v_reset=-0.2, tau=3.0)
    torch.testing.assert_close(block(x).double(), s_want, rtol=0, atol=0)


# ---------------------------------------------------------------------------
# B. Parameters are attributes
# ---------------------------------------------------------------------------


def test_attributes_read_as_spikingjelly_names_them():
    node = LIFNode(
        tau=3.0,
        decay_input=False,
        v_threshold=0.5,
        v_reset=None,
        detach_reset=True,
        surrogate_function=sg.ATan(alpha=3.0),
        store_v_seq=True,
        targets=CPU,
    )
    assert node.tau == 3.0 and node.decay_input is False
    assert node.v_threshold == 0.5 and node.v_reset is None
    assert node.detach_reset is True and node.store_v_seq is True
    assert node.surrogate_function == sg.ATan(alpha=3.0)
    assert node.step_mode == "s" and node.backend == "flexsn"
    plif = ParametricLIFNode(init_tau=4.0, targets=CPU)
    assert isinstance(plif.w, torch.nn.Parameter)
    assert torch.sigmoid(plif.w).item() == pytest.approx(0.25)


WRITES = [
    ("v_threshold", 0.25, dict(v_threshold=0.25)),
    ("tau", 10.0, dict(tau=10.0)),
    ("decay_input", False, dict(decay_input=False)),
    ("v_reset", None, dict(v_reset=None)),
    ("v_reset", -0.1, dict(v_reset=-0.1)),
]


@pytest.mark.parametrize(
    "name,value,formula", WRITES, ids=[f"{w[0]}={w[1]}" for w in WRITES]
)
def test_attribute_writes_take_effect(name, value, formula):
    """A write changes the next call, exactly as the formula with that
    value (the state carried over from the call before it)."""
    node = LIFNode(step_mode="m", targets=CPU)
    x1, x2 = drive(5, 40, seed=4), drive(5, 40, seed=5)
    node(x1)
    v1 = node.v.double()
    setattr(node, name, value)
    assert getattr(node, name) == value
    s_want, v_want = lif_expected(x2, v1, **formula)
    torch.testing.assert_close(node(x2).double(), s_want, rtol=0, atol=0)
    torch.testing.assert_close(node.v.double(), v_want[-1], **TOL)


@pytest.mark.parametrize(
    "name,value,surrogate",
    [
        ("detach_reset", True, "sigmoid"),
        ("surrogate_function", sg.ATan(alpha=3.0), ("atan", {"alpha": 3.0})),
    ],
)
def test_attribute_writes_change_gradients(name, value, surrogate):
    node = LIFNode(step_mode="m", targets=CPU)
    setattr(node, name, value)
    assert_lif_gradient(
        node, 6, surrogate=surrogate, detach_reset=(name == "detach_reset")
    )


def test_store_v_seq_write():
    node = LIFNode(step_mode="m", targets=CPU)
    x = drive(5, 12, seed=7)
    node(x)
    assert node.v_seq is None
    node.store_v_seq = True
    node.reset()
    node(x)
    _, v_want = lif_expected(x, 0.0)
    torch.testing.assert_close(node.v_seq.double(), v_want, **TOL)
    node.store_v_seq = False
    assert node.v_seq is None


def test_bad_attribute_writes():
    node = LIFNode(targets=CPU)
    with pytest.raises(ValueError, match="tau"):
        node.tau = 0.5
    with pytest.raises(TypeError, match="v_threshold"):
        node.v_threshold = "high"
    with pytest.raises(ValueError, match="finite"):
        node.v_threshold = float("nan")
    with pytest.raises(TypeError, match="detach_reset"):
        node.detach_reset = 0.5
    with pytest.raises(TypeError, match="v_reset"):
        node.v_reset = "zero"
    with pytest.raises(ValueError, match="backend"):
        node.backend = "numpy"
    node.backend = "cupy"  # SpikingJelly's names are accepted
    assert node.backend == "flexsn"
    assert node.tau == 2.0 and node.v_threshold == 1.0


def test_runtime_parameter_writes():
    """A runtime parameter is a kernel argument: a write needs no
    compile and changes the next call."""
    node = LIFNode(
        step_mode="m", kinds={"v_threshold": "runtime"}, targets=CPU
    )
    compiled = node.compiled
    node.v_threshold = 0.4
    x = drive(5, 20, seed=8)
    s_want, _ = lif_expected(x, 0.0, v_threshold=0.4)
    torch.testing.assert_close(node(x).double(), s_want, rtol=0, atol=0)
    assert node.compiled is compiled


# ---------------------------------------------------------------------------
# C. Save and load
# ---------------------------------------------------------------------------


def test_pickle_and_deepcopy_after_a_call():
    """Copies keep the state, the parameters and what they compute; a
    pickled copy loads its own kernels at its first call, a deep copy (the
    same process) shares the compiled neuron under a handle of its own,
    so that its first call under torch.compile does not compile (a graph
    break); a const change then recompiles the copy alone."""
    node = LIFNode(v_reset=-0.2, tau=3.0, step_mode="m", targets=CPU)
    x1, x2 = drive(4, 10, seed=9), drive(4, 10, seed=10)
    node(x1)
    s_want, v_want = lif_expected(x2, node.v.double(), tau=3.0, v_reset=-0.2)
    twin = copy.deepcopy(node)
    assert not twin._stale and twin.compiled is node.compiled
    assert twin.handle is not node.handle
    assert twin.handle.id != node.handle.id
    for copied in (twin, pickle.loads(pickle.dumps(node))):
        torch.testing.assert_close(copied.v, node.v, rtol=0, atol=0)
        assert copied.tau == 3.0 and copied.v_reset == -0.2
        torch.testing.assert_close(copied(x2).double(), s_want, rtol=0, atol=0)
        torch.testing.assert_close(copied.v.double(), v_want[-1], **TOL)
    twin.v_threshold = 0.7
    assert twin.compiled is not node.compiled
    twin.reset()
    s_want, _ = lif_expected(x2, 0.0, tau=3.0, v_reset=-0.2, v_threshold=0.7)
    torch.testing.assert_close(twin(x2).double(), s_want, rtol=0, atol=0)


def test_saved_before_a_call_trains_with_its_own_kernels():
    """torch.save before any call, other modules built, torch.load: the
    loaded module trains with its own neuron (a 0.5 threshold), not with
    the kernels of a module that happens to share a registry number."""
    node = LIFNode(v_threshold=0.5, step_mode="m", targets=CPU)
    buffer = io.BytesIO()
    torch.save(node, buffer)
    other = IFNode(v_threshold=2.0, step_mode="m", targets=CPU)
    other(drive(2, 3))
    buffer.seek(0)
    loaded = torch.load(buffer, weights_only=False)
    x = drive(6, 25, seed=11).requires_grad_()
    s = loaded(x)
    s.sum().backward()
    xr = x.detach().double().requires_grad_()
    s_want, _ = ref.lif_ref(xr, 0.0, v_threshold=0.5)
    s_want.sum().backward()
    torch.testing.assert_close(s.double(), s_want.detach(), rtol=0, atol=0)
    torch.testing.assert_close(x.grad.double(), xr.grad, rtol=1e-5, atol=1e-6)


SAVE = textwrap.dedent(
    """
    import sys, torch
    from flexsn.torch import LIFNode, ParametricLIFNode
    torch.manual_seed(0)
    net = torch.nn.Sequential(
        ParametricLIFNode(init_tau=3.0, v_reset=-0.1, step_mode="m"),
        LIFNode(v_threshold=0.5, v_reset=None, step_mode="m"))
    x = torch.randn(4, 16) + 0.6
    if sys.argv[2] == "call":
        with torch.no_grad():
            net(x)
    net[1].tau = 4.0
    torch.save({"net": net, "x": x}, sys.argv[1])
"""
)

LOAD = textwrap.dedent(
    """
    import sys, torch
    from flexsn.torch import IFNode
    IFNode(v_threshold=3.0, step_mode="m")(torch.ones(2, 2))  # takes id 1
    saved = torch.load(sys.argv[1], weights_only=False)
    net, x = saved["net"], saved["x"].requires_grad_()
    y = net(x)
    y.sum().backward()
    torch.save({"y": y.detach(), "grad": x.grad, "w": net[0].w.grad,
                "v0": net[0].v, "v1": net[1].v, "tau": net[1].tau},
               sys.argv[2])
"""
)


def _python(code, *args):
    package = pathlib.Path(flexsn.__file__).resolve().parent.parent
    env = dict(
        os.environ, PYTHONPATH=os.pathsep.join([str(package)] + sys.path)
    )
    result = subprocess.run(
        [sys.executable, "-c", code, *map(str, args)],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stderr


@pytest.mark.parametrize("before", ["call", "no-call"])
def test_save_and_load_across_processes(tmp_path, before):
    """A model saved in one process, after a call or before any, trains in
    another that built other modules first: the other process's results
    are the formulas' (PLIF's state carried over, then LIF with the tau
    written before saving)."""
    _python(SAVE, tmp_path / "net.pt", before)
    _python(LOAD, tmp_path / "net.pt", tmp_path / "out.pt")
    out = torch.load(tmp_path / "out.pt", weights_only=False)
    x = torch.load(tmp_path / "net.pt", weights_only=False)["x"]
    x = x.double().requires_grad_()
    w = torch.tensor(ref.init_w(3.0), dtype=torch.float64, requires_grad=True)
    v0_start, v1_start = -0.1, 0.0  # v_reset; 0 for the soft reset
    if before == "call":  # the first call, in the saving process
        s0_first, v0_first = ref.plif_ref(
            x.detach(), -0.1, w=w.detach(), v_reset=-0.1
        )
        _, v1_first = ref.lif_ref(s0_first, 0.0, v_threshold=0.5, v_reset=None)
        v0_start, v1_start = v0_first[-1], v1_first[-1]
    # The call in the loading process.
    s0, v0 = ref.plif_ref(x, v0_start, w=w, v_reset=-0.1)
    s1, v1 = ref.lif_ref(s0, v1_start, tau=4.0, v_threshold=0.5, v_reset=None)
    s1.sum().backward()
    assert out["tau"] == 4.0
    torch.testing.assert_close(out["y"].double(), s1.detach(), rtol=0, atol=0)
    torch.testing.assert_close(out["v0"].double(), v0[-1].detach(), **TOL)
    torch.testing.assert_close(out["v1"].double(), v1[-1].detach(), **TOL)
    torch.testing.assert_close(
        out["grad"].double(), x.grad, rtol=1e-5, atol=1e-6
    )
    torch.testing.assert_close(out["w"].double(), w.grad, rtol=1e-5, atol=1e-6)


# ---------------------------------------------------------------------------
# D. Dtype moves
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize(
    "convert,dtype",
    [
        (lambda m: m.half(), torch.float16),
        (lambda m: m.bfloat16(), torch.bfloat16),
        (lambda m: m.to(torch.float16), torch.float16),
    ],
)
def test_states_follow_dtype_moves(device, convert, dtype):
    node = LIFNode(step_mode="m").to(device)
    x = drive(4, 16, seed=12).to(device)
    node(x)
    v = node.v
    convert(node)
    assert node.v.dtype == dtype
    assert torch.equal(node.v, v.to(dtype))
    s = node(x.to(dtype))
    assert s.dtype == dtype and node.v.dtype == dtype
    node.float()
    assert node.v.dtype == torch.float32


def test_double_is_refused_at_conversion():
    node = LIFNode(step_mode="m", targets=CPU)
    node(drive(2, 3))
    with pytest.raises(TypeError, match="float32, float16 and bfloat16"):
        node.double()
    with pytest.raises(TypeError, match="float64"):
        torch.nn.Sequential(node).to(torch.float64)
    assert node.v.dtype == torch.float32


# ---------------------------------------------------------------------------
# E. Assigning v
# ---------------------------------------------------------------------------


def test_float_v_broadcasts():
    node = LIFNode(step_mode="m", targets=CPU)
    node.v = 0.5
    assert node.v == 0.5
    x = drive(5, 9, seed=13)
    s_want, v_want = lif_expected(x, 0.5)
    torch.testing.assert_close(node(x).double(), s_want, rtol=0, atol=0)
    torch.testing.assert_close(node.v.double(), v_want[-1], **TOL)


def test_tensor_v_of_the_neuron_shape():
    node = LIFNode(step_mode="m", targets=CPU)
    v0 = torch.linspace(-0.5, 0.9, 9)
    node.v = v0
    x = drive(5, 9, seed=14)
    s_want, _ = lif_expected(x, v0.double())
    torch.testing.assert_close(node(x).double(), s_want, rtol=0, atol=0)


def test_tensor_v_of_another_shape_is_an_error():
    node = LIFNode(step_mode="m", targets=CPU)
    node.v = torch.ones(5)
    with pytest.raises(ValueError, match=r"\(5,\).*\(3,\)"):
        node(torch.zeros(2, 3))
    with pytest.raises(TypeError, match="number or a tensor"):
        node.v = "high"


# ---------------------------------------------------------------------------
# F. step_mode
# ---------------------------------------------------------------------------


def test_single_step_is_the_default():
    """A [B, N] input is one step of B x N neurons, as in SpikingJelly."""
    node = LIFNode(v_reset=-0.1, targets=CPU)
    assert node.step_mode == "s"
    x = drive(4, 6, seed=15)
    s_want, v_want = lif_expected(x.unsqueeze(0), -0.1, v_reset=-0.1)
    s = node(x)
    assert s.shape == (4, 6)
    torch.testing.assert_close(s.double(), s_want[0], rtol=0, atol=0)
    torch.testing.assert_close(node.v.double(), v_want[0], **TOL)


def test_unknown_step_mode_is_refused():
    with pytest.raises(ValueError, match="step_mode"):
        LIFNode(step_mode="multi", targets=CPU)
    node = LIFNode(targets=CPU)
    with pytest.raises(ValueError, match="step_mode"):
        node.step_mode = "x"
    node.step_mode = "m"
    assert node.step_mode == "m"


# ---------------------------------------------------------------------------
# G. SpikingJelly's surrogate objects
# ---------------------------------------------------------------------------


class _atan_function(torch.autograd.Function):
    """SpikingJelly's surrogates run an autograd Function: fx cannot trace
    it, so a step function's core must not reach it."""

    @staticmethod
    def forward(ctx, x, alpha):
        raise AssertionError("the importer traced into the surrogate")

    @staticmethod
    def backward(ctx, grad):
        raise AssertionError("unreachable")


class ATan(torch.nn.Module):
    """Shaped as spikingjelly.activation_based.surrogate.ATan (2.0): the
    class name, `alpha` and `spiking` attributes, an nn.Module."""

    def __init__(self, alpha=2.0, spiking=True):
        super().__init__()
        self.alpha, self.spiking = alpha, spiking

    def forward(self, x):
        return _atan_function.apply(x, self.alpha)


def test_spikingjelly_surrogate_objects():
    node = LIFNode(
        surrogate_function=ATan(alpha=3.0), step_mode="m", targets=CPU
    )
    assert node.surrogate_function == sg.ATan(alpha=3.0)
    assert_lif_gradient(node, 16, surrogate=("atan", {"alpha": 3.0}))
    with pytest.raises(ValueError, match="spiking"):
        LIFNode(surrogate_function=ATan(spiking=False), targets=CPU)


def test_core_calling_a_spikingjelly_surrogate():
    surrogate = ATan(alpha=3.0)

    def core(x, v):
        h = v + (x - v) / 2.0
        s = surrogate(h - 1.0)
        return s, h * (1.0 - s)

    node = FlexSN(core, num_inputs=1, num_states=1, num_outputs=1, targets=CPU)
    assert (
        "#flexsn.atan<alpha = 3.0"
        in node.compiled.directory.joinpath("configured.mlir").read_text()
    )
    assert_lif_gradient(node, 17, surrogate=("atan", {"alpha": 3.0}))


# ---------------------------------------------------------------------------
# H. Printing
# ---------------------------------------------------------------------------


def test_print_shows_spikingjelly_fields():
    node = LIFNode(tau=3.0, v_reset=None, targets=CPU)
    text = repr(node)
    assert (
        "v_threshold=1.0, v_reset=None, detach_reset=False, "
        "step_mode=s, backend=flexsn, tau=3.0"
    ) in text
    assert "(surrogate_function): Sigmoid(alpha=4.0, spiking=True)" in text
    node.v_threshold = 0.25
    node.surrogate_function = sg.ATan()
    assert "v_threshold=0.25" in repr(node)
    assert "(surrogate_function): ATan(alpha=2.0, spiking=True)" in repr(node)
    plif = ParametricLIFNode(init_tau=4.0, targets=CPU)
    assert "tau=4.0" in repr(plif)
    assert "v_reset=0.0" in repr(IFNode(targets=CPU))


# ---------------------------------------------------------------------------
# N. Finite check
# ---------------------------------------------------------------------------


def test_check_finite_names_tensor_step_and_neuron():
    x = drive(5, 4, 3, seed=18)
    x[2, 1, 2] = float("nan")
    LIFNode(step_mode="m", targets=CPU)(x)  # off by default: no error
    node = LIFNode(step_mode="m", check_finite=True, targets=CPU)
    with pytest.raises(
        FloatingPointError,
        match=r"input 'x' is not finite at step t = 2: nan "
        r"at neuron \(1, 2\)",
    ):
        node(x)
    node.v = torch.tensor([[0.0, float("inf"), 0.0]] * 4)
    with pytest.raises(
        FloatingPointError,
        match=r"initial state 'v' is not finite: inf at " r"neuron \(0, 1\)",
    ):
        node(drive(5, 4, 3, seed=19))
    node.reset()
    # Finite inputs, an infinite potential (soft reset subtracts 1 only).
    big = torch.full((3, 2), 3e38)
    with pytest.raises(
        FloatingPointError, match=r"state 'v' is not finite at step t = 1: inf"
    ):
        IFNode(
            step_mode="m",
            v_reset=None,
            check_finite=True,
            store_v_seq=True,
            targets=CPU,
        )(big)
