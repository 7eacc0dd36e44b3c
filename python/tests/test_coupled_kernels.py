"""The coupled (recurrent) kernels Recurrent runs: one forward kernel over
the sequence with the product W_rec s[t-1] inside its time loop, one
backward kernel running the adjoint. Against an eager loop over the
numerics oracle's step (reference.recurrent_ref): spikes, and gradients
of the input, both weight matrices, the bias and PLIF's w by relative
norm, for samples of a few neurons up to the GPU kernels' largest (1024:
a block of 256 threads of four neurons each) and past it (the layer then
steps in Python); that no neuron call runs per step; and the kernels'
refusals of sizes they cannot take; and neurons with per-channel
parameters, which run coupled kernels compiled with them per neuron."""

import pytest
import torch

import flexsn
from devices import DEVICES, HAS_CUDA
from flexsn.fx import Trainable
from flexsn.torch import FlexSN, LIFNode, ParametricLIFNode, Recurrent
from flexsn.torch import _recurrent
from reference import recurrent_ref, spike

NEURONS = {
    "lif": (lambda: LIFNode(tau=2.0, step_mode="m"), {"tau": 2.0}),
    "plif": (lambda: ParametricLIFNode(init_tau=3.0, step_mode="m"), None),
}


def relative_error(got, want):
    return float((got - want).norm() / want.norm())


def run_both(kind, device, T, B, n_in, H, dtype=torch.float32, seed=0):
    """(layer spikes, reference spikes, [(gradient, reference gradient)])
    of one training call on random weights that make the neurons fire now
    and then."""
    torch.manual_seed(seed)
    make, params = NEURONS[kind]
    layer = Recurrent(n_in, H, make()).to(device)
    with torch.no_grad():
        layer.input.weight.normal_(0.2, 1.6 / n_in**0.5)
        layer.recurrent.weight.normal_(0, 0.8 / H**0.5)
    x = (torch.randn(T, B, n_in, device=device) + 0.6).requires_grad_()
    weights = torch.randn(T, B, H, device=device)
    if dtype == torch.float32:
        out = layer(x)
    else:
        with torch.autocast("cuda", dtype=dtype):
            out = layer(x)
    (out.float() * weights).sum().backward()
    w_in = layer.input.weight.detach().clone().requires_grad_()
    b_in = layer.input.bias.detach().clone().requires_grad_()
    w_rec = layer.recurrent.weight.detach().clone().requires_grad_()
    x_ref = x.detach().clone().requires_grad_()
    if params is None:  # PLIF: 1/tau = sigmoid(w), w trainable
        params = {"w": layer.neuron.w.detach().clone().requires_grad_()}
    want = recurrent_ref(kind, x_ref, w_in, b_in, w_rec, **params)
    (want * weights).sum().backward()
    pairs = [
        (x.grad, x_ref.grad),
        (layer.input.weight.grad, w_in.grad),
        (layer.input.bias.grad, b_in.grad),
        (layer.recurrent.weight.grad, w_rec.grad),
    ]
    if kind == "plif":
        pairs.append((layer.neuron.w.grad, params["w"].grad))
    return out, want, pairs


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("H", [7, 256, 300, 1024])
@pytest.mark.parametrize("kind", sorted(NEURONS))
def test_against_an_eager_loop(kind, H, device):
    out, want, pairs = run_both(kind, device, T=12, B=3, n_in=9, H=H)
    rate = float(want.mean())
    assert 0.02 < rate < 0.9, rate
    assert torch.equal(out, want)
    for got, ref in pairs:
        assert ref.abs().sum() > 0
        assert relative_error(got, ref) < 2e-5


