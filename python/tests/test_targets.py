"""The target table (flexsn._targets): each target's manifest, its key, its
kernel files and its device type are what a compile writes and what the
layers look up, and tensors no target runs get a clear error naming the
neuron: another torch device, or the GPU tensors of a ROCm build of
PyTorch, which call themselves "cuda" but cannot run CUDA cubins."""

import json

import pytest
import torch

import flexsn
from flexsn import _runtime, _targets
from flexsn.compiler import shipped_neurons
from flexsn.torch import LIFNode

from devices import DEVICES


@pytest.fixture(scope="module")
def compiled():
    """LIF for every target this machine compiles for (CUDA needs only the
    toolkit, not a GPU)."""
    return flexsn.compile(
        shipped_neurons()["lif"].read_text(),
        variants=("inference", "forward", "backward"),
    )


def test_every_compiled_target_is_where_the_table_says(compiled):
    assert set(compiled.targets) <= set(_targets.TARGETS)
    assert "cpu" in compiled.targets
    for name in compiled.targets:
        t = _targets.target(name)
        manifest = json.loads((compiled.directory / t.manifest).read_text())
        listed = manifest["targets"][name]["kernels"]
        assert listed, f"{t.manifest} lists no {name} kernel"
        assert [k["name"] for k in listed] == [
            k.name for k in compiled.manifest.kernels_of(name)
        ]
        assert compiled.image(name).name in t.images
        assert compiled.image(name) == compiled.directory / next(
            n for n in t.images if (compiled.directory / n).is_file()
        )
        # Every other target's kernels stay out of its list.
        for other in _targets.targets():
            if other.name != name:
                assert not set(
                    map(id, compiled.manifest.kernels_of(other.name))
                ) & set(map(id, compiled.manifest.kernels_of(name)))


def test_the_runtime_loads_each_target_with_its_class(compiled):
    for name in compiled.targets:
        if name == "cuda" and not torch.cuda.is_available():
            continue
        kernel = compiled.kernel(name, "inference", "f32")
        assert type(kernel).__name__ == _targets.target(name).kernel_class
        assert isinstance(kernel, getattr(_runtime, kernel.__class__.__name__))


def test_deterministic_twins_only_where_kernels_sum_across_threads():
    sums = {t.name: t.sums_across_threads for t in _targets.targets()}
    assert sums == {"cpu": False, "cuda": True}


def test_unknown_target_names_the_targets():
    with pytest.raises(KeyError, match="no target 'rocm' .*cpu, cuda"):
        _targets.target("rocm")


def test_devices_map_to_targets():
    assert _targets.for_device("cpu").name == "cpu"
    with pytest.raises(
        RuntimeError,
        match="lif: FlexSN runs on CPU and CUDA tensors, not " "meta",
    ):
        _targets.for_device("meta", "lif")


def test_a_module_on_another_device_names_the_neuron():
    x = torch.empty(4, 3, device="meta")
    with pytest.raises(RuntimeError, match="not meta"):
        LIFNode(step_mode="m")(x)


def test_rocm_gpu_tensors_get_a_clear_error(monkeypatch):
    """On a ROCm build, torch.version.hip is set and GPU tensors report
    'cuda': FlexSN refuses them by name before any CUDA runtime is
    loaded (no GPU is needed to check it)."""
    monkeypatch.setattr(torch.version, "hip", "6.2.41133", raising=False)
    with pytest.raises(RuntimeError, match="ROCm build .*HIP 6.2.41133"):
        _targets.for_device("cuda", "lif")
    neuron = LIFNode(step_mode="m")
    neuron(torch.zeros(2, 3))  # compiled, on the CPU
    with pytest.raises(RuntimeError, match="lif.*ROCm"):
        neuron._handle.kernels(torch.device("cuda"))
    # The CPU still runs.
    assert _targets.for_device("cpu").name == "cpu"


@pytest.mark.parametrize("device", DEVICES)
def test_modules_run_on_every_target_device(device):
    x = torch.full((3, 5), 1.5, device=device)
    spikes = LIFNode(tau=2.0, step_mode="m").to(device)(x)
    # LIF (tau 2, threshold 1, hard reset to 0): h = 0.75, then 1.125.
    assert spikes.tolist() == [[0.0] * 5, [1.0] * 5, [0.0] * 5]


def test_the_python_table_runs_every_target_the_compiler_registers():
    """The compiler's registry (lib/Targets, copied by flexsn-pygen) and
    this package's runtimes name the same targets, with the compiler's
    manifest and kernel files; FlexSN's test-only target is in neither."""
    from flexsn import _dialect

    assert set(_dialect.TARGETS) == set(_targets.TARGETS)
    assert "loops" not in _dialect.TARGETS
    for name, declared in _dialect.TARGETS.items():
        t = _targets.target(name)
        assert t.manifest == declared["manifest"]
        assert t.images == tuple(declared["kernel_files"])
