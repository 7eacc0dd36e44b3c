"""flexsn.torch modules: arguments, states, errors, the runtime's statuses."""

import os
import pathlib
import subprocess
import sys
import textwrap

import pytest
import torch

import flexsn
from flexsn.torch import FlexSN, LIFNode, ParametricLIFNode

import reference


@pytest.fixture(scope="module")
def lif():
    return LIFNode(step_mode="m", targets=("cpu",))


def test_bad_inputs_are_clear_errors(lif):
    lif.reset()
    with pytest.raises(TypeError, match="float32, float16 or bfloat16"):
        lif(torch.zeros(4, 3, dtype=torch.float64))
    with pytest.raises(TypeError, match="float32, float16 or bfloat16"):
        lif(torch.zeros(4, 3, dtype=torch.int32))
    with pytest.raises(ValueError, match=r"\[T, N...\] sequences"):
        lif(torch.zeros(4))
    with pytest.raises(ValueError, match="takes 1 input"):
        lif(torch.zeros(4, 3), torch.zeros(4, 3))
    lif.reset()
    lif.v = torch.zeros(3, dtype=torch.float16)
    with pytest.raises(TypeError, match="state 'v' is torch.float16"):
        flexsn.torch.scan(
            lif.handle, [torch.zeros(4, 3)], [lif.v], [], [], False
        )
    with pytest.raises(ValueError, match="state 'v' has shape"):
        flexsn.torch.scan(
            lif.handle, [torch.zeros(4, 3)], [torch.zeros(5)], [], [], False
        )
    lif.reset()


def test_bad_constructor_arguments():
    with pytest.raises(ValueError, match="tau must be a finite number > 1"):
        LIFNode(step_mode="m", tau=0.5, targets=("cpu",))
    with pytest.raises(ValueError, match="init_tau must be a finite number"):
        ParametricLIFNode(step_mode="m", init_tau=1.0, targets=("cpu",))
    with pytest.raises(ValueError, match="has 1 states"):
        FlexSN("lif", num_states=2, targets=("cpu",))
    with pytest.raises(ValueError, match="has no parameter bogus"):
        FlexSN("lif", params={"bogus": 1.0}, targets=("cpu",))
    with pytest.raises(ValueError, match="step_mode"):
        FlexSN("lif", step_mode="x", targets=("cpu",))
    with pytest.raises(TypeError, match="surrogate_function"):
        LIFNode(step_mode="m", surrogate_function=3, targets=("cpu",))
    with pytest.raises(ValueError, match="alpha"):
        LIFNode(
            step_mode="m",
            surrogate_function=flexsn.surrogate.ATan(alpha=0.0),
            targets=("cpu",),
        )


def test_non_contiguous_input_matches_contiguous(lif):
    torch.manual_seed(1)
    base = torch.randn(5, 4, 6) * 2
    strided = base[:, :, ::2]  # steps not contiguous
    lif.reset()
    got = lif(strided)
    lif.reset()
    want = lif(strided.contiguous())
    assert torch.equal(got, want)
    rows = torch.randn(5, 10)[:, :7]  # a time stride of 10 > N = 7
    lif.reset()
    got = lif(rows)
    expected, _ = reference.lif_ref(rows.contiguous())
    assert torch.equal(got, expected)


def test_states_carry_reset_and_detach():
    torch.manual_seed(2)
    x = torch.randn(6, 8) * 1.5
    node = LIFNode(step_mode="m", tau=3.0, targets=("cpu",))
    whole = node(x)
    v_whole = node.v.clone()
    node.reset()
    assert node.v == 0.0  # v_reset, a number until a call
    halves = torch.cat([node(x[:3]), node(x[3:])])
    assert torch.equal(whole, halves) and torch.equal(node.v, v_whole)
    # Truncated BPTT: after detach() the second call's loss reaches only
    # its own inputs.
    node.reset()
    a, b = x[:3].clone().requires_grad_(), x[3:].clone().requires_grad_()
    node(a)
    node.detach()
    node(b).sum().backward()
    assert a.grad is None and b.grad is not None
    # Without detach the gradient reaches the first call's inputs.
    node.reset()
    a = x[:3].clone().requires_grad_()
    node(a)
    (node(x[3:]).sum() + node.v.sum()).backward()
    assert a.grad is not None and a.grad.abs().sum() > 0


