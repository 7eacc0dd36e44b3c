"""Kernels' buffers are matched to tensors by their manifest bindings
alone: renaming every buffer changes nothing, and a deterministic kernel is
found by its signature, not by a name suffix."""

import dataclasses

import pytest
import torch

import flexsn
from flexsn import _runtime
from flexsn._manifest import Manifest
from flexsn.torch._kernels import NeuronKernels, buffer_layout

# A neuron with an output, a state, a per-neuron and a scalar trainable
# parameter: every kind of binding a neuron kernel has.
SOURCE = """
flexsn.neuron @leaky inputs(%x: f32) states(%v: f32) outputs(spike)
    params(%th: f32 = 1.0 trainable per_neuron, %k: f32 = 0.5 trainable) {
  %kx = arith.mulf %k, %x : f32
  %h = arith.addf %v, %kx : f32
  %d = arith.subf %h, %th : f32
  %s = flexsn.spike %d surrogate(#flexsn.sigmoid) : f32
  %one = arith.constant 1.0 : f32
  %keep = arith.subf %one, %s : f32
  %v1 = arith.mulf %h, %keep : f32
  flexsn.yield %s, %v1 : f32, f32
}
"""


@pytest.fixture(scope="module")
def compiled():
    return flexsn.compile(
        SOURCE,
        variants=("inference", "final-state", "forward", "backward"),
        targets=("cpu",),
    )


def renamed(manifest: Manifest) -> Manifest:
    """`manifest` with every buffer renamed `b<i>` and every kernel
    `k<i>`: the names say nothing any more."""

    def kernel(i, k):
        return dataclasses.replace(
            k,
            name=f"k{i}",
            buffers=tuple(
                dataclasses.replace(b, name=f"b{j}")
                for j, b in enumerate(k.buffers)
            ),
        )

    return Manifest(
        manifest.neurons,
        [kernel(i, k) for i, k in enumerate(manifest.gpu_kernels)],
        [kernel(i + 100, k) for i, k in enumerate(manifest.cpu_kernels)],
        manifest.chips,
    )


def test_backward_layout_from_bindings(compiled):
    spec = compiled.manifest.find("cpu", "backward", "f32")
    # The backward's arguments, written from the ABI's order (docs/ABI.md):
    # incoming gradients of the output and the state sequence, the re-read
    # input if any, the final state's gradient, then the gradients it
    # writes, the per-neuron parameter, and the trainable ones' gradients
    # (th then k, in declaration order).
    want = {
        (("output", True), 0),
        (("state_seq", True), 0),
        (("state_final", True), 0),
        (("input", True), 0),
        (("state_init", True), 0),
        (("param", False), 0),
        (("param", True), 0),
        (("param", True), 1),
    }
    layout = buffer_layout(spec, compiled.info)
    assert want <= set(layout) and set(layout) - want <= {
        (("input", False), 0)
    }, layout
    assert len(layout) == len(set(layout))
    # A parameter's gradient is found by the parameter's name.
    [th_grad] = [
        b
        for b in spec.buffers
        if b.binds.key == ("param", True) and b.binds.name == "th"
    ]
    assert th_grad.binds.shape == "per_neuron"
    assert th_grad.role == "per_neuron_param_gradient"


def test_renaming_buffers_changes_no_layout(compiled):
    other = renamed(compiled.manifest)
    for k, r in zip(compiled.manifest.cpu_kernels, other.cpu_kernels):
        assert [b.name for b in r.buffers] != [b.name for b in k.buffers]
        assert buffer_layout(r, compiled.info) == buffer_layout(
            k, compiled.info
        )


def test_renamed_manifest_trains_the_same(compiled, monkeypatch):
    T, N = 5, 7
    gen = torch.Generator().manual_seed(3)
    x = torch.randn(T, N, generator=gen) * 2
    v0 = torch.rand(N, generator=gen)
    th = torch.rand(N, generator=gen) + 0.5
    gy, gv = torch.randn(T, N, generator=gen), torch.randn(T, N, generator=gen)

    def run(neuron):
        kernels = NeuronKernels(neuron, "cpu")
        outputs, states, workspace = kernels.forward([x], [v0], [0.5], [th])
        grads = kernels.backward(
            [gy], [gv], workspace, [x], [0.5], False, x, shaped=[th]
        )
        return (
            outputs
            + states
            + [g for group in grads for g in group if g is not None]
        )

    want = run(compiled)
    monkeypatch.setattr(_runtime, "_loaded", {})  # load the renamed specs
    got = run(
        dataclasses.replace(compiled, manifest=renamed(compiled.manifest))
    )
    assert len(got) == len(want) == 2 + 1 + 1 + 2
    for g, w in zip(got, want):
        assert torch.equal(g, w)
    # The gradients are not trivially zero: the test would see a mix-up.
    assert all(w.abs().sum() > 0 for w in want[2:])


def _entry(name, deterministic, binds):
    return {
        "name": name,
        "function": "flexsn_" + name,
        "neuron": "",
        "variant": "backward",
        "dtype": "f32",
        "workspace_bytes": "0",
        "deterministic": deterministic,
        "options": {},
        "arguments": [],
        "vector_width": 4,
        "vector_kernel": name + "_vec",
        "scalar_kernel": name + "_scalar",
        "buffers": [
            {
                "name": f"b{i}",
                "role": role,
                "dtype": "f32",
                "shape": [],
                "binds": b,
            }
            for i, (role, b) in enumerate(binds)
        ],
    }


def test_deterministic_kernel_found_by_signature():
    grad_x = (
        "output_sequence",
        {"value": "input", "index": 0, "gradient": True},
    )
    grad_w = (
        "param_gradient",
        {"value": "param", "name": "w", "shape": "scalar", "gradient": True},
    )
    grad_u = (
        "param_gradient",
        {"value": "param", "name": "u", "shape": "scalar", "gradient": True},
    )
    scratch = ("reduction_scratch", {"value": "scratch", "gradient": False})
    manifest = Manifest.from_json(
        [
            {
                "format": "flexsn-manifest",
                "version": 12,
                "neurons": [],
                "targets": {
                    "cuda": {
                        "chips": ["sm_90"],
                        "kernels": [
                            _entry("first", False, [grad_x, grad_w]),
                            _entry("second", False, [grad_x, grad_u]),
                            # Names that share nothing with their kernels'.
                            _entry(
                                "zz_other", True, [grad_x, grad_u, scratch]
                            ),
                            _entry(
                                "aa_fixed", True, [grad_x, grad_w, scratch]
                            ),
                        ],
                    }
                },
            }
        ]
    )
    first, second = manifest.gpu_kernels[:2]
    assert manifest.deterministic_of(first).name == "aa_fixed"
    assert manifest.deterministic_of(second).name == "zz_other"
    assert manifest.deterministic_of(manifest.gpu_kernels[2]) is None
