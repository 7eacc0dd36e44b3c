"""flexsn.compile: sources, options, the cache, diagnostics."""

import json
import multiprocessing.pool
import os
import pathlib
import subprocess
import sys

import pytest

import flexsn
from flexsn import _cache, _tools

LEAK = """
// A leaky integrator whose output is its state.
flexsn.neuron @leak inputs(%x: f32) states(%v: f32) outputs(y)
    params(%a: f32 = 0.5 runtime) {
  %av = arith.mulf %a, %v : f32
  %h = arith.addf %av, %x : f32
  flexsn.yield %h, %h : f32, f32
}
"""


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("FLEXSN_CACHE_DIR", str(tmp_path / "cache"))
    _cache.memo.clear()
    yield tmp_path / "cache"
    _cache.memo.clear()


def count_tool_runs(monkeypatch):
    calls = []
    real = _tools.run

    def counting(argv, *args, **kwargs):
        calls.append([str(a) for a in argv])
        return real(argv, *args, **kwargs)

    monkeypatch.setattr(_tools, "run", counting)
    return calls


def test_sources_path_text_and_name(cache, tmp_path):
    path = tmp_path / "leak.mlir"
    path.write_text(LEAK)
    for source in (path, str(path), LEAK):
        compiled = flexsn.compile(
            source, targets=("cpu",), variants=("inference",)
        )
        assert compiled.name == "leak"
        assert compiled.info.inputs == ("x",)
        assert [p.name for p in compiled.info.runtime_params] == ["a"]
    lif = flexsn.compile("lif", targets=("cpu",), variants=("inference",))
    assert lif.info.states == ("v",)
    assert set(flexsn.shipped_neurons()) >= {
        "if",
        "lif",
        "plif",
        "qif",
        "eif",
        "izhikevich",
        "cuba_lif",
    }


def test_second_compile_runs_no_tool(cache, monkeypatch):
    calls = count_tool_runs(monkeypatch)
    first = flexsn.compile(LEAK, targets=("cpu",), variants=("inference",))
    # One compile is one flexsn-compile run (besides the toolchain's
    # --version, asked once per process).
    compiles = [c for c in calls if "--version" not in c]
    assert len(compiles) == 1 and "flexsn-compile" in compiles[0][0], calls
    ran = len(calls)
    # A new process's view: the in-memory memo is gone, the cache stays.
    _cache.memo.clear()
    again = flexsn.compile(LEAK, targets=("cpu",), variants=("inference",))
    assert len(calls) == ran
    assert again.directory == first.directory
    # Another option is another entry.
    other = flexsn.compile(
        LEAK, targets=("cpu",), variants=("inference",), params={"a": 0.25}
    )
    assert other.directory != first.directory and len(calls) > ran


@pytest.mark.skipif(
    not (flexsn.compiler.cuda_toolkit() / "bin" / "ptxas").is_file(),
    reason="no CUDA toolkit",
)
def test_approximate_surrogates_reach_the_gpu_pipeline_only(
    cache, monkeypatch
):
    """approximate_surrogates=True is another entry whose GPU lowering
    (and only it: the CPU target has no such option) is asked for
    approximate surrogates; the default asks nothing."""
    calls = count_tool_runs(monkeypatch)
    kwargs = dict(targets=("cpu", "cuda"), variants=("forward", "backward"))
    default = flexsn.compile("lif", **kwargs)
    approximate = flexsn.compile("lif", approximate_surrogates=True, **kwargs)
    assert approximate.directory != default.directory
    # One flexsn-compile run each, from its request, which asks the CUDA
    # target (and it alone) for approximate surrogates.
    compiles = [c for c in calls if "--version" not in c]
    assert len(compiles) == 2, calls
    requests = [
        json.loads((n.directory / "request.json").read_text())
        for n in (default, approximate)
    ]
    approximate_asked = [
        r["targets"]["cuda"]["approximate_surrogates"] for r in requests
    ]
    assert approximate_asked == [False, True]
    assert all(r["targets"]["cpu"] == {} for r in requests)
    assert approximate.gpu_image.read_bytes() != default.gpu_image.read_bytes()


