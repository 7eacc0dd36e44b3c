"""Spikes stored as bytes and as bits: `spike_dtype=torch.uint8` and
`spike_dtype="bits"` modules, the u8 and bits kernels they call, and their
misuse.

The reference is reference.py's LIF loop (float32, no FlexSN code); the
compact kernels must also agree bit for bit with the dense kernels of the
same neuron, whose states they share. Bit-packed spikes are checked against
numpy.packbits (axis=-1, bitorder="little") of the dense spikes."""

import numpy as np
import pytest
import torch

import flexsn
from flexsn.torch import FlexSN, LIFNode, ParametricLIFNode

import reference
from devices import DEVICES

DTYPES = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}


def drive(shape, dtype, device, seed=0):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(shape, generator=g) * 1.5 + 0.4).to(device, dtype)


def far_from_threshold(x, v_threshold=1.0, tau=2.0, margin=1e-2):
    """Neurons whose charge h never comes within `margin` of the threshold
    (float32 reference): their spikes cannot flip on rounding."""
    v = torch.zeros(x.shape[1:])
    far = torch.ones(x.shape[1:], dtype=torch.bool)
    for xt in x.float().cpu():
        h = v + (xt - v) / tau
        far &= (h - v_threshold).abs() >= margin
        v = torch.where(h >= v_threshold, torch.zeros_like(h), h)
    return far


@pytest.fixture(scope="module")
def modules():
    """A LIF storing spikes compactly and a dense one, per spike dtype
    (torch.uint8, "bits") and store_v_seq."""
    return {
        (spikes, seq): (
            LIFNode(step_mode="m", spike_dtype=spikes, store_v_seq=seq),
            LIFNode(step_mode="m", store_v_seq=seq),
        )
        for spikes in (torch.uint8, "bits")
        for seq in (False, True)
    }


def run_with_dense(pair, shape, dtype, device):
    """Runs the compact module and the dense one of `pair` on the same
    inputs and initial v: (x, v0, compact spikes, dense spikes), the
    modules' states left for comparison."""
    x = drive(shape, DTYPES[dtype], device)
    v0 = drive(shape[1:], DTYPES[dtype], device, seed=1) * 0.5
    for m in pair:
        m.reset()
        m.v = v0.clone()
    with torch.no_grad():
        return (x, v0) + tuple(m(x) for m in pair)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", list(DTYPES))
@pytest.mark.parametrize(
    "store_v_seq", [False, True], ids=["final-state", "inference"]
)
@pytest.mark.parametrize("shape", [(7, 3, 37), (16, 2, 4, 5), (1, 1), (9, 4)])
def test_u8_spikes_match_reference_and_dense(
    modules, shape, store_v_seq, dtype, device
):
    u8, dense = (m.to(device) for m in modules[torch.uint8, store_v_seq])
    x, v0, s, s_dense = run_with_dense((u8, dense), shape, dtype, device)
    assert s.dtype == torch.uint8 and s.shape == x.shape
    assert s.device == x.device
    assert set(s.unique().tolist()) <= {0, 1}
    # The same kernel arithmetic: the bytes are the dense spikes.
    assert torch.equal(s, s_dense.to(torch.uint8))
    assert torch.equal(u8.v, dense.v) and u8.v.dtype == x.dtype
    if store_v_seq:
        assert torch.equal(u8.v_seq, dense.v_seq)
    # Independent: the float32 reference, away from the threshold.
    if dtype == "f32":
        want, v_seq = reference.lif_ref(x.cpu(), v0.cpu())
        assert torch.equal(s.cpu().float(), want)
        assert torch.allclose(u8.v.cpu(), v_seq[-1], rtol=1e-5, atol=1e-5)
    if shape[0] > 1:
        assert s.any(), "no spike: the input tests nothing"


