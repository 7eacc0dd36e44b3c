"""An option's path from the module to its kernel and back stays short:
the files whose code names the spike-storage option, and those naming a
surrogate parameter, are the ones docs/Contributing.md lists ("The path of
an option, end to end"). Read from the sources, with comments and
docstrings left out (they may explain an option without handling it);
generated files and the tests are not sources."""

import ast
import pathlib
import re

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
SOURCES = ("python/flexsn", "lib", "include", "tools")
SUFFIXES = {".py", ".cpp", ".h", ".td"}

#: flexsn-run's own `--spike-storage` and its CPU runner: a second front
#: end, not the path of a module's call. SPIKE_STORAGES: the exported list
#: of the enum's cases (like KERNEL_VARIANTS), which handles no option.
OUTSIDE_THE_PATH = (
    "tools/flexsn-run/",
    "lib/Runner/",
    "include/flexsn/Runner/",
)
EXPORT = re.compile(r"\bSPIKE_STORAGES\b")

SPIKE_STORAGE = re.compile(r"spike[-_]?storage|spike_dtype", re.IGNORECASE)
SPIKE_STORAGE_PATH = {
    "python/flexsn/torch/_modules.py",
    "python/flexsn/_options.py",
    "include/flexsn/Pipelines/CompileRequest.td",
    "include/flexsn/Dialect/FlexSN/IR/FlexSNAttrs.td",
    "include/flexsn/Dialect/FlexSN/Transforms/Passes.td",
    "lib/Dialect/FlexSN/Transforms/GenerateKernels.cpp",
}
SURROGATE_PARAM = re.compile(r"\bT_period\b")
SURROGATE_PARAM_PATH = {
    "include/flexsn/Dialect/FlexSN/IR/FlexSNAttrs.td",
    "include/flexsn/Dialect/FlexSN/IR/SurrogateFormulas.h",
}

pytestmark = pytest.mark.skipif(
    not (ROOT / "lib").is_dir(), reason="needs the source tree"
)


def python_code(text: str) -> str:
    """The module's code without comments and docstrings."""
    tree = ast.parse(text)
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if (
            isinstance(body, list)
            and body
            and isinstance(body[0], ast.Expr)
            and isinstance(body[0].value, ast.Constant)
            and isinstance(body[0].value.value, str)
        ):
            body[0] = ast.Pass()
    return ast.unparse(tree)


def cxx_code(text: str) -> str:
    """C++ or TableGen without comments and ODS descriptions."""
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    text = re.sub(r"//[^\n]*", "", text)
    return re.sub(r"let description = \[\{.*?\}\];", "", text, flags=re.S)


def sources():
    """(path relative to the root, its code) of every source file."""
    for folder in SOURCES:
        for path in sorted((ROOT / folder).rglob("*")):
            name = path.relative_to(ROOT).as_posix()
            if path.suffix not in SUFFIXES or name.startswith(
                OUTSIDE_THE_PATH
            ):
                continue
            text = path.read_text()
            if "generated" in text[:400].lower():
                continue
            code = (
                python_code(text) if path.suffix == ".py" else cxx_code(text)
            )
            yield name, "\n".join(
                line for line in code.splitlines() if not EXPORT.search(line)
            )


def files_naming(pattern) -> set:
    return {name for name, code in sources() if pattern.search(code)}


def test_the_spike_storage_option_crosses_six_files():
    found = files_naming(SPIKE_STORAGE)
    assert found == SPIKE_STORAGE_PATH, (
        f"handled in {sorted(found - SPIKE_STORAGE_PATH)} too, or no "
        f"longer in {sorted(SPIKE_STORAGE_PATH - found)}: keep the option "
        f"on its path (docs/Contributing.md)"
    )
    assert len(SPIKE_STORAGE_PATH) <= 6


def test_a_surrogate_parameter_is_declared_once():
    found = files_naming(SURROGATE_PARAM)
    assert found <= SURROGATE_PARAM_PATH, sorted(found)
    assert "include/flexsn/Dialect/FlexSN/IR/FlexSNAttrs.td" in found


def test_contributing_shows_the_path():
    guide = (ROOT / "docs" / "Contributing.md").read_text()
    section = guide[guide.index("### The path of an option") :]
    for name in SPIKE_STORAGE_PATH | SURROGATE_PARAM_PATH:
        assert pathlib.PurePosixPath(name).name in section, name


def test_the_reader_sees_through_comments_and_docstrings():
    """The check would miss nothing that code does: a name in code counts,
    the same name in a comment or docstring does not."""
    code = python_code('"""spike_storage"""\nx = 1  # spike_storage\n')
    assert not SPIKE_STORAGE.search(code)
    assert SPIKE_STORAGE.search(python_code('x = {"spike_storage": 1}\n'))
    assert not SPIKE_STORAGE.search(cxx_code("int a; // spikeStorage\n"))
    assert SPIKE_STORAGE.search(cxx_code("SpikeStorage s;\n"))
