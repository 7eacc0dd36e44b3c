"""Per-channel parameters (`shapes={"w": "per_channel"}`) through
flexsn.compile, flexsn.torch.scan, FlexSN and ParametricLIFNode.

The inputs are `[T, B, C, ...]`; a per-channel parameter is a `[C]` tensor
broadcast along dimension 2. Every expected value comes from `plif_loop`
below: a plain loop over T with the formulas of lib/Neurons/plif.mlir's
comment, the leak of each channel taken from its own entry of `w`, whose
spike is H(x) = (x >= 0) with the sigmoid surrogate's backward (alpha = 4),
differentiated by torch autograd. It shares no code with the package.

* forward (inference and training kernels) and gradients of x, the initial
  state and a trainable per-channel w, hard and soft reset, with and
  without detach_reset, for inputs with and without dimensions after C;
* per-channel and per-neuron parameters interleaved in one neuron (the
  kernels' argument order), a runtime per-channel parameter (a buffer);
* T = 0 and B = 0 (zero gradients), an optimizer step, single-step mode,
  half storage, torch.compile (the custom op, torch >= 2.4);
* bad tensors and constructor arguments are clear errors; a channel layout
  that does not tile the neurons never reaches a kernel.

Each case runs on CPU tensors and, where a GPU is present, on CUDA tensors
(`cuda` marker).
"""

import math

import pytest
import torch

import flexsn
from flexsn.torch import FlexSN, ParametricLIFNode

from devices import DEVICES  # noqa: E402
from shaped_params import (
    FLAGS,
    FWD_TOL,
    GRAD_TOL,
    ModuleCache,  # noqa: E402
    SigmoidSpike,
    check_forward_kernels,
    close,
    set_flags,
    set_param,
    slope,
)

C = 3
SHAPE = (2, C, 4)  # [B, C, S]: N = 24
T = 7
PER_CHANNEL = {"w": "per_channel"}


# ---------------------------------------------------------------------------
# The reference
# ---------------------------------------------------------------------------


def along_channels(value, step_shape):
    """A [C] tensor viewed to broadcast along dimension 1 of a step
    [B, C, ...]; other values as they are."""
    if isinstance(value, torch.Tensor) and value.dim() == 1:
        return value.view((1, -1) + (1,) * (len(step_shape) - 2))
    return value


def plif_loop(x, w, thr=1.0, v0=None, v_reset=0.0, soft=False, detach=False):
    """PLIF with decay_input (lib/Neurons/plif.mlir): (spikes, v_seq).
    `w` and `v_reset` may be [C] tensors (one value per channel, dimension 2
    of x), `thr` a tensor of the neuron shape.

        k = sigmoid(w)
        h = v + (x - (v - V_r)) * k      V_r = v_reset (hard) or 0 (soft)
        s = spike(h - thr)
        hard: v' = s_d * v_reset + (1 - s_d) * h
        soft: v' = h - s_d * thr         s_d = detach(s) if detach else s
    """
    step = x.shape[1:]
    k = along_channels(1 / (1 + torch.exp(-w)), step)
    v_reset = along_channels(v_reset, step)
    v = torch.zeros_like(x[0]) if v0 is None else v0
    spikes, vs = [], []
    for t in range(x.shape[0]):
        v_rest = 0.0 if soft else v_reset
        h = v + (x[t] - (v - v_rest)) * k
        s = SigmoidSpike.apply(h - thr)
        s_d = s.detach() if detach else s
        v = h - s_d * thr if soft else s_d * v_reset + (1 - s_d) * h
        spikes.append(s)
        vs.append(v)
    if not spikes:
        return x.new_zeros(x.shape), x.new_zeros(x.shape)
    return torch.stack(spikes), torch.stack(vs)


