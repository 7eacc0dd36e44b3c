"""`flexsn.compile`: a neuron to CPU and GPU kernels, cached by content;
`flexsn.compile_kernels`: the same for kernel functions written by hand.

This module is the driver: it checks a compile's options and loads what
the compile produced. A compile is one run of flexsn-compile (which lowers
for the CPU and the GPU side by side; `_compile_tool`), whose outputs are
one entry of the compile cache (`_cache`: keyed by the source and the
options, checked before use):

    neuron.mlir    the source as given
    configured.mlir  the source with parameters and surrogate set
    neuron.json    the neurons (names, parameters with defaults, kinds and
                   shapes)
    torch_step.py  the configured steps as PyTorch functions, where every
                   op has one
    cpu.json, kernels.so     CPU kernels (shared library, C interface)
    gpu.json, kernels.cubin  GPU kernels (cubin, or a fatbin for several
                             chips)
    done           written last: the size and sha256 of every other file
"""

import dataclasses
import os
import pathlib
from typing import Dict, Iterable, Mapping, Optional, Sequence, Union

from . import _dialect, _runtime, _tools
from ._cache import CACHE_FORMAT, CacheError, cache_dir, cached, read_json
from ._compile_tool import TORCH_STEP, cuda_toolkit, run_tools
from ._manifest import Manifest, NeuronInfo
from ._options import TARGETS, CompileOptions
from ._targets import target, targets
from ._tools import CompileError

__all__ = [
    "ALL_VARIANTS",
    "PARAM_SHAPES",
    "SPIKE_STORAGES",
    "STORAGE_TYPES",
    "TARGETS",
    "TORCH_STEP",
    "CacheError",
    "CompileOptions",
    "CompiledKernels",
    "CompiledNeuron",
    "cache_dir",
    "compile",
    "compile_kernels",
    "cuda_toolkit",
    "read_source",
    "shipped_neurons",
]

# The dialect's enums (FlexSNAttrs.td), under the names the package exports.
ALL_VARIANTS = _dialect.KERNEL_VARIANTS
STORAGE_TYPES = _dialect.STORAGE_TYPES
PARAM_SHAPES = _dialect.PARAM_SHAPES
#: How inference and final-state kernels store spike outputs: in the
#: storage type, as bytes (0/1), or bit-packed (8 per byte).
SPIKE_STORAGES = _dialect.SPIKE_STORAGES


def shipped_neurons() -> Dict[str, pathlib.Path]:
    """The neuron library: name -> .mlir file."""
    directory = _tools.neurons_dir()
    return {p.stem: p for p in sorted(directory.glob("*.mlir"))}


def read_source(source: Union[str, os.PathLike]) -> (str, str):
    """(text, file name for diagnostics) of a path, neuron text or shipped
    neuron name."""
    if isinstance(source, os.PathLike):
        path = pathlib.Path(source)
        return path.read_text(), str(path)
    if not isinstance(source, str):
        raise TypeError(
            "source must be a path, MLIR text or a shipped "
            f"neuron name, not {type(source).__name__}"
        )
    if "flexsn." in source or "{" in source:
        return source, "<neuron>.mlir"
    shipped = shipped_neurons()
    if source in shipped:
        return shipped[source].read_text(), str(shipped[source])
    path = pathlib.Path(source)
    if path.suffix == ".mlir" or os.sep in source:
        if not path.is_file():
            raise FileNotFoundError(f"no neuron file {source}")
        return path.read_text(), str(path)
    raise ValueError(
        f"'{source}' is neither a neuron file, MLIR text, nor "
        f"a shipped neuron (those are: "
        f"{', '.join(shipped) or 'none found'})"
    )


