"""Fusion through what real models write: batch norms inside containers
that run on [T*B, ...] (SpikingJelly's SeqToANNContainer style), behind
flatten / reshape / unflatten of (T, B), BatchNorm1d after Conv1d or
Linear on [T, B, C, L], and forwards that branch on their inputs' shapes
(traced at each call's shapes). Every model is checked with the fusion
harness (fused == unfused: outputs, every gradient, running statistics,
neuron states), and each test first checks that the chains it is about
were fused at all.
"""

import io
import contextlib

import pytest
import torch
from torch import nn

from flexsn.torch import LIFNode, fuse
from flexsn.torch._fuse import _PROGRAMS, fused_block

from devices import DEVICES
from fusion_harness import Case, compare
from test_fuse import _pickled

SWITCHING = ("train", "eval", "train", "eval")


@pytest.fixture(autouse=True, scope="module")
def fresh_blocks():
    _PROGRAMS.clear()


def lif():
    return LIFNode(tau=2.0, step_mode="m", detach_reset=True)


class SeqToANN(nn.Sequential):
    """Runs its modules on [T*B, ...] and gives back [T, B, ...], as
    SpikingJelly's SeqToANNContainer does (its unpacking of the shape is
    what a symbolic trace cannot follow)."""

    def forward(self, x):
        steps, batch = x.shape[:2]
        return super().forward(x.flatten(0, 1)).unflatten(0, (steps, batch))