def test_cache_layout_and_manifest(cache):
    compiled = flexsn.compile(
        "plif",
        targets=("cpu",),
        variants=("forward", "backward"),
        storage_types=("f32", "f16"),
    )
    assert compiled.directory.parent.parent == cache
    assert (compiled.directory / "kernels.so").is_file()
    cpu = json.loads((compiled.directory / "cpu.json").read_text())
    names = sorted(k["name"] for k in cpu["targets"]["cpu"]["kernels"])
    assert names == [
        "plif_backward_f16",
        "plif_backward_f32",
        "plif_forward_f16",
        "plif_forward_f32",
        "plif_forward_final_state_f16",
        "plif_forward_final_state_f32",
    ]
    backward = compiled.manifest.find("cpu", "backward", "f16")
    assert [b.role for b in backward.buffers_with_role("param_gradient")] == [
        "param_gradient"
    ]
    assert backward.params == (("w", "f32"),)
    # The workspace formula is evaluated from the manifest: one f16 [T, N],
    # rounded up to whole floats.
    assert backward.workspace_size(T=3, N=10, ld=0) == 3 * 10 * 2
    assert backward.workspace_size(T=3, N=9, ld=0) == 4 * 14


def _compile_in_subprocess(cache_dir):
    env = dict(
        os.environ,
        FLEXSN_CACHE_DIR=str(cache_dir),
        PYTHONPATH=str(pathlib.Path(flexsn.__file__).parent.parent),
    )
    code = (
        "import flexsn; c = flexsn.compile('if', targets=('cpu',), "
        "variants=('final-state',), params={'v_threshold': 0.75}); "
        "print(c.directory)"
    )
    return subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True
    )


def test_concurrent_compiles_share_one_entry(cache):
    with multiprocessing.pool.ThreadPool(4) as pool:
        results = pool.map(_compile_in_subprocess, [cache] * 4)
    for r in results:
        assert r.returncode == 0, r.stderr
    dirs = {r.stdout.strip() for r in results}
    assert len(dirs) == 1
    entry = pathlib.Path(dirs.pop())
    assert (entry / "done").is_file() and (entry / "kernels.so").is_file()
    # No temporary build directories are left behind.
    assert not list(entry.parent.glob(".build-*"))


def test_invalid_neuron_reports_line_and_column(cache, tmp_path):
    bad = tmp_path / "bad.mlir"
    bad.write_text(LEAK.replace("arith.addf %av, %x", "arith.addf %av, %nope"))
    with pytest.raises(flexsn.CompileError) as error:
        flexsn.compile(bad, targets=("cpu",))
    assert error.value.locations, error.value.diagnostics
    file, line, column = error.value.locations[0]
    assert file == str(bad)
    assert line == 6 and column > 1
    assert "nope" in str(error.value)


def test_bad_options_are_clear_errors(cache):
    with pytest.raises(ValueError, match="unknown variant 'train'"):
        flexsn.compile("lif", variants=("train",))
    with pytest.raises(ValueError, match="unknown storage type 'f64'"):
        flexsn.compile("lif", storage_types=("f64",))
    with pytest.raises(ValueError, match="shipped neuron"):
        flexsn.compile("no_such_neuron")
    with pytest.raises(flexsn.CompileError, match="has no parameter 'tauu'"):
        flexsn.compile("lif", targets=("cpu",), params={"tauu": 2.0})
    with pytest.raises(flexsn.CompileError, match="expected true, false"):
        flexsn.compile(
            "lif",
            targets=("cpu",),
            kinds={"soft_reset": "runtime"},
            params={"soft_reset": 3},
        )
    with pytest.raises(flexsn.CompileError, match="alpha"):
        flexsn.compile(
            "lif", targets=("cpu",), surrogate="#flexsn.sigmoid<alpha=-1.0>"
        )
    with pytest.raises(ValueError):
        flexsn.surrogate.Sigmoid(alpha=-1.0)


def test_params_are_specialized(cache):
    compiled = flexsn.compile(
        "lif",
        targets=("cpu",),
        variants=("inference",),
        params={"tau": 4.0, "soft_reset": True},
        kinds={"v_threshold": "runtime"},
    )
    params = {p.name: p for p in compiled.info.params}
    assert params["tau"].default == 4.0 and params["tau"].kind == "const"
    assert params["soft_reset"].default is True
    assert params["v_threshold"].kind == "runtime"
    kernel = compiled.manifest.find("cpu", "inference", "f32")
    assert kernel.params == (("v_threshold", "f32"),)


