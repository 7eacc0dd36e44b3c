"""flexsn.torch.fuse on unmodified models: SpikingJelly-style networks
(multi-step batch norms, SEW-ResNet and Spiking-ResNet blocks, a classifier
averaged over time), written here as SpikingJelly writes them.

The reference is the same model unfused, run by PyTorch's own batch norm
and the FlexSN neuron modules: eval outputs equal, training outputs,
gradients and running statistics within float tolerance, the same
state_dict keys both ways.
"""

import copy
import dataclasses
import io

import pytest
import torch
from torch import nn

from flexsn.torch import LIFNode, fuse
from flexsn.torch import _fuse as fuse_module
from flexsn.torch._fuse import _PROGRAMS, _key, _shape, fused_block

from devices import DEVICES


@pytest.fixture(autouse=True)
def fresh_blocks():
    """Each test compiles the blocks its models take as a fresh process
    would (the same sources whatever ran before: a GPU machine without the
    tools finds them in a cache filled here)."""
    _PROGRAMS.clear()


class MultiStep:
    """A batch norm over [T, B, C, ...], as SpikingJelly's
    layer.BatchNorm1d/2d(step_mode="m"): one batch of T·B samples."""

    step_mode = "m"

    def forward(self, x):
        if self.step_mode == "s":
            return super().forward(x)
        return super().forward(x.flatten(0, 1)).view(x.shape)


class MultiStepBatchNorm2d(MultiStep, nn.BatchNorm2d):
    pass


class MultiStepBatchNorm1d(MultiStep, nn.BatchNorm1d):
    pass


class MultiStepConv(nn.Conv2d):
    def forward(self, x):
        y = super().forward(x.flatten(0, 1))
        return y.view(x.shape[0], x.shape[1], *y.shape[1:])


def lif():
    return LIFNode(tau=2.0, detach_reset=True, step_mode="m")


def sew_function(x, y, cnf):
    """SpikingJelly's sew_function(identity, out, cnf)."""
    if cnf == "ADD":
        return x + y
    if cnf == "AND":
        return x * y
    return x * (1.0 - y)