@pytest.mark.parametrize("device", DEVICES)
def test_u8_spikes_against_reference_near_threshold(device):
    """Half precision rounds the charge: only neurons that never come near
    the threshold are compared to the float32 reference."""
    u8 = LIFNode(step_mode="m", spike_dtype=torch.uint8).to(device)
    x = drive((12, 4, 64), torch.float16, device, seed=3)
    with torch.no_grad():
        s = u8(x)
    want, _ = reference.lif_ref(x.float().cpu())
    far = far_from_threshold(x)
    assert far.float().mean() > 0.5
    assert torch.equal(s.cpu()[:, far].float(), want[:, far])


@pytest.mark.parametrize("device", DEVICES)
def test_u8_per_channel_and_single_step(device):
    """Per-channel PLIF ([B, C, S] kernels) and single-step mode."""
    torch.manual_seed(0)
    x = drive((6, 2, 3, 5), torch.float32, device)
    u8 = ParametricLIFNode(
        step_mode="m", num_channels=3, spike_dtype=torch.uint8
    ).to(device)
    dense = ParametricLIFNode(step_mode="m", num_channels=3).to(device)
    with torch.no_grad():
        u8.w.copy_(torch.tensor([-1.0, 0.0, 2.0]))
        dense.w.copy_(u8.w)
        assert torch.equal(u8(x), dense(x).to(torch.uint8))
    step = LIFNode(spike_dtype=torch.uint8, step_mode="s").to(device)
    ref = LIFNode(step_mode="s").to(device)
    with torch.no_grad():
        for t in range(x.shape[0]):
            got = step(x[t])
            assert got.dtype == torch.uint8 and got.shape == x.shape[1:]
            assert torch.equal(got, ref(x[t]).to(torch.uint8))


@pytest.mark.parametrize("device", DEVICES)
def test_u8_empty_sequences(device):
    u8 = LIFNode(step_mode="m", spike_dtype=torch.uint8).to(device)
    with torch.no_grad():
        for shape in ((0, 3), (4, 0)):
            s = u8(torch.zeros(shape, device=device))
            assert s.dtype == torch.uint8 and s.shape == shape
            u8.reset()


@pytest.mark.cuda
def test_u8_strided_time_on_cuda():
    """A [T, N] view with time stride > N is read in place; the byte
    output has the same layout rule."""
    u8 = LIFNode(
        step_mode="m", spike_dtype=torch.uint8, store_v_seq=True
    ).cuda()
    dense = LIFNode(step_mode="m", store_v_seq=True).cuda()
    base = drive((5, 40), torch.float32, "cuda")
    x = base[:, :36]
    with torch.no_grad():
        assert torch.equal(u8(x), dense(x).to(torch.uint8))


def test_u8_spikes_carry_no_gradient():
    u8 = LIFNode(step_mode="m", spike_dtype=torch.uint8)
    x = drive((4, 3), torch.float32, "cpu").requires_grad_()
    with pytest.raises(RuntimeError, match="carry no gradient"):
        u8(x)
    # Under no_grad the same module runs.
    with torch.no_grad():
        assert u8(x).dtype == torch.uint8
    # A trainable parameter needs a gradient too.
    plif = ParametricLIFNode(step_mode="m", spike_dtype=torch.uint8)
    with pytest.raises(RuntimeError, match="carry no gradient"):
        plif(drive((4, 3), torch.float32, "cpu"))


def test_u8_misuse_is_a_clear_error():
    with pytest.raises(ValueError, match="spike_dtype is None"):
        LIFNode(step_mode="m", spike_dtype=torch.int8)
    with pytest.raises(ValueError, match="unknown spike storage 'u4'"):
        flexsn.compile("lif", spike_storage=("u4",), targets=("cpu",))
    with pytest.raises(ValueError, match="lists no storage"):
        flexsn.compile("lif", spike_storage=(), targets=("cpu",))
    # A neuron without a spike output has no byte kernel.
    leaky = """
    flexsn.neuron @leaky inputs(%x: f32) states(%v: f32) outputs(y) {
      %h = arith.addf %v, %x : f32
      flexsn.yield %h, %h : f32, f32
    }"""
    with pytest.raises(flexsn.CompileError) as info:
        flexsn.compile(leaky, spike_storage=("u8",), targets=("cpu",))
    assert "has no spike output" in info.value.diagnostics
    # A dense-only compile has no u8 kernel: a clear KeyError.
    compiled = flexsn.compile("lif", targets=("cpu",), variants=("inference",))
    with pytest.raises(KeyError, match="spike_storage=u8"):
        compiled.kernel(
            "cpu", "inference", "f32", options={"spike_storage": "u8"}
        )