def test_without_tools_the_cache_serves(cache, monkeypatch):
    flexsn.compile("if", targets=("cpu",), variants=("inference",))
    _cache.memo.clear()
    monkeypatch.setenv("FLEXSN_TOOLS_DIR", str(cache / "no-tools"))
    monkeypatch.setattr(_tools, "shutil", None, raising=False)
    assert not _tools.tools_available()
    served = flexsn.compile("if", targets=("cpu",), variants=("inference",))
    assert served.cpu_library is not None
    _cache.memo.clear()
    with pytest.raises(flexsn.ToolNotFoundError, match="holds no compiled"):
        flexsn.compile("if", targets=("cpu",), variants=("final-state",))


def test_manifest_version_is_checked():
    with pytest.raises(flexsn.ManifestError, match="version 2"):
        flexsn.Manifest.from_json(
            [{"format": "flexsn-manifest", "version": 2}]
        )
    with pytest.raises(flexsn.ManifestError, match="not a FlexSN manifest"):
        flexsn.Manifest.from_json([{"format": "other"}])


def test_neuron_info_views_are_computed_up_front():
    """NeuronInfo's views of its parameters are attributes from its
    construction on, none computed on a first read (torch.compile must not
    see one appear inside a frame it traces), and equality and hashing
    read the fields alone."""
    from flexsn._manifest import NeuronInfo, Param

    info = NeuronInfo(
        "n",
        ("x",),
        ("v",),
        ("s",),
        (
            Param("tau", "f32", 2.0, "const"),
            Param("w", "f32", 1.0, "trainable", "per_channel"),
            Param("b", "f32", 0.0, "runtime"),
        ),
    )
    views = dict(
        runtime_params=("w", "b"),
        trainable_params=("w",),
        fixed_runtime_params=("b",),
        scalar_runtime_params=("b",),
        per_neuron_params=(),
        per_channel_params=("w",),
        shaped_params=("w",),
    )
    for name, names in views.items():
        assert name in vars(info), name
        assert tuple(p.name for p in vars(info)[name]) == names, name
    assert vars(info)["channels"] is True
    again = NeuronInfo("n", ("x",), ("v",), ("s",), info.params)
    assert again == info and hash(again) == hash(info)
    assert info != NeuronInfo("n", ("x",), ("v",), ("s",), info.params[:1])


def test_size_formulas_are_evaluated_safely():
    from flexsn._manifest import evaluate_size

    assert (
        evaluate_size(
            "1 * T * ld * 4 + 4 + 4 * 1 * ceil(N / 256)", T=3, N=257, ld=300
        )
        == 3 * 300 * 4 + 4 + 4 * 2
    )
    assert evaluate_size("0", T=1, N=1, ld=1) == 0
    for hostile in ("__import__('os')", "T ** 2", "open('x')", "N / 3"):
        with pytest.raises(flexsn.ManifestError):
            evaluate_size(hostile, T=2, N=2, ld=2)


