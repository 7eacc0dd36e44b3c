"""Every benchmark's --smoke mode (tiny shapes on the CPU) runs, writes its
results, and its checks hold; the GPU modes refuse a machine without one
cleanly. The benchmarks run in this process (torch is imported once),
device-ddp in its own (it spawns two)."""

import json
import math
import os
import subprocess
import sys
import xml.dom.minidom

import pytest
import torch

from bench import ROOT
from bench.__main__ import BENCHMARKS, main

NO_GPU = pytest.mark.skipif(
    torch.cuda.is_available(), reason="a CUDA GPU is present"
)


def run(*argv):
    assert main([str(a) for a in argv]) == 0


def positive(x):
    return isinstance(x, (int, float)) and math.isfinite(x) and x > 0


def test_help_lists_every_benchmark():
    out = subprocess.run(
        [sys.executable, "-m", "bench", "--help"],
        cwd=str(ROOT),
        stdout=subprocess.PIPE,
        universal_newlines=True,
        check=True,
    ).stdout
    for name in BENCHMARKS:
        assert "\n  " + name + " " in out
    assert main(["no-such-benchmark"]) == 2


@NO_GPU
@pytest.mark.parametrize(
    "argv",
    [
        ["lif"],
        ["placement"],
        ["schedule"],
        ["saved-storage"],
        ["block", "--cubin", "unused.cubin"],
        ["block-train"],
        ["fx"],
        ["device-torch"],
        ["device-ddp"],
        ["resnet"],
        ["zoo"],
        ["recurrent"],
    ],
)
def test_gpu_mode_without_a_gpu(argv, capsys):
    assert main(argv) == 2
    assert "needs" in capsys.readouterr().err


@pytest.fixture(scope="module")
def lif_results(tmp_path_factory):
    out = tmp_path_factory.mktemp("lif")
    run("lif", "--smoke", "--out", out)
    with open(out / "results.json") as f:
        return out, json.load(f)


def test_lif(lif_results):
    out, doc = lif_results
    meta, rows = doc["meta"], doc["rows"]
    assert meta["complete"] and positive(meta["copy_gbs"])
    assert sorted((r["variant"], r["dtype"]) for r in rows) == sorted(
        (v, d)
        for v in ("inference", "final_state", "train")
        for d in ("f32", "bf16")
    )
    for r in rows:
        assert r["status"] == "FLEXSN_SUCCESS" and r["unwritten"] == 0
        for key in ("flexsn_ms", "frac_copy", "eager_ms", "speedup_eager"):
            assert positive(r[key]), (key, r)
        # The eager loop's spikes, but for a few rounded across the
        # threshold (more of them in bf16).
        assert r["spike_mismatch_vs_eager"] <= (
            1e-3 if r["dtype"] == "f32" else 1e-2
        )
        if r["dtype"] == "f32":
            assert r.get("state_maxdiff_vs_eager", 0) <= 1e-6
            assert r.get("x_grad_maxdiff_vs_eager", 0) <= 1e-5
    modules = meta["modules"]
    assert "error" not in modules and len(modules["checks"]) == 4
    for c in modules["checks"]:
        assert c["inference_equal"] and c["train_spikes_equal"]
        assert c["train_x_grad_maxdiff"] <= 1e-6
    assert all(r["ok"] is None for r in modules["host"] + modules["wall"])
    assert len(meta["spike_storage"]) == 4
    assert all(
        s["same"] and positive(s["speedup"]) for s in meta["spike_storage"]
    )
    md = (out / "results.md").read_text()
    assert md.count("\n| 2^12 |") == len(rows) + len(meta["spike_storage"])
    assert not (out / "bench.png").exists()


def test_spike_storage_report(lif_results, tmp_path):
    out, doc = lif_results
    run("spike-storage-report", out / "results.json", tmp_path)
    with open(tmp_path / "spike_storage_results.json") as f:
        report = json.load(f)
    assert report["spike_storage"] == doc["meta"]["spike_storage"]
    md = (tmp_path / "spike_storage_results.md").read_text()
    assert md.count("\n| 2^12 |") == 4 and "| NO |" not in md
    svg = xml.dom.minidom.parse(str(tmp_path / "spike_storage.svg"))
    assert len(svg.getElementsByTagName("rect")) == 4 * 3 + 3


