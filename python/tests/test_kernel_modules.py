"""flexsn.compile_kernels: kernel functions written by hand in MLIR, their
training pairs completed by autodiff, run through flexsn._runtime.

The module below holds one forward kernel, a block written as one scan: an
affine pre-op p = a·x + c (a = `scale`, trainable; c = `shift`, runtime), a
leaky soft-reset neuron h = v/2 + p, s = H(h - 1), v' = h - s, and a
residual readout y = s + x, with the piecewise-quadratic surrogate
psi(u) = max(1 - |u|, 0). `block_loop` below computes its forward and its
backward from these formulas in float64 numpy, sharing no code with the
package. Inputs are multiples of 1/16 and T is small, so every forward value
is exact in f32 (h - 1 = 0 included, where both sides spike): the forward
must match exactly and the gradients to f32 rounding.

Each case runs on the CPU kernels and, where a GPU is present, on the GPU
kernels (`cuda` marker): several N (vector groups, a partial last group),
the deterministic backward (same bits on every run), absent incoming
gradients, and the errors: unknown kernels, a module without kernels, a
module autodiff refuses.
"""

import pytest
import torch

import flexsn

from devices import DEVICES  # noqa: E402

BLOCK = """
func.func @block_forward_f32(%x: memref<?x?xf32>, %v0: memref<?xf32>,
                             %y: memref<?x?xf32>, %v: memref<?x?xf32>,
                             %scale: f32, %shift: f32)
    attributes {flexsn.kernel = #flexsn.kernel<"block", forward, f32,
      buffers = [<"x", input_sequence, f32, sequence, input 0>,
                 <"v_init", initial_state, f32, per_neuron, state_init 0>,
                 <"y", output_sequence, f32, sequence, output 0>,
                 <"v_seq", state_sequence, f32, sequence, state_seq 0>],
      params = [<"scale", 1.0 : f32, trainable>,
                <"shift", 0.0 : f32, runtime>]>} {
  flexsn.scan ins(%x : memref<?x?xf32>) inits(%v0 : memref<?xf32>)
      params(%scale, %shift : f32, f32) outs(%y : memref<?x?xf32>)
      states(%v : memref<?x?xf32>) {
  ^bb0(%xi: f32, %vi: f32, %a: f32, %c: f32):
    %half = arith.constant 0.5 : f32
    %one = arith.constant 1.0 : f32
    %ax = arith.mulf %xi, %a : f32
    %p = arith.addf %ax, %c : f32
    %leak = arith.mulf %vi, %half : f32
    %h = arith.addf %leak, %p : f32
    %over = arith.subf %h, %one : f32
    %s = flexsn.spike %over surrogate(#flexsn.piecewise_quadratic) : f32
    %vn = arith.subf %h, %s : f32
    %yi = arith.addf %s, %xi : f32
    flexsn.yield %yi, %vn : f32, f32
  }
  return
}
"""

SCALE, SHIFT = 2.0, 0.25


@pytest.fixture(scope="module")
def block():
    return flexsn.compile_kernels(BLOCK)


def block_loop(x, v0, a, c, gy, gv, gfinal):
    """The block's forward and backward from its formulas (float64 numpy
    arrays): (y, v_seq, x_grad, v_init_grad, scale_grad). `gy`/`gv` may be
    None (no incoming gradient)."""
    import numpy as np

    T, N = x.shape
    gy = np.zeros((T, N)) if gy is None else gy
    gv = np.zeros((T, N)) if gv is None else gv
    v, hs, ys, vs = v0.copy(), [], [], []
    for t in range(T):
        h = 0.5 * v + (a * x[t] + c)
        s = (h - 1.0 >= 0).astype(np.float64)
        v = h - s
        hs.append(h), ys.append(s + x[t]), vs.append(v)
    carry, dx, da = gfinal.copy(), np.zeros((T, N)), 0.0
    for t in reversed(range(T)):
        g = gv[t] + carry
        psi = np.maximum(1.0 - np.abs(hs[t] - 1.0), 0.0)
        G = g * (1.0 - psi) + gy[t] * psi
        dx[t] = gy[t] + a * G
        da += float((G * x[t]).sum())
        carry = 0.5 * G
    return np.array(ys), np.array(vs), dx, carry, da


def expected(*inputs):
    """block_loop of (x, v0, gy, gv, gfinal) tensors (or None)."""
    x, v0, gy, gv, gfinal = (
        None if t is None else t.double().numpy() for t in inputs
    )
    return block_loop(x, v0, SCALE, SHIFT, gy, gv, gfinal)


