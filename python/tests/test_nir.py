"""flexsn.nir: NIR's HDF5 files read and written (docs/NIR.md). Files
written by flexsn.nir.write read back identically; files written with
plain h5py the way NIR 1.0.x and 0.2.0 write them read as their format
says; bad files get errors that name the node or the edge."""

import builtins

import numpy as np
import pytest

h5py = pytest.importorskip("h5py")  # utils/setup.sh installs python3-h5py

from flexsn import nir  # noqa: E402


def f32(*values):
    return np.array(values, dtype=np.float32)


def cnn():
    """A feed-forward convolutional graph: every layer kind of a CNN."""
    rng = np.random.default_rng(0)
    return nir.Graph(
        nodes={
            "input": nir.Node("Input", {"shape": np.array([2, 8, 8])}),
            "conv": nir.Node(
                "Conv2d",
                {
                    "weight": rng.normal(size=(4, 2, 3, 3)).astype(np.float32),
                    "stride": np.array([1, 1]),
                    "padding": "same",
                    "dilation": np.array([1, 1]),
                    "groups": 1,
                    "bias": f32(0.1, 0.2, 0.3, 0.4),
                    "input_shape": np.array([8, 8]),
                },
            ),
            "lif": nir.Node(
                "LIF",
                {
                    "tau": np.full((4, 8, 8), 0.02, np.float32),
                    "r": np.ones((4, 8, 8), np.float32),
                    "v_leak": np.zeros((4, 8, 8), np.float32),
                    "v_threshold": np.ones((4, 8, 8), np.float32),
                    "v_reset": np.zeros((4, 8, 8), np.float32),
                },
            ),
            "pool": nir.Node(
                "SumPool2d",
                {
                    "kernel_size": np.array([2, 2]),
                    "stride": np.array([2, 2]),
                    "padding": np.array([0, 0]),
                },
            ),
            "flat": nir.Node(
                "Flatten",
                {
                    "start_dim": 0,
                    "end_dim": -1,
                    "input_type": np.array([4, 4, 4]),
                },
            ),
            "fc": nir.Node(
                "Affine",
                {
                    "weight": rng.normal(size=(10, 64)).astype(np.float32),
                    "bias": np.zeros(10, np.float32),
                },
            ),
            "li": nir.Node(
                "LI",
                {
                    "tau": np.full(10, 0.01, np.float32),
                    "r": np.ones(10, np.float32),
                    "v_leak": np.zeros(10, np.float32),
                },
            ),
            "output": nir.Node("Output", {"shape": np.array([10])}),
        },
        edges=[
            ("input", "conv"),
            ("conv", "lif"),
            ("lif", "pool"),
            ("pool", "flat"),
            ("flat", "fc"),
            ("fc", "li"),
            ("li", "output"),
        ],
        metadata={"made_by": "test_nir"},
    )


def recurrent():
    """A recurrent CubaLIF layer: a cycle through a Linear."""
    n = 5
    cuba = {
        "tau_syn": np.full(n, 0.005, np.float32),
        "tau_mem": np.full(n, 0.01, np.float32),
        "r": np.ones(n, np.float32),
        "v_leak": np.zeros(n, np.float32),
        "v_threshold": np.ones(n, np.float32),
        "v_reset": np.zeros(n, np.float32),
        "w_in": np.full(n, 50.0, np.float32),
    }
    return nir.Graph(
        nodes={
            "input": nir.Node("Input", {"shape": np.array([3])}),
            "w_in": nir.Node(
                "Affine",
                {
                    "weight": np.arange(15, dtype=np.float32).reshape(5, 3),
                    "bias": np.zeros(n, np.float32),
                },
            ),
            "lif": nir.Node("CubaLIF", cuba),
            "w_rec": nir.Node(
                "Linear", {"weight": np.eye(n, dtype=np.float32) * 0.5}
            ),
            "output": nir.Node("Output", {"shape": np.array([n])}),
        },
        edges=[
            ("input", "w_in"),
            ("w_in", "lif"),
            ("lif", "w_rec"),
            ("w_rec", "lif"),
            ("lif", "output"),
        ],
    )


