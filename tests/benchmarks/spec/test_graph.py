"""The DAG questions: topological order (graphlib) and the largest set of nodes that may run at once
(benchmarks.spec.graph), against the exhaustive algorithms they replaced (benchmarks.perf.spec_limits)."""

from __future__ import annotations

import time
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from benchmarks.perf.spec_limits import (
    chain_workflow,
    old_concurrent_sets_max,
    old_topological_order,
    pairs_workflow,
)
from benchmarks.spec.graph import concurrent_sets_max
from benchmarks.spec.load import load_yaml
from benchmarks.spec.model import Node, Workflow, WorkflowValidationError


def problems(call: Any) -> str:
    with pytest.raises(WorkflowValidationError) as info:
        call()
    return "\n".join(e.message for e in info.value.errors)


def python_workflow(deps: dict[str, list[str]], background: frozenset[str] = frozenset()) -> Workflow:
    """A Workflow built in Python through the model alone (its validators check the graph)."""
    unit = load_yaml("a: {type: Sleep}\n").applications["a"]
    nodes = {
        n: Node(name=n, uses="a", depend_on=tuple(d), background=n in background) for n, d in deps.items()
    }
    return Workflow(name="w", applications={"a": unit}, nodes=nodes)


def foreground_after(wf: Workflow) -> dict[str, set[str]]:
    """For each node, the nodes it reaches through foreground dependencies (cannot overlap with it)."""
    after: dict[str, set[str]] = {n: set() for n in wf.nodes}
    for name in wf.topological_order():
        for dep in wf.nodes[name].depend_on:
            if not wf.nodes[dep].background:
                after[name] |= {dep} | after[dep]
    return after


# -- topological order ------------------------------------------------------------------------------


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_topological_order_is_the_old_stable_order(data: st.DataObject) -> None:
    n = data.draw(st.integers(1, 12))
    names = [f"n{i}" for i in data.draw(st.permutations(range(n)))]
    # Edges only towards a lower hidden rank: a DAG, defined in a shuffled order.
    rank = {name: data.draw(st.integers(0, 100)) for name in names}
    deps = {a: [b for b in names if rank[b] < rank[a] and data.draw(st.booleans())] for a in names}
    wf = python_workflow(deps)
    assert wf.topological_order() == old_topological_order(wf)


def test_topological_order_of_a_long_chain_is_fast() -> None:
    wf = chain_workflow(5000)
    start = time.process_time()  # CPU time: a loaded machine's waits do not count
    assert wf.topological_order() == [f"n{i}" for i in range(5000)]
    assert time.process_time() - start < 2


# -- the partition share check ----------------------------------------------------------------------


@st.composite
def weighted_dags(draw: st.DrawFn) -> tuple[Workflow, dict[str, int]]:
    n = draw(st.integers(1, 9))
    names = [f"n{i}" for i in range(n)]
    deps = {names[i]: [names[j] for j in range(i) if draw(st.booleans())] for i in range(n)}
    background = frozenset(x for x in names if draw(st.integers(0, 3)) == 0)
    weight = {x: draw(st.sampled_from([0, 1, 5, 20, 33, 50, 100])) for x in names}
    return python_workflow(deps, background), weight


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(weighted_dags())
def test_largest_concurrent_share_equals_the_old_exhaustive_search(case: Any) -> None:
    wf, weight = case
    total, chosen = concurrent_sets_max(wf, weight)
    assert total == old_concurrent_sets_max(wf, weight)[0]
    assert total == sum(weight[n] for n in chosen)
    assert all(weight[n] > 0 for n in chosen)
    # The nodes returned can all run at once: none reaches another through foreground nodes.
    after = foreground_after(wf)
    assert all(a not in after[b] for a in chosen for b in chosen)


def test_the_partition_check_of_24_pairs_is_fast_and_right() -> None:
    start = time.process_time()  # CPU time: a loaded machine's waits do not count
    wf = pairs_workflow(24, 4)
    assert concurrent_sets_max(wf, {n: 4 for n in wf.nodes})[0] == 96
    assert "120 %" in problems(lambda: load_yaml("scheduler: partition\n" + pairs_text(24, 5)))
    load_yaml("scheduler: partition\n" + pairs_text(24, 4))
    assert time.process_time() - start < 5


def pairs_text(pairs: int, share: int) -> str:
    nodes = "".join(f"  p{i}: {{uses: a}}\n  q{i}: {{uses: a, depend_on: [p{i}]}}\n" for i in range(pairs))
    return f"a: {{type: Sleep, mps: {share}}}\nworkflows:\n{nodes}"
