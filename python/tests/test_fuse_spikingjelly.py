"""flexsn.torch.fuse on SpikingJelly's own model zoo, built with FlexSN
neurons: spiking_resnet18, sew_resnet18 (ADD and IAND) and
spiking_vgg11_bn. Eval outputs of the fused model equal the unfused
model's; a training step's outputs, gradients and running statistics agree
within float tolerance.

SpikingJelly is imported from PYTHONPATH where it is (it needs torch >= 2.4:
the GPU machine's torch); elsewhere these tests skip, and test_fuse.py
covers the same chains on models written here.
"""

import pytest
import torch
from torch import nn

from flexsn.torch import LIFNode, fuse
from flexsn.torch._fuse import _PROGRAMS

from devices import DEVICES
from fusion_harness import Case, compare


@pytest.fixture(autouse=True)
def fresh_blocks():
    """Each test compiles the blocks its models take as a fresh process
    would (the same sources whatever ran before: a GPU machine without the
    tools finds them in a cache filled here)."""
    _PROGRAMS.clear()


zoo = pytest.importorskip("spikingjelly.activation_based.model")
from spikingjelly.activation_based import functional  # noqa: E402
from spikingjelly.activation_based.model import (  # noqa: E402
    sew_resnet,
    spiking_resnet,
    spiking_vgg,
)

MODELS = {
    "spiking_resnet18": lambda **kw: spiking_resnet.spiking_resnet18(**kw),
    "sew_resnet18_add": lambda **kw: sew_resnet.sew_resnet18(cnf="ADD", **kw),
    "sew_resnet18_iand": lambda **kw: sew_resnet.sew_resnet18(
        cnf="IAND", **kw
    ),
    "spiking_vgg11_bn": lambda **kw: spiking_vgg.spiking_vgg11_bn(**kw),
}
#: Chains fuse finds: every batch norm of each model but Spiking-ResNet's
#: downsampling ones (their output is the identity its bn2 -> += identity
#: -> sn2 chains add).
FUSED = {
    "spiking_resnet18": 1 + 8 + 8,
    "sew_resnet18_add": 1 + 16 + 3,
    "sew_resnet18_iand": 1 + 16 + 3,
    "spiking_vgg11_bn": 8,
}


def build(name, device):
    torch.manual_seed(0)
    net = MODELS[name](
        spiking_neuron=LIFNode,
        tau=2.0,
        detach_reset=True,
        step_mode="m",
        num_classes=10,
    )
    functional.set_step_mode(net, "m")
    return net.to(device)


def batch(device, seed):
    gen = torch.Generator().manual_seed(seed)
    return torch.rand(2, 2, 3, 32, 32, generator=gen).to(device)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", sorted(MODELS))
def test_zoo_model(device, name, capsys):
    model = build(name, device)
    twin = build(name, device)
    twin.load_state_dict(model.state_dict())
    fused = fuse(twin, verbose=True)
    report = capsys.readouterr().out.splitlines()
    assert sum(line.startswith("fused:") for line in report) == FUSED[name]
    assert list(fused.state_dict()) == list(model.state_dict())

    # Training: two steps, outputs, gradients and running statistics.
    for step in range(2):
        x = batch(device, step)
        functional.reset_net(model)
        functional.reset_net(fused)
        want, got = model(x), fused(x)
        torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4)
        model.zero_grad()
        fused.zero_grad()
        want.square().sum().backward()
        got.square().sum().backward()
        # Relative to each gradient's norm: the two batch norms' statistics
        # round differently, and 18 layers of spikes carry the difference.
        # (A bias before a batch norm has gradient zero in exact arithmetic:
        # test_zoo_model_contract checks it as the noise it is.)
        zero = biases_before_batch_norms(model)
        for (key, p), q in zip(model.named_parameters(), twin.parameters()):
            if key in zero:
                continue
            error = float((q.grad - p.grad).norm())
            assert error <= 1e-3 * float(p.grad.norm()), (key, error)
        for (key, b), c in zip(model.named_buffers(), twin.buffers()):
            torch.testing.assert_close(c, b, rtol=1e-5, atol=1e-5, msg=key)

    # Eval: the running statistics folded, the same outputs.
    model.eval()
    fused.eval()
    x = batch(device, 7)
    with torch.no_grad():
        functional.reset_net(model)
        functional.reset_net(fused)
        want, got = model(x), fused(x)
    if device == "cpu":
        assert torch.equal(got, want)
    else:  # cuDNN's batch norm rounds in another order
        torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4)


