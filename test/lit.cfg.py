# -*- Python -*-
# lit configuration for the FlexSN regression tests.

import ctypes
import os
import platform
import shutil

import lit.formats
import lit.util
from lit.llvm import llvm_config
from lit.llvm.subst import ToolSubst

config.name = "FLEXSN"
config.test_format = lit.formats.ShTest(not llvm_config.use_lit_shell)
config.suffixes = [".mlir", ".test"]
config.excludes = ["CMakeLists.txt", "Inputs", "lit.cfg.py", "lit.site.cfg.py"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.flexsn_obj_root, "test")

config.substitutions.append(("%PATH%", config.environment["PATH"]))
config.substitutions.append(("%flexsn_src_root", config.flexsn_src_root))
config.substitutions.append(("%flexsn_obj_root", config.flexsn_obj_root))
config.substitutions.append(("%llvm_tools_dir", config.llvm_tools_dir))
config.substitutions.append(("%mlir_include", config.mlir_include_dir))
config.substitutions.append(
    ("%neurons", os.path.join(config.flexsn_src_root, "lib", "Neurons"))
)
# GPU compilation needs a CUDA toolkit (ptxas, libdevice), not a GPU.
config.substitutions.append(("%cuda_toolkit", config.cuda_toolkit))
if os.path.exists(os.path.join(config.cuda_toolkit, "bin", "ptxas")):
    config.available_features.add("cuda-toolkit")
if os.path.exists(os.path.join(config.cuda_toolkit, "include", "cuda.h")):
    config.available_features.add("cuda-headers")
# A CUDA driver (libcuda.so.1) loads: programs linking it start. Whether a
# GPU is there is for them to find out.
try:
    ctypes.CDLL("libcuda.so.1")
    config.available_features.add("cuda-driver")
except OSError:
    pass
# Ahead-of-time CPU kernels are linked into shared libraries by cc.
if shutil.which("cc"):
    config.available_features.add("c-compiler")
if shutil.which("cmake") and shutil.which("ninja"):
    config.available_features.add("cmake")
# Debian packages: cpack -G DEB needs dpkg's tools (dpkg-deb, dpkg-shlibdeps).
if shutil.which("dpkg-deb") and shutil.which("dpkg-shlibdeps"):
    config.available_features.add("dpkg")
# Tests of x86-64 code generation (CPU names, registers).
if platform.machine() == "x86_64":
    config.available_features.add("x86_64")
# A sanitizer build's runtime archive is instrumented: programs linking it
# link the sanitizer runtimes too.
sanitized = config.flexsn_sanitizers.upper() in ("ON", "1", "TRUE", "YES")
if sanitized:
    config.available_features.add("sanitizers")
    # Programs linking the instrumented runtime are built by the compiler
    # that instrumented it (clang's sanitizer runtimes in a fuzzing build,
    # GCC's in utils/check_sanitizers.sh's own): `cc` is that compiler.
    cc_dir = os.path.join(config.flexsn_obj_root, "test", "cc-bin")
    os.makedirs(cc_dir, exist_ok=True)
    cc_link = os.path.join(cc_dir, "cc")
    if os.path.realpath(cc_link) != os.path.realpath(config.c_compiler):
        if os.path.lexists(cc_link):
            os.remove(cc_link)
        os.symlink(config.c_compiler, cc_link)
    llvm_config.with_environment("PATH", cc_dir, append_path=True)
# A program linking the sanitizer build's runtime needs the sanitizer
# runtimes first: it is compiled with the same flags.
sanitize_cflags = "-fsanitize=address,undefined" if sanitized else ""
config.substitutions.append(("%sanitize_cflags", sanitize_cflags))
config.substitutions.append(
    ("%flexsn_runtime_lib", config.flexsn_runtime_lib + " " + sanitize_cflags)
)
if os.path.exists(config.flexsn_runtime_lib):
    config.available_features.add("flexsn-runtime")
# mlir-runner's runtime libraries, as -shared-libs takes them, and the
# OpenMP runtime of the CPU kernels' parallel loops.
mlir_lib_dir = os.path.join(os.path.dirname(config.llvm_tools_dir), "lib")
config.substitutions.append(
    (
        "%mlir_runner_libs",
        ",".join(
            [
                os.path.join(mlir_lib_dir, lib)
                for lib in [
                    "libmlir_c_runner_utils.so",
                    "libmlir_runner_utils.so",
                ]
            ]
            + [config.flexsn_openmp_library]
        ),
    )
)
# Linking a program or library with CPU kernels: the OpenMP runtime, found
# at run time where it was at link time.
config.substitutions.append(
    (
        "%openmp_link",
        "%s -Wl,-rpath,%s"
        % (
            config.flexsn_openmp_library,
            os.path.dirname(config.flexsn_openmp_library),
        ),
    )
)

# FileCheck variables must not leak between CHECK-LABEL blocks.
config.environment["FILECHECK_OPTS"] = "--enable-var-scope"

# OMP_NUM_THREADS: the CPU kernels' default thread count.
llvm_config.with_system_environment(
    ["HOME", "INCLUDE", "LIB", "TMP", "TEMP", "OMP_NUM_THREADS"]
)
# Scripts run by tests find the FlexSN tools on PATH.
llvm_config.with_environment("PATH", config.flexsn_tools_dir, append_path=True)
# RUN lines that start with LLVM's `not` (lit substitutes it only after a
# pipe) find it, and the other LLVM tools, on PATH.
llvm_config.with_environment("PATH", config.llvm_tools_dir, append_path=True)
llvm_config.use_default_substitutions()

tool_dirs = [config.flexsn_tools_dir, config.llvm_tools_dir]
tools = [
    "flexsn-compile",
    "flexsn-lsp-server",
    "flexsn-opt",
    "flexsn-tblgen",
    "flexsn-translate",
    # The multi-call binary (tools/flexsn); not plain `flexsn`, which RUN
    # lines hold as a word (`flexsn.cpu_kernels`).
    ToolSubst(
        "%flexsn_multicall", os.path.join(config.flexsn_tools_dir, "flexsn")
    ),
    ToolSubst(
        "%flexsn_unittests",
        os.path.join(
            config.flexsn_obj_root, "test", "Unit", "FlexSNUnitTests"
        ),
    ),
]
llvm_config.add_tool_substitutions(tools, tool_dirs)
