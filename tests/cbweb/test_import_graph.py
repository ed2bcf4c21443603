"""The web side, the workers and the kernels have no import cycle, function-level imports included.

import-linter's contracts say which package may import which; a cycle inside one package (the run
services importing dispatch, which imports execution, which imports the services) breaks none of
them, so the graph itself is checked here with grimp (import-linter's library) and networkx.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import grimp
import networkx as nx
import pytest

PACKAGES = ("cbweb", "workers", "cbkernels")


def import_cycles(*packages: str) -> list[list[str]]:
    """Return one cycle (module names, in import order) per group of modules that import each other.

    grimp records every import statement, wherever it stands (in a function, under TYPE_CHECKING).
    """
    graph = grimp.build_graph(*packages, cache_dir=None)
    edges = nx.DiGraph()
    for module in graph.modules:
        edges.add_node(module)
        for imported in graph.find_modules_directly_imported_by(module):
            edges.add_edge(module, imported)
    cycles = []
    for group in nx.strongly_connected_components(edges):
        if len(group) > 1 or any(edges.has_edge(m, m) for m in group):
            cycle = nx.find_cycle(edges.subgraph(group))
            cycles.append([a for a, _ in cycle] + [cycle[0][0]])
    return sorted(cycles)


def test_the_web_side_workers_and_kernels_have_no_import_cycle() -> None:
    cycles = import_cycles(*PACKAGES)
    assert not cycles, "import cycles:\n" + "\n".join(" -> ".join(c) for c in cycles)


def test_a_cycle_through_a_function_level_import_is_found_and_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    package = tmp_path / "cyclic_pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "services.py").write_text(
        textwrap.dedent(
            """\
            def create():
                from cyclic_pkg.dispatch import enqueue

                enqueue()
            """
        )
    )
    (package / "dispatch.py").write_text("from cyclic_pkg.services import create\n\ndef enqueue(): ...\n")
    (package / "models.py").write_text("")
    monkeypatch.syspath_prepend(str(tmp_path))
    [cycle] = import_cycles("cyclic_pkg")
    assert set(cycle) == {"cyclic_pkg.services", "cyclic_pkg.dispatch"}
    assert cycle[0] == cycle[-1] and len(cycle) == 3