def test_placement(tmp_path):
    out = tmp_path / "placement.txt"
    run("placement", "--smoke", "--out", out)
    lines = out.read_text().splitlines()
    assert len(lines) == 1 + 2 * 2
    for line in lines[1:]:
        assert positive(float(line.split()[-3].rstrip("%")))


def test_schedule(tmp_path):
    run("schedule", "--smoke", "--out", tmp_path)
    with open(tmp_path / "schedule_results.json") as f:
        rows = json.load(f)["rows"]
    assert [(r["dtype"], r["T"]) for r in rows] == [("f32", 4), ("bf16", 4)]
    for r in rows:
        assert list(r["kernels"]) == ["flexsn"] and r["same"] == {}
        assert positive(r["kernels"]["flexsn"]["frac_copy"])
    assert (tmp_path / "schedule_results.md").is_file()


def test_saved_storage(tmp_path):
    run("saved-storage", "--smoke", "--out", tmp_path)
    with open(tmp_path / "saved_storage_results.json") as f:
        meta = json.load(f)
    (row,), (prec,) = meta["rows"], meta["precision"]
    for mode in ("f32", "storage", "approx"):
        assert positive(row[mode]["frac_copy"])
    assert positive(row["storage"]["speedup"])
    # The forward does not depend on how h is saved; with h in f32 the
    # input gradient is within bf16's rounding of float64's.
    assert prec["same_spikes"]
    assert prec["f32"]["x_grad"]["mean_rel"] < 1e-2
    assert prec["f32"]["x_grad"]["beyond_1pct"] == 0
    # With h in bf16 the backward keeps the forward's spikes: no gradient
    # takes the other branch.
    assert prec["storage"]["x_grad"]["beyond_1pct"] == 0
    # The modules' rows (FlexSN's only on the CPU), both savings.
    rows = {r["name"]: r for r in meta["modules"]}
    assert sorted(rows) == [
        "flexsn, h in f32",
        "flexsn, h in the storage type",
    ], rows
    for r in rows.values():
        assert "error" not in r, r
        assert positive(r["frac_copy"])
        assert r["x_grad"]["mean_rel"] < 1e-2
        assert r["x_grad"]["beyond_1pct"] == 0
        assert r["spikes_off"] < 1e-3


def test_block(tmp_path):
    run("block", "--smoke", "--out", tmp_path)
    with open(tmp_path / "block_results.json") as f:
        meta = json.load(f)
    assert len(meta["checks"]) == 3 and all(
        c["bitwise"] for c in meta["checks"]
    )
    (row,) = meta["rows"]
    assert positive(row["frac_copy"]) and positive(row["speedup"])


def test_block_train(tmp_path):
    run("block-train", "--smoke", "--out", tmp_path)
    with open(tmp_path / "block_train_results.json") as f:
        meta = json.load(f)
    assert all(c["bitwise"] and c["gradients_close"] for c in meta["checks"])
    (row,) = meta["rows"]
    for key in ("fused_ms", "unfused_ms", "eager_ms", "frac_copy", "vs_eager"):
        assert positive(row[key]), key
    assert "compile_ms" not in row and "fused_atomic_ms" not in row
    assert not (tmp_path / "block_train.png").exists()


def test_recurrent(tmp_path):
    run("recurrent", "--smoke", "--out", tmp_path)
    with open(tmp_path / "recurrent_results.json") as f:
        meta = json.load(f)
    (check,) = meta["checks"]
    assert check["ok"] and check["spikes_equal"] == 1.0
    assert 0 < check["spike_rate"] < 1
    rows = {r["variant"]: r for r in meta["rows"]}
    assert set(rows) == {"eager", "flexsn"}
    for row in rows.values():
        for key in ("step_ms", "first_step_s", "frac_copy", "vs_eager"):
            assert positive(row[key]), key
    assert "torch.compile" in meta["skipped"]
    assert not (tmp_path / "recurrent.png").exists()


def test_cpu(tmp_path):
    run("cpu", "--smoke", "--out", tmp_path)
    with open(tmp_path / "cpu_results.json") as f:
        meta = json.load(f)
    assert meta["checks"] and all(c["ok"] for c in meta["checks"])
    rows = {(r["threads"], r["row"]) for r in meta["rows"]}
    for threads in (1, 2):
        for row in (
            "kernel inference",
            "kernel final_state",
            "kernel train",
            "LIFNode inference",
            "LIFNode train",
        ):
            assert (threads, row) in rows
    for r in meta["rows"]:
        assert positive(r["ms"])
        assert positive(r.get("frac_copy") or r.get("vs_eager"))
    assert not (tmp_path / "cpu.png").exists()