def test_single_step_mode_equals_multi_step():
    torch.manual_seed(3)
    x = torch.randn(5, 4) * 2
    single = LIFNode(step_mode="s", targets=("cpu",))
    steps = torch.stack([single(x[t]) for t in range(5)])
    expected, _ = reference.lif_ref(x)
    assert torch.equal(steps, expected)


def test_store_v_seq(lif):
    torch.manual_seed(4)
    x = torch.randn(4, 2, 3) * 2
    node = LIFNode(step_mode="m", store_v_seq=True, targets=("cpu",))
    node(x)
    _, v_seq = reference.lif_ref(x)
    assert node.v_seq.shape == (4, 2, 3)
    assert torch.equal(node.v_seq, v_seq) and torch.equal(node.v, v_seq[-1])


def test_runtime_parameters_are_attributes():
    node = FlexSN("lif", kinds={"v_threshold": "runtime"}, targets=("cpu",))
    assert node.v_threshold == 1.0
    x = torch.full((3, 4), 0.8)
    node.v_threshold = 0.5
    spikes = node(x)
    expected, _ = reference.lif_ref(x, v_threshold=0.5)
    assert torch.equal(spikes, expected) and spikes.sum() > 0


def test_trainable_parameter_is_a_parameter():
    node = ParametricLIFNode(step_mode="m", init_tau=3.0, targets=("cpu",))
    names = [name for name, _ in node.named_parameters()]
    assert names == ["w"]
    assert node.w.item() == pytest.approx(reference.init_w(3.0))


def test_runtime_status_names_the_argument():
    """The C runtime's checks run before any driver call, so a refused
    launch is testable without a GPU."""
    try:
        compiled = flexsn.compile(
            "lif", targets=("cuda",), variants=("final-state",)
        )
    except flexsn.CompileError as error:
        pytest.skip(f"no CUDA toolkit to compile with: {error}")
    kernel = compiled.kernel("cuda", "final-state", "f32")
    with pytest.raises(flexsn.RuntimeStatusError) as error:
        # x (a required input) is NULL.
        kernel.launch(0, 4, 8, 0, [0, 0, 0, 0], 0)
    assert error.value.status == "FLEXSN_ERROR_NULL_POINTER"
    assert error.value.argument == "x"
    assert "argument 'x'" in str(error.value)
    with pytest.raises(flexsn.RuntimeStatusError) as error:
        kernel.launch(0, -1, 8, 0, [16, 0, 0, 0], 0)
    assert error.value.status == "FLEXSN_ERROR_NEGATIVE_SIZE"
    assert error.value.argument is None
    with pytest.raises(flexsn.RuntimeStatusError) as error:
        kernel.launch(0, 4, 8, 0, [18, 0, 0, 0], 0)  # misaligned x
    assert error.value.status == "FLEXSN_ERROR_INVALID_ARGUMENT"
    assert error.value.argument == "x"


def test_deterministic_option_and_global_flag():
    node = ParametricLIFNode(
        step_mode="m", targets=("cpu",), deterministic=True
    )
    assert node.handle.deterministic_mode() is True
    node.deterministic = False
    assert node.handle.deterministic_mode() is False
    previous = torch.are_deterministic_algorithms_enabled()
    torch.use_deterministic_algorithms(True)
    try:
        assert node.handle.deterministic_mode() is True
        torch.use_deterministic_algorithms(True, warn_only=True)
        assert node.handle.deterministic_mode() == "warn"
        # The module's own request is not softened by torch's warn_only.
        node.deterministic = True
        assert node.handle.deterministic_mode() is True
    finally:
        torch.use_deterministic_algorithms(previous)


@pytest.mark.cuda
def test_backward_on_a_fresh_autograd_thread():
    """PyTorch runs a CUDA backward on a worker thread where no CUDA context
    may be current yet (nothing but FlexSN's backward runs there); the
    runtime adopts the device's primary context. A fresh process, so no
    earlier test has made one current on that thread."""
    code = textwrap.dedent(
        """
        import torch
        from flexsn.torch import LIFNode
        x = torch.randn(4, 1024, device="cuda", requires_grad=True)
        s = LIFNode(step_mode="m")(x)
        g, = torch.autograd.grad(s, (x,), torch.ones_like(s))
        print(bool(torch.isfinite(g).all()) and bool((g != 0).any()))
    """
    )
    package = pathlib.Path(flexsn.__file__).resolve().parent.parent
    env = dict(
        os.environ, PYTHONPATH=os.pathsep.join([str(package)] + sys.path)
    )
    result = subprocess.run(
        [sys.executable, "-c", code],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        universal_newlines=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.strip() == "True"
