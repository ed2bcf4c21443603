"""The spec's input limits, its topological order and the partition share check (issue 17, item 3)."""

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
from benchmarks.schedulers.mps import ShareError, partition_share_plan
from benchmarks.spec.graph import concurrent_sets_max
from benchmarks.spec.load import from_dict, load_yaml
from benchmarks.spec.model import (
    DEFAULT_LIMITS,
    Limits,
    Node,
    Workflow,
    WorkflowValidationError,
    requests_per_run,
)


def problems(call: Any) -> str:
    with pytest.raises(WorkflowValidationError) as info:
        call()
    return "\n".join(e.message for e in info.value.errors)


def python_workflow(deps: dict[str, list[str]], background: frozenset[str] = frozenset()) -> Workflow:
    """A Workflow built in Python (not through a loader, so nothing checked its graph)."""
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


def test_topological_order_of_a_python_built_cycle_raises_naming_the_cycle_instead_of_looping() -> None:
    wf = python_workflow({"x": [], "a": ["c"], "b": ["a"], "c": ["b"]})
    with pytest.raises(ValueError, match="dependency cycle: ") as info:
        wf.topological_order()
    assert set(str(info.value).split(": ")[1].split(" -> ")) == {"a", "b", "c"}


def test_topological_order_of_an_unknown_dependency_raises() -> None:
    with pytest.raises(ValueError, match="unknown node"):
        python_workflow({"a": ["ghost"]}).topological_order()


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
    start = time.perf_counter()
    assert wf.topological_order() == [f"n{i}" for i in range(5000)]
    assert time.perf_counter() - start < 2


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
    start = time.perf_counter()
    wf = pairs_workflow(24, 4)
    assert concurrent_sets_max(wf, {n: 4 for n in wf.nodes})[0] == 96
    assert "120 %" in problems(lambda: load_yaml("scheduler: partition\n" + pairs_text(24, 5)))
    load_yaml("scheduler: partition\n" + pairs_text(24, 4))
    assert time.perf_counter() - start < 5


def pairs_text(pairs: int, share: int) -> str:
    nodes = "".join(f"  p{i}: {{uses: a}}\n  q{i}: {{uses: a, depend_on: [p{i}]}}\n" for i in range(pairs))
    return f"a: {{type: Sleep, mps: {share}}}\nworkflows:\n{nodes}"


def test_validation_uses_the_schedulers_share_policy_for_nodes_without_a_share() -> None:
    text = """
scheduler: partition
a: {type: Sleep, mps: 100}
b: {type: Sleep}
workflows:
  x: {uses: a}
  y: {uses: b}
"""
    assert "no share is left for y" in problems(lambda: load_yaml(text))
    wf = load_yaml(text.replace("scheduler: partition", "scheduler: greedy"))
    with pytest.raises(ShareError, match="no share is left for y"):
        partition_share_plan(wf, ["x", "y"])
    assert partition_share_plan(wf, ["x"]) == {"x": 100}


# -- limits -----------------------------------------------------------------------------------------


def test_the_cli_defaults_are_the_documented_limits() -> None:
    assert (
        Limits(
            max_bytes=1024 * 1024,
            max_depth=64,
            max_values=200_000,
            max_units=64,
            max_nodes=64,
            max_total_requests=100_000,
        )
        == DEFAULT_LIMITS
    )


def test_100000_nodes_are_refused_before_anything_is_built() -> None:
    spec = {"a": {"type": "Sleep"}, "workflows": {f"n{i}": {"uses": "a"} for i in range(100_000)}}
    start = time.perf_counter()
    text = problems(lambda: from_dict(spec, limits=Limits(max_values=10**7)))
    assert "100000 nodes, over the limit of 64" in text
    assert time.perf_counter() - start < 2
    # Under the default limits the sheer number of values is refused first.
    assert "more than 200000 values" in problems(lambda: from_dict(spec))


def test_units_and_task_lists_over_the_limits_are_refused() -> None:
    units = {f"u{i}": {"type": "Sleep"} for i in range(5)}
    limits = Limits(max_units=4, max_nodes=4)
    assert "5 application units, over the limit of 4" in problems(lambda: from_dict(units, limits=limits))
    tasks = {"wf": {"tasks": [{"type": "Sleep"} for _ in range(5)]}}
    assert "5 tasks (nodes), over the limit of 4" in problems(lambda: from_dict(tasks, limits=limits))


def test_a_task_list_of_many_tasks_of_one_type_is_named_in_linear_time() -> None:
    tasks = {"wf": {"tasks": [{"type": "Sleep", "num_requests": 1} for _ in range(3000)]}}
    start = time.perf_counter()
    wf = from_dict(tasks, limits=Limits(max_nodes=3000, max_units=3000))
    assert len(wf.nodes) == 3000 and "sleep_3000" in wf.nodes
    assert time.perf_counter() - start < 20


def test_requests_per_run_count_warmup_and_concurrency_of_every_node() -> None:
    text = "a: {type: Sleep, num_requests: 10, warmup_requests: 2, concurrency: 3}\n"
    text += "workflows:\n  x: {uses: a}\n  y: {uses: a}\n"
    assert requests_per_run(load_yaml(text)) == {"x": 36, "y": 36}
    message = problems(lambda: load_yaml(text, limits=Limits(max_total_requests=71)))
    assert "72 requests" in message and "limit of 71" in message and "node 'x'" in message


def test_a_billion_requests_are_refused_by_the_field_bound() -> None:
    text = problems(lambda: load_yaml("a: {type: Sleep, num_requests: 1000000000}\n"))
    assert "num_requests" in text and "10000000" in text


@pytest.mark.parametrize("depth", [65, 1000, 100_000])
def test_deep_yaml_is_refused_naming_the_depth_limit(depth: int) -> None:
    text = problems(lambda: load_yaml("a: " + "[" * depth + "]" * depth + "\n"))
    assert "deeper than 64 levels" in text


def test_a_deep_mapping_given_as_data_is_refused_without_recursion() -> None:
    deep: Any = "leaf"
    for _ in range(100_000):
        deep = [deep]
    assert "nests deeper than 64 levels" in problems(lambda: from_dict({"a": {"type": "Sleep", "x": deep}}))


def test_yaml_over_the_byte_limit_is_refused_naming_it() -> None:
    text = problems(lambda: load_yaml("a: {type: Sleep}\n#" + "x" * 2000, limits=Limits(max_bytes=1000)))
    assert "limit of 1000 bytes" in text


def test_a_workflow_at_the_request_limit_still_loads() -> None:
    wf = load_yaml("a: {type: Sleep, num_requests: 99990, warmup_requests: 10}\n")
    assert sum(requests_per_run(wf).values()) == DEFAULT_LIMITS.max_total_requests


def test_the_request_limit_points_at_the_task_of_a_task_list_with_its_line() -> None:
    text = "wf:\n  tasks:\n    - {type: Sleep, num_requests: 10}\n"
    text += "    - {name: big, type: Sleep, num_requests: 90}\n"
    with pytest.raises(WorkflowValidationError) as info:
        load_yaml(text, limits=Limits(max_total_requests=50))
    (error,) = info.value.errors
    assert error.path == "wf.tasks[1].num_requests" and error.line == 4
    assert "node 'big'" in error.message