def data(device, seed, shape=SHAPE, steps=T):
    """Inputs that make a good fraction of the neurons spike, an initial
    state, and leaks that differ per channel (1/tau from 0.12 to 0.88)."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn((steps,) + shape, generator=g) * 0.9 + 0.9
    v0 = torch.rand(shape, generator=g) * 1.1 - 0.2
    w = (
        torch.linspace(-2.0, 2.0, shape[1])
        + torch.rand(shape[1], generator=g) * 0.2
    )
    return x.to(device), v0.to(device), w.to(device)


def weights(device, seed, shape=SHAPE, steps=T):
    g = torch.Generator().manual_seed(seed + 1000)
    return (
        torch.randn((steps,) + shape, generator=g).to(device),
        torch.randn((steps,) + shape, generator=g).to(device),
    )


# ---------------------------------------------------------------------------
# Modules, compiled once per file
# ---------------------------------------------------------------------------

CONFIGS = {
    # The reset flags as runtime parameters: one compile for the matrix.
    "plif": lambda: FlexSN(
        "plif",
        kinds={"soft_reset": "runtime", "detach_reset": "runtime"},
        shapes=PER_CHANNEL,
        num_channels=C,
        store_state_seqs=True,
    ),
    # w per channel (trainable), v_threshold per neuron (trainable),
    # v_reset per channel (runtime): shaped buffers in declaration order
    # w, v_threshold, v_reset, of both kinds.
    "mixed": lambda: FlexSN(
        "plif",
        kinds={"v_threshold": "trainable", "v_reset": "runtime"},
        shapes={
            "w": "per_channel",
            "v_threshold": "per_neuron",
            "v_reset": "per_channel",
        },
        neuron_shape=SHAPE,
        store_state_seqs=True,
    ),
    "node": lambda: ParametricLIFNode(step_mode="m", num_channels=C),
    "node-s": lambda: ParametricLIFNode(num_channels=C, step_mode="s"),
}

# A fresh-state module of a configuration on a device (one compile each).
module = ModuleCache(CONFIGS)


# ---------------------------------------------------------------------------
# Compile and manifest
# ---------------------------------------------------------------------------


def test_manifest_param_shapes():
    compiled = flexsn.compile(
        "plif",
        kinds={"v_threshold": "trainable", "v_reset": "runtime"},
        shapes={
            "w": "per_channel",
            "v_threshold": "per_neuron",
            "v_reset": "per_channel",
        },
        targets=("cpu",),
    )
    info = compiled.info
    params = {p.name: p for p in info.params}
    assert params["w"].per_channel and params["w"].shaped
    assert not params["w"].per_neuron
    assert params["v_threshold"].per_neuron and params["v_threshold"].shaped
    assert not params["soft_reset"].shaped
    assert info.channels
    assert [p.name for p in info.per_channel_params] == ["w", "v_reset"]
    assert [p.name for p in info.shaped_params] == [
        "w",
        "v_threshold",
        "v_reset",
    ]
    assert info.scalar_runtime_params == ()
    backward = compiled.manifest.find("cpu", "backward", "f32")
    assert backward.channels
    assert [
        (b.name, b.role, b.shape)
        for b in backward.buffers
        if "param" in b.role
    ] == [
        ("w", "per_channel_param", ("C",)),
        ("v_threshold", "per_neuron_param", ("B", "C", "S")),
        ("v_reset", "per_channel_param", ("C",)),
        ("w_grad", "per_channel_param_gradient", ("C",)),
        ("v_threshold_grad", "per_neuron_param_gradient", ("B", "C", "S")),
    ]
    plain = flexsn.compile("plif", targets=("cpu",))
    assert not plain.info.channels
    assert not plain.manifest.find("cpu", "backward", "f32").channels


def test_shipped_neuron_with_a_per_channel_declaration():
    """A neuron file may declare the shape itself; the module then needs
    only the channel count."""
    text, _ = flexsn.compiler.read_source("plif")
    text = text.replace(
        "%w: f32 = 0.0 trainable,", "%w: f32 = 0.0 trainable per_channel,"
    )
    assert "per_channel" in text
    m = FlexSN(text, num_channels=2, storage_types=("f32",))
    assert m.w.shape == (2,) and torch.equal(m.w.detach(), torch.zeros(2))
    x = torch.full((3, 1, 2, 5), 0.9)
    assert m(x).shape == x.shape
    assert "num_channels=2" in repr(m)


# ---------------------------------------------------------------------------
# Forward and gradients against the reference
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("flags", list(FLAGS))
def test_forward_matches_reference(flags, device):
    m = module("plif", device)
    set_flags(m, flags)
    x, v0, w = data(device, 1)
    set_param(m, "w", w)
    want_s, want_v = plif_loop(x, w, v0=v0, **FLAGS[flags])
    assert 0.1 < want_s.mean().item() < 0.9
    check_forward_kernels(m, x, v0, want_s, want_v, FWD_TOL[device])


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("flags", list(FLAGS))
@pytest.mark.parametrize(
    "shape",
    [SHAPE, (3, C), (2, C, 2, 3), (1, C, 1)],
    ids=["BCS", "BC", "BCHW", "S1"],
)
def test_gradients_match_reference(shape, flags, device):
    m = module("plif", device)
    set_flags(m, flags)
    x, v0, w = data(device, 2, shape)
    w_s, w_v = weights(device, 2, shape)
    set_param(m, "w", w)

    def loss(s, v_seq):
        return (s * w_s).sum() + (v_seq * w_v).sum()

    x_m, v0_m = x.clone().requires_grad_(), v0.clone().requires_grad_()
    m.reset()
    m.states[0] = v0_m
    loss(m(x_m), m.state_seqs[0]).backward()

    x_r, v0_r = x.clone().requires_grad_(), v0.clone().requires_grad_()
    w_r = w.clone().requires_grad_()
    loss(*plif_loop(x_r, w_r, v0=v0_r, **FLAGS[flags])).backward()

    tol = GRAD_TOL[device]
    close(x_m.grad, x_r.grad, tol, "x.grad")
    close(v0_m.grad, v0_r.grad, tol, "v0.grad")
    assert m.w.grad.dtype == torch.float32 and m.w.grad.shape == (C,)
    close(m.w.grad, w_r.grad, tol, "w.grad")
    # One gradient per channel, not one value repeated.
    assert len(set(w_r.grad.tolist())) == C


@pytest.mark.parametrize("device", DEVICES)
def test_reference_sensitivity(device):
    """The comparisons above can fail: the leaks given to the wrong
    channels (w reversed, or read along another dimension), or another
    surrogate slope, move the reference beyond the tolerances."""
    m = module("plif", device)
    set_flags(m, "hard")
    x, v0, w = data(device, 3)
    w_s, _ = weights(device, 3)
    set_param(m, "w", w)
    m.reset()
    x_m = x.clone().requires_grad_()
    s = m(x_m)
    (s * w_s).sum().backward()

    def reference(w, alpha=SigmoidSpike.alpha):
        with slope(alpha):
            x_r, w_r = x.clone().requires_grad_(), w.clone().requires_grad_()
            s = plif_loop(x_r, w_r)[0]
            (s * w_s).sum().backward()
        return s.detach(), x_r.grad, w_r.grad

    want_s, gx, gw = reference(w)
    close(s.detach(), want_s, FWD_TOL[device], "spikes")
    close(x_m.grad, gx, GRAD_TOL[device], "x.grad")
    close(m.w.grad, gw, GRAD_TOL[device], "w.grad")
    _, gx2, _ = reference(w.flip(0))
    assert not torch.allclose(x_m.grad, gx2, **GRAD_TOL[device])
    # The leak taken along the last dimension (S = 4 != C) instead.
    k = 1 / (
        1 + torch.exp(-torch.linspace(-2.0, 2.0, SHAPE[2], device=device))
    )
    x_r = x.clone().requires_grad_()
    v, wrong = torch.zeros_like(x[0]), []
    for t in range(T):
        h = v + (x_r[t] - v) * k
        s_t = SigmoidSpike.apply(h - 1.0)
        v = (1 - s_t) * h
        wrong.append(s_t)
    (torch.stack(wrong) * w_s).sum().backward()
    assert not torch.allclose(x_m.grad, x_r.grad, **GRAD_TOL[device])
    _, _, gw3 = reference(w, alpha=4.4)
    assert not torch.allclose(m.w.grad, gw3, **GRAD_TOL[device])


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_half_storage(dtype, device):
    """Sequences stored in half precision, w and its gradient in float32:
    the kernels compute in float32 from the rounded inputs, so they match
    the float32 reference on those, up to the rounding of what they
    store."""
    m = module("plif", device)
    set_flags(m, "soft")
    x, v0, w = data(device, 5)
    w_s, w_v = weights(device, 5)
    x, v0 = x.to(dtype), v0.to(dtype)
    set_param(m, "w", w)
    x_m, v0_m = x.clone().requires_grad_(), v0.clone().requires_grad_()
    m.reset()
    m.states[0] = v0_m
    s = m(x_m)
    assert s.dtype == dtype and m.w.dtype == torch.float32
    (
        (s.float() * w_s).sum() + (m.state_seqs[0].float() * w_v).sum()
    ).backward()

    x_r = x.float().requires_grad_()
    v0_r = v0.float().requires_grad_()
    w_r = w.clone().requires_grad_()
    want_s, want_v = plif_loop(x_r, w_r, v0=v0_r, soft=True)
    ((want_s * w_s).sum() + (want_v * w_v).sum()).backward()
    assert torch.equal(s.detach().float(), want_s.detach())
    tol = dict(rtol=2e-2, atol=2e-2)
    close(m.state_seqs[0].detach().float(), want_v.detach(), tol, "v_seq")
    assert m.w.grad.dtype == torch.float32
    close(m.w.grad, w_r.grad, dict(rtol=2e-2, atol=5e-2), "w.grad")
    close(x_m.grad.float(), x_r.grad, tol, "x.grad")


@pytest.mark.parametrize("device", DEVICES)
def test_per_channel_and_per_neuron_params_together(device):
    """w (per-channel, trainable), v_threshold (per-neuron, trainable) and
    v_reset (per-channel, runtime) in one neuron."""
    m = module("mixed", device)
    x, v0, w = data(device, 6)
    w_s, w_v = weights(device, 6)
    g = torch.Generator().manual_seed(66)
    thr = (torch.rand(SHAPE, generator=g) * 0.8 + 0.6).to(device)
    v_reset = torch.tensor([-0.3, 0.0, 0.2], device=device)
    assert [n for n, _ in m.named_parameters()] == ["w", "v_threshold"]
    assert [n for n, _ in m.named_buffers()] == ["v_reset"]
    assert m.v_reset.shape == (C,) and m.v_threshold.shape == SHAPE
    set_param(m, "w", w)
    with torch.no_grad():
        m.v_threshold.copy_(thr)
        m.v_reset.copy_(v_reset)
    m.v_threshold.grad = None
    m.reset()
    m.states[0] = v0.clone()
    x_m = x.clone().requires_grad_()
    s = m(x_m)
    ((s * w_s).sum() + (m.state_seqs[0] * w_v).sum()).backward()

    x_r, w_r = x.clone().requires_grad_(), w.clone().requires_grad_()
    thr_r = thr.clone().requires_grad_()
    want_s, want_v = plif_loop(x_r, w_r, thr_r, v0, v_reset=v_reset)
    ((want_s * w_s).sum() + (want_v * w_v).sum()).backward()

    close(s.detach(), want_s.detach(), FWD_TOL[device], "spikes")
    close(m.state_seqs[0].detach(), want_v.detach(), FWD_TOL[device], "v_seq")
    tol = GRAD_TOL[device]
    close(x_m.grad, x_r.grad, tol, "x.grad")
    close(m.w.grad, w_r.grad, tol, "w.grad")
    close(m.v_threshold.grad, thr_r.grad, tol, "v_threshold.grad")
    assert m.v_reset.grad is None


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize(
    "steps,shape", [(0, SHAPE), (4, (0, C, 2))], ids=["T0", "B0"]
)
def test_empty_gives_zero_gradients(steps, shape, device):
    m = module("node", device)
    x = torch.zeros((steps,) + shape, device=device, requires_grad=True)
    n = math.prod(shape)
    v0 = torch.arange(float(n)).reshape(shape).to(device).requires_grad_()
    w = torch.arange(1.0, 1.0 + n).reshape(shape).to(device)
    m.states[0] = v0
    m.w.grad = None
    s = m(x)
    assert s.shape == (steps,) + shape
    (s.sum() + (m.states[0] * w).sum()).backward()
    assert torch.equal(m.w.grad, torch.zeros(C, device=device))
    if steps == 0:
        # The final state is the initial one.
        assert torch.equal(v0.grad, w)


# ---------------------------------------------------------------------------
# Modules: training, runtime buffers, single step
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("device", DEVICES)
def test_node_optimizer_step(device):
    m = module("node", device)
    assert [n for n, _ in m.named_parameters()] == ["w"]
    assert isinstance(m.w, torch.nn.Parameter) and m.w.shape == (C,)
    set_param(m, "w", torch.zeros(C))  # init_tau = 2
    x, _, _ = data(device, 7, shape=(4, C, 5))
    w_s, _ = weights(device, 7, shape=(4, C, 5))
    opt = torch.optim.SGD(m.parameters(), lr=0.5)
    m.reset()
    (m(x) * w_s).sum().backward()
    w_r = torch.zeros(C, device=device, requires_grad=True)
    (plif_loop(x, w_r)[0] * w_s).sum().backward()
    grad = m.w.grad.clone()
    close(grad, w_r.grad, GRAD_TOL[device], "w.grad")
    opt.step()
    after = m.w.detach().clone()
    close(after, -0.5 * grad, dict(rtol=1e-6, atol=1e-7), "step")
    assert len(set(after.tolist())) == C  # each channel its own leak
    m.reset()
    with torch.no_grad():
        s = m(x)
    close(s, plif_loop(x, after)[0], FWD_TOL[device], "spikes after step")


@pytest.mark.parametrize("device", DEVICES)
def test_runtime_per_channel_param_is_a_buffer(device):
    """A runtime per-channel threshold: a [C] buffer, changed in place
    between calls; gradients reach the inputs, not it."""
    m = FlexSN(
        "plif",
        kinds={"v_threshold": "runtime"},
        shapes={"v_threshold": "per_channel"},
        params={"v_threshold": torch.tensor([0.6, 1.0, 1.4])},
    ).to(device)
    assert m.num_channels == C
    assert [n for n, _ in m.named_buffers()] == ["v_threshold"]
    assert "v_threshold" in m.state_dict()
    x, v0, _ = data(device, 8)
    thr = torch.tensor([0.6, 1.0, 1.4], device=device).view(1, C, 1)
    with torch.no_grad():
        s = m(x)
    close(
        s, plif_loop(x, torch.tensor(0.0), thr)[0], FWD_TOL[device], "spikes"
    )
    m.v_threshold.add_(0.25)
    x_m, x_r = x.clone().requires_grad_(), x.clone().requires_grad_()
    w_s, _ = weights(device, 8)
    m.reset()
    m.states[0] = v0.clone()
    (m(x_m) * w_s).sum().backward()
    (
        plif_loop(x_r, torch.tensor(0.0), thr + 0.25, v0)[0] * w_s
    ).sum().backward()
    close(x_m.grad, x_r.grad, GRAD_TOL[device], "x.grad (moved threshold)")
    assert m.v_threshold.grad is None
    assert m.w.grad is not None and m.w.grad.shape == ()  # scalar w


@pytest.mark.parametrize("device", DEVICES)
def test_single_step_mode(device):
    """Single-step inputs are [B, C, ...]: the channel is dimension 1."""
    m = module("node-s", device)
    x, _, w = data(device, 9, shape=(2, C, 3))
    w_s, _ = weights(device, 9, shape=(2, C, 3))
    set_param(m, "w", w)
    m.reset()
    spikes = [m(x[t]) for t in range(T)]
    assert spikes[0].shape == (2, C, 3)
    s = torch.stack(spikes)
    (s * w_s).sum().backward()
    w_r = w.clone().requires_grad_()
    want, want_v = plif_loop(x, w_r)
    (want * w_s).sum().backward()
    close(s.detach(), want.detach(), FWD_TOL[device], "spikes")
    close(m.v.detach(), want_v[-1].detach(), FWD_TOL[device], "v")
    close(
        m.w.grad, w_r.grad, GRAD_TOL[device], "w.grad (summed over the steps)"
    )


def test_half_module_passes_float32():
    """A module converted with .half() keeps working: the kernels get a
    float32 copy of w, its gradient comes back in w's dtype; a conversion
    to a dtype the kernels do not store is refused."""
    m = ParametricLIFNode(step_mode="m", num_channels=2).half()
    assert m.w.dtype == torch.float16
    m(torch.randn(4, 3, 2, 5).half() + 0.8).sum().backward()
    assert m.w.grad.dtype == torch.float16 and m.w.grad.shape == (2,)
    with pytest.raises(TypeError, match="float32, float16 and bfloat16"):
        m.double()


@pytest.mark.parametrize("device", DEVICES)
def test_deterministic_mode(device):
    """w.grad has the same bits on every run, in either mode: CPU kernels
    sum in one order; on the GPU the module always calls the deterministic
    kernel, which writes each neuron's sum over time, and sums them per
    channel with torch (the kernel that adds them with atomics is slower,
    and serves only direct launches). Both agree with the reference
    loop."""
    m = module("node", device)
    x, _, w = data(device, 10)
    set_param(m, "w", w)
    w_r = w.clone().requires_grad_()
    plif_loop(x, w_r)[0].sum().backward()

    def grad(deterministic):
        m.deterministic = deterministic
        m.reset()
        m.w.grad = None
        m(x).sum().backward()
        return m.w.grad.clone()

    try:
        first = grad(True)
        assert first.shape == (3,)
        for _ in range(3):
            assert torch.equal(grad(True), first)
        close(first, w_r.grad, GRAD_TOL[device], "deterministic w.grad")
        assert torch.equal(grad(False), first)
        # torch's deterministic mode picks the deterministic kernel too.
        previous = torch.are_deterministic_algorithms_enabled()
        torch.use_deterministic_algorithms(True)
        try:
            assert torch.equal(grad(False), first)
        finally:
            torch.use_deterministic_algorithms(previous)
    finally:
        m.deterministic = False


@pytest.mark.skipif(
    not flexsn.torch.has_custom_op(),
    reason="torch has no torch.library.custom_op",
)
@pytest.mark.parametrize("device", DEVICES)
def test_torch_compile_custom_op(device):
    """torch.compile(fullgraph=True) traces flexsn::scan with per-channel
    tensors (trainable and runtime) and its backward op."""
    m = module("mixed", device)
    x, v0, w = data(device, 11)
    set_param(m, "w", w)
    with torch.no_grad():
        m.v_threshold.fill_(1.0)
        m.v_reset.copy_(torch.tensor([-0.3, 0.0, 0.2]))
    w_s, _ = weights(device, 11)

    def run(x, v0):
        m.reset()
        m.states[0] = v0
        return (m(x) * w_s).sum() + m.state_seqs[0].sum()

    results = []
    for fn in (run, torch.compile(run, fullgraph=True, backend="aot_eager")):
        m.w.grad = m.v_threshold.grad = None
        x_m = x.clone().requires_grad_()
        loss = fn(x_m, v0.clone())
        loss.backward()
        results.append(
            (
                loss.detach(),
                x_m.grad,
                m.w.grad.clone(),
                m.v_threshold.grad.clone(),
            )
        )
    for name, a, b in zip(
        ("loss", "x.grad", "w.grad", "v_threshold.grad"), *results
    ):
        close(b, a, GRAD_TOL[device], name)
    with torch.no_grad():
        m.reset()
        want = m(x)
        m.reset()
        got = torch.compile(
            lambda x: m(x), fullgraph=True, backend="aot_eager"
        )(x)
    assert torch.equal(got, want)


# ---------------------------------------------------------------------------
# Errors
# ---------------------------------------------------------------------------


def test_constructor_errors():
    with pytest.raises(ValueError, match="pass num_channels=C"):
        FlexSN("plif", shapes=PER_CHANNEL)
    with pytest.raises(ValueError, match="num_channels is a positive int"):
        ParametricLIFNode(step_mode="m", num_channels=0)
    with pytest.raises(ValueError, match="has no per-channel parameter"):
        FlexSN("plif", num_channels=4)
    with pytest.raises(
        ValueError, match="'w' has 3 channels, num_channels " "says 4"
    ):
        FlexSN(
            "plif",
            shapes=PER_CHANNEL,
            num_channels=4,
            params={"w": torch.zeros(3)},
        )
    with pytest.raises(ValueError, match=r"'w' is a \[C\] tensor"):
        FlexSN("plif", shapes=PER_CHANNEL, params={"w": torch.zeros(2, 3)})
    with pytest.raises(
        ValueError,
        match=r"neuron shape \(2, 5\) is " r"\[B, C, \.\.\.\] with C = 3",
    ):
        FlexSN(
            "plif",
            kinds={"v_threshold": "trainable"},
            shapes={"w": "per_channel", "v_threshold": "per_neuron"},
            num_channels=3,
            neuron_shape=(2, 5),
        )
    with pytest.raises(ValueError, match="'w' is a scalar"):
        FlexSN("plif", params={"w": torch.zeros(3)})


@pytest.mark.parametrize("device", DEVICES)
def test_bad_tensors_are_clear_errors(device):
    m = module("node", device)
    for grad in (False, True):
        with torch.set_grad_enabled(grad):
            m.reset()
            with pytest.raises(
                ValueError,
                match=r"inputs are \[T, B, C, " r"\.\.\.\] sequences",
            ):
                m(torch.zeros(4, C, device=device, requires_grad=grad))
            m.reset()
            with pytest.raises(
                ValueError,
                match=r"'w' has shape \(3,\), " r"expected \[C\] = \(4,\)",
            ):
                m(torch.zeros(4, 2, 4, 3, device=device, requires_grad=grad))
    h = m.handle
    x = torch.zeros((4,) + SHAPE, device=device)
    good = torch.zeros(C, device=device)
    cases = [
        (good.to(torch.float64), TypeError, "'w' is torch.float64"),
        (good.reshape(1, C), ValueError, "'w' has shape"),
        (torch.empty(C, device="meta"), ValueError, "'w' is on meta"),
        (0.0, TypeError, r"'w' is a tensor of shape \[C\]"),
    ]
    if device == "cuda":
        cases.append((good.cpu(), ValueError, "'w' is on cpu"))
    for value, error, message in cases:
        for grad in (False, True):
            with torch.set_grad_enabled(grad):
                with pytest.raises(error, match=message):
                    flexsn.torch.scan(
                        h,
                        [x.clone().requires_grad_(grad)],
                        [None],
                        [value],
                        [],
                        False,
                    )
    s, _ = flexsn.torch.scan(h, [x], [None], [good], [], False)
    assert torch.equal(s[0], torch.zeros_like(x))


def test_kernel_channel_arguments_are_checked():
    """The raw kernels: a kernel with per-channel buffers takes
    channels=(C, S), others none, and (C, S) must tile N. The CPU functions
    trust their descriptors, so CpuKernel checks before calling; the GPU
    runtime returns FLEXSN_ERROR_BAD_CHANNELS (checked on a GPU by
    channel_kernel_checks.py)."""
    from flexsn import _runtime

    compiled = flexsn.compile(
        "plif", shapes=PER_CHANNEL, variants=("inference",)
    )
    plain = flexsn.compile("plif", variants=("inference",))
    spec = compiled.manifest.find("cpu", "inference", "f32")
    kernel = _runtime.load_kernel(compiled, "cpu", "inference", "f32")
    with pytest.raises(ValueError, match=r"pass channels=\(C, S\)"):
        kernel.launch(4, 6, [0] * len(spec.buffers), 0, [1.0])
    for channels in ((4, 1), (2, 2), (0, 6), (3, 0), (-1, -6)):
        with pytest.raises(ValueError, match="do not lay out N = 6"):
            kernel.launch(
                4, 6, [0] * len(spec.buffers), 0, [1.0], channels=channels
            )
    other = _runtime.load_kernel(plain, "cpu", "inference", "f32")
    with pytest.raises(ValueError, match="has no per-channel buffers"):
        other.launch(4, 6, [0] * 4, 0, [1.0], channels=(2, 3))
    if "cuda" not in compiled.targets or compiled.gpu_image is None:
        return
    spec = compiled.manifest.find("cuda", "inference", "f32")
    assert spec.channels
    kernel = _runtime.GpuKernel(spec, _runtime.GpuImage(compiled.gpu_image))
    with pytest.raises(ValueError, match=r"pass channels=\(C, S\)"):
        kernel.launch(0, 4, 6, 0, [0] * 5, 0)
    spec = plain.manifest.find("cuda", "inference", "f32")
    kernel = _runtime.GpuKernel(spec, _runtime.GpuImage(plain.gpu_image))
    with pytest.raises(ValueError, match="has no per-channel buffers"):
        kernel.launch(0, 4, 6, 0, [0] * 4, 0, channels=(2, 3))


# ---------------------------------------------------------------------------
# Python step functions
# ---------------------------------------------------------------------------


def _python_plif(
    x,
    v,
    w=flexsn.fx.Trainable(0.0, shape="per_channel"),
    v_threshold=flexsn.fx.Runtime(1.0, shape="per_neuron"),
):
    """PLIF with decay_input and a hard reset to 0, as plif_loop."""
    h = v + (x - v) * (1 / (1 + torch.exp(-w)))
    s = flexsn.spike(h - v_threshold)
    return s, (1 - s) * h


python_module = ModuleCache(
    {
        "plif": lambda: FlexSN(
            _python_plif, 1, 1, neuron_shape=SHAPE, store_state_seqs=True
        )
    }
)


@pytest.mark.parametrize("device", DEVICES)
def test_python_step_function_declares_shaped_params(device):
    """`Trainable(v, shape="per_channel")` and `Runtime(v,
    shape="per_neuron")` in a step function: the module holds a [C]
    nn.Parameter and a buffer of the neuron shape, and trains w per
    channel."""
    m = python_module("plif", device)
    assert {p.name: (p.kind, p.shape) for p in m.info.params} == {
        "w": ("trainable", "per_channel"),
        "v_threshold": ("runtime", "per_neuron"),
    }
    assert m.num_channels == C and m.w.shape == (C,)
    assert [n for n, _ in m.named_buffers()] == ["v_threshold"]
    x, v0, w = data(device, 12)
    w_s, w_v = weights(device, 12)
    g = torch.Generator().manual_seed(12)
    thr = (torch.rand(SHAPE, generator=g) * 0.8 + 0.6).to(device)
    set_param(m, "w", w)
    with torch.no_grad():
        m.v_threshold.copy_(thr)
    m.states[0] = v0.clone()
    x_m = x.clone().requires_grad_()
    s = m(x_m)
    ((s * w_s).sum() + (m.state_seqs[0] * w_v).sum()).backward()
    x_r, w_r = x.clone().requires_grad_(), w.clone().requires_grad_()
    want_s, want_v = plif_loop(x_r, w_r, thr, v0)
    ((want_s * w_s).sum() + (want_v * w_v).sum()).backward()
    close(s.detach(), want_s.detach(), FWD_TOL[device], "spikes")
    close(x_m.grad, x_r.grad, GRAD_TOL[device], "x.grad")
    close(m.w.grad, w_r.grad, GRAD_TOL[device], "w.grad")


def test_step_function_shape_errors():
    for make, error, message in [
        (
            lambda: flexsn.fx.Trainable(0.0, shape="per_row"),
            ValueError,
            "unknown shape 'per_row'",
        ),
        (
            lambda: flexsn.fx.Runtime(True, shape="per_channel"),
            TypeError,
            "runtime or trainable float",
        ),
        (
            lambda: flexsn.fx.Const(1.0, shape="per_neuron"),
            TypeError,
            "unexpected keyword",
        ),
    ]:
        with pytest.raises(error, match=message):
            make()
    assert repr(flexsn.fx.Trainable(0.5, shape="per_channel")) == (
        "Trainable(0.5, shape='per_channel')"
    )
    assert repr(flexsn.fx.Runtime(0.5)) == "Runtime(0.5)"
