"""The compile cache checks an entry's files before using them: a damaged
entry is rebuilt where the tools are, and names the bad file where not."""

import json
import multiprocessing.pool
import os
import pathlib
import re
import shutil
import subprocess
import sys
import tempfile
import time
import warnings

import numpy as np
import pytest

import flexsn
from flexsn import _cache, _tools, compiler

OPTIONS = dict(variants=("inference",))
HAS_PTXAS = (compiler.cuda_toolkit() / "bin" / "ptxas").is_file()
_pristine = {}


@pytest.fixture(scope="module")
def pristine(tmp_path_factory):
    """pristine(targets): a cache holding "if" compiled for `targets`,
    built once per module."""

    def make(targets):
        if targets not in _pristine:
            root = tmp_path_factory.mktemp("pristine") / "cache"
            with pytest.MonkeyPatch.context() as mp:
                mp.setenv("FLEXSN_CACHE_DIR", str(root))
                _cache.memo.clear()
                compiled = flexsn.compile("if", targets=targets, **OPTIONS)
                _cache.memo.clear()
            _pristine[targets] = (root, compiled.directory.relative_to(root))
        return _pristine[targets]

    return make


@pytest.fixture
def damaged(pristine, tmp_path, monkeypatch):
    """damaged(file, how, targets) -> (entry, file path): a private copy
    of the pristine cache with one file of its entry damaged."""

    def make(name, how, targets=("cpu",)):
        root, relative = pristine(targets)
        cache = tmp_path / "cache"
        shutil.copytree(root, cache)
        monkeypatch.setenv("FLEXSN_CACHE_DIR", str(cache))
        _cache.memo.clear()
        entry = cache / relative
        path = entry / name
        corrupt(path, how)
        return entry, path

    yield make
    _cache.memo.clear()


