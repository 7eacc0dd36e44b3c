"""NIR files (the Neuromorphic Intermediate Representation), read and
written without the `nir` package: `read(path)` and `write(path, graph)`
on NIR's HDF5 layout (docs/NIR.md).

A file holds a dataset `version` and a group `node`: the top graph. Each
node is a group with a string dataset `type` and one dataset per
parameter; a graph (`type` "NIRGraph") also has a group `nodes`, one
subgroup per node named by its id, and a dataset `edges` of (source,
target) id pairs, where "sub.node" names a node inside the nested graph
"sub". A group `metadata` may ride along on any node: it is kept, never
interpreted.

Here a graph is a `Graph` (its nodes by id, its edges, its metadata) and
every other node a `Node` (its type, its parameters by name as NumPy
arrays, strings or numbers, its metadata). Reading checks what can be
checked without running the graph: every node's type is a NIR primitive,
each of its parameters is there (those NIR 1.0 added get their defaults
in an older file), and every edge names nodes of its graph; an error names
the node or the edge. h5py is needed (Debian's python3-h5py, or `pip
install flexsn[nir]`) and imported only here.
"""

import dataclasses
import pathlib
from typing import Dict, List, Tuple, Union

try:
    import numpy as np
except ImportError:  # said by _h5py(), when a file is read or written
    np = None

#: The version of NIR's format this module writes (and reads: every 1.0.x
#: file and the 0.2.0 files before it).
VERSION = "1.0.7"

#: Each primitive's parameters: those a file must hold, then those with a
#: default (NIR 1.0 added them, so a 0.2.0 file may not), as a function of
#: the parameters read.
PRIMITIVES = {
    "Input": (("shape",), {}),
    "Output": (("shape",), {}),
    "Affine": (("weight", "bias"), {}),
    "Linear": (("weight",), {}),
    "Scale": (("scale",), {}),
    "Conv1d": (
        ("weight", "stride", "padding", "dilation", "groups", "bias"),
        {},
    ),
    "Conv2d": (
        ("weight", "stride", "padding", "dilation", "groups", "bias"),
        {},
    ),
    "SumPool2d": (("kernel_size", "stride", "padding"), {}),
    "AvgPool2d": (("kernel_size", "stride", "padding"), {}),
    "Flatten": (("start_dim", "end_dim"), {}),
    "Threshold": (("threshold",), {}),
    "Delay": (("delay",), {}),
    "I": (("r",), {}),
    "LI": (("tau", "r", "v_leak"), {}),
    "IF": (
        ("r", "v_threshold"),
        {"v_reset": lambda p: np.zeros_like(p["v_threshold"])},
    ),
    "LIF": (
        ("tau", "r", "v_leak", "v_threshold"),
        {"v_reset": lambda p: np.zeros_like(p["v_threshold"])},
    ),
    "CubaLI": (
        ("tau_syn", "tau_mem", "r", "v_leak"),
        {"w_in": lambda p: np.ones_like(p["tau_syn"])},
    ),
    "CubaLIF": (
        ("tau_syn", "tau_mem", "r", "v_leak", "v_threshold"),
        {
            "v_reset": lambda p: np.zeros_like(p["v_threshold"]),
            "w_in": lambda p: np.ones_like(p["tau_syn"]),
        },
    ),
}

GRAPH = "NIRGraph"


class NIRError(ValueError):
    """A NIR file or graph that this module cannot read or write: the
    message names the node or edge."""


@dataclasses.dataclass
class Node:
    """A NIR primitive: its `type` (a key of PRIMITIVES) and its
    parameters by name."""

    type: str
    params: Dict[str, object] = dataclasses.field(default_factory=dict)
    metadata: Dict[str, object] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass
class Graph:
    """A NIR graph: its nodes (Node or Graph) by id, and its edges as
    (source, target) ids, "sub.node" addressing inside a nested graph."""

    nodes: Dict[str, Union[Node, "Graph"]]
    edges: List[Tuple[str, str]] = dataclasses.field(default_factory=list)
    metadata: Dict[str, object] = dataclasses.field(default_factory=dict)
    type: str = dataclasses.field(default=GRAPH, init=False)


def _h5py():
    try:
        if np is None:
            raise ImportError("numpy")
        import h5py
    except ImportError:
        raise ImportError(
            "flexsn.nir needs h5py to read and write NIR's HDF5 files: "
            "install Debian's python3-h5py (apt install python3-h5py) or "
            "`pip install flexsn[nir]`"
        ) from None
    return h5py


def _value(dataset):
    """A dataset's value: text for a string, else a NumPy array or
    scalar as stored."""
    value = dataset[()]
    if isinstance(value, bytes):
        return value.decode("utf-8")
    return value


def _metadata(group) -> Dict[str, object]:
    if "metadata" not in group:
        return {}
    return {
        key: _value(item)
        for key, item in group["metadata"].items()
        if not hasattr(item, "keys")
    }


