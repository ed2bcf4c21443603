"""The engine has no import cycle, counting every import: module level, inside functions, and
under ``TYPE_CHECKING`` (grimp, import-linter's graph library, sees them all)."""

from __future__ import annotations

from pathlib import Path

import grimp
import networkx as nx
import pytest


def import_cycle(package: str) -> list[str]:
    """Return one import cycle among ``package``'s modules, each with the line that imports the
    next (``a (l.3) -> b``), or an empty list when the package's import graph is acyclic."""
    graph = grimp.build_graph(package, cache_dir=None)
    digraph = nx.DiGraph()
    digraph.add_nodes_from(graph.modules)
    for module in graph.modules:
        digraph.add_edges_from(
            (module, imported) for imported in graph.find_modules_directly_imported_by(module)
        )
    try:
        edges = nx.find_cycle(digraph)
    except nx.NetworkXNoCycle:
        return []
    steps = []
    for importer, imported in edges:
        lines = sorted(
            d["line_number"] for d in graph.get_import_details(importer=importer, imported=imported)
        )
        steps.append(f"{importer} (l.{lines[0]}) -> {imported}")
    return steps


def test_the_engine_has_no_import_cycle() -> None:
    cycle = import_cycle("benchmarks")
    assert not cycle, "import cycle in the engine:\n  " + "\n  ".join(cycle)


def test_an_import_inside_a_function_closes_a_cycle(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    package = tmp_path / "cyclic_pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "a.py").write_text("import cyclic_pkg.b\n")
    (package / "b.py").write_text("def late():\n    from cyclic_pkg import a\n    return a\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    cycle = import_cycle("cyclic_pkg")
    assert sorted(cycle) == ["cyclic_pkg.a (l.1) -> cyclic_pkg.b", "cyclic_pkg.b (l.2) -> cyclic_pkg.a"]