def sixteenths(gen, shape, low, high):
    """Random multiples of 1/16 in [low, high)."""
    return (
        torch.randint(
            int(low * 16), int(high * 16), shape, generator=gen
        ).float()
        / 16
    )


class Runner:
    """Launches the block's kernels on `device` on torch tensors."""

    def __init__(self, block, device):
        self.device = device
        self.forward = block.kernel(device, "block_forward_f32")
        self.block = block

    def launch(self, kernel, T, N, buffers, workspace, params):
        address = [0 if b is None else b.data_ptr() for b in buffers]
        if self.device == "cuda":
            kernel.launch(
                torch.cuda.current_stream().cuda_stream,
                T,
                N,
                0,
                address,
                workspace.data_ptr(),
                params,
            )
            torch.cuda.synchronize()
        else:
            kernel.launch(T, N, address, workspace.data_ptr(), params)

    def run(self, x, v0, gy, gv, gfinal, deterministic=False):
        T, N = x.shape
        backward = self.block.kernel(
            self.device, "block_backward_f32", deterministic
        )
        dev = dict(device=self.device, dtype=torch.float32)
        bytes_ = max(
            self.forward.spec.workspace_size(T, N, N),
            backward.spec.workspace_size(T, N, N),
        )
        workspace = torch.zeros(
            max(bytes_, 4), dtype=torch.uint8, device=self.device
        )
        x, v0 = x.to(**dev), v0.to(**dev)
        y = torch.full((T, N), -7.0, **dev)
        v_seq = torch.full((T, N), -7.0, **dev)
        self.launch(
            self.forward, T, N, [x, v0, y, v_seq], workspace, [SCALE, SHIFT]
        )

        def move(g):
            return None if g is None else g.to(**dev)

        dx = torch.full((T, N), -7.0, **dev)
        dv0 = torch.full((N,), -7.0, **dev)
        da = torch.full((), -7.0, **dev)
        # Arguments: y_grad, v_seq_grad (optional), x (re-read),
        # v_final_grad, x_grad, v_init_grad, scale_grad.
        names = [b.name for b in backward.spec.buffers if not b.in_workspace]
        assert names == [
            "y_grad",
            "v_seq_grad",
            "x",
            "v_final_grad",
            "x_grad",
            "v_init_grad",
            "scale_grad",
        ], names
        self.launch(
            backward,
            T,
            N,
            [move(gy), move(gv), x, move(gfinal), dx, dv0, da],
            workspace,
            [SCALE, SHIFT],
        )
        return [t.cpu().double().numpy() for t in (y, v_seq, dx, dv0)] + [
            float(da)
        ]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize(
    "T,N,incoming",
    [
        (1, 1, True),
        (6, 37, True),
        (5, 1000, True),
        (8, 4099, True),
        (4, 300, False),
    ],
)  # no gradient of y or v_seq: zeros
def test_block_against_formulas(block, device, T, N, incoming):
    import numpy as np

    gen = torch.Generator().manual_seed(T * 7919 + N)
    x = sixteenths(gen, (T, N), -1, 1)
    v0 = sixteenths(gen, (N,), -0.5, 1)
    gy = sixteenths(gen, (T, N), -1, 1) if incoming else None
    gv = sixteenths(gen, (T, N), -1, 1) if incoming else None
    gfinal = sixteenths(gen, (N,), -1, 1)
    got = Runner(block, device).run(x, v0, gy, gv, gfinal)
    want = expected(x, v0, gy, gv, gfinal)
    if T * N > 100:
        # Some neurons spike, others not: both branches are reached.
        assert 0 < (want[0] - x.double().numpy() != 0).mean() < 1
    np.testing.assert_array_equal(got[0], want[0])  # y: exact
    np.testing.assert_array_equal(got[1], want[1])  # v_seq: exact
    np.testing.assert_allclose(got[2], want[2], rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(got[3], want[3], rtol=1e-5, atol=1e-5)
    assert got[4] == pytest.approx(want[4], rel=1e-4, abs=1e-4)


@pytest.mark.parametrize("device", DEVICES)
def test_deterministic_backward(block, device):
    import numpy as np

    gen = torch.Generator().manual_seed(11)
    T, N = 6, 5000
    inputs = [
        sixteenths(gen, (T, N), -1, 1),
        sixteenths(gen, (N,), 0, 1),
        sixteenths(gen, (T, N), -1, 1),
        None,
        sixteenths(gen, (N,), -1, 1),
    ]
    runner = Runner(block, device)
    runs = [runner.run(*inputs, deterministic=True) for _ in range(3)]
    assert len({r[4] for r in runs}) == 1  # the same bits every run
    want = expected(*inputs)
    assert runs[0][4] == pytest.approx(want[4], rel=1e-4)
    np.testing.assert_array_equal(runs[0][2], runs[1][2])


def test_names_and_errors(block):
    assert block.names == ("block_forward_f32", "block_backward_f32")
    spec = block.kernel("cpu", "block_forward_f32").spec
    assert [b.role for b in spec.buffers][-1] == "saved_output"
    assert spec.params == (("scale", "f32"), ("shift", "f32"))
    with pytest.raises(KeyError, match="no kernel 'nope'.*block_forward_f32"):
        block.kernel("cpu", "nope")
    with pytest.raises(KeyError, match="no kernel was compiled for 'tpu'"):
        block.kernel("tpu", "block_forward_f32")
    with pytest.raises(flexsn.CompileError, match="holds no kernel function"):
        flexsn.compile_kernels("func.func @f() { return }", targets=("cpu",))
    # A reverse-time scan cannot be differentiated: the MLIR diagnostic
    # comes back, pointing into the source.
    backwards = BLOCK.replace("flexsn.scan ins(", "flexsn.scan reverse ins(")
    with pytest.raises(flexsn.CompileError) as error:
        flexsn.compile_kernels(backwards, targets=("cpu",))
    assert "forward-time scan" in str(error.value)
    assert error.value.locations, str(error.value)


FINAL_ONLY = (
    BLOCK.replace("%v: memref<?x?xf32>,", "%v: memref<?xf32>,")
    .replace("states(%v : memref<?x?xf32>)", "states(%v : memref<?xf32>)")
    .replace(
        '<"v_seq", state_sequence, f32, sequence, state_seq 0>',
        '<"v", final_state, f32, per_neuron, state_final 0>',
    )
)


def test_state_kept_only_at_its_end():
    """A forward kernel that keeps only the final state trains: its
    backward takes the final state's gradient and none per step."""
    block = flexsn.compile_kernels(FINAL_ONLY, targets=("cpu",))
    forward = block.kernel("cpu", "block_forward_f32")
    backward = block.kernel("cpu", "block_backward_f32")
    assert [b.name for b in backward.spec.buffers if not b.in_workspace] == [
        "y_grad",
        "x",
        "v_final_grad",
        "x_grad",
        "v_init_grad",
        "scale_grad",
    ]
    T, N = 5, 6
    gen = torch.Generator().manual_seed(4)
    x, v0, gy, gfinal = (
        sixteenths(gen, shape, -1, 2) for shape in ((T, N), (N,), (T, N), (N,))
    )
    workspace = torch.zeros(forward.spec.workspace_size(T, N, N) // 4 + 1)
    y, v, dx, dv0, da = (
        torch.full(shape, -7.0) for shape in ((T, N), (N,), (T, N), (N,), ())
    )
    tensors = {
        "x": x,
        "v_init": v0,
        "y": y,
        "v": v,
        "y_grad": gy,
        "v_final_grad": gfinal,
        "x_grad": dx,
        "v_init_grad": dv0,
        "scale_grad": da,
    }
    for kernel in (forward, backward):
        if kernel is backward:
            da.zero_()  # a scalar gradient is added to
        kernel.launch(
            T,
            N,
            [
                tensors[b.name].data_ptr()
                for b in kernel.spec.buffers
                if not b.in_workspace
            ],
            workspace.data_ptr(),
            [SCALE, SHIFT],
        )
    want_y, want_v, want_dx, want_dv0, want_da = expected(
        x, v0, gy, None, gfinal
    )
    import numpy as np

    np.testing.assert_array_equal(y.double().numpy(), want_y)
    np.testing.assert_array_equal(v.double().numpy(), want_v[-1])
    # Gradients multiply f32 roundings over the steps: close, not equal.
    np.testing.assert_allclose(
        dx.double().numpy(), want_dx, rtol=1e-6, atol=1e-7
    )
    np.testing.assert_allclose(
        dv0.double().numpy(), want_dv0, rtol=1e-6, atol=1e-7
    )
    assert float(da) == pytest.approx(want_da, rel=1e-6)
