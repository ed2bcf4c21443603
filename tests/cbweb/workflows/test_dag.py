"""The DAG drawing: columns by depth, computed without recursion, cycles drawn without looping."""

from __future__ import annotations

from cbweb.workflows.dag import DagNode, _depths, dag_svg


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
