"""FlexSN from Python: compile spiking neurons ahead of time and run them.

    import flexsn
    lif = flexsn.compile("lif", params={"tau": 3.0})   # cached by content
    from flexsn.torch import LIFNode                  # PyTorch modules

See docs/Python.md.
"""

from . import surrogate
from ._manifest import Kernel, Manifest, ManifestError, NeuronInfo, Param
from ._options import CompileOptions
from ._runtime import NoDeterministicKernelError, RuntimeStatusError
from ._tools import CompileError, ToolNotFoundError
from .compiler import (
    ALL_VARIANTS,
    SPIKE_STORAGES,
    STORAGE_TYPES,
    CacheError,
    CompiledKernels,
    CompiledNeuron,
    cache_dir,
    compile,
    compile_kernels,
    shipped_neurons,
)

# CMake's project version.
from ._dialect import VERSION as __version__  # noqa: F401

__all__ = [
    "ALL_VARIANTS",
    "STORAGE_TYPES",
    "CacheError",
    "CompileError",
    "CompileOptions",
    "CompiledKernels",
    "CompiledNeuron",
    "Kernel",
    "Manifest",
    "ManifestError",
    "NeuronInfo",
    "NoDeterministicKernelError",
    "Param",
    "RuntimeStatusError",
    "SPIKE_STORAGES",
    "ToolNotFoundError",
    "cache_dir",
    "compile",
    "compile_kernels",
    "shipped_neurons",
    "surrogate",
]


def __getattr__(name):
    # flexsn.fx and flexsn.spike need torch: imported on first use only.
    if name in ("fx", "spike"):
        import importlib

        fx = importlib.import_module(".fx", __name__)
        return fx if name == "fx" else fx.spike
    raise AttributeError(f"module 'flexsn' has no attribute '{name}'")