def test_manifest_describes_byte_spikes():
    compiled = flexsn.compile(
        "lif",
        targets=("cpu",),
        variants=("inference", "final-state"),
        spike_storage=("dense", "u8"),
    )
    kernels = {k.name: k for k in compiled.manifest.cpu_kernels}
    assert sorted(kernels) == [
        "lif_final_state_f32",
        "lif_final_state_f32_spikes_u8",
        "lif_inference_f32",
        "lif_inference_f32_spikes_u8",
    ]
    u8 = kernels["lif_inference_f32_spikes_u8"]
    assert u8.options == (("spike_storage", "u8"),)
    assert kernels["lif_inference_f32"].options == ()
    assert [(b.name, b.dtype, b.element_bytes) for b in u8.buffers] == [
        ("x", "f32", 4),
        ("v_init", "f32", 4),
        ("spike", "u8", 1),
        ("v_seq", "f32", 4),
    ]
    found = compiled.manifest.find(
        "cpu", "inference", "f32", options={"spike_storage": "u8"}
    )
    assert found is u8


def test_step_function_with_u8_spikes():
    """A Python step function's spike (flexsn.fx) is a spike output."""

    def core(x, v):
        h = v + (x - v) / 2.0
        s = flexsn.spike(h - 1.0)
        return s, h * (1.0 - s)

    module = FlexSN(core, 1, 1, spike_dtype=torch.uint8)
    x = drive((6, 10), torch.float32, "cpu")
    with torch.no_grad():
        s = module(x)
    want, _ = reference.lif_ref(x)
    assert s.dtype == torch.uint8 and torch.equal(s.float(), want)


@pytest.mark.skipif(
    not flexsn.torch.has_custom_op(),
    reason="torch has no torch.library.custom_op",
)
@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize(
    "store_v_seq", [False, True], ids=["final-state", "inference"]
)
def test_u8_spikes_under_torch_compile(store_v_seq, device):
    """torch.compile(fullgraph=True) traces flexsn::scan returning uint8
    spikes: its fake gives the dtypes the kernels write."""
    u8 = LIFNode(
        step_mode="m", spike_dtype=torch.uint8, store_v_seq=store_v_seq
    ).to(device)
    dense = LIFNode(step_mode="m", store_v_seq=store_v_seq).to(device)
    x = drive((8, 4, 33), torch.float32, device, seed=5)

    def run(module, x):
        module.reset()
        s = module(x)
        return s, module.v

    compiled = torch.compile(
        lambda x: run(u8, x), fullgraph=True, backend="aot_eager"
    )
    with torch.no_grad():
        s, v = compiled(x)
        s_dense, v_dense = run(dense, x)
    assert s.dtype == torch.uint8 and v.dtype == torch.float32
    assert torch.equal(s, s_dense.to(torch.uint8))
    assert torch.equal(v, v_dense)


# -- spikes as bits -----------------------------------------------------------


def packbits(spikes):
    """numpy's packing of [T, N...] 0/1 spikes over the flattened neurons:
    [T, ceil(N / 8)] bytes, least significant bit first."""
    s = (spikes.detach().cpu().reshape(spikes.shape[0], -1) != 0).numpy()
    return torch.from_numpy(np.packbits(s, axis=-1, bitorder="little"))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", list(DTYPES))
