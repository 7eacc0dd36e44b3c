"""flexsn-compile run for one compile: its typed compile request from the
compile's options (checked against the request schema the compiler
declares), and its outputs written into a cache entry's directory."""

import json
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


def compile_request(key: dict) -> dict:
    """The compile request (flexsn-compile --request) of a compile whose
    cache key is `key`: its request (CompileOptions.request) with this
    machine's CUDA toolkit, checked against the schema the compiler
    declares (`_dialect.COMPILE_REQUEST`) before it is written."""
    request = json.loads(json.dumps(key["request"]))
    cuda = request["targets"].get("cuda")
    if cuda is not None:
        cuda["toolkit"] = str(cuda_toolkit())
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
            options.get("kernel_functions")
            and path.is_file()
            and not json.loads(path.read_text())["targets"][t.name]["kernels"]
        ):
            raise CompileError(
                f"{filename} holds no kernel function (a "
                "func.func carrying flexsn.kernel)",
                "",
            )
