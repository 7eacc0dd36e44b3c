"""Finding and running the FlexSN tools (flexsn-compile, flexsn-opt,
flexsn-translate).

Search order for the tools: $FLEXSN_TOOLS_DIR, the tools bundled in the
package by the wheel (`flexsn/_bundled/bin`, utils/build_wheel.sh), the
build tree next to this package (`build/bin`), an install prefix
(`<prefix>/bin` when the package is installed under
`<prefix>/lib/python3/...`), then PATH. In each directory a tool is its own
executable or, failing that, the multi-call `flexsn` (`flexsn <tool>`,
the one binary the wheel bundles: tools/flexsn). The neuron library and the
runtime are found the same way ($FLEXSN_NEURONS_DIR, `lib/Neurons`,
`<prefix>/share/flexsn/neurons`; $FLEXSN_RUNTIME_LIB, `<prefix>/lib`).
"""

import functools
import hashlib
import os
import pathlib
import re
import shutil
import subprocess
import sys
from typing import List, Optional, Sequence

#: The tools the Python layer runs: one flexsn-compile run per compile.
_TOOLS = ("flexsn-compile",)
#: The multi-call binary: `flexsn <tool>` runs flexsn-<tool>, and so does a
#: link to it named flexsn-<tool>.
MULTICALL = "flexsn"

PACKAGE_DIR = pathlib.Path(__file__).resolve().parent
SOURCE_ROOT = PACKAGE_DIR.parent.parent  # python/flexsn -> the repository
#: The wheel's own prefix: bin/ (the tools, linked statically), lib/ (the
#: runtime, LLVM's OpenMP runtime), share/flexsn/neurons.
BUNDLED = PACKAGE_DIR / "_bundled"


class CompileError(RuntimeError):
    """A tool rejected a neuron or failed. `diagnostics` holds the MLIR
    diagnostics (`file:line:col: error: ...`), `command` the tool's argv."""

    def __init__(
        self, message: str, diagnostics: str = "", command: Sequence[str] = ()
    ):
        text = message + (":\n" + diagnostics.rstrip() if diagnostics else "")
        super().__init__(text)
        self.diagnostics = diagnostics
        self.command = list(command)

    @property
    def locations(self) -> List[tuple]:
        """(file, line, column) of every error diagnostic."""
        return [
            (m.group(1), int(m.group(2)), int(m.group(3)))
            for m in re.finditer(
                r"^(.*?):(\d+):(\d+): error:", self.diagnostics, re.M
            )
        ]


class ToolNotFoundError(CompileError):
    pass


def _prefix_candidates(*parts: str) -> List[pathlib.Path]:
    candidates = [BUNDLED / pathlib.Path(*parts)]
    build = os.environ.get("FLEXSN_BUILD_DIR", "build")
    candidates.append(SOURCE_ROOT / build / pathlib.Path(*parts))
    # Installed: <prefix>/lib/python3*/site-packages/flexsn -> <prefix>.
    for parent in PACKAGE_DIR.parents:
        if parent.name == "lib":
            candidates.append(parent.parent / pathlib.Path(*parts))
            break
    return candidates


def _executable(path: pathlib.Path) -> bool:
    return path.is_file() and os.access(path, os.X_OK)


def _command_in(directory: pathlib.Path, name: str) -> Optional[List[str]]:
    """How `directory` runs tool `name`: its own executable, else the
    multi-call binary's `flexsn <tool>`; None if it holds neither."""
    if _executable(directory / name):
        return [str(directory / name)]
    if _executable(directory / MULTICALL):
        return [str(directory / MULTICALL), name[len("flexsn-") :]]
    return None


def tool_command(name: str) -> List[str]:
    """The argv prefix that runs tool `name` (flexsn-compile, flexsn-opt,
    flexsn-translate), found in the order the module says."""
    override = os.environ.get("FLEXSN_TOOLS_DIR")
    if override:
        command = _command_in(pathlib.Path(override), name)
        if command:
            return command
        raise ToolNotFoundError(
            f"{name} not found in $FLEXSN_TOOLS_DIR ({override})"
        )
    for directory in _prefix_candidates("bin"):
        command = _command_in(directory, name)
        if command:
            return command
    found = shutil.which(name)
    if found:
        return [found]
    raise ToolNotFoundError(
        f"{name} not found: build FlexSN (bash utils/setup.sh build), or set "
        f"$FLEXSN_TOOLS_DIR to the directory holding it"
    )


def find_tool(name: str) -> pathlib.Path:
    """The executable file behind tool `name`: its own, or the multi-call
    binary that runs it (tool_command says how to call it)."""
    return pathlib.Path(tool_command(name)[0])