def nested():
    """A graph holding a graph, addressed as "sub.node"."""
    inner = nir.Graph(
        nodes={
            "input": nir.Node("Input", {"shape": np.array([4])}),
            "scale": nir.Node("Scale", {"scale": f32(1, 2, 3, 4)}),
            "output": nir.Node("Output", {"shape": np.array([4])}),
        },
        edges=[("input", "scale"), ("scale", "output")],
    )
    return nir.Graph(
        nodes={
            "input": nir.Node("Input", {"shape": np.array([4])}),
            "sub": inner,
            "thr": nir.Node("Threshold", {"threshold": f32(0, 0, 1, 1)}),
            "output": nir.Node("Output", {"shape": np.array([4])}),
        },
        edges=[
            ("input", "sub.input"),
            ("sub.output", "thr"),
            ("thr", "output"),
        ],
    )


def delayed():
    """A delay before an IF neuron, and an integrator."""
    return nir.Graph(
        nodes={
            "input": nir.Node("Input", {"shape": np.array([3])}),
            "delay": nir.Node("Delay", {"delay": f32(0.001, 0.002, 0)}),
            "if": nir.Node(
                "IF",
                {
                    "r": f32(1, 1, 1),
                    "v_threshold": f32(1, 1, 1),
                    "v_reset": f32(0, 0, 0),
                },
            ),
            "i": nir.Node("I", {"r": f32(2, 2, 2)}),
            "output": nir.Node("Output", {"shape": np.array([3])}),
        },
        edges=[
            ("input", "delay"),
            ("delay", "if"),
            ("if", "i"),
            ("i", "output"),
        ],
    )


GRAPHS = {
    "cnn": cnn,
    "recurrent": recurrent,
    "nested": nested,
    "delayed": delayed,
}


def assert_same(a, b, where="<top>"):
    """The two graphs hold the same nodes, parameters (values and dtypes),
    edges and metadata."""
    assert type(a) is type(b), where
    assert a.type == b.type and a.metadata.keys() == b.metadata.keys(), where
    if isinstance(a, nir.Graph):
        assert a.nodes.keys() == b.nodes.keys(), where
        assert [tuple(e) for e in a.edges] == [tuple(e) for e in b.edges]
        for name in a.nodes:
            assert_same(a.nodes[name], b.nodes[name], f"{where}.{name}")
        return
    assert a.params.keys() == b.params.keys(), where
    for name, value in a.params.items():
        other = b.params[name]
        if isinstance(value, str):
            assert other == value, (where, name)
        else:
            value, other = np.asarray(value), np.asarray(other)
            assert value.dtype == other.dtype, (where, name)
            assert value.shape == other.shape, (where, name)
            assert np.array_equal(value, other), (where, name)


@pytest.mark.parametrize("kind", sorted(GRAPHS))
def test_write_then_read_is_identity(kind, tmp_path):
    graph = GRAPHS[kind]()
    nir.write(tmp_path / "a.nir", graph)
    again = nir.read(tmp_path / "a.nir")
    assert_same(graph, again)
    # read, write, read: the same again.
    nir.write(tmp_path / "b.nir", again)
    assert_same(graph, nir.read(tmp_path / "b.nir"))


def test_layout_is_nirs(tmp_path):
    """The file's layout is NIR's: a version, the top node's type and
    nodes, edges as string pairs, array parameters gzip-compressed."""
    nir.write(tmp_path / "g.nir", cnn())
    with h5py.File(tmp_path / "g.nir", "r") as f:
        assert f["version"][()].decode() == nir.VERSION
        top = f["node"]
        assert top["type"][()] == b"NIRGraph"
        assert set(top["nodes"]) == set(cnn().nodes)
        assert [
            tuple(x.decode() for x in pair) for pair in top["edges"][()]
        ] == cnn().edges
        lif = top["nodes"]["lif"]
        assert lif["type"][()] == b"LIF"
        assert lif["tau"].compression == "gzip"
        assert lif["tau"].dtype == np.float32
        assert top["nodes"]["conv"]["padding"][()] == b"same"
        assert top["metadata"]["made_by"][()] == b"test_nir"
    nir.write(tmp_path / "raw.nir", cnn(), compression=None)
    with h5py.File(tmp_path / "raw.nir", "r") as f:
        assert f["node"]["nodes"]["lif"]["tau"].compression is None


