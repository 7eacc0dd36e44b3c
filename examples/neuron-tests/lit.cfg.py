# A lit configuration for testing your own FlexSN neurons, in CI or by hand:
# copy this directory next to your .mlir files and run
#
#   /usr/lib/llvm-22/bin/lit -v <directory>
#
# It finds FlexSN's tools on PATH (the Debian package installs them in
# /usr/bin; FLEXSN_BIN=<dir> names another place) and FileCheck and `not`
# in LLVM 22's bin directory (llvm-22-tools). Tests are the .mlir and .test
# files; lit writes their temporary files under Output/ (or LIT_OUTPUT_DIR).
import os
import shutil
import subprocess
import sys

import lit.formats

config.name = "neurons"
config.test_format = lit.formats.ShTest(execute_external=True)
config.suffixes = [".mlir", ".test"]
config.excludes = ["lit.cfg.py", "adaptive_lif_reference.py", "Output"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.environ.get(
    "LIT_OUTPUT_DIR", os.path.join(config.test_source_root, "Output")
)

path = [
    os.environ.get("FLEXSN_BIN", ""),
    "/usr/lib/llvm-22/bin",
    os.environ.get("PATH", ""),
]
config.environment["PATH"] = os.pathsep.join(p for p in path if p)
for tool in ("flexsn-opt", "flexsn-translate", "flexsn-run", "FileCheck"):
    if not shutil.which(tool, path=config.environment["PATH"]):
        lit_config.fatal(
            f"{tool} not found: install FlexSN and "
            "llvm-22-tools, or set FLEXSN_BIN"
        )

# %python: this interpreter; the `numpy` feature where it has numpy.
config.substitutions.append(("%python", sys.executable))
if (
    subprocess.call(
        [sys.executable, "-c", "import numpy"], stderr=subprocess.DEVNULL
    )
    == 0
):
    config.available_features.add("numpy")
# %cuda_toolkit and the `cuda-toolkit` feature: GPU kernels compile where
# ptxas is (CUDA_HOME, default /usr/local/cuda); no GPU is needed.
cuda = os.environ.get("CUDA_HOME", "/usr/local/cuda")
config.substitutions.append(("%cuda_toolkit", cuda))
if os.path.exists(os.path.join(cuda, "bin", "ptxas")):
    config.available_features.add("cuda-toolkit")
