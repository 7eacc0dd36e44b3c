"""flexsn.torch.Delay: y[t] = x[t - d] per neuron, against the shift
written here in NumPy; its backward exact (each input's gradient is the
gradient of the one output that copies it); its state across calls; to_nir
and back. Each on both of the layer's paths: the scan (a shift-register
neuron's kernels) and the gather along time."""

import numpy as np
import pytest
import torch

from devices import DEVICES
from flexsn.torch import Delay, LIFNode, from_nir, to_nir
from flexsn.torch import _delay

T, B = 9, 3


@pytest.fixture(params=["scan", "gather"])
def path(request, monkeypatch):
    """Which path the layer takes; after the test, checks that the scan
    path scanned and the gather did not."""
    if request.param == "gather":
        monkeypatch.setattr(_delay, "SCAN_MAX_DELAY", 0)
    calls = [0]
    real = _delay.scan

    def counting(*args, **kwargs):
        calls[0] += 1
        return real(*args, **kwargs)

    monkeypatch.setattr(_delay, "scan", counting)
    yield request.param
    assert (calls[0] > 0) == (request.param == "scan")


def shifted(x, delays):
    """x [T, B, ...] with each neuron's sequence shifted by its delay
    (delays broadcast to a sample), zeros before the first step."""
    x = np.asarray(x)
    d = np.broadcast_to(np.asarray(delays), x.shape[2:])
    y = np.zeros_like(x)
    for index in np.ndindex(*d.shape):
        k = int(d[index])
        if k < x.shape[0]:  # else the sequence is all zeros
            y[(slice(k, None), slice(None)) + index] = x[
                (slice(0, x.shape[0] - k), slice(None)) + index
            ]
    return y


def assert_shifts_exactly(layer, x, delays):
    """The layer's output is x shifted (in x's dtype), and the gradient
    of x[t'] that of y[t' + d]: the shift backwards."""
    x.requires_grad_()
    y = layer(x)
    assert y.dtype == x.dtype
    want = shifted(x.detach().float().cpu(), delays)
    assert torch.equal(y.float().cpu(), torch.as_tensor(want))
    g = torch.randn_like(y)
    y.backward(g)
    want = np.flip(shifted(np.flip(g.float().cpu().numpy(), 0), delays), 0)
    assert torch.equal(x.grad.float().cpu(), torch.as_tensor(want.copy()))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize(
    "delays, sample",
    [
        (np.array([0, 1, 2, 5, 0, 3, 12]), (7,)),  # one per neuron
        (2, (4,)),  # one for all
        (np.array([[[0]], [[3]]]), (2, 3, 4)),  # one per channel
        (1, (5,)),
    ],
    ids=["per-neuron", "scalar", "per-channel", "one-step"],
)
def test_forward_and_backward_are_exact(delays, sample, device, path):
    x = torch.randn((T, B) + sample, device=device)
    assert_shifts_exactly(Delay(delays).to(device), x, delays)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("layout", ["channels-last", "time-strided"])
def test_layouts(layout, device, path):
    """A channels-last view ([T, B, H, W, C] memory) and a sequence
    strided in time shift as the row-major one does: the per-neuron
    delays follow each neuron, not the memory order."""
    delays = np.random.RandomState(0).randint(0, 6, size=(3, 2, 4))
    if layout == "channels-last":
        x = torch.randn(T, B, 2, 4, 3, device=device).permute(0, 1, 4, 2, 3)
    else:
        x = torch.randn(2 * T, B, 3, 2, 4, device=device)[::2]
    assert not x.is_contiguous()
    assert_shifts_exactly(Delay(delays).to(device), x, delays)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_half_precision_is_copied_exactly(dtype, path):
    delays = np.array([0, 3, 1, 7, 2])
    x = torch.randn(T, B, 5).to(dtype)
    assert_shifts_exactly(Delay(delays), x, delays)


def test_deep_delays_run_as_the_gather(monkeypatch):
    """Past SCAN_MAX_DELAY (a neuron's states are its last max(d)
    inputs) the gather runs, with the same copies."""
    calls = []
    monkeypatch.setattr(_delay, "scan", lambda *a: calls.append(a))
    delays = np.array([0, _delay.SCAN_MAX_DELAY + 1, 5])
    x = torch.randn(_delay.SCAN_MAX_DELAY + 4, B, 3)
    assert torch.equal(Delay(delays)(x), torch.as_tensor(shifted(x, delays)))
    assert not calls