def write_by_hand(path, version, nodes, edges, edge_dtype):
    """A NIR file written with h5py alone, the way NIR's writer lays one
    out: `nodes` maps an id to (type, {parameter: value})."""
    with h5py.File(path, "w") as f:
        f.create_dataset("version", data=version, dtype=h5py.string_dtype())
        top = f.create_group("node")
        top.create_dataset("type", data="NIRGraph", dtype=h5py.string_dtype())
        group = top.create_group("nodes")
        for name, (kind, params) in nodes.items():
            node = group.create_group(name)
            node.create_dataset("type", data=kind, dtype=h5py.string_dtype())
            for key, value in params.items():
                if isinstance(value, np.ndarray) and value.ndim:
                    node.create_dataset(key, data=value, compression="gzip")
                else:
                    node.create_dataset(key, data=value)
        top.create_dataset("edges", data=np.array(edges, dtype=edge_dtype))


@pytest.mark.parametrize(
    "edge_dtype", ["S", "object"], ids=["fixed-bytes", "variable-strings"]
)
def test_reads_a_file_nir_1_0_writes(tmp_path, edge_dtype):
    tau = np.array([0.01, 0.02], np.float32)
    nodes = {
        "input": ("Input", {"shape": np.array([2])}),
        "lif": (
            "LIF",
            {
                "tau": tau,
                "r": f32(10, 10),
                "v_leak": f32(0, 0),
                "v_threshold": f32(1, 1),
                "v_reset": f32(-0.5, 0),
            },
        ),
        "output": ("Output", {"shape": np.array([2])}),
    }
    edges = [["input", "lif"], ["lif", "output"]]
    if edge_dtype == "object":
        edge_dtype = h5py.string_dtype("utf-8")
    write_by_hand(tmp_path / "x.nir", "1.0.7", nodes, edges, edge_dtype)
    graph = nir.read(tmp_path / "x.nir")
    assert graph.edges == [("input", "lif"), ("lif", "output")]
    lif = graph.nodes["lif"]
    assert lif.type == "LIF"
    assert np.array_equal(lif.params["tau"], tau)
    assert np.array_equal(lif.params["v_reset"], f32(-0.5, 0))
    assert np.array_equal(graph.nodes["input"].params["shape"], [2])


def test_old_files_get_the_parameters_nir_1_0_added(tmp_path):
    """A 0.2.0 file has no v_reset (0) and no CubaLIF w_in (1)."""
    nodes = {
        "input": ("Input", {"shape": np.array([2])}),
        "lif": (
            "LIF",
            {
                "tau": f32(0.01, 0.02),
                "r": f32(1, 1),
                "v_leak": f32(0, 0),
                "v_threshold": f32(1, 2),
            },
        ),
        "cuba": (
            "CubaLIF",
            {
                "tau_syn": f32(1, 1),
                "tau_mem": f32(2, 2),
                "r": f32(1, 1),
                "v_leak": f32(0, 0),
                "v_threshold": f32(1, 1),
            },
        ),
        "output": ("Output", {"shape": np.array([2])}),
    }
    write_by_hand(
        tmp_path / "old.nir",
        "0.2.0",
        nodes,
        [["input", "lif"], ["lif", "cuba"], ["cuba", "output"]],
        "S",
    )
    graph = nir.read(tmp_path / "old.nir")
    assert np.array_equal(graph.nodes["lif"].params["v_reset"], f32(0, 0))
    assert np.array_equal(graph.nodes["cuba"].params["v_reset"], f32(0, 0))
    assert np.array_equal(graph.nodes["cuba"].params["w_in"], f32(1, 1))