def _format_value(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return repr(value)
    raise TypeError(
        f"parameter values are bool, int or float, not "
        f"{type(value).__name__}"
    )


def _surrogate_text(surrogate) -> str:
    if surrogate is None:
        return ""
    if isinstance(surrogate, str):
        return surrogate
    return surrogate.mlir()


@dataclasses.dataclass
class CompiledNeuron:
    """The artifacts of one compile; kernels are loaded on first use."""

    name: str
    directory: pathlib.Path
    manifest: Manifest
    variants: tuple
    storage_types: tuple
    targets: tuple

    @property
    def info(self) -> NeuronInfo:
        return self.manifest.neurons[self.name]

    def image(self, target_name: str) -> Optional[pathlib.Path]:
        """The file holding the kernels of the target `target_name` (the
        first of its `images` present), or None."""
        for name in target(target_name).images:
            if (self.directory / name).is_file():
                return self.directory / name
        return None

    @property
    def cpu_library(self) -> Optional[pathlib.Path]:
        return self.image("cpu")

    @property
    def gpu_image(self) -> Optional[pathlib.Path]:
        return self.image("cuda")

    def kernel(
        self,
        device: str,
        variant: str,
        dtype: str,
        deterministic: bool = False,
        options=(),
        final_states: Optional[bool] = None,
        coupled: bool = False,
    ):
        """The runnable kernel (see flexsn._runtime), loaded once;
        `options` (a mapping of compile options to values) picks the
        kernel they chose over the variant's default (as the manifest's
        kernels list them); `final_states=True` the training forward that
        writes final states, not state sequences; `coupled=True` the
        coupled (recurrent) kernel (compiled with `coupled=True`)."""
        return _runtime.load_kernel(
            self,
            device,
            variant,
            dtype,
            deterministic,
            options,
            final_states=final_states,
            coupled=coupled,
        )


@dataclasses.dataclass
class CompiledKernels:
    """The artifacts of one `compile_kernels`; kernels are loaded on first
    use, by name."""

    directory: pathlib.Path
    manifest: Manifest
    targets: tuple

    image = CompiledNeuron.image
    cpu_library = CompiledNeuron.cpu_library
    gpu_image = CompiledNeuron.gpu_image

    @property
    def names(self) -> tuple:
        """The kernels' names (each compiled for every target)."""
        return tuple(
            dict.fromkeys(
                k.name
                for k in self.manifest.cpu_kernels + self.manifest.gpu_kernels
                if not k.deterministic
            )
        )

    def kernel(self, device: str, name: str, deterministic: bool = False):
        """The runnable kernel `name` for `device` ("cpu" or "cuda"; see
        flexsn._runtime), loaded once; `deterministic` picks a backward
        kernel's variant that sums parameter gradients in a fixed order."""
        return _runtime.load_named_kernel(self, device, name, deterministic)

    def kernel_of(
        self,
        device: str,
        function: str,
        variant: str,
        dtype: str,
        deterministic: bool = False,
    ):
        """The runnable `variant` kernel of storage `dtype` that kernel
        generation made from `function` (a neuron or a block function),
        found by its signature, not by its name."""
        return _runtime.load_kernel(
            self, device, variant, dtype, deterministic, neuron=function
        )


def compile(
    source,
    *,
    options: Optional[CompileOptions] = None,
    params: Optional[Mapping[str, object]] = None,
    surrogate=None,
    **fields,
) -> CompiledNeuron:
    """Compiles a neuron (a `.mlir` path, MLIR text or a shipped neuron name)
    to kernels as `options` (a `flexsn.CompileOptions`) says: which
    variants, storage types, targets ("cpu", "cuda"; default: "cpu", plus
    "cuda" when a CUDA toolkit is installed), chips, parameter kinds and
    shapes, spike storage, how half-precision training saves and whether
    surrogates are approximated. Its fields may also be given by keyword
    (`variants=`, `storage_types=`, `targets=`, `chip=`, `kinds=`,
    `shapes=`, `neuron=`, `spike_storage=`, `save_in_storage_type=`,
    `approximate_surrogates=`), changing those of `options`.

    `params` sets parameter defaults (a `const` parameter is specialized to
    it), `kinds` re-binds parameters (`const`, `runtime`, `trainable`),
    `shapes` gives parameters a shape (`scalar`; `per_neuron`: one f32
    value per neuron, a `[N]` buffer of the kernels; `per_channel`: one f32
    value per channel, a `[C]` buffer, the kernels then seeing the neurons
    as `[B, C, S]`; a shaped parameter must be `runtime` or `trainable`;
    applied after `kinds`), `surrogate` (a
    `flexsn.surrogate` object or attribute text) replaces every spike's
    surrogate. `spike_storage` says how the inference and final-state
    kernels store spike outputs (outputs that are `flexsn.spike` results):
    "dense" (in the storage type), "u8" (uint8 0/1, a quarter of f32's
    bytes) and/or "bits" (8 spikes per byte: bit n % 8 of byte
    t * ceil(ld / 8) + n / 8; the non-dense ones need a spike output).
    `save_in_storage_type` (the default) makes the f16 and bf16 training
    kernels save what the backward reads in their storage type, rounded so
    that the backward's spikes are the forward's; False saves it in f32:
    more bytes, a backward at the forward's exact values (docs/Python.md
    measures both). `approximate_surrogates=True` makes the CUDA
    backward kernels evaluate surrogate gradients with the GPU's
    approximate exp and division (a few ulp; faster f16 and bf16 backward
    kernels) instead of correctly rounded. A second compile of the same
    neuron and options runs no tool. A neuron that does not verify raises
    CompileError carrying the MLIR diagnostics (`file:line:col: error:
    ...`)."""
    options = CompileOptions.of(options, **fields)
    text, filename = read_source(source)
    key = _cache_key(options, params, surrogate)
    return _compiled(text, filename, key, lambda entry: _load(entry, key))


def _cache_key(
    options: CompileOptions, params: Optional[Mapping[str, object]], surrogate
) -> dict:
    """What a compile's cache entry is keyed by: its compile request (the
    options, the parameter values and the surrogate; _compile_tool adds
    the machine's CUDA toolkit when it writes it) and the cache's
    format."""
    request = options.request(
        _targets(options.targets), params, _surrogate_text(surrogate)
    )
    return {"request": request, "cache_format": CACHE_FORMAT}


def _targets(targets: Optional[Iterable[str]]) -> tuple:
    """The targets given, or by default the CPU, plus CUDA where a CUDA
    toolkit is installed (or no tools are, so that a cache filled where
    they were serves both)."""
    if targets is None:
        ptxas = cuda_toolkit() / "bin" / "ptxas"
        targets = (
            ("cpu", "cuda")
            if ptxas.is_file() or not _tools.tools_available()
            else ("cpu",)
        )
    return CompileOptions(targets=targets).targets


def _compiled(text: str, filename: str, key: dict, load):
    """`load(entry)` of the cache entry of `text` compiled with the cache
    key `key`, compiled first where the tools are."""
    return cached(
        text,
        key,
        lambda work: run_tools(work, text, filename, key),
        load,
    )


def compile_kernels(
    source,
    *,
    targets: Optional[Iterable[str]] = None,
    chip: Union[str, Sequence[str]] = "sm_90",
    approximate_surrogates: bool = False,
) -> "CompiledKernels":
    """Compiles the kernel functions of a module written by hand (a `.mlir`
    path or MLIR text: `func.func`s carrying a `flexsn.kernel` signature
    around one `flexsn.scan`, and blocks: `func.func`s on tensors marked
    `flexsn.block`, which the pipeline fuses into one scan and compiles to
    `<block>_inference_<dtype>`; see docs/Python.md) to kernels for
    `targets` (as for `compile`). Autodiff first completes every forward
    kernel that has no backward kernel yet: it adds the sequences the
    forward saves and the backward kernel, named with the forward's last
    `forward` replaced by `backward`. A module that does not verify, or
    that autodiff cannot differentiate, raises CompileError with the MLIR
    diagnostics.
    `approximate_surrogates` is as for `compile`."""
    text, filename = read_source(source)
    options = CompileOptions(
        chip=(chip,) if isinstance(chip, str) else tuple(chip),
        approximate_surrogates=approximate_surrogates,
    )
    request = options.request(_targets(targets))
    # Kernel functions as written, training pairs completed, and blocks
    # fused into inference kernels: no neuron to configure or describe.
    request["kernels"] = {"variants": ["inference", "forward", "backward"]}
    del request["neuron_manifest"]
    key = {
        "request": request,
        "kernel_functions": True,
        "cache_format": CACHE_FORMAT,
    }
    return _compiled(
        text, filename, key, lambda entry: _load_kernels(entry, key)
    )


def _load(entry: pathlib.Path, key: dict) -> CompiledNeuron:
    documents = [
        read_json(entry, name)
        for name in ["neuron.json"] + [t.manifest for t in targets()]
        if (entry / name).is_file()
    ]
    manifest = Manifest.from_json(documents)
    names = list(manifest.neurons)
    if not names:
        raise CompileError(
            "the source defines no flexsn.neuron: nothing " "to compile"
        )
    kernels = key["request"]["kernels"]
    asked = kernels.get("neurons", [None])[0]
    name = asked or (names[0] if len(names) == 1 else None)
    if name is None:
        raise ValueError(
            "the source defines several neurons "
            f"({', '.join(names)}): pass neuron="
        )
    return CompiledNeuron(
        name,
        entry,
        manifest,
        tuple(kernels["variants"]),
        tuple(kernels["storage_types"]),
        tuple(key["request"]["targets"]),
    )


def _load_kernels(entry: pathlib.Path, key: dict) -> "CompiledKernels":
    documents = [
        read_json(entry, name)
        for name in [t.manifest for t in targets()]
        if (entry / name).is_file()
    ]
    return CompiledKernels(
        entry, Manifest.from_json(documents), tuple(key["request"]["targets"])
    )
