"""`flexsn.compile`: a neuron to CPU and GPU kernels, cached by content;
`flexsn.compile_kernels`: the same for kernel functions written by hand.

A compile is one run of flexsn-compile (which lowers for the CPU and the
GPU side by side), and stores, in one cache entry:

    neuron.mlir    the source as given
    configured.mlir  the source with parameters and surrogate set
    neuron.json    the neurons (names, parameters with defaults, kinds and
                   shapes)
    cpu.json, kernels.so       CPU kernels (shared library, C interface)
    gpu.json, kernels.cubin    GPU kernels (cubin, or a fatbin for several chips)
    done           written last: the size and sha256 of every other file

An entry lives at `<cache>/<key>/<toolchain>/`, where `key` hashes the
neuron text and every option, and `toolchain` hashes the tools: other tools
compile a new entry. Where no tools exist (a machine that only runs
kernels), the newest entry for `key` that is intact is used. Entries are
built in a temporary directory and renamed into place, so processes
compiling the same neuron at once never see a half-written entry.

Before an entry is used, its files are checked against `done` (once per
process): a truncated kernels.so would kill the process with SIGBUS when
loaded, a damaged JSON file fail on every run. A damaged entry is rebuilt
where the tools are (with a warning naming the file); elsewhere it raises
CacheError, naming the file and what to do.
"""

import dataclasses
import hashlib
import json
import os
import pathlib
import shutil
import tempfile
import threading
import time
import uuid
import warnings
from typing import Dict, Iterable, Mapping, Optional, Sequence, Tuple, Union

from . import _dialect, _tools
from ._manifest import Manifest, NeuronInfo
from ._tools import CompileError

# The dialect's enums (FlexSNAttrs.td), under the names the package exports.
ALL_VARIANTS = _dialect.KERNEL_VARIANTS
STORAGE_TYPES = _dialect.STORAGE_TYPES
PARAM_SHAPES = _dialect.PARAM_SHAPES
#: How inference and final-state kernels store spike outputs: in the
#: storage type, as bytes (0/1), or bit-packed (8 per byte).
SPIKE_STORAGES = _dialect.SPIKE_STORAGES
TARGETS = ("cpu", "cuda")
# Bumped when an entry's layout changes; part of every key, so entries of
# another format are never read. 2: `done` records the entry's files; 3:
# manifests of version 10 (buffer bindings).
CACHE_FORMAT = 3
_RECORD_FORMAT = "flexsn-cache-entry"


class CacheError(CompileError):
    """A cache entry is damaged (a file missing, truncated or altered) and
    cannot be rebuilt here; the message names the file and what to do."""


def cache_dir() -> pathlib.Path:
    """$FLEXSN_CACHE_DIR, else $XDG_CACHE_HOME/flexsn, else ~/.cache/flexsn."""
    override = os.environ.get("FLEXSN_CACHE_DIR")
    if override:
        path = pathlib.Path(override)
        if path.exists() and not path.is_dir():
            raise CacheError(f"FLEXSN_CACHE_DIR={override} is not a "
                             "directory: point it at a directory (it is "
                             "created when missing)")
        return path
    base = os.environ.get("XDG_CACHE_HOME") or pathlib.Path.home() / ".cache"
    return pathlib.Path(base) / "flexsn"


def cuda_toolkit() -> pathlib.Path:
    return pathlib.Path(os.environ.get("FLEXSN_CUDA_TOOLKIT")
                        or os.environ.get("CUDA_HOME") or "/usr/local/cuda")


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
        raise TypeError("source must be a path, MLIR text or a shipped "
                        f"neuron name, not {type(source).__name__}")
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
    raise ValueError(f"'{source}' is neither a neuron file, MLIR text, nor "
                     f"a shipped neuron (those are: "
                     f"{', '.join(shipped) or 'none found'})")