class Symbol:
    """A stand-in for torch.compile's SymInt: an integer known only
    through integer arithmetic (not hashable, not an int)."""

    __hash__ = None

    def __init__(self, value):
        self.value = value

    def _op(self, other, op):
        other = other.value if isinstance(other, Symbol) else other
        assert type(other) is int, other
        return Symbol(op(self.value, other))

    def __add__(self, o):
        return self._op(o, lambda a, b: a + b)

    def __sub__(self, o):
        return self._op(o, lambda a, b: a - b)

    def __mul__(self, o):
        return self._op(o, lambda a, b: a * b)

    def __floordiv__(self, o):
        return self._op(o, lambda a, b: a // b)

    def __neg__(self):
        return Symbol(-self.value)

    __radd__ = __add__
    __rmul__ = __mul__

    def __rsub__(self, o):
        return Symbol(o - self.value)


def test_size_formulas_take_symbolic_sizes():
    """With dynamic shapes under torch.compile a workspace's size is a
    symbolic integer: the formula is built from it with integer
    operations, equal to the formula at the same numbers."""
    from flexsn._manifest import evaluate_size

    formulas = (
        "1 * T * ld * 4 + 4 + 4 * 1 * ceil(N / 256)",
        "T * N * 2 - ceil((N - 1) / 3) * 4",
        "ceil(T * N / 8) + ld / 2",
    )
    for formula in formulas:
        for T, N, ld in ((3, 257, 300), (1, 1, 2), (5, 1024, 1024)):
            got = evaluate_size(formula, T=Symbol(T), N=Symbol(N), ld=ld)
            want = evaluate_size(formula, T=T, N=N, ld=ld)
            assert isinstance(got, Symbol) and got.value == want, formula
    with pytest.raises(flexsn.ManifestError, match="symbolic"):
        evaluate_size("T / N", T=Symbol(4), N=Symbol(2), ld=1)


def test_a_wheel_uses_its_bundled_tools(cache, tmp_path, monkeypatch):
    """The wheel's flexsn/_bundled prefix (utils/build_wheel.sh) comes
    before the build tree: its tools and runtime are found there, and its
    OpenMP runtime is passed to flexsn-compile (the bundled tool was built
    elsewhere, so its own default path would not exist)."""
    monkeypatch.delenv("FLEXSN_TOOLS_DIR", raising=False)
    monkeypatch.delenv("FLEXSN_RUNTIME_LIB", raising=False)
    bundled = tmp_path / "_bundled"
    monkeypatch.setattr(_tools, "BUNDLED", bundled)
    assert _tools.bundled_openmp_library() is None
    build_tool = _tools.find_tool("flexsn-compile")
    assert bundled not in build_tool.parents

    (bundled / "bin").mkdir(parents=True)
    (bundled / "lib").mkdir()
    # The bundled flexsn-compile: the build's, behind a script recording
    # its arguments.
    log = tmp_path / "argv.txt"
    tool = bundled / "bin" / "flexsn-compile"
    tool.write_text(f'#!/bin/sh\necho "$@" >> {log}\nexec {build_tool} "$@"\n')
    tool.chmod(0o755)
    runtime = bundled / "lib" / "libflexsn_runtime.so"
    runtime.write_bytes(b"")
    openmp = bundled / "lib" / "libomp.so.5"
    openmp.symlink_to(
        pathlib.Path(
            os.environ.get(
                "FLEXSN_OPENMP_LIBRARY", "/usr/lib/llvm-22/lib/libomp.so.5"
            )
        ).resolve()
    )
    assert _tools.find_tool("flexsn-compile") == tool
    assert _tools.find_runtime_library() == runtime
    assert _tools.bundled_openmp_library() == openmp

    compiled = flexsn.compile(LEAK, targets=("cpu",), variants=("inference",))
    assert f"--openmp-library={openmp}" in log.read_text()
    assert compiled.cpu_library is not None


def test_the_multicall_binary_runs_the_tools(cache, tmp_path, monkeypatch):
    """A directory holding only the multi-call `flexsn` (the wheel's one
    binary) runs each tool as `flexsn <tool>`, and compiles with it."""
    multicall = _tools.find_tool("flexsn-compile").parent / "flexsn"
    if not multicall.is_file():
        pytest.skip("no multi-call flexsn next to the tools")
    tools = tmp_path / "tools"
    tools.mkdir()
    (tools / "flexsn").symlink_to(multicall)
    monkeypatch.setenv("FLEXSN_TOOLS_DIR", str(tools))
    assert _tools.tool_command("flexsn-opt") == [str(tools / "flexsn"), "opt"]
    assert _tools.find_tool("flexsn-compile") == tools / "flexsn"
    calls = count_tool_runs(monkeypatch)
    compiled = flexsn.compile(LEAK, targets=("cpu",), variants=("inference",))
    assert compiled.cpu_library is not None
    assert calls and all(
        c[:2] == [str(tools / "flexsn"), "compile"] for c in calls
    )
    # A tool of its own comes before the multi-call binary.
    (tools / "flexsn-opt").symlink_to(multicall.parent / "flexsn-opt")
    assert _tools.tool_command("flexsn-opt") == [str(tools / "flexsn-opt")]
    (tools / "flexsn").unlink()
    with pytest.raises(_tools.ToolNotFoundError, match="flexsn-compile"):
        _tools.tool_command("flexsn-compile")


@pytest.mark.parametrize("script", ["flexsn-opt", "flexsn"])
def test_console_scripts_run_the_bundled_binary(tmp_path, script):
    """The wheel's console scripts exec the bundled multi-call binary
    under their own name: flexsn-opt runs flexsn-opt, flexsn lists the
    tools."""
    multicall = _tools.find_tool("flexsn-compile").parent / "flexsn"
    if not multicall.is_file():
        pytest.skip("no multi-call flexsn next to the tools")
    bundled = tmp_path / "_bundled"
    (bundled / "bin").mkdir(parents=True)
    (bundled / "bin" / "flexsn").symlink_to(multicall)
    code = (
        "import pathlib, sys; from flexsn import _tools; "
        f"_tools.BUNDLED = pathlib.Path({str(bundled)!r}); "
        f"sys.argv[0] = {str(tmp_path / 'venv-bin' / script)!r}; "
        "_tools.console_main()"
    )
    env = dict(os.environ, PYTHONPATH=str(_tools.PACKAGE_DIR.parent))

    def run():
        return subprocess.run(
            [sys.executable, "-c", code, "--version"],
            capture_output=True,
            text=True,
            timeout=60,
            env=env,
        )

    done = run()
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"{script} (FlexSN {flexsn.__version__})")
    # Without the binary: a message, not a loop through PATH.
    (bundled / "bin" / "flexsn").unlink()
    done = run()
    assert done.returncode == 1
    assert "reinstall the flexsn wheel" in done.stderr


