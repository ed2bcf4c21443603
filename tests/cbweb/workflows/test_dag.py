"""The DAG drawing: columns by depth, computed without recursion, cycles drawn without looping."""

from __future__ import annotations

import re

from cbweb.workflows.dag import DagNode, _depths, crossings, dag_svg, nodes_of_spec


def test_a_chain_of_5000_nodes_is_laid_out_one_column_per_node() -> None:
    nodes = [DagNode("n0", "Sleep")] + [DagNode(f"n{i}", "Sleep", (f"n{i - 1}",)) for i in range(1, 5000)]
    depth = _depths(list(reversed(nodes)))
    assert depth["n0"] == 0 and depth["n4999"] == 4999


def test_a_node_goes_right_of_its_deepest_dependency() -> None:
    nodes = [
        DagNode("a", "Sleep"),
        DagNode("b", "Sleep", ("a",)),
        DagNode("c", "Sleep", ("a", "b", "ghost")),
    ]
    assert _depths(nodes) == {"a": 0, "b": 1, "c": 2}


def test_a_cycle_and_what_follows_it_are_drawn_without_looping() -> None:
    nodes = [
        DagNode("a", "Sleep", ("b",)),
        DagNode("b", "Sleep", ("a",)),
        DagNode("c", "Sleep", ("b",)),
        DagNode("self", "Sleep", ("self",)),
    ]
    depth = _depths(nodes)
    assert set(depth) == {"a", "b", "c", "self"}
    assert depth["self"] == 0
    assert depth["c"] > depth["b"]
    assert dag_svg(nodes).count('<g class="node') == 4


def test_a_cycle_is_drawn_with_a_loop_for_its_closing_edge_and_its_nodes_marked() -> None:
    svg = dag_svg(
        [
            DagNode("a", "Sleep", ("c",)),
            DagNode("b", "Sleep", ("a",)),
            DagNode("c", "Sleep", ("b",)),
            DagNode("d", "Sleep", ("c",)),
        ]
    )
    assert svg.count('class="edge"') == 3 and svg.count('class="edge back"') == 1
    marked = {m for m in ("a", "b", "c", "d") if f'class="node invalid" data-node="{m}"' in svg}
    assert marked == {"a", "b", "c"}


def test_a_model_servers_clients_are_drawn_after_it_with_a_served_by_edge() -> None:
    spec = {
        "llm": {"type": "LLMServer", "model": "smollm2-135m"},
        "chat": {"type": "Chatbot", "server": "llm", "num_requests": 2},
        "notes": {"type": "Chatbot", "server": "llm"},
        "art": {"type": "ImageGen"},
        "workflows": {
            "serve": {"uses": "llm", "background": True},
            "a": {"uses": "chat"},
            "b": {"uses": "notes", "depend_on": ["a", "serve"]},
            "c": {"uses": "art", "depend_on": ["a"]},
        },
    }
    nodes = {n.name: n for n in nodes_of_spec(spec)}
    assert nodes["a"].served_by == ("serve",) and nodes["a"].depend_on == ()
    assert nodes["b"].after == ("a", "serve")  # a server also named in depend_on is one edge
    assert nodes["serve"].served_by == () and nodes["c"].served_by == ()
    assert _depths(list(nodes.values())) == {"serve": 0, "a": 1, "b": 2, "c": 2}
    svg = dag_svg(list(nodes.values()))
    assert svg.count('class="edge serves"') == 1 and "<title>a is served by serve</title>" in svg
    assert "<title>b depends on serve</title>" in svg and svg.count('class="edge"') == 3


def test_an_edge_over_a_column_runs_in_the_gap_under_its_rows_not_through_the_box_between() -> None:
    svg = dag_svg([DagNode("a", "Sleep"), DagNode("b", "Sleep", ("a",)), DagNode("c", "Sleep", ("a", "b"))])
    edge = r'<path class="edge" d="([^"]+)"[^>]*><title>([^<]+)<'
    routes = {title: d for d, title in re.findall(edge, svg)}
    # a -> c passes column 1 (b's box, on the same row) along the gap under the row; b -> c is one curve.
    lane = 10 + 44 + 18 / 2
    assert "L " in routes["c depends on a"] and f" {lane:.1f} " in routes["c depends on a"]
    assert "L " not in routes["c depends on b"]


def rows_of(svg: str) -> dict[str, float]:
    return {
        name: float(y)
        for name, y in re.findall(r'data-node="([^"]+)"><title>[^<]*</title><rect x="[^"]+" y="([^"]+)"', svg)
    }


def test_nodes_in_a_column_are_ordered_so_that_edges_do_not_cross() -> None:
    # In the file's order d comes before c: a -> c and b -> d would cross.
    nodes = [
        DagNode("a", "Sleep"),
        DagNode("b", "Sleep"),
        DagNode("d", "Sleep", ("b",)),
        DagNode("c", "Sleep", ("a",)),
        DagNode("e", "Sleep", ("d",)),
        DagNode("f", "Sleep", ("c",)),
    ]
    columns = {0: ["a", "b"], 1: ["d", "c"], 2: ["e", "f"]}
    edges = [(dep, n.name) for n in nodes for dep in n.depend_on]
    assert crossings(columns, edges) == 1
    rows = rows_of(dag_svg(nodes))
    assert rows["a"] < rows["b"] and rows["c"] < rows["d"] and rows["f"] < rows["e"]
    assert crossings({0: ["a", "b"], 1: ["c", "d"], 2: ["f", "e"]}, edges) == 0


def test_the_files_order_stays_where_reordering_would_not_cross_fewer_edges() -> None:
    # A complete bipartite pair of columns: every order crosses the same number of edges.
    nodes = [DagNode("x", "Sleep"), DagNode("y", "Sleep")] + [
        DagNode(name, "Sleep", ("x", "y")) for name in ("q", "p")
    ]
    rows = rows_of(dag_svg(nodes))
    assert rows["x"] < rows["y"] and rows["q"] < rows["p"]
