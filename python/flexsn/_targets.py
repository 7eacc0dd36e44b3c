"""The targets a compile builds kernels for, each declared once here: its
name (the compile request's `targets.<name>`, `CompileOptions.targets`,
the manifest's `targets.<name>` section), the manifest its lowering writes,
the files that may hold its kernels, the runtime class that loads and
launches one, the torch device type whose tensors it runs, and whether its
kernels sum parameter gradients across threads (then a backward kernel has
a deterministic twin that sums them in a fixed order). Every layer asks
this table, not a spelled-out "cpu" or "cuda"; a target is one entry here,
its kernel class in `_runtime` and its lowering in the compiler (its
folder under lib/Targets, whose manifest and kernel files flexsn-pygen
copies into `_dialect.TARGETS`: they are not restated here)."""

import dataclasses
import sys
from typing import Dict, Tuple

from . import _dialect


@dataclasses.dataclass(frozen=True)
class Target:
    name: str
    #: The manifest of the target's lowering in a compiled directory.
    manifest: str
    #: The `Manifest` field holding its kernels.
    kernels_attr: str
    #: The files that may hold its kernels, the first present is loaded.
    images: Tuple[str, ...]
    #: The `_runtime` class of one of its kernels: `open_image(path)` loads
    #: a file of `images` once, `Class(spec, image)` is a kernel of it.
    kernel_class: str
    #: torch's device type of the tensors it runs.
    device_type: str
    #: Whether parameter gradients are summed across threads.
    sums_across_threads: bool


def _target(
    name: str, kernels_attr: str, kernel_class: str, device: str, sums: bool
) -> Target:
    """The target `name` of the compiler's registry, whose manifest and
    kernel files the compiler declares (`_dialect.TARGETS`), run by this
    package's `kernel_class` on `device` tensors."""
    declared = _dialect.TARGETS[name]
    return Target(
        name,
        declared["manifest"],
        kernels_attr,
        tuple(declared["kernel_files"]),
        kernel_class,
        device,
        sums,
    )


TARGETS: Dict[str, Target] = {
    t.name: t
    for t in (
        _target("cpu", "cpu_kernels", "CpuKernel", "cpu", False),
        _target("cuda", "gpu_kernels", "GpuKernel", "cuda", True),
    )
}


def targets() -> Tuple[Target, ...]:
    """Every target, in the order of TARGETS."""
    return tuple(TARGETS.values())


def target(name: str) -> Target:
    """The target `name`; an unknown one raises KeyError naming those
    there are."""
    found = TARGETS.get(name)
    if found is None:
        raise KeyError(
            f"no target '{name}' (the targets: {', '.join(TARGETS)})"
        )
    return found


def for_device(device_type: str, what: str = "FlexSN") -> Target:
    """The target whose kernels run tensors of torch's `device_type`.

    A ROCm build of PyTorch calls its GPU tensors "cuda" too: they get a
    clear error here, not the CUDA runtime (FlexSN's GPU kernels are
    NVIDIA cubins)."""
    for t in TARGETS.values():
        if t.device_type == device_type:
            break
    else:
        raise RuntimeError(
            f"{what}: FlexSN runs on "
            f"{' and '.join(t.device_type.upper() for t in TARGETS.values())}"
            f" tensors, not {device_type}"
        )
    torch = sys.modules.get("torch")
    hip = getattr(getattr(torch, "version", None), "hip", None)
    if device_type == "cuda" and hip:
        raise RuntimeError(
            f"{what}: this PyTorch is a ROCm build (HIP {hip}), whose GPU "
            f"tensors report the device 'cuda'; FlexSN's GPU kernels are "
            f"CUDA cubins for NVIDIA GPUs: run on CPU tensors"
        )
    return t
