"""flexsn-compile run for one compile: its command line from the compile's
options, and its outputs written into a cache entry's directory."""

import json
import os
import pathlib

from . import _tools
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


def run_tools(
    work: pathlib.Path, text: str, filename: str, options: dict
) -> None:
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
        source,
        "-o",
        work,
        "--cc=" + _tools.c_compiler(),
    ]
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
                configure.append(
                    key + "=" + ",".join(f"{k}={v}" for k, v in options[key])
                )
        if options["surrogate"]:
            configure.append("surrogate=" + options["surrogate"])
        if configure:
            argv.append(
                "--configure=flexsn-set-params{%s}" % " ".join(configure)
            )
        argv.append("--neuron-manifest")
        pipeline = []
        if options["neuron"]:
            pipeline.append("neurons=" + options["neuron"])
        if options.get("spike_storage"):
            pipeline.append(
                "spike-storage=" + ",".join(options["spike_storage"])
            )
        if options.get("save_in_storage_type") is False:
            pipeline.append("save-in-storage-type=false")
        pipeline += [
            "variants=" + ",".join(options["variants"]),
            "storage-types=" + ",".join(options["storage_types"]),
        ]
    if "cpu" in options["targets"]:
        argv.append("--cpu=" + " ".join(pipeline))
    if "cuda" in options["targets"]:
        gpu = list(pipeline)
        if options.get("approximate_surrogates"):
            gpu.append("approximate-surrogates=true")
        gpu += [
            "chip=" + ",".join(options["chips"]),
            f"toolkit={cuda_toolkit()}",
        ]
        argv.append("--gpu=" + " ".join(gpu))
        if len(options["chips"]) > 1:
            argv += ["--fatbin", f"--flexsn-toolkit={cuda_toolkit()}"]
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
    for manifest, key in (
        ("cpu.json", "cpu_kernels"),
        ("gpu.json", "kernels"),
    ):
        path = work / manifest
        if (
            options.get("kernels")
            and path.is_file()
            and not json.loads(path.read_text())[key]
        ):
            raise CompileError(
                f"{filename} holds no kernel function (a "
                "func.func carrying flexsn.kernel)",
                "",
            )