def test_host(tmp_path):
    run("host", "--smoke", "--out", tmp_path)
    with open(tmp_path / "host_cpu_results.json") as f:
        meta = json.load(f)
    assert [r["row"] for r in meta["rows"]] == [
        "floor",
        "LIFNode train",
        "LIFNode channels-last train",
        "LIFNode inference",
        "Block train",
    ]
    assert all(positive(r["us"]) for r in meta["rows"])
    table = (tmp_path / "host_cpu_results.md").read_text().splitlines()
    assert len(table) == 2 + len(meta["rows"])


def test_fx(tmp_path):
    run("fx", "--smoke", "--out", tmp_path)
    with open(tmp_path / "fx_results.json") as f:
        res = json.load(f)["results"]
    assert len(res) == 4 and all(r["ok"] for r in res)
    (same,) = [r for r in res if r["check"].endswith("the shipped one")]
    assert same["spike_flip_fraction"] == 0


def test_device_torch(tmp_path):
    run("device-torch", "--smoke", "--out", tmp_path)
    with open(tmp_path / "torch_results.json") as f:
        res = {r["check"]: r for r in json.load(f)}
    assert res["lif cpu vs eager reference"]["ok"]
    assert res["plif cpu vs eager reference"]["ok"]
    (digits,) = [r for r in res.values() if r["check"].startswith("digits")]
    assert digits["ok"] and digits["max_rel_loss_diff"] <= 1e-3
    assert len(digits["loss_flexsn"]) == 2
    assert all(math.isfinite(v) for v in digits["loss_flexsn"])


def test_device_ddp(tmp_path):
    # Its own process: torch.multiprocessing spawns the two ranks.
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1")
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "bench",
            "device-ddp",
            "--smoke",
            "--out",
            str(tmp_path),
        ],
        cwd=str(ROOT),
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        universal_newlines=True,
    )
    assert proc.returncode == 0, proc.stdout[-3000:]
    with open(tmp_path / "ddp_results.json") as f:
        res = json.load(f)
    assert len(res) == 4 and all(r["ok"] for r in res), res
    assert res[0]["worst_err_over_tol"] <= 1


def test_resnet_judges_each_fused_variant_against_its_unfused_twin():
    """Eager fused against eager unfused, CUDA-graph fused against
    CUDA-graph unfused, each also in its fastest layout."""
    from bench.resnet import judge

    def row(variant, layout, ms):
        return dict(
            model="m",
            precision="f32",
            layout=layout,
            variant=variant,
            step_ms=ms,
            first_step_s=0.5,
        )

    rows = [
        row("flexsn", "contiguous", 30.0),
        row("flexsn-fused", "contiguous", 20.0),
        row("flexsn+graph", "contiguous", 12.0),
        row("flexsn-fused+graph", "contiguous", 10.0),
        row("flexsn+graph", "channels_last", 9.0),
        row("flexsn-fused+graph", "channels_last", 9.5),
        row("sj-torch+compile", "contiguous", 15.0),
        dict(
            model="m",
            precision="f32",
            layout="contiguous",
            variant="flexsn-fused+compile",
            error="no",
        ),
    ]
    checks = {c["check"]: c for c in judge(rows)}
    eager = checks["m f32 contiguous flexsn-fused vs_flexsn"]
    assert (eager["ratio"], eager["ok"]) == (1.5, True)
    graph = checks["m f32 contiguous flexsn-fused+graph vs_flexsn"]
    assert (graph["ratio"], graph["ok"]) == (1.2, False)
    compiled = checks[
        "m f32 contiguous flexsn-fused+graph " "vs_sj_torch_compile"
    ]
    assert compiled["ratio"] == 1.5
    # Fastest layouts: 9.0 unfused (channels-last), 9.5 fused.
    fastest = checks["m f32 fastest layout flexsn-fused+graph vs_flexsn"]
    assert fastest["ratio"] == round(9.0 / 9.5, 3)
    assert checks["m f32 contiguous fuse_first_step_s"]["ok"]
    assert not any("fuse_first_step_s" in c and "graph" in c for c in checks)