class FlattenNet(nn.Module):
    """conv -> bn on x.flatten(0, 1), reshaped back with view and
    unflatten: symbolically traceable (no container, no unpacking)."""

    def __init__(self, channels=4):
        super().__init__()
        self.conv1 = nn.Conv2d(2, channels, 3, 1, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(channels)
        self.sn1 = lif()
        self.conv2 = nn.Conv2d(channels, channels, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(channels)
        self.sn2 = lif()

    def forward(self, x):
        T, B = x.shape[0], x.shape[1]
        y = self.bn1(self.conv1(x.flatten(0, 1)))
        y = self.sn1(y.view(T, B, y.shape[1], y.shape[2], y.shape[3]))
        z = self.bn2(self.conv2(y.flatten(0, 1))).unflatten(0, (T, B))
        return self.sn2(z) + y


class Attention(nn.Module):
    """Spikformer's spiking self-attention, in small: Conv1d -> BN1d in a
    container on [T, B, C, L] tokens, a shape check that a symbolic trace
    cannot follow, and a projection whose spikes join the residual."""

    def __init__(self, dim=8, heads=2):
        super().__init__()
        self.heads = heads
        self.qkv = SeqToANN(
            nn.Conv1d(dim, 3 * dim, 1, bias=False), nn.BatchNorm1d(3 * dim)
        )
        self.qkv_sn = lif()
        self.attn_sn = LIFNode(
            tau=2.0, v_threshold=0.5, step_mode="m", detach_reset=True
        )
        self.proj = SeqToANN(
            nn.Conv1d(dim, dim, 1, bias=False), nn.BatchNorm1d(dim)
        )
        self.proj_sn = lif()

    def forward(self, x):
        if x.ndim != 4:
            raise ValueError("expected [T, B, C, L]")
        T, B, C, L = x.shape
        qkv = self.qkv_sn(self.qkv(x))
        q, k, v = (
            qkv.reshape(T, B, 3, self.heads, C // self.heads, L)
            .flatten(2, 3)
            .chunk(3, dim=2)
        )
        y = (v @ k.transpose(-2, -1)) @ q * 0.125
        y = self.attn_sn(y).reshape(T, B, C, L)
        return self.proj_sn(self.proj(y))


class Mlp(nn.Module):
    def __init__(self, dim=8, hidden=16):
        super().__init__()
        self.fc1 = SeqToANN(
            nn.Conv1d(dim, hidden, 1, bias=False), nn.BatchNorm1d(hidden)
        )
        self.sn1 = lif()
        self.fc2 = SeqToANN(
            nn.Conv1d(hidden, dim, 1, bias=False), nn.BatchNorm1d(dim)
        )
        self.sn2 = lif()

    def forward(self, x):
        return self.sn2(self.fc2(self.sn1(self.fc1(x))))


class TinySpikformer(nn.Module):
    """Spikformer's structure in small: a patch stage whose batch norm is
    followed by max-pooling (not a chain), a positional stage (a chain),
    and one transformer block whose attention and MLP outputs join their
    residuals (chains with an ADD connection)."""

    def __init__(self, dim=8, classes=3):
        super().__init__()
        self.stem = SeqToANN(
            nn.Conv2d(2, dim, 3, 1, 1, bias=False),
            nn.BatchNorm2d(dim),
            nn.MaxPool2d(3, 2, 1),
        )
        self.stem_sn = lif()
        self.pos = SeqToANN(
            nn.Conv2d(dim, dim, 3, 1, 1, bias=False), nn.BatchNorm2d(dim)
        )
        self.pos_sn = lif()
        self.attn = Attention(dim)
        self.mlp = Mlp(dim)
        self.head = nn.Linear(dim, classes)

    def forward(self, x):
        if x.dim() != 5:
            raise ValueError("expected [T, B, C, H, W]")
        x = self.stem_sn(self.stem(x))
        x = self.pos_sn(self.pos(x)) + x
        T, B, C, H, W = x.shape
        tokens = x.flatten(3)
        tokens = tokens + self.attn(tokens)
        tokens = tokens + self.mlp(tokens)
        return self.head(tokens.mean(-1)).mean(0)


class LinearBn(nn.Module):
    """Linear -> BatchNorm1d on [T*B, C] -> neuron: the classifier of
    SEW-style models written with a reshape."""

    def __init__(self, features=18, classes=5):
        super().__init__()
        self.fc = nn.Linear(features, classes)
        self.bn = nn.BatchNorm1d(classes)
        self.sn = lif()

    zero_gradients = ("fc.bias",)

    def forward(self, x):
        T, B = x.shape[0], x.shape[1]
        y = self.bn(self.fc(x.flatten(2).flatten(0, 1)))
        return self.sn(y.reshape(T, B, -1)).sum(0)


class PreAddNet(nn.Module):
    """Spiking-ResNet's basic blocks, bn2(conv2(.)) + identity -> sn2: the
    identity added in place (`out += y`, out a view of the batch norm's
    output) in the first, as a new tensor after a downsampling path in the
    second, whose spikes are averaged over time."""

    def __init__(self, channels=4):
        super().__init__()
        self.conv0 = nn.Conv2d(2, channels, 3, 1, 1, bias=False)
        self.bn0 = nn.BatchNorm2d(channels)
        self.sn0 = lif()
        self.conv1 = nn.Conv2d(channels, channels, 3, 1, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(channels)
        self.sn1 = lif()
        self.conv2 = nn.Conv2d(channels, channels, 3, 2, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(channels)
        # A 3x3 downsampling convolution where ResNet's is 1x1: the
        # backward of a 1x1 stride-2 convolution on channels-last CPU
        # tensors corrupts the heap in torch 1.13 (oneDNN; a few calls
        # abort the process), with or without FlexSN in the model.
        self.down = nn.Sequential(
            nn.Conv2d(channels, channels, 3, 2, 1, bias=False),
            nn.BatchNorm2d(channels),
        )
        self.sn2 = lif()

    def forward(self, x):
        T, B = x.shape[0], x.shape[1]
        y = self.bn0(self.conv0(x.flatten(0, 1))).unflatten(0, (T, B))
        y = self.sn0(y)
        out = self.bn1(self.conv1(y.flatten(0, 1))).view(y.shape)
        out += y
        y = self.sn1(out)
        out = self.bn2(self.conv2(y.flatten(0, 1))).unflatten(0, (T, B))
        identity = self.down(y.flatten(0, 1)).unflatten(0, (T, B))
        return self.sn2(out + identity).mean(0)


def images(shape):
    def make(call):
        gen = torch.Generator().manual_seed(200 + call)
        return torch.randn(shape, generator=gen) * 2.0 + 0.5

    return make


def reset(model):
    for n in model.modules():
        if isinstance(n, LIFNode):
            n.reset()


def fused_chains(model, x):
    """The connection of each chain that fuse(model) fused, after one
    call (a module traced at its calls has its graphs then)."""
    fused = fuse(model)
    with torch.no_grad():
        fused(x)
    graphs = []
    for m in fused.modules():
        graphs += [m.graph] if isinstance(m, torch.fx.GraphModule) else []
        at_call = m.__dict__.get("forward")
        graphs += [g.graph for g, _ in getattr(at_call, "graphs", {}).values()]
    return [
        n.kwargs["connection"] + (" after +" if "added" in n.kwargs else "")
        for g in graphs
        for n in g.nodes
        if n.target is fused_block
    ]


MODELS = {
    "flatten": (FlattenNet, (4, 3, 2, 6, 6), ["none", "add"]),
    "linear_bn": (LinearBn, (4, 3, 2, 3, 3), ["none"]),
    "pre_add": (
        PreAddNet,
        (4, 3, 2, 6, 6),
        ["none", "none after +", "none after +"],
    ),
    "spikformer": (
        TinySpikformer,
        (4, 3, 2, 8, 8),
        ["none", "none", "add", "none", "none", "add"],
    ),
}


@pytest.mark.parametrize("name", list(MODELS))
def test_chains_are_fused(name):
    """The chains each model is about are found (a harness pass with
    nothing fused would prove nothing)."""
    make, shape, connections = MODELS[name]
    torch.manual_seed(0)
    found = fused_chains(make(), images(shape)(0))
    # The positional stage's spikes are added to its input: an ADD too.
    if name == "spikformer":
        connections = ["add", "none", "add", "none", "add"]
    assert sorted(found) == sorted(connections), found


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("layout", ["row_major", "channels_last"])
@pytest.mark.parametrize("name", list(MODELS))
def test_contract(device, layout, name):
    make, shape, _ = MODELS[name]
    if layout == "channels_last" and len(shape) != 5:
        pytest.skip("channels-last is for [T, B, C, H, W] images")
    compare(
        make, images(shape), Case(device, layout, "f32", SWITCHING)
    ).check()


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("precision", ["amp", "bf16"])
@pytest.mark.parametrize("name", ["spikformer", "pre_add"])
def test_contract_half_precisions(device, precision, name):
    if (
        device == "cpu"
        and precision == "amp"
        and not hasattr(torch, "autocast")
    ):
        pytest.skip("no torch.autocast")
    make, shape, _ = MODELS[name]
    compare(
        make, images(shape), Case(device, "row_major", precision, SWITCHING)
    ).check()


def test_new_shapes_are_traced_again():
    """A model fused at its calls' shapes: a new batch size is traced
    again, and each call still computes what the unfused model does."""
    torch.manual_seed(0)
    model = TinySpikformer()
    fused = fuse(model)
    for batch in (3, 2, 3):
        x = images((4, batch, 2, 8, 8))(batch)
        reset(model)
        expected = model(x)
        reset(model)  # the neurons are shared
        got = fused(x)
        assert ((got - expected).norm() / expected.norm()) < 1e-5
    assert len(fused.forward.graphs) == 2


def test_changed_attribute_runs_unfused():
    """A plain value the traced forward read (the attention's head count,
    set on the model the caller holds) changed after tracing: the call
    runs the module's own forward, so it follows the new value."""
    torch.manual_seed(0)
    model = TinySpikformer().eval()
    fused = fuse(model)
    x = images((4, 2, 2, 8, 8))(0)
    fused(x)
    fused.attn.heads = 4
    model.attn.heads = 4
    with torch.no_grad():
        reset(model)
        expected = model(x)
        reset(model)  # the neurons are shared
        got = fused(x)
    assert torch.equal(expected, got)


def test_verbose_names_what_is_not_fused():
    torch.manual_seed(0)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        fused = fuse(TinySpikformer(), verbose=True)
        with torch.no_grad():
            fused(images((4, 2, 2, 8, 8))(0))
    text = out.getvalue()
    assert "traced and fused at its first call" in text
    assert (
        "stem.1: not fused, its output is not the only input of a "
        "FlexSN neuron (it goes to a MaxPool2d)" in text
    )
    assert "fused: pos.1 (over [T*B, ...]) -> pos_sn -> add" in text


def test_pre_neuron_adds_are_reported():
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        fuse(PreAddNet(), verbose=True)
    assert out.getvalue().splitlines() == [
        "fused: bn0 (over [T*B, ...]) -> sn0",
        "fused: bn1 (over [T*B, ...]) -> + sn0 -> sn1",
        "fused: bn2 (over [T*B, ...]) -> + unflatten_2 -> sn2 -> mean over T",
        "down.1: not fused, its output is not the only input of a FlexSN "
        "neuron (it is the second input of a fused chain: sn2's)",
    ]


class AddedTwice(nn.Module):
    """Adds that a block cannot take: a scalar, an alpha, and the batch
    norm's output added in place to the other tensor (which the add then
    changes: the model reads it again)."""

    def __init__(self):
        super().__init__()
        self.bns = nn.ModuleList(nn.BatchNorm2d(2) for _ in range(3))
        self.sns = nn.ModuleList(lif() for _ in range(3))

    def forward(self, x):
        a = self.sns[0](self.bns[0](x.flatten(0, 1)).view(x.shape) + 1.0)
        b = self.sns[1](
            torch.add(self.bns[1](x.flatten(0, 1)).view(x.shape), x, alpha=2.0)
        )
        y = x.clone()
        y += self.bns[2](x.flatten(0, 1)).view(x.shape)
        return a + b + self.sns[2](y) + y


def test_adds_a_block_cannot_take_run_unfused():
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        fuse(AddedTwice(), verbose=True)
    lines = out.getvalue().splitlines()
    assert len(lines) == 3 and not [x for x in lines if "fused:" in x]
    assert all("a block adds a tensor of its shape" in x for x in lines[:2])
    compare(
        AddedTwice,
        images((3, 2, 2, 4, 4)),
        Case("cpu", "row_major", "f32", SWITCHING),
    ).check()


def test_reshape_that_moves_channels_runs_unfused():
    """A reshape after the batch norm that does not split T*B (here it
    regroups the batch into the channels) is checked at the call: the
    block would normalize other groups, so the call runs unfused."""

    class Regrouped(nn.Module):
        def __init__(self):
            super().__init__()
            self.bn = nn.BatchNorm2d(2)
            self.sn = lif()

        def forward(self, x):
            y = self.bn(x.flatten(0, 1))
            return self.sn(
                y.reshape(x.shape[0], 1, -1, x.shape[3], x.shape[4])
            )

    torch.manual_seed(0)
    x = images((4, 3, 2, 5, 5))(0)
    model = Regrouped()
    fused = fuse(model)
    assert any(n.target is fused_block for n in fused.graph.nodes)
    expected = model(x)
    model.sn.reset()
    got = fused(x)
    assert torch.allclose(got, expected)


class MemoryModule(nn.Module):
    """Keeps a state in a dict, as SpikingJelly's MemoryModule does
    (`self.v = ...` writes `self._memories["v"]`)."""

    def __init__(self):
        super().__init__()
        self.__dict__["_memories"] = {"v": 0.0}

    def __getattr__(self, name):
        memories = self.__dict__.get("_memories", {})
        if name in memories:
            return memories[name]
        return super().__getattr__(name)

    def __setattr__(self, name, value):
        if name in self.__dict__.get("_memories", {}):
            self._memories[name] = value
        else:
            super().__setattr__(name, value)

    def forward(self, x):
        self.v = self.v + x
        return self.v


class Branching(nn.Module):
    """A shape check (so it is traced at its calls), a chain, a module
    with a state in a dict, and a child whose forward branches on its own
    `training`."""

    class Doubling(nn.Module):
        def forward(self, x):
            return x * 2.0 if self.training else x

    def __init__(self):
        super().__init__()
        self.bn = nn.BatchNorm2d(2)
        self.sn = lif()
        self.memory = MemoryModule()
        self.doubling = self.Doubling()

    def forward(self, x):
        if x.ndim != 5:
            raise ValueError("[T, B, C, H, W]")
        T, B = x.shape[:2]
        y = self.sn(self.bn(x.flatten(0, 1)).unflatten(0, (T, B)))
        return self.doubling(self.memory(y))


def test_tracing_leaves_module_state_alone():
    """Tracing at a call runs leaf modules on meta tensors: a state kept
    in a dict is put back, so the fused call leaves it as the unfused one
    does."""
    torch.manual_seed(0)
    model = Branching()
    fused = fuse(model)
    x = images((2, 3, 2, 4, 4))(0)
    expected = model(x).detach()
    state = model.memory.v.detach().clone()
    model.memory.v = 0.0
    reset(model)
    got = fused(x)
    assert fused.forward.graphs, "not traced at the call"
    assert (
        isinstance(model.memory.v, torch.Tensor)
        and model.memory.v.device.type == "cpu"
    )
    assert torch.allclose(model.memory.v, state)
    assert torch.allclose(got, expected)


def test_submodule_mode_is_guarded():
    """A child put in eval alone (the root still training): the graph
    traced with its training branch is not used."""
    torch.manual_seed(0)
    model = Branching()
    fused = fuse(model)
    x = images((2, 3, 2, 4, 4))(0)
    fused(x)
    model.doubling.eval()
    for m in (model, fused):
        m.memory.v = 0.0
    reset(model)
    expected = model(x).detach()
    model.memory.v = 0.0
    reset(model)
    assert torch.allclose(fused(x), expected)


def test_symbolic_trace_leaves_module_state_alone():
    """fuse traces each module that has children; a forward that stores a
    traced value (a proxy) in its state leaves the model as it was, and
    a tensor constant of a forward (which torch.fx puts on the traced
    module) is no error."""

    class WithMemory(nn.Module):
        def __init__(self):
            super().__init__()
            self.memory = MemoryModule()
            self.inner = nn.Sequential(MemoryModule())

        def forward(self, x):
            self.inner[0].v = x  # a traced forward writes a proxy here
            return self.memory(x) * torch.tensor(0.5)

    model = WithMemory()
    fuse(model)
    assert model.memory.v == 0.0 and model.inner[0].v == 0.0
    x = torch.ones(2, 2)
    assert torch.equal(model(x), x * 0.5)


def test_fused_at_call_copies_and_pickles():
    """A model fused at its calls deep-copies and pickles (torch.save)
    with its own modules: the copy traces again at its first call, and
    computes what the original does; changing the copy's parameters
    leaves the original as it was."""
    import copy

    torch.manual_seed(0)
    model = TinySpikformer()
    fused = fuse(model)
    x = images((4, 2, 2, 8, 8))(0)
    with torch.no_grad():
        reset(model)
        expected = fused(x)
    reset(model)
    for other in (copy.deepcopy(fused), _pickled(fused)):
        assert other.forward.holder is other and not other.forward.graphs
        assert list(other.state_dict()) == list(model.state_dict())
        with torch.no_grad():
            reset(other)
            assert torch.allclose(other(x), expected)
            next(other.parameters()).add_(1.0)
            reset(model)
            assert torch.allclose(fused(x), expected)