class SEWBlock(nn.Module):
    """SEW-ResNet's BasicBlock: the connection joins the second neuron's
    spikes and the identity (or the downsampled identity's spikes)."""

    def __init__(self, cin, cout, stride, cnf):
        super().__init__()
        self.conv1 = MultiStepConv(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = MultiStepBatchNorm2d(cout)
        self.sn1 = lif()
        self.conv2 = MultiStepConv(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = MultiStepBatchNorm2d(cout)
        self.sn2 = lif()
        self.downsample = None
        if stride != 1 or cin != cout:
            self.downsample = nn.Sequential(
                MultiStepConv(cin, cout, 1, stride, bias=False),
                MultiStepBatchNorm2d(cout),
            )
            self.downsample_sn = lif()
        self.cnf = cnf

    def forward(self, x):
        identity = x
        out = self.sn1(self.bn1(self.conv1(x)))
        out = self.sn2(self.bn2(self.conv2(out)))
        if self.downsample is not None:
            identity = self.downsample_sn(self.downsample(x))
        return sew_function(identity, out, self.cnf)


class SpikingBlock(nn.Module):
    """Spiking-ResNet's BasicBlock: the residual is added (in place) before
    the second neuron, which the chain of bn2 takes."""

    def __init__(self, channels):
        super().__init__()
        self.conv1 = MultiStepConv(channels, channels, 3, 1, 1, bias=False)
        self.bn1 = MultiStepBatchNorm2d(channels)
        self.sn1 = lif()
        self.conv2 = MultiStepConv(channels, channels, 3, 1, 1, bias=False)
        self.bn2 = MultiStepBatchNorm2d(channels)
        self.sn2 = lif()

    def forward(self, x):
        identity = x
        out = self.sn1(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        out += identity
        return self.sn2(out)


class Net(nn.Module):
    def __init__(self, cnf="ADD", classes=5):
        super().__init__()
        self.conv = MultiStepConv(2, 8, 3, 1, 1, bias=False)
        self.bn = MultiStepBatchNorm2d(8)
        self.sn = lif()
        self.layer = nn.Sequential(
            SEWBlock(8, 8, 1, cnf), SEWBlock(8, 12, 2, cnf), SpikingBlock(12)
        )
        self.fc1 = nn.Linear(12, 16)
        self.bn_fc = MultiStepBatchNorm1d(16)
        self.sn_fc = lif()
        self.fc2 = nn.Linear(16, classes)

    def forward(self, x):
        x = self.layer(self.sn(self.bn(self.conv(x))))
        x = x.mean((3, 4))
        rates = self.sn_fc(self.bn_fc(self.fc1(x))).mean(0)
        return self.fc2(rates)


def reset(model):
    for m in model.modules():
        if isinstance(m, LIFNode):
            m.reset()


def twins(cnf, device, seed=0):
    torch.manual_seed(seed)
    model = Net(cnf).to(device)
    with torch.no_grad():  # batch norms that are not the identity
        for m in model.modules():
            if isinstance(m, nn.modules.batchnorm._BatchNorm):
                m.weight.uniform_(0.6, 1.6)
                m.bias.uniform_(-0.1, 0.3)
    return model, fuse(model)


def batch(device, seed=1):
    gen = torch.Generator().manual_seed(seed)
    return (torch.randn(4, 3, 2, 8, 8, generator=gen) * 2).to(device)


def test_report_and_state_dict(capsys):
    model = Net("IAND")
    fused = fuse(model, verbose=True)
    lines = capsys.readouterr().out.splitlines()
    fused_lines = [line for line in lines if line.startswith("fused:")]
    assert "fused: bn -> sn" in lines
    assert any(
        line.startswith("fused: layer.1.bn2 -> layer.1.sn2 -> iand")
        for line in lines
    )
    assert "fused: bn_fc -> sn_fc -> mean over T" in lines
    # stem, 2 x (bn1, bn2), downsample, the spiking block's bn1 and its
    # bn2 with the identity added before sn2, classifier
    assert len(fused_lines) == 9
    assert "fused: layer.2.bn2 -> + layer.1.sn2 -> layer.2.sn2" in lines
    assert isinstance(fused, torch.fx.GraphModule)
    assert "fused_block" in fused.code
    # fuse compiled every block it made (float32) before the first call.
    for connection, skip, readout in (
        ("none", False, "none"),
        ("iand", True, "none"),
        ("none", False, "mean"),
    ):
        assert (
            _key(model.sn, _shape(connection, skip, readout), "f32")
            in _PROGRAMS
        )
    assert list(fused.state_dict()) == list(model.state_dict())
    # A checkpoint loads both ways.
    other = Net("IAND")
    fused.load_state_dict(other.state_dict())
    assert torch.equal(model.bn.weight, other.bn.weight)
    other.load_state_dict(fused.state_dict())
    assert isinstance(model.layer[0], SEWBlock)  # model is unchanged


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("cnf", ["ADD", "AND", "IAND"])
def test_eval_equals_unfused(device, cnf):
    model, fused = twins(cnf, device)
    x = batch(device)
    model.train()
    with torch.no_grad():  # running statistics that are not (0, 1)
        model(x)
    reset(model)
    model.eval()
    fused.eval()
    with torch.no_grad():
        want = model(x)
        reset(model)
        got = fused(x)
    if device == "cpu":
        assert torch.equal(got, want)
    else:  # cuDNN's batch norm rounds in another order
        torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("cnf", ["ADD", "IAND"])
def test_training_step_matches_unfused(device, cnf):
    """Two training steps: the outputs, every parameter's gradient, the
    running statistics and the batch counts of the fused model against
    the unfused one."""
    check_training_steps(cnf, device)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("cnf", ["ADD", "IAND"])
def test_batch_norm_apart_matches_unfused(device, cnf, monkeypatch):
    """Training with every batch norm run as its own module before a block
    of the neuron, the connection and the readout (what channels-last CUDA
    inputs take, forced here on any device) against the unfused model."""
    apart = []

    def normalizes_apart(bn, x):
        apart.append(bn.training)
        return bn.training

    monkeypatch.setattr(fuse_module, "_normalizes_apart", normalizes_apart)
    check_training_steps(cnf, device)
    assert apart and all(apart)
    # The blocks without the batch norm ran: with the connection, and
    # with the readout.
    neuron = lif()
    for connection, skip, readout in (
        (cnf.lower(), True, "none"),
        ("none", False, "mean"),
    ):
        shape = dataclasses.replace(
            _shape(connection, skip, readout), pre="none"
        )
        assert _key(neuron, shape, "f32") in _PROGRAMS


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA GPU")
@pytest.mark.parametrize("cnf", ["ADD", "IAND"])
def test_channels_last_training_matches_unfused(cnf):
    """A channels-last model and batch on the GPU: training runs its
    batch norms as cuDNN's, apart from the blocks, and matches the
    unfused model; eval and row-major inputs keep the fused statistics."""
    x = batch("cuda").flatten(0, 1)
    x = x.contiguous(memory_format=torch.channels_last).view(4, 3, 2, 8, 8)
    bn = MultiStepBatchNorm2d(2).cuda()
    assert fuse_module._normalizes_apart(bn, x)
    assert not fuse_module._normalizes_apart(bn, x.contiguous())
    assert not fuse_module._normalizes_apart(bn.eval(), x)
    check_training_steps(cnf, "cuda", torch.channels_last)


def check_training_steps(cnf, device, memory_format=None):
    model, fused = twins(cnf, device)
    clone, _ = twins(cnf, device)
    if memory_format is not None:
        model.to(memory_format=memory_format)
        clone.to(memory_format=memory_format)
    clone.load_state_dict(model.state_dict())
    fused = fuse(clone)
    for step in range(2):
        x = batch(device, seed=10 + step)
        if memory_format is not None:
            x = (
                x.flatten(0, 1)
                .contiguous(memory_format=memory_format)
                .view(x.shape)
            )
        reset(model)
        reset(clone)
        want, got = model(x), fused(x)
        torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4)
        grad = torch.randn(
            want.shape, generator=torch.Generator().manual_seed(step)
        ).to(device)
        model.zero_grad()
        fused.zero_grad()
        want.backward(grad)
        got.backward(grad)
        for (name, p), q in zip(model.named_parameters(), clone.parameters()):
            torch.testing.assert_close(
                q.grad, p.grad, rtol=1e-3, atol=1e-4, msg=name
            )
        for (name, b), c in zip(model.named_buffers(), clone.buffers()):
            torch.testing.assert_close(c, b, rtol=1e-5, atol=1e-6, msg=name)


def test_pickled_model_runs_again():
    model, fused = twins("ADD", "cpu")
    fused.eval()
    x = batch("cpu")
    with torch.no_grad():
        want = fused(x)
    buffer = io.BytesIO()
    torch.save(fused, buffer)
    buffer.seek(0)
    loaded = (
        torch.load(buffer, weights_only=False)
        if "weights_only" in torch.load.__code__.co_varnames
        else torch.load(buffer)
    )
    reset(loaded)
    with torch.no_grad():
        assert torch.equal(loaded(x), want)


def test_inputs_the_kernels_do_not_take_run_unfused():
    """A broadcast operand, or a neuron switched to single-step after
    fuse, runs the modules one by one: the same results as unfused."""
    bn = MultiStepBatchNorm2d(3).eval()
    neuron = lif()
    x = torch.randn(2, 2, 3, 4, 4)
    operand = torch.randn(3, 4, 4)  # broadcasts over T and B
    got = fused_block(bn, neuron, x, operand, connection="add")
    neuron.reset()
    assert torch.equal(got, neuron(bn(x)) + operand)
    neuron.reset()
    neuron.step_mode = "s"
    single = x[0]
    bn.step_mode = "s"
    got = fused_block(bn, neuron, single)
    neuron.reset()
    assert torch.equal(got, neuron(bn(single)))


def test_untraceable_parent_fuses_its_children(capsys):
    class Untraceable(nn.Module):
        def __init__(self):
            super().__init__()
            self.inner = nn.Sequential(MultiStepBatchNorm2d(3), lif())

        def forward(self, x):
            if x.sum() > 0:  # data-dependent control flow: fx cannot trace
                return self.inner(x)
            return self.inner(-x)

    model = Untraceable()
    fused = fuse(model, verbose=True)
    out = capsys.readouterr().out
    assert "model: torch.fx cannot trace it" in out
    assert "fused: inner.0 -> inner.1" in out
    assert fused is not model and model.inner is not fused.inner
    x = torch.randn(2, 2, 3, 4, 4)
    with torch.no_grad():
        model.eval()
        fused.eval()
        want = model(x)
        model.inner[1].reset()
        assert torch.equal(fused(x), want)


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA GPU")
def test_training_step_replays_in_a_cuda_graph():
    """A fused model's training step (forward, backward) captured in a
    CUDA graph: each replay on new data gives the loss and the gradients
    an eager step gives (no host work runs at replay: the batch norms'
    statistics, the blocks' kernels and autograd are all captured)."""
    model, fused = twins("ADD", "cuda")
    twin, _ = twins("ADD", "cuda")
    twin.load_state_dict(model.state_dict())
    static_x = batch("cuda", seed=20)

    def step():
        reset(model)
        loss = fused(static_x).square().sum()
        loss.backward()
        return loss

    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for _ in range(3):
            step()
    torch.cuda.current_stream().wait_stream(stream)
    model.zero_grad(set_to_none=True)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        static_loss = step()
    for seed in (21, 22):
        x = batch("cuda", seed=seed)
        static_x.copy_(x)
        graph.replay()
        reset(twin)
        twin.zero_grad()
        want = twin(x).square().sum()
        want.backward()
        torch.testing.assert_close(static_loss, want, rtol=1e-4, atol=1e-4)
        for (name, p), q in zip(twin.named_parameters(), model.parameters()):
            torch.testing.assert_close(
                q.grad, p.grad, rtol=1e-3, atol=1e-4, msg=name
            )


def test_shared_neuron_keeps_its_call_order(capsys):
    """A neuron module called twice: fusing its connection would move its
    first call after its second; fuse keeps the chain to bn -> neuron, and
    the states see the calls in the model's order."""

    class Shared(nn.Module):
        def __init__(self):
            super().__init__()
            self.bn = MultiStepBatchNorm2d(3)
            self.sn = lif()

        def forward(self, x):
            s = self.sn(self.bn(x))
            o = self.sn(x)  # the same neuron again, before the connection
            return s + o

    model = Shared().eval()
    fused = fuse(model, verbose=True)
    out = capsys.readouterr().out
    assert "fused: bn -> sn\n" in out + "\n" and "add with" not in out
    x = torch.randn(2, 2, 3, 4, 4)
    with torch.no_grad():
        want = model(x)
        model.sn.reset()
        assert torch.equal(fused(x), want)


# ---------------------------------------------------------------------------
# What fuse must not change: plain values the forward reads, tensors
# changed in place, neurons and operands a block does not take.
# ---------------------------------------------------------------------------


class ReadsState(nn.Module):
    """A forward that returns a neuron's state after the call."""

    def __init__(self):
        super().__init__()
        self.bn = MultiStepBatchNorm2d(2)
        self.sn = lif()

    def forward(self, x):
        self.sn(self.bn(x))
        return self.sn.v


def test_forward_reading_a_neuron_state_is_not_fused(capsys):
    model = ReadsState()
    fused = fuse(model, verbose=True)
    assert fused is model
    assert (
        "not fused, its forward reads sn.v, a neuron's state"
        in capsys.readouterr().out
    )
    x = batch("cpu")[:, :, :2]
    reset(model)
    assert isinstance(fused(x), torch.Tensor)  # not the traced 0.0


class ReadsPlainValues(nn.Module):
    """A forward that branches on `self.training` and reads `self.scale`
    and `self.cnf`, plain values torch.fx freezes when it traces."""

    def __init__(self):
        super().__init__()
        self.bn = MultiStepBatchNorm2d(2)
        self.sn = lif()
        self.scale = 1.0
        self.cnf = "ADD"

    def forward(self, x):
        s = self.sn(self.bn(x))
        y = sew_function(x, s, self.cnf) * self.scale
        if self.training:
            return y
        return y.mean(0)


def test_plain_values_the_forward_reads_are_guarded(capsys):
    """The fused model follows a change of mode or of an attribute its
    forward reads (running unfused while they differ from the traced
    values): always what the unfused model computes."""
    torch.manual_seed(3)
    model = ReadsPlainValues()
    fused = fuse(ReadsPlainValues(), verbose=True)
    fused.load_state_dict(model.state_dict())
    out = capsys.readouterr().out
    assert "fused: bn -> sn" in out
    assert "reads training, cnf, scale as plain values" in out
    x = batch("cpu")[:, :, :2]

    def same(*, steps=("train", "eval")):
        for mode in steps:
            model.train(mode == "train")
            fused.train(mode == "train")
            reset(model)
            reset(fused)
            with torch.no_grad():
                torch.testing.assert_close(
                    fused(x), model(x), rtol=1e-5, atol=1e-5
                )

    same()
    model.scale = fused.scale = 3.0
    same()
    model.cnf = fused.cnf = "AND"
    same()
    fused.scale, fused.cnf = 1.0, "ADD"  # the traced values again
    model.scale, model.cnf = 1.0, "ADD"
    same()
    assert fused.scale == 1.0 and fused.cnf == "ADD"
    # Deep copies and pickles keep the guards.
    for other in (copy.deepcopy(fused), _pickled(fused)):
        other.load_state_dict(model.state_dict())
        other.scale = 2.0
        model.scale = 2.0
        other.eval()
        model.eval()
        reset(model)
        reset(other)
        with torch.no_grad():
            torch.testing.assert_close(other(x), model(x))
        model.scale = 1.0


def _pickled(module):
    buffer = io.BytesIO()
    torch.save(module, buffer)
    buffer.seek(0)
    if "weights_only" in torch.load.__code__.co_varnames:
        return torch.load(buffer, weights_only=False)
    return torch.load(buffer)


class InPlaceBetween(nn.Module):
    """The chain's input changed in place between the neuron and the
    connection (an in-place ReLU of the input, or a `mul_`)."""

    def __init__(self, how):
        super().__init__()
        self.bn = MultiStepBatchNorm2d(2)
        self.sn = lif()
        self.act = nn.ReLU(inplace=True)
        self.how = how

    def forward(self, x):
        out = self.sn(self.bn(x))
        if self.how == "relu":
            return out + self.act(x)
        if self.how == "mul_":
            other = x.mul_(0.5)
            return out + other
        return out + torch.nn.functional.relu(x, inplace=True)


@pytest.mark.parametrize("how", ["relu", "mul_", "functional"])
def test_chain_is_not_moved_past_in_place_changes(how, capsys):
    torch.manual_seed(5)
    model = InPlaceBetween(how)
    fused = fuse(InPlaceBetween(how), verbose=True)
    fused.load_state_dict(model.state_dict())
    # The neuron runs fused where it was; the connection stays after the
    # in-place change.
    lines = capsys.readouterr().out.splitlines()
    assert "fused: bn -> sn" in lines
    for step in range(2):
        x = batch("cpu", seed=step)[:, :, :2]
        reset(model)
        reset(fused)
        want = model(x.clone())
        got = fused(x.clone())
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
        torch.testing.assert_close(
            fused.bn.running_mean, model.bn.running_mean
        )
        torch.testing.assert_close(fused.sn.v, model.sn.v)


@pytest.mark.parametrize("spike_dtype", [torch.uint8, "bits"])
def test_neuron_storing_spikes_as_bytes_or_bits_is_not_fused(
    spike_dtype, capsys
):
    class Chain(nn.Module):
        def __init__(self):
            super().__init__()
            self.bn = MultiStepBatchNorm2d(2)
            self.sn = LIFNode(tau=2.0, step_mode="m", spike_dtype=spike_dtype)

        def forward(self, x):
            return self.sn(self.bn(x))

    model = Chain().eval()
    fused = fuse(model, verbose=True)
    assert (
        "chosen by compile options (spike_storage=" in capsys.readouterr().out
    )
    x = batch("cpu")[:, :, :2]
    with torch.no_grad():
        want = model(x)
        reset(fused)
        got = fused(x)
    assert got.dtype == want.dtype and got.shape == want.shape
    assert torch.equal(got, want)


def test_non_tensor_operand_runs_unfused():
    class ScaledByBatch(nn.Module):
        def __init__(self):
            super().__init__()
            self.bn = MultiStepBatchNorm2d(2)
            self.sn = lif()

        def forward(self, x):
            return self.sn(self.bn(x)) * x.shape[0]

    torch.manual_seed(2)
    model = ScaledByBatch()
    fused = fuse(ScaledByBatch())
    fused.load_state_dict(model.state_dict())
    x = batch("cpu")[:, :, :2]
    reset(model)
    torch.testing.assert_close(fused(x), model(x))


def test_one_value_per_channel_in_training_raises_as_unfused():
    bn, neuron = MultiStepBatchNorm2d(2), lif()
    x = torch.randn(1, 1, 2, 1, 1)
    with pytest.raises(ValueError, match="more than 1 value per channel"):
        bn(x)
    with pytest.raises(ValueError, match="more than 1 value per channel"):
        fused_block(bn, neuron, x)


class Chain(nn.Module):
    def __init__(self):
        super().__init__()
        self.bn = MultiStepBatchNorm2d(2)
        self.sn = lif()

    def forward(self, x):
        return self.sn(self.bn(x))


@pytest.mark.parametrize("module", ["bn", "sn"])
@pytest.mark.parametrize(
    "kind",
    ["forward pre-hooks", "forward hooks", "backward hooks"],
)
def test_hooked_chain_is_not_fused(module, kind, capsys):
    """A hook on the batch norm or the neuron (SpikingJelly's monitors
    hook neurons) would not be called by a block: the chain is not fused,
    and the hook sees every call."""
    torch.manual_seed(3)
    model = Chain()
    calls = []
    target = getattr(model, module)
    if kind == "forward pre-hooks":
        target.register_forward_pre_hook(lambda m, args: calls.append(m))
    elif kind == "forward hooks":
        target.register_forward_hook(lambda m, args, y: calls.append(m))
    else:
        target.register_full_backward_hook(
            lambda m, grad_in, grad_out: calls.append(m)
        )
    fused = fuse(model, verbose=True)
    what = "batch norm" if module == "bn" else "neuron"
    assert (
        f"bn -> sn: not fused, the {what} has {kind}, which a block would "
        f"not call" in capsys.readouterr().out.splitlines()
    )
    x = batch("cpu")[:, :, :2].requires_grad_()
    fused(x).sum().backward()
    assert calls == [target]


def test_hook_added_after_fusing_runs_the_chain_unfused():
    """A hook registered on a fused chain's module after fuse (a monitor
    attached to the fused model): the chain runs unfused while it is
    there, calling the hooked module, with the same result, and fused
    again once it is removed."""
    torch.manual_seed(4)
    model = Chain()
    fused = fuse(model)
    assert "fused_block" in fused.code
    x = batch("cpu")[:, :, :2]
    spikes = []
    hook = fused.sn.register_forward_hook(lambda m, a, y: spikes.append(y))
    with torch.no_grad():
        got = fused(x)
        assert len(spikes) == 1 and torch.equal(spikes[0], got)
        hook.remove()
        reset(fused)
        again = fused(x)
        reset(model)
        want = model(x)
    assert len(spikes) == 1
    assert torch.equal(got, want)
    torch.testing.assert_close(again, want)


class LoopedOverSteps(nn.Module):
    """A single-step chain its forward calls at every step of its own loop
    over T: its batch norm normalizes each step's [B, C, ...] alone."""

    def __init__(self):
        super().__init__()
        self.bn = nn.BatchNorm2d(2)
        self.sn = LIFNode(tau=2.0)

    def forward(self, x):
        return torch.stack([self.sn(self.bn(x[t])) for t in range(len(x))])


def test_single_step_chain_in_a_loop_is_named_once(capsys):
    model = LoopedOverSteps()
    fused = fuse(model, verbose=True)
    x = torch.randn(3, 4, 2, 5, 5)
    y = fused(x)
    lines = [
        line
        for line in capsys.readouterr().out.splitlines()
        if line.strip().startswith("bn -> sn")
    ]
    assert len(lines) == 1, lines
    assert "not multi-step" in lines[0] and lines[0].endswith("(3 calls)")
    model.sn.reset()
    torch.testing.assert_close(y, model(x), rtol=0, atol=0)
