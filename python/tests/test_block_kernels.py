"""flexsn.compile_kernels of a spiking block written on tensors: the
pipeline fuses batch-norm's apply step, a LIF neuron and a residual add
(test/Pipelines/Inputs/bn_lif_block.mlir) into one scan and kernel
generation makes it one inference kernel, `bn_lif_inference_f32`, run here
through flexsn._runtime over [T, B, C, S] on the CPU and, where a GPU is
present, on the GPU (`cuda` marker).

`block_loop` computes the block from its formulas in float64 numpy,
sharing no code with the package: p = x·scale[c] + shift[c],
h = v + (p - v)/2, s = H(h - 1), v' = (1 - s)·h from v = 0, and y = s + x.
Inputs are multiples of 1/16 with scale and shift of few bits and T small,
so every value is exact in f32: the kernel must match exactly.
"""

import pathlib

import numpy as np
import pytest
import torch

import flexsn

from devices import DEVICES  # noqa: E402

BLOCK = (
    pathlib.Path(__file__).resolve().parents[2]
    / "test"
    / "Pipelines"
    / "Inputs"
    / "bn_lif_block.mlir"
)


@pytest.fixture(scope="module")
def block():
    return flexsn.compile_kernels(BLOCK)


def block_loop(x, scale, shift):
    """(y, final v) of the block in float64 from its formulas; x is
    [T, B, C, S]."""
    p = x * scale[None, None, :, None] + shift[None, None, :, None]
    v = np.zeros(x.shape[1:])
    ys = []
    for t in range(x.shape[0]):
        h = v + (p[t] - v) / 2
        s = (h - 1 >= 0).astype(np.float64)
        v = (1 - s) * h
        ys.append(s + x[t])
    return np.array(ys), v


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("shape", [(5, 2, 3, 4), (3, 1, 4, 5), (1, 3, 2, 1)])
def test_block_kernel_against_formulas(block, device, shape):
    T, B, C, S = shape
    N = B * C * S
    gen = torch.Generator().manual_seed(T * 1000 + N)
    x = torch.randint(-24, 40, shape, generator=gen).float() / 16
    scale = torch.randint(8, 40, (C,), generator=gen).float() / 16
    shift = torch.randint(-8, 8, (C,), generator=gen).float() / 16
    want_y, want_v = block_loop(
        x.double().numpy(), scale.double().numpy(), shift.double().numpy()
    )
    x, scale, shift = (t.to(device) for t in (x, scale, shift))
    y = torch.full_like(x, float("nan"))
    v = torch.full((B, C, S), float("nan"), device=device)
    kernel = block.kernel(device, "bn_lif_inference_f32")
    addresses = [
        x.data_ptr(),
        0,
        y.data_ptr(),
        v.data_ptr(),
        scale.data_ptr(),
        shift.data_ptr(),
    ]  # v_init absent: zeros
    if device == "cuda":
        kernel.launch(
            torch.cuda.current_stream().cuda_stream,
            T,
            N,
            0,
            addresses,
            0,
            channels=(C, S),
        )
        torch.cuda.synchronize()
    else:
        kernel.launch(T, N, addresses, 0, channels=(C, S))
    assert torch.equal(y.cpu().double(), torch.from_numpy(want_y))
    assert torch.equal(v.cpu().double(), torch.from_numpy(want_v))


def test_block_kernel_signature(block):
    spec = block.kernel("cpu", "bn_lif_inference_f32").spec
    assert [b.name for b in spec.buffers] == [
        "x",
        "v_init",
        "y",
        "v",
        "scale",
        "shift",
    ]
    assert [b.role for b in spec.buffers] == [
        "input_sequence",
        "initial_state",
        "output_sequence",
        "final_state",
        "per_channel_param",
        "per_channel_param",
    ]
    with pytest.raises(ValueError):
        block.kernel("cpu", "bn_lif_inference_f32").launch(
            2, 10, [0] * 6, 0, channels=(3, 2)
        )


UNFUSABLE = """
flexsn.neuron @id inputs(%x: f32) outputs(y) {
  flexsn.yield %x : f32
}
func.func @twice(%x: tensor<?x?xf32>, %e: tensor<?x?xf32>)
    -> (tensor<?x?xf32>, tensor<?x?xf32>) attributes {flexsn.block} {
  %p = linalg.map { arith.negf } ins(%x : tensor<?x?xf32>)
      outs(%e : tensor<?x?xf32>)
  %y = flexsn.scan @id ins(%p : tensor<?x?xf32>) outs(%e : tensor<?x?xf32>)
  return %y, %p : tensor<?x?xf32>, tensor<?x?xf32>
}
"""


def test_unfusable_block_is_an_error():
    # The negation's result is returned too: it stays outside the scan,
    # which a block kernel cannot hold.
    with pytest.raises(flexsn.CompileError, match="runs outside its scan"):
        flexsn.compile_kernels(UNFUSABLE, targets=("cpu",))


MALFORMED_LIST = """
func.func @total(%x: tensor<?x?xf32>, %i: tensor<?xf32>) -> tensor<?xf32>
    attributes {flexsn.block} {
  %r = linalg.reduce {arith.addf} ins(%x : tensor<?x?xf32>)
      outs(%i : tensor<?xf32>) dimensions = [0
  return %r : tensor<?xf32>
}
"""


def test_malformed_linalg_list_is_a_compile_error():
    # Upstream's linalg.reduce parser crashes on an unclosed list; the
    # tools report it at the token that breaks it.
    with pytest.raises(
        flexsn.CompileError,
        match=r":6:3: error: expected a list of 64-bit "
        r"integers in square brackets after "
        r"'dimensions ='",
    ):
        flexsn.compile_kernels(MALFORMED_LIST, targets=("cpu",))