@pytest.mark.parametrize("dtype", [torch.float64, torch.int32])
def test_other_dtypes_run_as_the_gather(dtype, monkeypatch):
    calls = []
    monkeypatch.setattr(_delay, "scan", lambda *a: calls.append(a))
    delays = np.array([0, 3, 1])
    x = (torch.randn(T, B, 3) * 10).to(dtype)
    y = Delay(delays)(x)
    assert y.dtype == dtype and not calls
    assert torch.equal(y, torch.as_tensor(shifted(x, delays)))


def test_the_scan_saves_no_sequence_for_backward():
    """The shift register's backward kernel reads no workspace: a
    training call keeps only the delays (one value per neuron), where the
    gather keeps its [T, B, ...] int64 index."""
    delays = np.array([0, 2, 1, 4, 3, 6, 5, 7])
    x = torch.randn(T, B, 8, requires_grad=True)
    saved = {}

    def pack(t):
        saved[t.data_ptr()] = t.numel() * t.element_size()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        Delay(delays)(x)
    assert sum(saved.values()) <= B * 8 * 4, saved


def test_pieces_give_what_the_whole_gives(path):
    delays = np.array([0, 1, 4, 2])
    layer = Delay(delays)
    x = torch.randn(T, B, 4, requires_grad=True)
    whole = layer(x)
    layer.reset()
    pieces = torch.cat([layer(x[:2]), layer(x[2:3]), layer(x[3:])])
    assert torch.equal(pieces, whole)
    g = torch.randn_like(whole)
    pieces.backward(g)
    grad, x.grad = x.grad.clone(), None
    whole.backward(g)
    assert torch.equal(grad, x.grad)
    layer.reset()
    assert torch.equal(layer(x), whole)
    # detach(): the next call's gradient stops at its own input.
    layer.reset()
    layer(x[:4])
    layer.detach()
    x.grad = None
    layer(x[4:]).sum().backward()
    assert torch.all(x.grad[:4] == 0)
    # A new batch size starts from zeros.
    assert torch.equal(layer(x[:, :2]), whole[:, :2])


def test_loaded_delays_are_the_layers():
    """load_state_dict brings the delays and their depth."""
    deep = Delay(np.array([0, 5, 2]))
    layer = Delay(np.array([1, 1, 1]))
    layer.load_state_dict(deep.state_dict())
    assert layer.max_delay == 5
    x = torch.randn(T, B, 3)
    assert torch.equal(layer(x), torch.as_tensor(shifted(x, [0, 5, 2])))


def test_bad_delays_are_clear_errors():
    with pytest.raises(TypeError, match="whole numbers of steps"):
        Delay(np.array([0.5]))
    with pytest.raises(ValueError, match="must be >= 0"):
        Delay(np.array([1, -1]))
    with pytest.raises(ValueError, match="do not broadcast"):
        Delay(np.array([1, 2, 3]))(torch.zeros(T, B, 4))
    with pytest.raises(ValueError, match=r"expects \[T, B, ...\]"):
        Delay(1)(torch.zeros(4))


def test_goes_to_nir_and_back(tmp_path):
    """A Delay between a Linear and a neuron is NIR's Delay node, in
    seconds; read back, the model computes the same spikes."""
    from flexsn import nir

    torch.manual_seed(0)
    linear = torch.nn.Linear(3, 4)
    model = torch.nn.Sequential(
        linear, Delay(np.array([0, 2, 1, 3])), LIFNode(step_mode="m")
    )
    graph = to_nir(model, dt=1e-3)
    assert np.allclose(graph.nodes["1"].params["delay"], [0, 2e-3, 1e-3, 3e-3])
    nir.write(tmp_path / "d.nir", graph)
    back = from_nir(str(tmp_path / "d.nir"), dt=1e-3)
    x = torch.randn(T, B, 3) * 3
    with torch.no_grad():
        got = back(x)
        want = model(x)
    assert torch.equal(got, want)
    assert 0 < float(want.mean()) < 1