def console_main() -> None:
    """The wheel's console scripts (flexsn, flexsn-compile, flexsn-opt,
    flexsn-translate): the bundled multi-call binary, run under the
    script's name so that it runs that tool."""
    binary = BUNDLED / "bin" / MULTICALL
    if not _executable(binary):
        sys.exit(f"{binary} is missing: reinstall the flexsn wheel")
    name = pathlib.Path(sys.argv[0]).name
    os.execv(binary, [name] + sys.argv[1:])


def tools_available() -> bool:
    try:
        for name in _TOOLS:
            find_tool(name)
        return True
    except ToolNotFoundError:
        return False


def neurons_dir() -> pathlib.Path:
    override = os.environ.get("FLEXSN_NEURONS_DIR")
    if override:
        return pathlib.Path(override)
    in_tree = SOURCE_ROOT / "lib" / "Neurons"
    if in_tree.is_dir():
        return in_tree
    for path in _prefix_candidates("share", "flexsn", "neurons"):
        if path.is_dir():
            return path
    return in_tree


def find_runtime_library() -> Optional[pathlib.Path]:
    """libflexsn_runtime.so: $FLEXSN_RUNTIME_LIB, the build tree, a prefix."""
    override = os.environ.get("FLEXSN_RUNTIME_LIB")
    if override:
        return pathlib.Path(override)
    # Per prefix (the wheel's first): a build tree's lib/Runtime, then lib.
    for pair in zip(
        _prefix_candidates("lib", "Runtime", "libflexsn_runtime.so"),
        _prefix_candidates("lib", "libflexsn_runtime.so"),
    ):
        for path in pair:
            if path.is_file():
                return path
    return None


def _hash_files(files: Sequence[pathlib.Path]) -> str:
    digest = hashlib.sha256()
    for f in files:
        digest.update(f.read_bytes())
    return digest.hexdigest()


def _files_digest(
    files: Sequence[pathlib.Path], memo_dir: Optional[pathlib.Path]
) -> str:
    """_hash_files(files), read back from `memo_dir` while the files' path,
    size, inode and modification time are as they were when it was written
    (a rebuilt or reinstalled tool changes them): a statically linked tool
    is 180 MB, a third of a second to hash in every process."""
    if memo_dir is None:
        return _hash_files(files)
    stamps = [
        (str(f), s.st_size, s.st_ino, s.st_mtime_ns)
        for f, s in ((f, f.stat()) for f in files)
    ]
    memo = memo_dir / (
        "tools-" + hashlib.sha256(repr(stamps).encode()).hexdigest()[:24]
    )
    try:
        known = memo.read_text()
        if re.fullmatch(r"[0-9a-f]{64}", known):
            return known
    except OSError:
        pass
    digest = _hash_files(files)
    try:
        memo_dir.mkdir(parents=True, exist_ok=True)
        # Written whole, then renamed: a reader sees all of it or none.
        partial = memo.with_name(f"{memo.name}.{os.getpid()}")
        partial.write_text(digest)
        os.replace(partial, memo)
    except OSError:
        pass  # a read-only cache: hash again next time
    return digest


@functools.lru_cache(maxsize=None)
def toolchain_id(memo_dir: Optional[pathlib.Path] = None) -> str:
    """Identifies the tools: a compile with other tools is another cache
    entry. It hashes their bytes (memoized in `memo_dir`, _files_digest)
    and their --version, run in every process: it names the LLVM they were
    built with and the CPU this machine compiles CPU kernels for, which
    differs between machines that share one cache."""
    files = [find_tool(name).resolve() for name in _TOOLS]
    digest = hashlib.sha256(_files_digest(files, memo_dir).encode())
    digest.update(run(tool_command("flexsn-compile") + ["--version"]).encode())
    return digest.hexdigest()[:16]


def run(argv: Sequence, what: str = "", cwd=None) -> str:
    """Runs a tool; a failure raises CompileError with its diagnostics."""
    argv = [str(a) for a in argv]
    result = subprocess.run(
        argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=cwd
    )
    if result.returncode != 0:
        diagnostics = result.stderr.decode(errors="replace")
        raise CompileError(
            what
            or f"{pathlib.Path(argv[0]).name} failed "
            f"(exit {result.returncode})",
            diagnostics,
            argv,
        )
    return result.stdout.decode(errors="replace")


def bundled_openmp_library() -> Optional[pathlib.Path]:
    """The OpenMP runtime the wheel ships for CPU kernels, which the
    bundled flexsn-compile links them with (the path it was built with
    names the build machine's LLVM); None outside a wheel."""
    path = BUNDLED / "lib" / "libomp.so.5"
    return path if path.is_file() else None


def c_compiler() -> str:
    """The driver that links CPU kernels into a shared library: $CC, cc."""
    compiler = (
        os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
    )
    if not compiler:
        raise ToolNotFoundError(
            "no C compiler driver (cc) to link the CPU kernels: install gcc, "
            "or set $CC"
        )
    return compiler