@pytest.mark.cuda
@pytest.mark.skipif(not HAS_CUDA, reason="no CUDA GPU")
@pytest.mark.parametrize("kind", sorted(NEURONS))
def test_autocast_float16_stays_near_float32(kind):
    """Under AMP the drive is float16 (the Linear's output), and so are
    the kernels' sequences: spikes within a few percent of float32's, the
    gradients within a few percent by norm."""
    out, want, pairs = run_both(
        kind, "cuda", T=16, B=4, n_in=9, H=64, dtype=torch.float16
    )
    assert out.dtype == torch.float16
    assert float((out.float() - want).abs().mean()) < 0.03
    for got, ref in pairs:
        assert relative_error(got.float(), ref) < 0.1


@pytest.mark.parametrize("device", DEVICES)
def test_no_neuron_call_per_step(device, monkeypatch):
    """The recurrence runs in the coupled kernels: the neuron module is
    never called, and the spikes are the loop's."""
    layer = Recurrent(5, 6, LIFNode(tau=2.0, step_mode="m")).to(device)
    x = torch.randn(10, 2, 5, device=device) + 1.0
    with torch.no_grad():
        want = _loop(layer, x)
    layer.reset()

    def refuse(*args):
        raise AssertionError("the neuron was called step by step")

    monkeypatch.setattr(layer.neuron, "forward", refuse)
    with torch.no_grad():
        assert torch.equal(layer(x), want)


def _loop(layer, x):
    """The layer stepped in Python, one neuron call per step."""
    drive = layer.input(x)
    previous, outputs = None, []
    for current in drive:
        if previous is not None:
            current = current + layer.recurrent(previous)
        previous = layer.neuron(current[None])[0]
        outputs.append(previous)
    return torch.stack(outputs)


@pytest.mark.cuda
@pytest.mark.skipif(not HAS_CUDA, reason="no CUDA GPU")
def test_samples_past_the_kernels_step_in_python():
    """A hidden size the GPU kernels cannot take (over 1024) steps in
    Python: the same spikes as the CPU's coupled kernels."""
    H = _recurrent.MAX_CUDA_HIDDEN + 1
    out, want, pairs = run_both("lif", "cuda", T=6, B=2, n_in=5, H=H)
    assert torch.equal(out, want)
    for got, ref in pairs:
        assert relative_error(got, ref) < 2e-5


def test_cubalif_has_two_states_and_couples_its_current():
    """CubaLIF (two states) couples its spikes into its input current."""
    torch.manual_seed(1)
    layer = Recurrent(4, 5, FlexSN("cuba_lif"))
    with torch.no_grad():
        layer.recurrent.weight.normal_(0, 1.0)
    x = torch.randn(20, 2, 4) + 1.5
    with torch.no_grad():
        fused = layer(x)
        layer.reset()
        assert fused.any() and torch.equal(fused, _loop(layer, x))


@pytest.mark.parametrize("device", DEVICES)
def test_the_kernels_refuse_what_they_cannot_take(device):
    """N not whole samples of H, a coupling given to an uncoupled kernel,
    none to a coupled one; on the GPU a sample of more than 1024."""
    compiled = flexsn.compile(
        "lif", variants=("forward", "backward"), coupled=True
    )
    coupled = compiled.kernel(device, "forward", "f32", coupled=True)
    plain = compiled.kernel(device, "forward", "f32")
    x = torch.zeros(3, 8, device=device)
    out = torch.empty_like(x)
    work = torch.empty(
        coupled.spec.workspace_size(3, 8, 8) // 4 + 1, device=device
    )
    weights = torch.zeros(4, 4, device=device)
    addresses = {
        "x": x.data_ptr(),
        "spike": out.data_ptr(),
        "coupling": weights.data_ptr(),
    }
    buffers = [
        addresses.get(b.name, 0)
        for b in coupled.spec.buffers
        if not b.in_workspace
    ]

    def launch(kernel, coupling, N=8):
        if device == "cuda":
            kernel.launch(
                torch.cuda.current_stream().cuda_stream,
                3,
                N,
                0,
                buffers if kernel is coupled else buffers[:-1],
                work.data_ptr(),
                coupling=coupling,
            )
        else:
            kernel.launch(
                3,
                N,
                buffers if kernel is coupled else buffers[:-1],
                work.data_ptr(),
                coupling=coupling,
            )

    with pytest.raises(ValueError, match="pass coupling=H"):
        launch(coupled, None)
    with pytest.raises(ValueError, match="not a coupled kernel"):
        launch(plain, 4)
    if device == "cpu":
        with pytest.raises(ValueError, match="not samples of H = 3"):
            launch(coupled, 3)
    else:
        from flexsn._runtime import RuntimeStatusError

        for H in (3, 2048):
            with pytest.raises(RuntimeStatusError, match="BAD_COUPLING"):
                launch(coupled, H)
    launch(coupled, 4)  # two samples of four: fine