def corrupt(path: pathlib.Path, how: str) -> None:
    data = path.read_bytes()
    if how == "truncate":
        path.write_bytes(data[: len(data) // 2])
    elif how == "empty":
        path.write_bytes(b"")
    elif how == "delete":
        path.unlink()
    elif how == "flip":  # same size, other contents
        path.write_bytes(bytes([data[0] ^ 0xFF]) + data[1:])
    elif how != "keep":
        raise ValueError(how)


def if_reference(x):
    """IFNode, hard reset to 0 at threshold 1 (docs/Semantics.md)."""
    v = np.zeros(x.shape[1], np.float32)
    spikes = np.empty_like(x)
    for t in range(x.shape[0]):
        h = v + x[t]
        spikes[t] = (h >= 1.0).astype(np.float32)
        v = h * (1.0 - spikes[t])
    return spikes


def run_if(compiled):
    """The spikes of the CPU inference kernel on fixed inputs, checked
    against the reference."""
    T, N = 8, 64
    x = np.random.default_rng(0).uniform(0.0, 0.6, (T, N)).astype(np.float32)
    kernel = compiled.kernel("cpu", "inference", "f32")
    arrays = []
    for b in kernel.spec.buffers:
        shape = {("T", "N"): (T, N), ("N",): (N,)}[b.shape]
        arrays.append(
            x
            if b.role == "input_sequence"
            else np.zeros(shape, np.float32)
            if b.role == "initial_state"
            else np.full(shape, np.nan, np.float32)
        )
    kernel.launch(T, N, [a.ctypes.data for a in arrays], 0)
    (spikes,) = [
        a
        for a, b in zip(arrays, kernel.spec.buffers)
        if b.role == "output_sequence"
    ]
    np.testing.assert_array_equal(spikes, if_reference(x))
    assert spikes.any() and not spikes.all()


CPU_DAMAGE = [
    ("kernels.so", "empty"),
    ("kernels.so", "delete"),
    ("kernels.so", "flip"),
    ("cpu.json", "truncate"),
    ("neuron.json", "truncate"),
    ("neuron.json", "delete"),
    ("done", "empty"),
    ("done", "delete"),
]
# Truncating kernels.so is the subprocess tests' (loaded, it is SIGBUS).
GPU_DAMAGE = [("gpu.json", "truncate"), ("kernels.cubin", "truncate")]
CASES = [
    pytest.param(n, h, ("cpu",), id=f"{n}-{h}") for n, h in CPU_DAMAGE
] + [
    pytest.param(
        n,
        h,
        ("cpu", "cuda"),
        id=f"{n}-{h}",
        marks=pytest.mark.skipif(not HAS_PTXAS, reason="no CUDA toolkit"),
    )
    for n, h in GPU_DAMAGE
]


@pytest.mark.parametrize("name,how,targets", CASES)
def test_damaged_entry_is_rebuilt(damaged, name, how, targets):
    entry, path = damaged(name, how, targets)
    with pytest.warns(RuntimeWarning, match=re.escape(str(path))) as said:
        compiled = flexsn.compile("if", targets=targets, **OPTIONS)
    assert said[0].filename == __file__  # the caller's line, not ours
    assert compiled.directory == entry
    assert _cache.damage(entry) is None
    assert json.loads((entry / "done").read_text())["files"]["kernels.so"]
    assert not [p for p in entry.parent.iterdir() if p.name.startswith(".")]
    run_if(compiled)
    if "cuda" in targets:
        assert compiled.manifest.gpu_kernels
        assert compiled.gpu_image.stat().st_size > 0
    # Intact now: the next process uses it as it is.
    _cache.memo.clear()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        flexsn.compile("if", targets=targets, **OPTIONS)


@pytest.mark.parametrize("name,how,targets", CASES)
def test_without_tools_a_damaged_entry_names_the_file(
    damaged, monkeypatch, name, how, targets
):
    entry, path = damaged(name, how, targets)
    monkeypatch.setattr(_tools, "tools_available", lambda: False)
    with pytest.raises(flexsn.CompileError) as error:
        flexsn.compile("if", targets=targets, **OPTIONS)
    message = str(error.value)
    assert type(error.value).__name__ == "CacheError", message
    assert str(path) in message, message
    assert f"delete {entry}" in message and "where the tools are" in message
    assert path.exists() == (how != "delete")  # nothing deleted without tools


def test_without_tools_an_older_intact_entry_serves(damaged, monkeypatch):
    """An entry of other tools, older but intact, beats a damaged one."""
    entry, path = damaged("cpu.json", "truncate")
    root, relative = _pristine[("cpu",)]
    older = entry.parent / "0000000000000000"
    shutil.copytree(root / relative, older)
    os.utime(older / "done", (1, 1))
    monkeypatch.setattr(_tools, "tools_available", lambda: False)
    with pytest.warns(RuntimeWarning, match=re.escape(str(path))) as said:
        compiled = flexsn.compile("if", targets=("cpu",), **OPTIONS)
    assert said[0].filename == __file__
    assert compiled.directory == older
    run_if(compiled)


def test_a_file_removed_after_the_check_is_named(damaged):
    entry, _ = damaged("kernels.so", "keep")
    compiled = flexsn.compile("if", targets=("cpu",), **OPTIONS)
    (entry / "kernels.so").unlink()
    with pytest.raises(
        flexsn.CompileError, match=re.escape(str(entry / "kernels.so"))
    ) as error:
        compiled.kernel("cpu", "inference", "f32")
    assert isinstance(error.value, compiler.CacheError)
    assert f"delete {entry}" in str(error.value)


RUN_IN_SUBPROCESS = """
import sys
sys.path.insert(0, {tests!r})
import flexsn, test_cache_integrity as t
t.run_if(flexsn.compile("if", targets=("cpu",), **t.OPTIONS))
print("ran")
"""


def _run_in_subprocess(env):
    here = pathlib.Path(__file__).resolve().parent
    code = RUN_IN_SUBPROCESS.format(tests=str(here))
    return subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env=dict(os.environ, PYTHONPATH=str(here.parent), **env),
    )


@pytest.mark.parametrize("processes", [1, 3])
def test_truncated_library_is_rebuilt_not_loaded(damaged, processes):
    """ctypes would map the truncated library and the process die of SIGBUS;
    processes that find it at once each rebuild it, or use one that did."""
    entry, path = damaged("kernels.so", "truncate")
    env = {"FLEXSN_CACHE_DIR": os.environ["FLEXSN_CACHE_DIR"]}
    with multiprocessing.pool.ThreadPool(processes) as pool:
        results = pool.map(_run_in_subprocess, [env] * processes)
    for r in results:
        assert r.returncode == 0, (r.returncode, r.stderr)
        assert r.stdout.strip() == "ran"
    assert str(path) in "".join(r.stderr for r in results)
    assert _cache.damage(entry) is None
    assert not [p for p in entry.parent.iterdir() if p.name.startswith(".")]


def test_truncated_library_without_tools_is_an_error(damaged, tmp_path):
    entry, path = damaged("kernels.so", "truncate")
    r = _run_in_subprocess(
        {
            "FLEXSN_CACHE_DIR": os.environ["FLEXSN_CACHE_DIR"],
            "FLEXSN_TOOLS_DIR": str(tmp_path / "no-tools"),
        }
    )
    assert r.returncode == 1, (r.returncode, r.stderr)
    assert "CacheError" in r.stderr and str(path) in r.stderr, r.stderr
    assert "bytes where" in r.stderr and f"delete {entry}" in r.stderr


def test_cache_dir_that_is_a_file_is_a_clear_error(tmp_path, monkeypatch):
    path = tmp_path / "not-a-directory"
    path.write_text("")
    monkeypatch.setenv("FLEXSN_CACHE_DIR", str(path))
    _cache.memo.clear()
    with pytest.raises(
        compiler.CacheError, match="FLEXSN_CACHE_DIR=.* is not a directory"
    ):
        flexsn.compile("if", targets=("cpu",), **OPTIONS)


def test_entry_of_another_user_is_named_not_called_damaged(pristine, tmp_path):
    """An entry this user cannot read (built by another user into a shared
    cache: entries are private to their builder) is a clear error, not a
    'damaged' entry that cannot then be moved aside."""
    root, relative = pristine(("cpu",))
    # Under /tmp itself: pytest's own folders are private to this user.
    shared = pathlib.Path(tempfile.mkdtemp(prefix="flexsn-shared-"))
    cache = shared / "cache"
    shutil.copytree(root, cache)
    (cache / relative).chmod(0o700)
    code = (
        "import flexsn, sys\n"
        "try:\n"
        "    flexsn.compile('if', targets=('cpu',), "
        "variants=('inference',))\n"
        "except flexsn.compiler.CacheError as error:\n"
        "    print(error); sys.exit(3)\n"
    )
    env = dict(
        os.environ,
        FLEXSN_CACHE_DIR=str(cache),
        PYTHONPATH=str(pathlib.Path(flexsn.__file__).parent.parent),
    )
    if os.geteuid() == 0:  # another user: root's entries are 0700
        for path in (shared, cache, cache / relative.parts[0]):
            path.chmod(0o777)
        preexec = lambda: os.setuid(65534)  # noqa: E731: nobody
    else:  # this user, without the permission
        (cache / relative).chmod(0)
        preexec = None
    result = subprocess.run(
        [sys.executable, "-c", code],
        env=env,
        cwd="/",
        capture_output=True,
        text=True,
        preexec_fn=preexec,
    )
    (cache / relative).chmod(0o700)
    shutil.rmtree(shared)
    assert result.returncode == 3, result.stdout + result.stderr
    assert "cannot be read" in result.stdout
    assert "another user" in result.stdout
    assert "damaged" not in result.stdout


def test_build_folders_left_by_a_killed_compile_are_removed(
    tmp_path, monkeypatch
):
    monkeypatch.setenv("FLEXSN_CACHE_DIR", str(tmp_path))
    _cache.memo.clear()
    compiled = flexsn.compile("if", targets=("cpu",), **OPTIONS)
    parent = compiled.directory.parent
    stale, fresh = parent / ".build-stale", parent / ".build-fresh"
    stale.mkdir()
    fresh.mkdir()
    old = time.time() - 2 * _cache.STALE_BUILD_SECONDS
    os.utime(stale, (old, old))
    _cache.memo.clear()
    shutil.rmtree(compiled.directory)  # the next compile builds again
    flexsn.compile("if", targets=("cpu",), **OPTIONS)
    assert not stale.exists()
    assert fresh.exists()  # perhaps another process's build


def test_source_without_a_neuron_is_a_clear_error(tmp_path, monkeypatch):
    monkeypatch.setenv("FLEXSN_CACHE_DIR", str(tmp_path))
    _cache.memo.clear()
    empty = tmp_path / "empty.mlir"
    empty.write_text("")
    for source in ("module {}", empty):
        with pytest.raises(flexsn.CompileError, match="no flexsn.neuron"):
            flexsn.compile(source, targets=("cpu",))