def _format_value(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return repr(value)
    raise TypeError(f"parameter values are bool, int or float, not "
                    f"{type(value).__name__}")


def _surrogate_text(surrogate) -> str:
    if surrogate is None:
        return ""
    text = surrogate if isinstance(surrogate, str) else surrogate.mlir()
    if " " in text:
        raise ValueError("write the surrogate attribute without spaces: "
                         f"{text!r}")
    return text


@dataclasses.dataclass
class CompiledNeuron:
    """The artifacts of one compile; kernels are loaded on first use."""
    name: str
    directory: pathlib.Path
    manifest: Manifest
    variants: tuple
    storage_types: tuple
    targets: tuple
    spike_storage: tuple = ("dense",)

    @property
    def info(self) -> NeuronInfo:
        return self.manifest.neurons[self.name]

    @property
    def cpu_library(self) -> Optional[pathlib.Path]:
        path = self.directory / "kernels.so"
        return path if path.is_file() else None

    @property
    def gpu_image(self) -> Optional[pathlib.Path]:
        for name in ("kernels.cubin", "kernels.fatbin"):
            if (self.directory / name).is_file():
                return self.directory / name
        return None

    def kernel(self, device: str, variant: str, dtype: str,
               deterministic: bool = False, spikes: str = "dense",
               final_states: Optional[bool] = None):
        """The runnable kernel (see flexsn._runtime), loaded once;
        `spikes="u8"` or `"bits"` picks the inference or final-state
        kernel that stores spike outputs as bytes or bit-packed;
        `final_states=True` the training forward that writes final states,
        not state sequences."""
        from . import _runtime
        return _runtime.load_kernel(self, device, variant, dtype,
                                    deterministic, spikes,
                                    final_states=final_states)


@dataclasses.dataclass
class CompiledKernels:
    """The artifacts of one `compile_kernels`; kernels are loaded on first
    use, by name."""
    directory: pathlib.Path
    manifest: Manifest
    targets: tuple

    cpu_library = CompiledNeuron.cpu_library
    gpu_image = CompiledNeuron.gpu_image

    @property
    def names(self) -> tuple:
        """The kernels' names (each compiled for every target)."""
        return tuple(dict.fromkeys(
            k.name for k in self.manifest.cpu_kernels + self.manifest.gpu_kernels
            if not k.deterministic))

    def kernel(self, device: str, name: str, deterministic: bool = False):
        """The runnable kernel `name` for `device` ("cpu" or "cuda"; see
        flexsn._runtime), loaded once; `deterministic` picks a backward
        kernel's variant that sums parameter gradients in a fixed order."""
        from . import _runtime
        return _runtime.load_named_kernel(self, device, name, deterministic)

    def kernel_of(self, device: str, function: str, variant: str, dtype: str,
                  deterministic: bool = False):
        """The runnable `variant` kernel of storage `dtype` that kernel
        generation made from `function` (a neuron or a block function),
        found by its signature, not by its name."""
        from . import _runtime
        return _runtime.load_kernel(self, device, variant, dtype,
                                    deterministic, neuron=function)


_memo: Dict[str, object] = {}
_memo_lock = threading.Lock()


def compile(source, *, variants: Iterable[str] = ALL_VARIANTS,
            storage_types: Iterable[str] = ("f32",),
            targets: Optional[Iterable[str]] = None,
            chip: Union[str, Sequence[str]] = "sm_90",
            params: Optional[Mapping[str, object]] = None,
            kinds: Optional[Mapping[str, str]] = None,
            surrogate=None, neuron: Optional[str] = None,
            shapes: Optional[Mapping[str, str]] = None,
            spike_storage: Iterable[str] = ("dense",),
            save_in_storage_type: bool = True,
            approximate_surrogates: bool = False) -> CompiledNeuron:
    """Compiles a neuron (a `.mlir` path, MLIR text or a shipped neuron name)
    to kernels for `targets` ("cpu", "cuda"; default: "cpu", plus "cuda"
    when a CUDA toolkit is installed).

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
    kernels) instead of correctly rounded. A second compile of
    the same neuron and options runs no tool. A neuron that does not verify raises CompileError
    carrying the MLIR diagnostics (`file:line:col: error: ...`)."""
    text, filename = read_source(source)
    variants = tuple(dict.fromkeys(variants))
    storage_types = tuple(dict.fromkeys(storage_types))
    spike_storage = tuple(dict.fromkeys(spike_storage))
    for s in spike_storage:
        if s not in SPIKE_STORAGES:
            raise ValueError(f"unknown spike storage '{s}' (one of: "
                             f"{', '.join(SPIKE_STORAGES)})")
    if not spike_storage:
        raise ValueError("spike_storage lists no storage ("
                         f"{', '.join(SPIKE_STORAGES)})")
    for v in variants:
        if v not in ALL_VARIANTS:
            raise ValueError(f"unknown variant '{v}' (one of: "
                             f"{', '.join(ALL_VARIANTS)})")
    for t in storage_types:
        if t not in STORAGE_TYPES:
            raise ValueError(f"unknown storage type '{t}' (one of: "
                             f"{', '.join(STORAGE_TYPES)})")
    for name, shape in (shapes or {}).items():
        if shape not in PARAM_SHAPES:
            raise ValueError(f"unknown shape '{shape}' for parameter "
                             f"'{name}' (one of: {', '.join(PARAM_SHAPES)})")
    chips = (chip,) if isinstance(chip, str) else tuple(chip)
    targets = _targets(targets)
    options = {
        "variants": variants, "storage_types": storage_types,
        "targets": targets, "chips": chips if "cuda" in targets else (),
        "values": sorted((k, _format_value(v))
                         for k, v in (params or {}).items()),
        "kinds": sorted((kinds or {}).items()),
        "surrogate": _surrogate_text(surrogate), "neuron": neuron or "",
        "cache_format": CACHE_FORMAT,
    }
    if shapes:
        # Only when given: the keys of every other compile stay as they were.
        options["shapes"] = sorted(shapes.items())
    if spike_storage != ("dense",):
        options["spike_storage"] = spike_storage
    if not save_in_storage_type:
        options["save_in_storage_type"] = False
    _set_surrogate_precision(options, approximate_surrogates)
    return _cached(text, filename, options, _load)


def _set_surrogate_precision(options: dict, approximate: bool) -> None:
    # Only when not the default: the keys of every other compile stay.
    if approximate:
        options["approximate_surrogates"] = True


def _targets(targets: Optional[Iterable[str]]) -> tuple:
    if targets is None:
        targets = ("cpu", "cuda") if (cuda_toolkit() / "bin" / "ptxas"
                                      ).is_file() or not _tools.tools_available(
                                      ) else ("cpu",)
    targets = tuple(dict.fromkeys(targets))
    for t in targets:
        if t not in TARGETS:
            raise ValueError(f"unknown target '{t}' (cpu or cuda)")
    return targets


def _cached(text: str, filename: str, options: dict, load):
    """`load(entry, options)` of the cache entry of `text` compiled with
    `options`, built first where the tools are."""
    key = hashlib.sha256(
        json.dumps([text, options], sort_keys=True).encode()).hexdigest()[:24]
    with _memo_lock:
        if key in _memo:
            return _memo[key]

    entry_root = cache_dir() / key
    if _tools.tools_available():
        entry = entry_root / _tools.toolchain_id(cache_dir() / "toolchains")
        if entry.exists():
            damage = _damage(entry)
            if damage:
                warnings.warn(f"{_describe(entry, *damage)}: rebuilding it",
                              RuntimeWarning, stacklevel=3)
                _discard(entry)
        if not (entry / "done").is_file():
            _build(entry, text, filename, options)
    else:
        entry = _newest_intact(entry_root)

    compiled = load(entry, options)
    with _memo_lock:
        _memo[key] = compiled
    return compiled


def _newest_intact(entry_root: pathlib.Path) -> pathlib.Path:
    """Without tools: the newest entry of `entry_root` whose files match
    its record."""
    entries = [p for p in entry_root.iterdir()
               if p.is_dir() and not p.name.startswith(".")
               ] if entry_root.is_dir() else []
    if not entries:
        raise _tools.ToolNotFoundError(
            "the FlexSN tools are not installed and the cache "
            f"({cache_dir()}) holds no compiled copy of this source with "
            "these options: compile it where the tools are, then copy "
            "the cache (set $FLEXSN_CACHE_DIR)")

    def built_at(entry):
        try:
            return (entry / "done").stat().st_mtime
        except OSError:
            return float("-inf")

    damaged = []
    for entry in sorted(entries, key=built_at, reverse=True):
        damage = _damage(entry)
        if damage is None:
            for line in damaged:
                warnings.warn(f"{line}: using the older {entry}",
                              RuntimeWarning, stacklevel=4)
            return entry
        damaged.append(_describe(entry, *damage))
    raise CacheError(
        "\n".join(damaged) + "\nThe FlexSN tools are not installed here to "
        "rebuild it: delete " + ", ".join(str(e) for e in entries)
        + ", compile the source again where the tools are, and copy that "
        "cache here (set $FLEXSN_CACHE_DIR)")


def _sha256(path: pathlib.Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _record(work: pathlib.Path) -> dict:
    """The contents of `done`: every file of the entry, size and sha256."""
    return {"format": _RECORD_FORMAT, "files": {
        p.name: {"size": p.stat().st_size, "sha256": _sha256(p)}
        for p in sorted(work.iterdir()) if p.name != "done"}}


def _damage(entry: pathlib.Path) -> Optional[Tuple[pathlib.Path, str]]:
    """(file, what is wrong) for the first file of `entry` that does not
    match the record in its `done`; None when all do. Nothing is loaded
    before this passes: ctypes maps a truncated library and dies of SIGBUS."""
    done = entry / "done"
    try:
        if not os.access(entry, os.R_OK | os.X_OK):
            raise PermissionError(f"cannot read the directory {entry}")
        record = json.loads(done.read_text())
        files = record["files"]
        if record["format"] != _RECORD_FORMAT or not all(
                pathlib.PurePath(name).name == name
                and isinstance(f["size"], int) and isinstance(f["sha256"], str)
                for name, f in files.items()):
            raise ValueError
    except FileNotFoundError:
        return done, "missing (the entry's record of its files)"
    except PermissionError as error:
        raise CacheError(
            f"FlexSN cache entry {entry} cannot be read ({error}): it "
            "belongs to another user or its permissions were changed; use a "
            "cache of your own (set $FLEXSN_CACHE_DIR) or fix its "
            "permissions") from None
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return done, ("not a record of the entry's files (damaged, or "
                      "written by another FlexSN version)")
    for name, expected in files.items():
        path = entry / name
        try:
            size = path.stat().st_size
            if size != expected["size"]:
                return path, (f"{size} bytes where {expected['size']} were "
                              "written (truncated or altered)")
            if _sha256(path) != expected["sha256"]:
                return path, "its contents differ from what was written"
        except FileNotFoundError:
            return path, "missing"
        except OSError as error:
            return path, f"unreadable ({error.strerror or error})"
    return None


def _describe(entry: pathlib.Path, path: pathlib.Path, problem: str) -> str:
    return f"damaged FlexSN cache entry {entry}: {path}: {problem}"


def _discard(entry: pathlib.Path) -> None:
    """Moves a damaged entry aside, then deletes it. The rename is atomic:
    of processes discarding it at once, one moves it, the others find it
    gone (and all then build it; the first rename into place wins)."""
    trash = entry.parent / f".trash-{uuid.uuid4().hex}"
    try:
        os.rename(entry, trash)
    except OSError as error:
        if entry.exists():
            raise CacheError(f"cannot move the damaged cache entry {entry} "
                             f"aside ({error}): delete it and compile "
                             "again") from None
        return
    shutil.rmtree(trash, ignore_errors=True)


def _damaged_file_error(entry: pathlib.Path, path: pathlib.Path,
                        problem: str) -> CacheError:
    """The error for a file of `entry` found damaged while being read."""
    return CacheError(f"{_describe(entry, path, problem)}: delete {entry} "
                      "and compile again (where the FlexSN tools are)")


def _read_json(entry: pathlib.Path, name: str) -> dict:
    # Checked against the record already; this names the file all the same
    # should it change since.
    path = entry / name
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError) as error:
        problem = f"unreadable ({error})"
        raise _damaged_file_error(entry, path, problem) from None


def compile_kernels(source, *, targets: Optional[Iterable[str]] = None,
                    chip: Union[str, Sequence[str]] = "sm_90",
                    approximate_surrogates: bool = False
                    ) -> "CompiledKernels":
    """Compiles the kernel functions of a module written by hand (a `.mlir`
    path or MLIR text: `func.func`s carrying a `flexsn.kernel` signature
    around one `flexsn.scan`, and blocks: `func.func`s on tensors marked
    `flexsn.block`, which the pipeline fuses into one scan and compiles to
    `<block>_inference_<dtype>`; see docs/Python.md) to kernels for
    `targets` (as for `compile`). Autodiff first completes every forward kernel that
    has no backward kernel yet: it adds the sequences the forward saves and
    the backward kernel, named with the forward's last `forward` replaced by
    `backward`. A module that does not verify, or that autodiff cannot
    differentiate, raises CompileError with the MLIR diagnostics.
    `approximate_surrogates` is as for `compile`."""
    text, filename = read_source(source)
    chips = (chip,) if isinstance(chip, str) else tuple(chip)
    targets = _targets(targets)
    options = {"kernels": True, "targets": targets,
               "chips": chips if "cuda" in targets else (),
               "cache_format": CACHE_FORMAT}
    _set_surrogate_precision(options, approximate_surrogates)
    return _cached(text, filename, options, _load_kernels)


def _load(entry: pathlib.Path, options: dict) -> CompiledNeuron:
    documents = [_read_json(entry, name)
                 for name in ("neuron.json", "cpu.json", "gpu.json")
                 if (entry / name).is_file()]
    manifest = Manifest.from_json(documents)
    names = list(manifest.neurons)
    if not names:
        raise CompileError("the source defines no flexsn.neuron: nothing "
                           "to compile")
    name = options["neuron"] or (names[0] if len(names) == 1 else None)
    if name is None:
        raise ValueError("the source defines several neurons "
                         f"({', '.join(names)}): pass neuron=")
    return CompiledNeuron(name, entry, manifest, options["variants"],
                          options["storage_types"], options["targets"],
                          tuple(options.get("spike_storage", ("dense",))))


def _load_kernels(entry: pathlib.Path, options: dict) -> "CompiledKernels":
    documents = [_read_json(entry, name)
                 for name in ("cpu.json", "gpu.json")
                 if (entry / name).is_file()]
    return CompiledKernels(entry, Manifest.from_json(documents),
                           options["targets"])


#: A build folder older than this was left by a process that died (a
#: compile takes seconds): the next build in its directory removes it.
_STALE_BUILD_SECONDS = 3600


def _remove_stale_builds(directory: pathlib.Path) -> None:
    now = time.time()
    for work in directory.glob(".build-*"):
        try:
            if now - work.stat().st_mtime > _STALE_BUILD_SECONDS:
                shutil.rmtree(work, ignore_errors=True)
        except OSError:
            pass


def _build(entry: pathlib.Path, text: str, filename: str,
           options: dict) -> None:
    entry.parent.mkdir(parents=True, exist_ok=True)
    _remove_stale_builds(entry.parent)
    work = pathlib.Path(tempfile.mkdtemp(prefix=".build-", dir=entry.parent))
    try:
        _run_tools(work, text, filename, options)
        # Last: an entry is complete when `done` exists.
        (work / "done").write_text(json.dumps(_record(work), indent=1))
        try:
            os.rename(work, entry)
        except OSError:
            # Another process finished the same entry first: keep theirs.
            if not (entry / "done").is_file():
                raise
    finally:
        shutil.rmtree(work, ignore_errors=True)


#: The configured neurons' steps as PyTorch functions, which flexsn-compile
#: writes where every op has a PyTorch form (--flexsn-to-torch): what a
#: neuron runs under torch.compile (flexsn.torch._torch_step).
TORCH_STEP = "torch_step.py"


def _run_tools(work: pathlib.Path, text: str, filename: str,
               options: dict) -> None:
    """Compiles `text` into `work` in one flexsn-compile run: the
    configured source, its manifest (neuron.json) and its steps over
    PyTorch tensors (torch_step.py, where it has them), then per target the
    kernels and their manifest (cpu.json and kernels.so, gpu.json and the
    GPU image)."""
    # The source keeps the user's file name, so diagnostics point at it.
    source = work / pathlib.Path(filename).name
    if not source.name.endswith(".mlir"):
        source = work / "neuron.mlir"
    source.write_text(text)
    argv = _tools.tool_command("flexsn-compile") + [
        source, "-o", work, "--cc=" + _tools.c_compiler()]
    openmp = _tools.bundled_openmp_library()
    if openmp is not None:
        argv.append(f"--openmp-library={openmp}")
    if options.get("kernels"):
        # Kernel functions as written, training pairs completed, and blocks
        # fused into inference kernels.
        pipeline = ["variants=inference,forward,backward"]
    else:
        configure = []
        if options["neuron"]:
            configure.append("neurons=" + options["neuron"])
        for key in ("values", "kinds", "shapes"):
            if options.get(key):
                configure.append(key + "=" + ",".join(
                    f"{k}={v}" for k, v in options[key]))
        if options["surrogate"]:
            configure.append("surrogate=" + options["surrogate"])
        if configure:
            argv.append("--configure=flexsn-set-params{%s}"
                        % " ".join(configure))
        argv.append("--neuron-manifest")
        pipeline = []
        if options["neuron"]:
            pipeline.append("neurons=" + options["neuron"])
        if options.get("spike_storage"):
            pipeline.append("spike-storage=" + ",".join(
                options["spike_storage"]))
        if options.get("save_in_storage_type") is False:
            pipeline.append("save-in-storage-type=false")
        pipeline += ["variants=" + ",".join(options["variants"]),
                     "storage-types=" + ",".join(options["storage_types"])]
    if "cpu" in options["targets"]:
        argv.append("--cpu=" + " ".join(pipeline))
    if "cuda" in options["targets"]:
        gpu = list(pipeline)
        if options.get("approximate_surrogates"):
            gpu.append("approximate-surrogates=true")
        gpu += ["chip=" + ",".join(options["chips"]),
                f"toolkit={cuda_toolkit()}"]
        argv.append("--gpu=" + " ".join(gpu))
        if len(options["chips"]) > 1:
            argv += ["--fatbin", f"--flexsn-toolkit={cuda_toolkit()}"]
    try:
        _tools.run(argv, f"{filename} does not compile")
    except CompileError as error:
        # Report the user's path, not the build directory's copy.
        raise CompileError(f"{filename} does not compile",
                           error.diagnostics.replace(str(source), filename),
                           error.command) from None
    # Only compile_kernels' sources may lack kernels: a neuron has some.
    for manifest, key in (("cpu.json", "cpu_kernels"),
                          ("gpu.json", "kernels")):
        path = work / manifest
        if options.get("kernels") and path.is_file() and \
                not json.loads(path.read_text())[key]:
            raise CompileError(f"{filename} holds no kernel function (a "
                               "func.func carrying flexsn.kernel)", "")