def biases_before_batch_norms(net):
    """The biases of the convolutions and Linears a batch norm follows
    (torchvision's VGG keeps them): gradient zero in exact arithmetic
    while the batch norm trains. The zoo builds each such pair as
    neighbours, so the module after the layer is its batch norm."""
    modules = list(net.named_modules())
    return tuple(
        f"{name}.bias"
        for (name, m), (_, after) in zip(modules, modules[1:])
        if isinstance(m, (nn.Conv2d, nn.Linear))
        and m.bias is not None
        and isinstance(after, nn.modules.batchnorm._BatchNorm)
    )


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("precision", ["f32", "amp"])
@pytest.mark.parametrize("layout", ["row_major", "channels_last"])
@pytest.mark.parametrize("name", sorted(MODELS))
def test_zoo_model_contract(device, precision, layout, name):
    """The fusion contract (fusion_harness.py) on the zoo: every gradient
    (conv biases included), statistic and state, across train and eval."""

    def make():
        net = build(name, "cpu")
        net.zero_gradients = biases_before_batch_norms(net)
        return net

    report = compare(
        make,
        lambda call: batch("cpu", call),
        Case(device, layout, precision, ("train", "eval", "train")),
    )
    report.check()


def spikformer(device="cpu"):
    """SpikingJelly's Spikformer-Ti on 32x32 images, its hard-coded
    neurons converted to FlexSN's (flexsn.torch.convert)."""
    from spikingjelly.activation_based.model import spikformer as former

    from flexsn.torch import convert

    torch.manual_seed(0)
    net = former.spikformer_ti(
        T=2, img_size_h=32, img_size_w=32, num_classes=10
    )
    lines = []
    net = convert(net, inplace=True, report=lines)
    assert not [line for line in lines if line.startswith("not swapped")]
    return net.to(device)


def test_spikformer_fuses_its_chains():
    """Spikformer's chains run on [T*B, ...] in SeqToANNContainers behind
    shape checks: traced at the call, every batch norm but the four patch
    stages' (max-pooling follows them) is fused, the blocks' residual adds
    with them."""
    import flexsn.torch._fuse as fuse_module

    fused = fuse(spikformer())
    with torch.no_grad():
        fused(batch("cpu", 0))
    graphs = [g for g, _ in fused.forward.graphs.values()]
    assert len(graphs) == 1
    connections = [
        n.kwargs["connection"]
        for n in graphs[0].graph.nodes
        if n.target is fuse_module.fused_block
    ]
    assert sorted(connections) == sorted(["add"] + ["none", "add"] * 8)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("precision", ["f32", "amp"])
def test_spikformer_contract(device, precision):
    report = compare(
        spikformer,
        lambda call: batch("cpu", call),
        Case(device, "row_major", precision, ("train", "eval", "train")),
    )
    report.check()


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA GPU")
@pytest.mark.parametrize("precision", ["f32", "amp"])
def test_spikformer_compiled_contract(precision):
    """Spikformer fused and compiled with the kernels for every call (the
    recipe of a model compiled with CUDA graphs) against the unfused model
    run eagerly (float32: compiled too, see below). Its chains fuse at a
    module's first call with each shape, which torch.compile cannot trace:
    first called compiled, they run unfused there (what a fused chain runs
    under torch.compile). In float32 Inductor's rounding differs from
    eager's: on one batch (utils/compile_rounding.py, H200) it moves the
    input's gradient by 6.3e-4 for SpikingJelly's own model and 6.5e-4 for
    FlexSN's, and over this test's calls, which flip spikes near the
    threshold, a gradient by up to 0.9%; so the reference is the unfused
    model compiled. With AMP rounding is compared by its size."""
    report = compare(
        spikformer,
        lambda call: batch("cpu", call),
        Case(
            "cuda",
            "row_major",
            precision,
            ("train", "eval", "train"),
            "kernels",
            "compiled" if precision == "f32" else "eager",
        ),
    )
    report.check()


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA GPU")
def test_spikformer_fused_at_call_then_compiled():
    """Called eagerly first, Spikformer's blocks hold their fused graphs;
    torch.compile then traces those graphs in one piece (fullgraph) and
    computes what the eager fused model computes."""
    model = fuse(spikformer("cuda"))
    x = batch("cuda", 0)
    functional.reset_net(model)
    want = model(x)
    compiled = torch.compile(model, fullgraph=True)
    functional.reset_net(model)
    got = compiled(x)
    torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4)