def test_bad_files_name_the_node(tmp_path):
    ok = {
        "input": ("Input", {"shape": np.array([2])}),
        "output": ("Output", {"shape": np.array([2])}),
    }
    cases = {
        "unknown type": (
            dict(ok, spiky=("Spiky", {"x": f32(1)})),
            "node 'spiky': unknown NIR type 'Spiky'",
        ),
        "missing parameter": (
            dict(ok, lif=("LIF", {"tau": f32(1), "r": f32(1)})),
            r"node 'lif' \(LIF\): missing parameter\(s\) v_leak, "
            r"v_threshold",
        ),
    }
    for name, (nodes, message) in cases.items():
        write_by_hand(
            tmp_path / "bad.nir", "1.0.7", nodes, [["input", "output"]], "S"
        )
        with pytest.raises(nir.NIRError, match=message):
            nir.read(tmp_path / "bad.nir")
    write_by_hand(tmp_path / "edge.nir", "1.0.7", ok, [["input", "lif"]], "S")
    with pytest.raises(
        nir.NIRError, match="edge 'input' -> 'lif' names 'lif'"
    ):
        nir.read(tmp_path / "edge.nir")
    # A nested graph's bad node is named by its path.
    graph = nested()
    graph.nodes["sub"].nodes["scale"] = nir.Node("Scale", {})
    with pytest.raises(
        nir.NIRError, match=r"node 'sub.scale' \(Scale\): missing"
    ):
        nir.write(tmp_path / "n.nir", graph)
    with h5py.File(tmp_path / "plain.h5", "w") as f:
        f.create_dataset("x", data=1)
    with pytest.raises(nir.NIRError, match="not a NIR file"):
        nir.read(tmp_path / "plain.h5")
    # Not HDF5 at all (an empty file, as a missing Git LFS object leaves,
    # or other bytes): an error naming the file; a missing file stays one.
    for name, data in (("empty.nir", b""), ("text.nir", b"version 1.0\n")):
        (tmp_path / name).write_bytes(data)
        with pytest.raises(
            nir.NIRError, match=f"{name}: not a NIR file \\(not HDF5"
        ):
            nir.read(tmp_path / name)
    with pytest.raises(FileNotFoundError):
        nir.read(tmp_path / "absent.nir")


def test_ids_with_dots_as_nirs_writer_makes_them(tmp_path):
    """NIR's writer joins the ids of a graph it flattened with dots
    ("lif1.lif", as in the NIR paper's recurrent network): such a file
    reads, and writes back identically; an edge naming the id is the node
    of that id."""
    nodes = {
        "input": ("Input", {"shape": np.array([3])}),
        "lif1.lif": (
            "LIF",
            {
                "tau": f32(1, 2),
                "r": f32(1, 1),
                "v_leak": f32(0, 0),
                "v_threshold": f32(1, 1),
                "v_reset": f32(0, 0),
            },
        ),
        "lif1.w_rec": ("Linear", {"weight": np.eye(2, dtype=np.float32)}),
        "fc": ("Linear", {"weight": np.ones((2, 3), np.float32)}),
        "output": ("Output", {"shape": np.array([2])}),
    }
    edges = [
        ["lif1.w_rec", "lif1.lif"],
        ["input", "fc"],
        ["fc", "lif1.lif"],
        ["lif1.lif", "lif1.w_rec"],
        ["lif1.lif", "output"],
    ]
    write_by_hand(
        tmp_path / "flat.nir",
        "1.0.7",
        nodes,
        edges,
        h5py.string_dtype("utf-8"),
    )
    graph = nir.read(tmp_path / "flat.nir")
    assert graph.nodes["lif1.w_rec"].type == "Linear"
    nir.write(tmp_path / "again.nir", graph)
    assert_same(graph, nir.read(tmp_path / "again.nir"))


def test_write_refuses_what_nir_cannot_hold(tmp_path):
    # An id "sub.scale" beside a nested graph "sub" holding "scale": an
    # edge naming it would name two nodes.
    graph = nested()
    graph.nodes["sub.scale"] = nir.Node("Scale", {"scale": f32(1, 1, 1, 1)})
    with pytest.raises(
        nir.NIRError,
        match="'sub.scale': its id also addresses a node "
        "inside the nested graph 'sub'",
    ):
        nir.write(tmp_path / "x.nir", graph)
    graph = recurrent()
    graph.edges.append(("lif", "nowhere"))
    with pytest.raises(nir.NIRError, match="names 'nowhere'"):
        nir.write(tmp_path / "x.nir", graph)
    with pytest.raises(nir.NIRError, match="unknown NIR type 'Conv3d'"):
        nir.write(tmp_path / "x.nir", nir.Graph({"c": nir.Node("Conv3d", {})}))


def test_without_h5py_the_error_says_what_to_install(monkeypatch, tmp_path):
    real_import = builtins.__import__

    def no_h5py(name, *args, **kwargs):
        if name == "h5py":
            raise ImportError("No module named 'h5py'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_h5py)
    with pytest.raises(ImportError, match="python3-h5py"):
        nir.read(tmp_path / "x.nir")
    with pytest.raises(ImportError, match=r"flexsn\[nir\]"):
        nir.write(tmp_path / "x.nir", cnn())