def channel_lif(
    x,
    v,
    tau=Trainable(2.0, shape="per_channel"),
    v_threshold=Trainable(1.0, shape="per_channel"),
):
    h = v + (x - v) / tau
    s = flexsn.spike(h - v_threshold)
    return s, (1.0 - s) * h


def channel_neuron(C):
    neuron = FlexSN(channel_lif, num_inputs=1, num_states=1, num_channels=C)
    with torch.no_grad():
        neuron.tau.uniform_(1.5, 4.0)
        neuron.v_threshold.uniform_(0.6, 1.2)
    return neuron


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("C", [1, 4, 12])
def test_per_channel_parameters(C, device, monkeypatch):
    """A neuron with per-channel tau and threshold, C channels of a
    sample's 12 neurons (neuron j in channel j // (12 / C), as from_nir's
    neurons see a sample), runs coupled kernels (compiled with those
    parameters per neuron): no neuron call per step; spikes and the
    gradients of the drive, the weights, tau and the threshold against the
    loop written here."""
    torch.manual_seed(C)
    H, T, B = 12, 16, 3
    neuron = channel_neuron(C).to(device)
    drive = (torch.randn(T, B, H, device=device) + 0.8).requires_grad_()
    w_rec = (torch.randn(H, H, device=device) * 0.6).requires_grad_()
    weights = torch.randn(T, B, H, device=device)

    def refuse(*args):
        raise AssertionError("the neuron was called step by step")

    monkeypatch.setattr(neuron, "forward", refuse)
    out = _recurrent.coupled_scan(neuron, drive, w_rec)
    (out * weights).sum().backward()

    got = [drive, w_rec, neuron.tau, neuron.v_threshold]
    ref = [t.detach().clone().requires_grad_() for t in got]
    tau = ref[2].repeat_interleave(H // C)
    threshold = ref[3].repeat_interleave(H // C)
    v = s = torch.zeros(B, H, device=device)
    spikes = []
    for t in range(T):
        h = v + (ref[0][t] + s @ ref[1].T - v) / tau
        s = spike(h - threshold)
        v = (1.0 - s) * h
        spikes.append(s)
    want = torch.stack(spikes)
    (want * weights).sum().backward()
    assert 0.05 < float(want.mean()) < 0.9
    assert torch.equal(out, want)
    for name, a, b in zip(("drive", "w_rec", "tau", "threshold"), got, ref):
        assert b.grad.abs().sum() > 0, name
        error = relative_error(a.grad, b.grad)
        assert error < 1e-4, (name, error)


def test_per_channel_parameters_must_fit_the_sample():
    """Channels that do not divide a sample are an error of the coupled
    scan; a Recurrent layer's per-channel neuron has hidden_size
    channels."""
    with pytest.raises(ValueError, match="5 channels of parameter 'tau'"):
        _recurrent.coupled_scan(
            channel_neuron(5), torch.randn(4, 2, 12), torch.zeros(12, 12)
        )
    with pytest.raises(ValueError, match="hidden_size \\(12\\) channels"):
        Recurrent(3, 12, channel_neuron(4))
    layer = Recurrent(3, 12, channel_neuron(12))
    assert layer(torch.randn(4, 2, 3)).shape == (4, 2, 12)
