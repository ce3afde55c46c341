"""The package's import layers (docs/architecture.rst): no import circle, and the layers pinned.

The graph is read from the source with :mod:`ast`, not by importing: every ``import`` of a
``mkrk_dask`` module counts, at module level, inside a function or under ``TYPE_CHECKING``. A
function-local import that goes back up a layer is still a circle, only a hidden one. (Imports
by name through :mod:`importlib`, as the package's lazy ``__getattr__`` and
``cli/models.py`` make, are not seen.) A package's ``__init__`` counts as a module of its own;
importing a submodule is not counted as importing its parent package.

An edge that must stay for now is listed in :data:`EXCEPTIONS` with the reason; the test fails
when a listed edge is gone, so that the list only shrinks.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable
from pathlib import Path

import pytest

PACKAGE = "mkrk_dask"
ROOT = Path(__file__).resolve().parent.parent / PACKAGE

#: (importer, imported) edges left out of the graph, each with why it is still there
EXCEPTIONS: dict[tuple[str, str], str] = {}

#: the modules above the estimators: they run, save or drive them
ABOVE_ESTIMATORS = {"mkrk_dask.model_io", "mkrk_dask.protocol", "mkrk_dask.protocol.run",
                    "mkrk_dask.protocol.methods"}

#: what nothing under backends/ imports: the loop, the plan, the estimators, the search, the
#: paper's protocol, saved models and the command line
ABOVE_BACKENDS = ("mkrk_dask.loop", "mkrk_dask.weight_steps", "mkrk_dask.plan",
                  "mkrk_dask.estimators", "mkrk_dask.search", "mkrk_dask.protocol",
                  "mkrk_dask.protocol.methods", "mkrk_dask.model_io", "mkrk_dask.cli")


def _modules() -> dict[str, tuple[Path, bool]]:
    """Every module of the package: dotted name -> (file, whether it is a package)."""
    found = {}
    for path in sorted(ROOT.rglob("*.py")):
        parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
        is_package = parts[-1] == "__init__"
        if is_package:
            parts.pop()
        found[".".join(parts)] = (path, is_package)
    return found


MODULES = _modules()


def _owner(name: str) -> str | None:
    """The module ``name`` is, or the nearest enclosing one (``pkg.mod.attr`` -> ``pkg.mod``)."""
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


def _imports(module: str) -> dict[str, list[int]]:
    """The package's modules ``module`` imports, with the lines of the imports."""
    path, is_package = MODULES[module]
    package = module if is_package else module.rpartition(".")[0]
    found: dict[str, list[int]] = {}

    def add(target: str | None, line: int) -> None:
        if target is not None and target != module:
            found.setdefault(target, []).append(line)

    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == PACKAGE:
                    add(_owner(alias.name), node.lineno)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[:len(parts) - node.level + 1]
                                + ([node.module] if node.module else []))
            else:
                base = node.module or ""
            if base.split(".")[0] != PACKAGE:
                continue
            for alias in node.names:
                # "from pkg import sub" imports the module pkg.sub; "from mod import name" mod
                full = f"{base}.{alias.name}"
                add(full if full in MODULES else _owner(base), node.lineno)
    return found


def _graph(exceptions: Iterable[tuple[str, str]] = ()) -> dict[str, dict[str, list[int]]]:
    graph = {module: _imports(module) for module in MODULES}
    for importer, imported in exceptions:
        graph[importer].pop(imported, None)
    return graph


GRAPH = _graph(EXCEPTIONS)