@pytest.mark.parametrize(
    "store_v_seq", [False, True], ids=["final-state", "inference"]
)
# N = 111 and 4 (not multiples of 8: the scalar kernel, a partial byte per
# row, on CUDA a partial warp), 40 and 4096 (whole bytes: the vector
# kernel), 1003 (many warps, the last partial).
@pytest.mark.parametrize(
    "shape", [(7, 3, 37), (16, 2, 4, 5), (1, 1), (9, 4), (3, 4096), (5, 1003)]
)
def test_bit_spikes_match_packbits_reference_and_dense(
    modules, shape, store_v_seq, dtype, device
):
    bits, dense = (m.to(device) for m in modules["bits", store_v_seq])
    x, v0, s, s_dense = run_with_dense((bits, dense), shape, dtype, device)
    T, N = shape[0], x[0].numel()
    assert s.dtype == torch.uint8 and s.shape == (T, (N + 7) // 8)
    assert s.device == x.device
    # The dense spikes, packed by numpy; the bits past N are zero.
    assert torch.equal(s.cpu(), packbits(s_dense))
    assert torch.equal(
        flexsn.torch.unpack_spikes(s, x.shape, x.dtype), s_dense
    )
    assert torch.equal(bits.v, dense.v) and bits.v.dtype == x.dtype
    if store_v_seq:
        assert torch.equal(bits.v_seq, dense.v_seq)
    if dtype == "f32":
        want, _ = reference.lif_ref(x.cpu(), v0.cpu())
        assert torch.equal(s.cpu(), packbits(want))
    if T > 1:
        assert s.any(), "no spike: the input tests nothing"


@pytest.mark.parametrize("device", DEVICES)
def test_bit_spikes_against_reference_near_threshold(device):
    bits = LIFNode(step_mode="m", spike_dtype="bits").to(device)
    x = drive((12, 4, 64), torch.float16, device, seed=3)
    with torch.no_grad():
        s = bits(x)
    want, _ = reference.lif_ref(x.float().cpu())
    got = torch.from_numpy(
        np.unpackbits(s.cpu().numpy(), axis=-1, bitorder="little")
    )
    far = far_from_threshold(x).reshape(-1)
    assert far.float().mean() > 0.5
    assert torch.equal(
        got.reshape(12, -1)[:, far].float(), want.reshape(12, -1)[:, far]
    )


@pytest.mark.cuda
@pytest.mark.parametrize("n", [37, 40, 300])
def test_bit_spikes_strided_time_on_cuda(n):
    """A [T, N] view with time stride ld = 48 (or 304) > N is read in place:
    each row of packed spikes is ceil(ld / 8) bytes, of which the first
    ceil(N / 8) hold the row (N = 37: the vector kernel's last group is
    partial)."""
    bits = LIFNode(step_mode="m", spike_dtype="bits", store_v_seq=True).cuda()
    dense = LIFNode(step_mode="m", store_v_seq=True).cuda()
    ld = (n + 8) // 8 * 8 + 8
    base = drive((5, ld), torch.float32, "cuda")
    x = base[:, :n]
    with torch.no_grad():
        s = bits(x)
        s_dense = dense(x)
    assert s.shape == (5, (n + 7) // 8) and s.stride() == ((ld + 7) // 8, 1)
    assert torch.equal(s.cpu(), packbits(s_dense))
    assert torch.equal(bits.v_seq, dense.v_seq)


@pytest.mark.parametrize("device", DEVICES)
def test_bit_per_channel_and_single_step(device):
    torch.manual_seed(0)
    x = drive((6, 2, 3, 5), torch.float32, device)
    bits = ParametricLIFNode(
        step_mode="m", num_channels=3, spike_dtype="bits"
    ).to(device)
    dense = ParametricLIFNode(step_mode="m", num_channels=3).to(device)
    with torch.no_grad():
        bits.w.copy_(torch.tensor([-1.0, 0.0, 2.0]))
        dense.w.copy_(bits.w)
        assert torch.equal(bits(x).cpu(), packbits(dense(x)))
    step = LIFNode(spike_dtype="bits", step_mode="s").to(device)
    ref = LIFNode(step_mode="s").to(device)
    with torch.no_grad():
        for t in range(x.shape[0]):
            got = step(x[t])
            assert got.dtype == torch.uint8 and got.shape == (4,)
            assert torch.equal(got.cpu(), packbits(ref(x[t])[None])[0])


@pytest.mark.parametrize("device", DEVICES)
def test_bit_empty_sequences(device):
    bits = LIFNode(step_mode="m", spike_dtype="bits").to(device)
    with torch.no_grad():
        for shape, packed in (((0, 3), (0, 1)), ((4, 0), (4, 0))):
            s = bits(torch.zeros(shape, device=device))
            assert s.dtype == torch.uint8 and s.shape == packed
            bits.reset()


def test_unpack_spikes_matches_numpy():
    g = torch.Generator().manual_seed(4)
    packed = torch.randint(0, 256, (3, 5), generator=g, dtype=torch.uint8)
    for shape in ((3, 37), (3, 40), (3, 2, 19)):
        n = int(np.prod(shape[1:]))
        want = np.unpackbits(
            packed.numpy(), axis=-1, count=n, bitorder="little"
        ).reshape(shape)
        got = flexsn.torch.unpack_spikes(packed, shape, torch.uint8)
        assert torch.equal(got, torch.from_numpy(want))
    with pytest.raises(
        ValueError, match=r"uint8 \[3, 6\], got torch.uint8 \(3, 5\)"
    ):
        flexsn.torch.unpack_spikes(packed, (3, 41))
    with pytest.raises(ValueError, match="got torch.int32"):
        flexsn.torch.unpack_spikes(packed.int(), (3, 40))


def test_bit_spikes_carry_no_gradient_and_misuse():
    bits = LIFNode(step_mode="m", spike_dtype="bits")
    x = drive((4, 3), torch.float32, "cpu").requires_grad_()
    with pytest.raises(RuntimeError, match="spike_storage=bits.*carry no"):
        bits(x)
    with pytest.raises(ValueError, match="or 'bits'"):
        LIFNode(step_mode="m", spike_dtype="bytes")
    assert "spike_dtype='bits'" in repr(bits)
    compiled = flexsn.compile("lif", targets=("cpu",), variants=("inference",))
    with pytest.raises(KeyError, match="spike_storage=bits"):
        compiled.kernel(
            "cpu", "inference", "f32", options={"spike_storage": "bits"}
        )


def test_manifest_describes_bit_spikes():
    compiled = flexsn.compile(
        "lif",
        targets=("cpu",),
        variants=("final-state",),
        spike_storage=("bits",),
    )
    [kernel] = compiled.manifest.cpu_kernels
    assert kernel.name == "lif_final_state_f32_spikes_bits"
    assert kernel.options == (("spike_storage", "bits"),)
    assert [(b.name, b.dtype, b.element_bytes) for b in kernel.buffers] == [
        ("x", "f32", 4),
        ("v_init", "f32", 4),
        ("spike", "bits", 0),
        ("v_final", "f32", 4),
    ]


@pytest.mark.skipif(
    not flexsn.torch.has_custom_op(),
    reason="torch has no torch.library.custom_op",
)
@pytest.mark.parametrize("device", DEVICES)
def test_bit_spikes_under_torch_compile(device):
    """The fake of flexsn::scan gives packed spikes their [T, ceil(N / 8)]
    shape."""
    bits = LIFNode(step_mode="m", spike_dtype="bits").to(device)
    dense = LIFNode(step_mode="m").to(device)
    x = drive((8, 4, 33), torch.float32, device, seed=5)

    def run(module, x):
        module.reset()
        return module(x), module.v

    compiled = torch.compile(
        lambda x: run(bits, x), fullgraph=True, backend="aot_eager"
    )
    with torch.no_grad():
        s, v = compiled(x)
        s_dense, v_dense = run(dense, x)
    assert s.shape == (8, 17) and torch.equal(s.cpu(), packbits(s_dense))
    assert torch.equal(v, v_dense)
