"""flexsn-compile run for one compile: its typed compile request from the
compile's options (checked against the request schema the compiler
declares), and its outputs written into a cache entry's directory."""

import json
import math
import os
import pathlib

from . import _dialect, _targets, _tools
from ._tools import CompileError


def cuda_toolkit() -> pathlib.Path:
    return pathlib.Path(
        os.environ.get("FLEXSN_CUDA_TOOLKIT")
        or os.environ.get("CUDA_HOME")
        or "/usr/local/cuda"
    )


#: The configured neurons' steps as PyTorch functions, which flexsn-compile
#: writes where every op has a PyTorch form (--flexsn-to-torch): what a
#: neuron runs under torch.compile (flexsn.torch._torch_step).
TORCH_STEP = "torch_step.py"


def _typed_value(text: str):
    """A parameter value of the cache key (as compiler._format_value
    wrote it) as the request's JSON value: a bool, an int or a float."""
    if text in ("true", "false"):
        return text == "true"
    try:
        return int(text)
    except ValueError:
        value = float(text)
    if not math.isfinite(value):
        # JSON has no spelling for it; no parameter takes one either.
        raise ValueError(f"a parameter value must be finite, got {text}")
    return value


def compile_request(options: dict) -> dict:
    """The compile request (flexsn-compile --request) of a compile whose
    cache key is `options`: typed fields, checked against the schema the
    compiler declares (`_dialect.COMPILE_REQUEST`) before it is written."""
    version = _dialect.COMPILE_REQUEST["version"]
    request = {"version": version}
    if options.get("kernels"):
        # Kernel functions as written, training pairs completed, and blocks
        # fused into inference kernels.
        request["kernels"] = {"variants": ["inference", "forward", "backward"]}
    else:
        neurons = [options["neuron"]] if options["neuron"] else []
        configure = {
            "neurons": neurons,
            "values": {k: _typed_value(v) for k, v in options["values"]},
            "kinds": dict(options["kinds"]),
            "shapes": dict(options.get("shapes", ())),
            "surrogate": options["surrogate"],
        }
        configure = {k: v for k, v in configure.items() if v}
        if configure:
            request["configure"] = configure
        request["neuron_manifest"] = True
        kernels = {
            "variants": list(options["variants"]),
            "storage_types": list(options["storage_types"]),
            "save_in_storage_type": options.get("save_in_storage_type", True),
        }
        if neurons:
            kernels["neurons"] = neurons
        if options.get("coupled"):
            kernels["coupled"] = True
        if options.get("spike_storage"):
            kernels["spike_storage"] = list(options["spike_storage"])
        request["kernels"] = kernels
    targets = {}
    if "cpu" in options["targets"]:
        targets["cpu"] = {}
    if "cuda" in options["targets"]:
        targets["cuda"] = {
            "chips": list(options["chips"]),
            "fatbin": len(options["chips"]) > 1,
            "toolkit": str(cuda_toolkit()),
            "approximate_surrogates": bool(
                options.get("approximate_surrogates")
            ),
        }
    request["targets"] = targets
    check_request(request)
    return request


def check_request(request: dict) -> None:
    """Raises ValueError where `request` does not follow the compiler's
    request schema: an unknown field, a value of the wrong type or not
    among a field's values."""
    objects = _dialect.COMPILE_REQUEST["objects"]

    def check(obj: dict, path: str) -> None:
        fields = objects[path]
        for name, value in obj.items():
            where = ".".join(p for p in ("request", path, name) if p)
            field = fields.get(name)
            if field is None:
                raise ValueError(
                    f"{where}: no such field (the fields: "
                    f"{', '.join(fields)})"
                )
            kind = field["type"]
            if kind == "object":
                if not isinstance(value, dict):
                    raise ValueError(f"{where}: expected an object")
                check(value, f"{path}.{name}" if path else name)
                continue
            _check_field(where, kind, field.get("values"), value)

    check(request, "")


def _check_field(where: str, kind: str, allowed, value) -> None:
    def text(item, at):
        if not isinstance(item, str):
            raise ValueError(f"{at}: expected a string, got {item!r}")
        if allowed is not None and item not in allowed:
            raise ValueError(
                f"{at}: '{item}' is not one of {', '.join(allowed)}"
            )

    if kind in ("bool",) and not isinstance(value, bool):
        raise ValueError(f"{where}: expected true or false, got {value!r}")
    if kind in ("count", "version") and (
        isinstance(value, bool) or not isinstance(value, int) or value < 0
    ):
        raise ValueError(f"{where}: expected a count, got {value!r}")
    if kind == "text":
        text(value, where)
    if kind in ("texts", "enums"):
        if not isinstance(value, (list, tuple)):
            raise ValueError(f"{where}: expected a list, got {value!r}")
        for i, item in enumerate(value):
            text(item, f"{where}[{i}]")
    if kind in ("values", "enum_map"):
        if not isinstance(value, dict):
            raise ValueError(f"{where}: expected an object, got {value!r}")
        for name, item in value.items():
            if kind == "enum_map":
                text(item, f"{where}.{name}")
            elif not isinstance(item, (bool, int, float)):
                raise ValueError(
                    f"{where}.{name}: expected a number or a bool, got "
                    f"{item!r}"
                )


def run_tools(
    work: pathlib.Path, text: str, filename: str, options: dict
) -> None:
    """Compiles `text` into `work` in one flexsn-compile run, from the
    compile request of `options` (written as request.json): the configured
    source, its manifest (neuron.json) and its steps over PyTorch tensors
    (torch_step.py, where it has them), then per target the kernels and
    their manifest (cpu.json and kernels.so, gpu.json and the GPU
    image)."""
    # The source keeps the user's file name, so diagnostics point at it.
    source = work / pathlib.Path(filename).name
    if not source.name.endswith(".mlir"):
        source = work / "neuron.mlir"
    source.write_text(text)
    request = work / "request.json"
    request.write_text(json.dumps(compile_request(options), indent=1))
    argv = _tools.tool_command("flexsn-compile") + [
        source,
        "-o",
        work,
        f"--request={request}",
        "--cc=" + _tools.c_compiler(),
    ]
    openmp = _tools.bundled_openmp_library()
    if openmp is not None:
        argv.append(f"--openmp-library={openmp}")
    try:
        _tools.run(argv, f"{filename} does not compile")
    except CompileError as error:
        # Report the user's path, not the build directory's copy.
        raise CompileError(
            f"{filename} does not compile",
            error.diagnostics.replace(str(source), filename),
            error.command,
        ) from None
    # Only compile_kernels' sources may lack kernels: a neuron has some.
    for t in _targets.targets():
        path = work / t.manifest
        if (
            options.get("kernels")
            and path.is_file()
            and not json.loads(path.read_text())["targets"][t.name]["kernels"]
        ):
            raise CompileError(
                f"{filename} holds no kernel function (a "
                "func.func carrying flexsn.kernel)",
                "",
            )