def _cycles(graph: dict[str, dict[str, list[int]]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
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


def _shortest_circle(graph: dict[str, dict[str, list[int]]], component: list[str]) -> list[str]:
    """The shortest circle through the modules of a strongly connected ``component``."""
    best: list[str] = []
    for start in component:
        parents = {start: ""}
        queue = [start]
        while queue:
            v = queue.pop(0)
            for w in graph[v]:
                if w == start:
                    path = [v]
                    while parents[path[-1]]:
                        path.append(parents[path[-1]])
                    path = path[::-1] + [start]
                    if not best or len(path) < len(best):
                        best = path
                    queue = []
                    break
                if w in component and w not in parents:
                    parents[w] = v
                    queue.append(w)
    return best


def _below(module_prefix: str) -> set[str]:
    """Every module the modules under ``module_prefix`` import, directly or not."""
    seen: set[str] = set()
    todo = [m for m in GRAPH if _under(m, module_prefix)]
    while todo:
        for w in GRAPH[todo.pop()]:
            if w not in seen:
                seen.add(w)
                todo.append(w)
    return {m for m in seen if not _under(m, module_prefix)}


def _under(module: str, prefix: str) -> bool:
    return module == prefix or module.startswith(prefix + ".")


def _importers(prefix: str) -> dict[str, list[int]]:
    """The modules outside ``prefix`` that import a module under it, with the lines."""
    return {m: [line for t, lines in targets.items() if _under(t, prefix) for line in lines]
            for m, targets in GRAPH.items()
            if not _under(m, prefix) and any(_under(t, prefix) for t in targets)}


def test_the_graph_is_read():
    """The reader sees relative, absolute and function-local imports (else every check below
    passes on an empty graph)."""
    assert len(MODULES) > 50
    assert "mkrk_dask.backends.factory" in GRAPH["mkrk_dask.backends"]  # from .factory import
    assert "mkrk_dask.kernels" in GRAPH["mkrk_dask.backends.blockwise.build"]  # from ...kernels
    assert "mkrk_dask.backends.nystrom.backend" in GRAPH["mkrk_dask.backends.factory"]  # in a def
    assert "mkrk_dask.estimators" in GRAPH["mkrk_dask.cli.commands"]  # from ..estimators import


def test_no_import_circles():
    cycles = _cycles(GRAPH)
    lines = []
    for component in cycles:
        circle = _shortest_circle(GRAPH, component)
        lines.append(f"{len(component)} modules in a circle, such as: " + " -> ".join(
            f"{a} (line {GRAPH[a][b][0]})" for a, b in zip(circle, circle[1:], strict=False))
            + f" -> {circle[-1]}")
    assert not cycles, ("import circles (move the shared piece to the lower module):\n"
                        + "\n".join(lines))


@pytest.mark.parametrize("edge", sorted(EXCEPTIONS))
def test_every_exception_is_still_needed(edge):
    importer, imported = edge
    assert imported in _imports(importer), (f"{importer} no longer imports {imported}: "
                                            "delete its entry from EXCEPTIONS")


def test_only_the_command_line_imports_it():
    assert _importers("mkrk_dask.cli") == {}


def test_nothing_below_the_estimators_imports_them():
    importers = {m: lines for m, lines in _importers("mkrk_dask.estimators").items()
                 if m not in ABOVE_ESTIMATORS and not _under(m, "mkrk_dask.cli")}
    assert importers == {}, ("these modules import the estimators: move that dependency up "
                             "(or, for a module above them, add it to ABOVE_ESTIMATORS)")
    assert not _below("mkrk_dask.estimators") & ABOVE_ESTIMATORS


def test_the_backends_import_only_building_blocks():
    below = _below("mkrk_dask.backends")
    assert sorted(m for m in below if any(_under(m, top) for top in ABOVE_BACKENDS)) == []


def test_a_circle_is_found():
    """The cycle check on a made-up graph: a function-local import back up is a circle."""
    graph = {"a": {"b": [1]}, "b": {"c": [2]}, "c": {"a": [30]}, "d": {"a": [4]}}
    assert _cycles(graph) == [["a", "b", "c"]]
    assert _shortest_circle(graph, ["a", "b", "c"]) == ["a", "b", "c", "a"]
    assert _cycles({"a": {"b": [1]}, "b": {}}) == []