def _read_node(group, where: str):
    if "type" not in group:
        raise NIRError(f"node {where!r}: no 'type' dataset")
    kind = _value(group["type"])
    if kind == GRAPH:
        if "nodes" not in group:
            raise NIRError(f"graph {where!r}: no 'nodes' group")
        nodes = {
            name: _read_node(child, _join(where, name))
            for name, child in group["nodes"].items()
        }
        edges = []
        if "edges" in group:
            raw = group["edges"][()]
            if raw.size and (raw.ndim != 2 or raw.shape[1] != 2):
                raise NIRError(
                    f"graph {where!r}: 'edges' must be N x 2, got "
                    f"shape {raw.shape}"
                )
            edges = [
                tuple(
                    e.decode("utf-8") if isinstance(e, bytes) else str(e)
                    for e in pair
                )
                for pair in raw.reshape(-1, 2)
            ]
        graph = Graph(nodes, edges, _metadata(group))
        check_edges(graph, where)
        return graph
    if kind not in PRIMITIVES:
        raise NIRError(
            f"node {where!r}: unknown NIR type {kind!r} (known: "
            f"{', '.join(sorted(PRIMITIVES))}, {GRAPH})"
        )
    params = {
        name: _value(item)
        for name, item in group.items()
        if name not in ("type", "metadata") and not hasattr(item, "keys")
    }
    required, defaults = PRIMITIVES[kind]
    missing = [name for name in required if name not in params]
    if missing:
        raise NIRError(
            f"node {where!r} ({kind}): missing parameter(s) "
            f"{', '.join(missing)}"
        )
    for name, default in defaults.items():
        if name not in params:
            params[name] = default(params)
    return Node(kind, params, _metadata(group))


def _join(graph: str, name: str) -> str:
    return name if not graph else f"{graph}.{name}"


def _nested(graph: Graph, address: str):
    """The nodes that `address` names inside the nested graphs of `graph`:
    "sub.node" the node "node" of the graph "sub", at every '.' (ids may
    hold dots: NIR's own writer joins a flattened graph's ids with them)."""
    found = []
    for i, char in enumerate(address):
        if char == ".":
            sub = graph.nodes.get(address[:i])
            node = (
                _resolve(sub, address[i + 1 :])
                if isinstance(sub, Graph)
                else None
            )
            if node is not None:
                found.append((address[:i], node))
    return found


def _resolve(graph: Graph, address: str):
    """The node an edge's end names in `graph`: the node of that id, else
    one inside a nested graph ("sub.node"), else None."""
    node = graph.nodes.get(address)
    if node is not None:
        return node
    found = _nested(graph, address)
    return found[0][1] if found else None


def _check_unambiguous(graph: Graph, name: str, where: str) -> None:
    """Raises NIRError where the id `name` ("a.b") would also address a
    node inside a nested graph of `graph` ("b" of the graph "a")."""
    found = _nested(graph, name)
    if found:
        raise NIRError(
            f"node {_join(where, name)!r}: its id also addresses "
            f"a node inside the nested graph "
            f"{_join(where, found[0][0])!r}"
        )


def check_edges(graph: Graph, where: str = "") -> None:
    """Raises NIRError for an edge whose end names no node of `graph`."""
    for source, target in graph.edges:
        for end in (source, target):
            if _resolve(graph, end) is None:
                raise NIRError(
                    f"graph {where or '<top>'!r}: edge {source!r} -> "
                    f"{target!r} names {end!r}, which is no node of it"
                )


def read(path: Union[str, pathlib.Path]) -> Union[Graph, Node]:
    """The graph (or the single node) of the NIR file at `path`, written by
    NIR 1.0.x, by its 0.2.0 predecessor, or by `write`."""
    h5py = _h5py()
    try:
        f = h5py.File(path, "r")
    except FileNotFoundError:
        raise
    except OSError as error:  # h5py's message does not name the file
        raise NIRError(f"{path}: not a NIR file (not HDF5: {error})") from None
    with f:
        if "node" not in f:
            raise NIRError(f"{path}: not a NIR file (no 'node' group)")
        return _read_node(f["node"], "")


def _write_value(h5py, group, name: str, value, compression) -> None:
    if isinstance(value, str):
        group.create_dataset(name, data=value, dtype=h5py.string_dtype())
    elif isinstance(value, np.ndarray) and value.ndim > 0:
        group.create_dataset(name, data=value, compression=compression)
    else:
        group.create_dataset(name, data=value)


def _write_node(h5py, group, node, where: str, compression) -> None:
    if isinstance(node, Graph):
        check_edges(node, where)
        _write_value(h5py, group, "type", GRAPH, None)
        nodes = group.create_group("nodes")
        for name, child in node.nodes.items():
            _check_unambiguous(node, name, where)
            _write_node(
                h5py,
                nodes.create_group(name),
                child,
                _join(where, name),
                compression,
            )
        edges = np.array(node.edges, dtype=object).reshape(-1, 2)
        group.create_dataset(
            "edges", data=edges, dtype=h5py.string_dtype("utf-8")
        )
    else:
        if node.type not in PRIMITIVES:
            raise NIRError(f"node {where!r}: unknown NIR type {node.type!r}")
        required, _ = PRIMITIVES[node.type]
        missing = [name for name in required if name not in node.params]
        if missing:
            raise NIRError(
                f"node {where!r} ({node.type}): missing "
                f"parameter(s) {', '.join(missing)}"
            )
        _write_value(h5py, group, "type", node.type, None)
        for name, value in node.params.items():
            _write_value(h5py, group, name, value, compression)
    if node.metadata:
        meta = group.create_group("metadata")
        for name, value in node.metadata.items():
            _write_value(h5py, meta, name, value, None)


def write(
    path: Union[str, pathlib.Path],
    graph: Union[Graph, Node],
    compression="gzip",
) -> None:
    """Writes `graph` to `path` in NIR's HDF5 layout, its array parameters
    compressed with `compression` (gzip, as NIR writes them; None for
    none)."""
    h5py = _h5py()
    with h5py.File(path, "w") as f:
        f.create_dataset("version", data=VERSION, dtype=h5py.string_dtype())
        _write_node(h5py, f.create_group("node"), graph, "", compression)
