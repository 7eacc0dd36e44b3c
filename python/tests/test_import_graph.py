"""No import cycle in the flexsn package: every `import` and `from ...
import` of one of its modules by another, at any depth of the file (an
import inside a function, which hides a cycle from the interpreter at
load time, counts), read from the sources. Importing a module's own
package (which Python does first anyway) is not an edge."""

import ast
import pathlib

PACKAGE = pathlib.Path(__file__).resolve().parents[1] / "flexsn"


def module_names(root: pathlib.Path) -> dict:
    """{dotted name: path} of the package at `root`."""
    names = {}
    for path in root.rglob("*.py"):
        parts = path.relative_to(root.parent).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        names[".".join(parts)] = path
    return names


def import_graph(root: pathlib.Path) -> dict:
    """{module: the package's modules it imports}."""
    modules = module_names(root)
    graph = {name: set() for name in modules}
    for name, path in modules.items():
        package = (
            name if path.name == "__init__.py" else name.rpartition(".")[0]
        )
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parts = package.split(".")
                    parts = parts[: len(parts) - node.level + 1]
                    base = ".".join(parts + ([base] if base else []))
                submodules = [f"{base}.{alias.name}" for alias in node.names]
                targets = [m for m in submodules if m in modules]
                if len(targets) < len(submodules):
                    targets.append(base)  # names defined in `base` itself
            else:
                continue
            graph[name].update(
                t
                for t in targets
                if t in modules and t != name and not name.startswith(t + ".")
            )
    return graph


def cycles(graph: dict) -> list:
    """The strongly connected components of more than one module."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_flexsn_has_no_import_cycle():
    graph = import_graph(PACKAGE)
    assert "flexsn.compiler" in graph and "flexsn._runtime" in graph
    assert "flexsn._runtime" in graph["flexsn.compiler"]
    assert cycles(graph) == []


def test_a_cycle_through_a_lazy_import_is_found(tmp_path):
    package = tmp_path / "pkg"
    (package / "sub").mkdir(parents=True)
    (package / "__init__.py").write_text("from .a import f\n")
    (package / "a.py").write_text("from . import b\n\ndef f():\n    pass\n")
    (package / "b.py").write_text(
        "def g():\n    from .sub.c import h\n    return h\n"
    )
    (package / "sub" / "__init__.py").write_text("")
    (package / "sub" / "c.py").write_text("from .. import a\nh = a.f\n")
    graph = import_graph(package)
    assert graph["pkg.sub.c"] == {"pkg.a"}  # not its packages
    assert cycles(graph) == [["pkg.a", "pkg.b", "pkg.sub.c"]]
