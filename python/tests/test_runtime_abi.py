"""The ctypes mirrors of the runtime's C structs (flexsn._runtime) against
the C header itself: a C compiler lays the structs out, and each mirror
field must sit at the C field's offset with its size, the structs the same
size; the MLIR memref descriptors the CPU kernels take against MLIR's own
C++ StridedMemRefType. A field renamed, added, removed or retyped on one
side fails here, not as a launch reading the wrong bytes."""

import ctypes
import pathlib
import shutil
import subprocess

import pytest

from flexsn import _runtime

REPO = pathlib.Path(__file__).resolve().parents[2]
HEADER_DIR = REPO / "include"
MLIR_INCLUDE = pathlib.Path("/usr/lib/llvm-22/include")

#: The ctypes mirror of each C struct of flexsn_runtime.h, by C name.
MIRRORS = {
    "flexsn_image": _runtime._Image,
    "flexsn_kernel_desc": _runtime._KernelDesc,
}


def compiler(*names):
    for name in names:
        path = shutil.which(name)
        if path:
            return path
    pytest.skip(f"no compiler among {', '.join(names)}")


def layouts(tmp_path, source: str, suffix: str, command) -> dict:
    """{(struct, field or "sizeof"): (offset, size)} printed by `source`,
    compiled and run."""
    src = tmp_path / f"layout{suffix}"
    exe = tmp_path / "layout"
    src.write_text(source)
    build = subprocess.run(
        command + [str(src), "-o", str(exe)], capture_output=True, text=True
    )
    assert build.returncode == 0, build.stderr
    out = subprocess.run(
        [str(exe)], capture_output=True, text=True, check=True
    ).stdout
    found = {}
    for line in out.splitlines():
        struct, field, offset, size = line.split()
        found[struct, field] = (int(offset), int(size))
    return found


def mirror_layout(mirror) -> dict:
    return {
        name: (getattr(mirror, name).offset, getattr(mirror, name).size)
        for name, _ in mirror._fields_
    }


def test_runtime_structs_match_the_header(tmp_path):
    lines = []
    for struct, mirror in MIRRORS.items():
        for name, _ in mirror._fields_:
            lines.append(
                f'  printf("{struct} {name} %zu %zu\\n", '
                f"offsetof({struct}, {name}), "
                f"sizeof((({struct} *)0)->{name}));"
            )
        lines.append(
            f'  printf("{struct} sizeof 0 %zu\\n", ' f"sizeof({struct}));"
        )
    lines.append(
        '  printf("flexsn_buffer_kind sizeof 0 %zu\\n", '
        "sizeof(flexsn_buffer_kind));"
    )
    source = (
        "#include <stddef.h>\n#include <stdio.h>\n"
        '#include "flexsn/Runtime/flexsn_runtime.h"\n'
        "int main(void) {\n" + "\n".join(lines) + "\n  return 0;\n}\n"
    )
    found = layouts(
        tmp_path,
        source,
        ".c",
        [compiler("cc", "gcc", "clang"), "-std=c11", f"-I{HEADER_DIR}"],
    )
    for struct, mirror in MIRRORS.items():
        for name, where in mirror_layout(mirror).items():
            assert found[struct, name] == where, (
                f"{struct}.{name}: C has offset/size "
                f"{found[struct, name]}, the ctypes mirror {where}"
            )
        assert found[struct, "sizeof"][1] == ctypes.sizeof(mirror), (
            f"{struct}: {found[struct, 'sizeof'][1]} bytes in C, "
            f"{ctypes.sizeof(mirror)} in its ctypes mirror (a field only "
            f"one side has)"
        )
    # `kinds` is mirrored as int *: the enum must be an int.
    assert found["flexsn_buffer_kind", "sizeof"][1] == ctypes.sizeof(
        ctypes.c_int
    )


def test_memref_descriptors_match_mlir(tmp_path):
    header = MLIR_INCLUDE / "mlir" / "ExecutionEngine" / "CRunnerUtils.h"
    if not header.is_file():
        pytest.skip(f"{header} not installed")
    # MLIR's fields in order, matched by position (their names differ).
    fields = ["basePtr", "data", "offset", "sizes", "strides"]
    usings, body = [], []
    for rank in (0, 1, 2, 4):
        usings.append(f"using M{rank} = StridedMemRefType<float, {rank}>;")
        for name in fields[:3] + (fields[3:] if rank else []):
            body.append(
                f'  std::printf("r{rank} {name} %zu %zu\\n", '
                f"offsetof(M{rank}, {name}), sizeof(M{rank}::{name}));"
            )
        body.append(
            f'  std::printf("r{rank} sizeof 0 %zu\\n", ' f"sizeof(M{rank}));"
        )
    source = (
        "#include <cstddef>\n#include <cstdio>\n"
        '#include "mlir/ExecutionEngine/CRunnerUtils.h"\n'
        + "\n".join(usings)
        + "\nint main() {\n"
        + "\n".join(body)
        + "\n  return 0;\n}\n"
    )
    found = layouts(
        tmp_path,
        source,
        ".cpp",
        [compiler("c++", "g++", "clang++"), "-std=c++17", f"-I{MLIR_INCLUDE}"],
    )
    for rank in (0, 1, 2, 4):
        mirror = _runtime._Descriptor.of_rank(rank)
        names = fields[:3] + (fields[3:] if rank else [])
        assert len(mirror._fields_) == len(names)
        for c_name, where in zip(names, mirror_layout(mirror).values()):
            assert found[f"r{rank}", c_name] == where, (rank, c_name)
        assert found[f"r{rank}", "sizeof"][1] == ctypes.sizeof(mirror)


def test_a_changed_mirror_is_caught(tmp_path, monkeypatch):
    """The check itself: a mirror with a field's type changed (int where
    C has a pointer) no longer matches."""

    class Wrong(ctypes.Structure):
        _fields_ = [
            (n, ctypes.c_int if n == "kinds" else t)
            for n, t in _runtime._KernelDesc._fields_
        ]

    monkeypatch.setitem(MIRRORS, "flexsn_kernel_desc", Wrong)
    with pytest.raises(AssertionError, match="kinds|sizeof|bytes"):
        test_runtime_structs_match_the_header(tmp_path)