def test_the_tools_hash_is_memoized_by_file_stamp(tmp_path, monkeypatch):
    """The tools' id hashes their bytes only while the memo does not know
    the tool file as it is (a rebuilt tool: other bytes, size and time);
    their --version, which names this machine's CPU, runs every time."""
    tools = tmp_path / "tools"
    tools.mkdir()
    tool = tools / "flexsn-compile"
    tool.write_text("#!/bin/sh\necho 'flexsn-compile (FlexSN 1)'\n")
    tool.chmod(0o755)
    monkeypatch.setenv("FLEXSN_TOOLS_DIR", str(tools))
    memo = tmp_path / "memo"
    hashed, versions = [], []
    real_hash, real_run = _tools._hash_files, _tools.run
    monkeypatch.setattr(
        _tools,
        "_hash_files",
        lambda files: (hashed.append(files), real_hash(files))[1],
    )
    monkeypatch.setattr(
        _tools,
        "run",
        lambda argv, *a, **k: (versions.append(argv), real_run(argv, *a, **k))[
            1
        ],
    )

    def toolchain(memo_dir=memo):
        _tools.toolchain_id.cache_clear()
        return _tools.toolchain_id(memo_dir)

    first = toolchain()
    assert len(hashed) == 1 and len(list(memo.iterdir())) == 1
    assert toolchain() == first and len(hashed) == 1 and len(versions) == 2
    # The same id without a memo, from the bytes.
    assert toolchain(None) == first and len(hashed) == 2
    tool.write_text("#!/bin/sh\necho 'flexsn-compile (FlexSN 2)'\n")
    second = toolchain()
    assert second != first and len(hashed) == 3
    assert toolchain() == second and len(hashed) == 3
    # A damaged memo is not trusted.
    for f in memo.iterdir():
        f.write_text("not a digest")
    assert toolchain() == second and len(hashed) == 4
    _tools.toolchain_id.cache_clear()


def test_version_is_the_tools():
    """One version: CMake's project(), printed by the tools' --version and
    generated into the package (_dialect.VERSION)."""
    out = _tools.run([_tools.find_tool("flexsn-compile"), "--version"])
    assert f"(FlexSN {flexsn.__version__})" in out


def test_zero_divisor_parameter_is_refused():
    """FlexSN("lif", params={"tau": 0.0}) would give NaN states (LIFNode
    and flexsn-run refuse it): the compile names the parameter."""
    from flexsn.torch import FlexSN

    with pytest.raises(flexsn.CompileError, match="divides by 'tau'"):
        FlexSN("lif", params={"tau": 0.0})