class _FakeCuda:
    """What bench resnet's timing calls of torch.cuda, doing nothing."""

    @staticmethod
    def synchronize():
        pass


class _FakeTimer:
    """Hands out each variant's step times in the order given, and records
    the order in which the variants were timed."""

    def __init__(self, times):
        self.times = {v: iter(ts) for v, ts in times.items()}
        self.timed, self.freed = [], 0

    def ms(self, step, reps):
        self.timed.append(step.variant)
        median = next(self.times[step.variant])
        return median, median - 0.5

    def free(self):
        self.freed += 1


def _fake_start(torch, model, variant, precision, layout, x, labels):
    if variant == "broken":
        raise RuntimeError("no such model")

    def step():
        pass

    step.variant = variant
    return (
        step,
        None,
        dict(
            model=model,
            variant=variant,
            precision=precision,
            layout=layout,
            first_step_s=0.1,
            first_loss=1.0,
        ),
    )


@pytest.mark.parametrize("rounds", [1, 3])
def test_resnet_times_variants_alone_or_in_turns(monkeypatch, rounds):
    """--rounds 1 times each variant once, in order; --rounds N builds them
    all, times them in turns N times and takes the median of the rounds'
    medians; a variant that fails to build is recorded with its error and
    the others still run."""
    from bench import resnet

    monkeypatch.setattr(resnet, "start", _fake_start)
    fake_torch = type("FakeTorch", (), {"cuda": _FakeCuda})
    timer = _FakeTimer({"a": [4.0, 1.0, 1.5], "b": [5.0, 6.0, 4.0]})
    runs = [("m", "f32", "channels_last", v) for v in ("a", "broken", "b")]
    rows = {
        r["variant"]: r
        for r in resnet.measure(
            fake_torch, timer, runs, None, None, reps=5, rounds=rounds
        )
    }
    assert set(rows) == {"a", "b", "broken"}
    assert "no such model" in rows["broken"]["error"]
    assert timer.timed == ["a", "b"] * rounds
    if rounds == 1:
        assert (rows["a"]["step_ms"], rows["b"]["step_ms"]) == (4.0, 5.0)
        assert "rounds_ms" not in rows["a"]
    else:
        assert rows["a"]["rounds_ms"] == [4.0, 1.0, 1.5]
        assert (rows["a"]["step_ms"], rows["a"]["min_ms"]) == (1.5, 0.5)
        assert (rows["b"]["step_ms"], rows["b"]["min_ms"]) == (5.0, 3.5)
    assert all(r["host_ms"] >= 0 for r in (rows["a"], rows["b"]))
    assert timer.freed >= 1


def test_zoo(tmp_path):
    """The model-zoo benchmark's CPU run: every in-repo model's FlexSN,
    fused and floor variants timed, and the fused model's first loss the
    unfused one's."""
    run("zoo", "--smoke", "--out", tmp_path)
    with open(tmp_path / "zoo_results.json") as f:
        doc = json.load(f)
    rows = doc["rows"]
    assert sorted((r["model"], r["variant"]) for r in rows) == sorted(
        (m, v)
        for m in ("former", "vgg")
        for v in ("flexsn", "flexsn-fused", "floor")
    )
    for r in rows:
        assert positive(r["step_ms"]) and positive(r["first_step_s"]), r
    checks = doc["checks"]
    assert len(checks) == 2 and all(c["ok"] for c in checks), checks


def test_zoo_plot(tmp_path):
    """zoo.svg: per model and layout, each variant's speedup over
    torch.compile of SpikingJelly (its step time over the variant's)."""
    rows = [
        dict(
            model="m",
            precision="f32",
            layout="contiguous",
            batch=4,
            variant=v,
            step_ms=ms,
        )
        for v, ms in (
            ("sj-torch+compile", 30.0),
            ("flexsn-fused+graph", 20.0),
            ("floor", 15.0),
        )
    ]
    with open(tmp_path / "r.json", "w") as f:
        json.dump({"rows": rows}, f)
    run("zoo", "--plot", tmp_path / "r.json", "--out", tmp_path)
    text = (tmp_path / "zoo.svg").read_text()
    xml.dom.minidom.parseString(text)
    assert ">1.50<" in text and ">2.00<" in text
    assert ">m f32 row-major B=4<" in text
