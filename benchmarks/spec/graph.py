"""Questions about a workflow's DAG beyond its order: which nodes run after which, which may overlap.

The order itself is ``Workflow.topological_order`` (graphlib); the largest set of nodes that may run
at the same time is a maximum-weight antichain, found with one max-flow in networkx.
"""

from __future__ import annotations

from collections.abc import Mapping

import networkx as nx

from benchmarks.spec.model import Workflow


def runs_after(workflow: Workflow) -> dict[str, set[str]]:
    """Return, for every node, the nodes it reaches through foreground dependencies only: the nodes
    that have finished before it starts (a background dependency runs on beside its dependents)."""
    after: dict[str, set[str]] = {n: set() for n in workflow.nodes}
    for name in workflow.topological_order():
        for dep in workflow.nodes[name].depend_on:
            if not workflow.nodes[dep].background:
                after[name] |= {dep} | after[dep]
    return after


def concurrent_sets_max(workflow: Workflow, weight: Mapping[str, int]) -> tuple[int, list[str]]:
    """Return the largest total weight of nodes that can run at the same time, and those nodes.

    Two nodes cannot overlap when one reaches the other through foreground nodes only: a background
    node keeps running after its dependents start, so it overlaps with them. That relation is a
    partial order, so the answer is a maximum-weight antichain. By Dilworth's theorem applied to each
    node copied ``weight`` times it is the total weight minus a maximum flow from the earlier to the
    later copies; the nodes are read off the minimum cut (polynomial: one max-flow on 2n+2 vertices).
    """
    names = [n for n in workflow.nodes if weight.get(n, 0) > 0]
    if not names:
        return 0, []
    after = runs_after(workflow)
    graph = nx.DiGraph()
    for n in names:
        graph.add_edge("source", ("early", n), capacity=weight[n])
        graph.add_edge(("late", n), "sink", capacity=weight[n])
    for later in names:
        for earlier in after[later]:
            if weight.get(earlier, 0) > 0:
                graph.add_edge(("early", earlier), ("late", later))  # no capacity: unbounded
    flow, (reachable, _) = nx.minimum_cut(graph, "source", "sink")
    chosen = [n for n in names if ("early", n) in reachable and ("late", n) not in reachable]
    total = sum(weight[n] for n in chosen)
    assert total == sum(weight[n] for n in names) - flow, "min cut does not give a maximum antichain"
    return total, chosen
