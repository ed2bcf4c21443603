"""The spec's input limits (benchmarks.spec.model.Limits, applied by benchmarks.spec.load)."""

from __future__ import annotations

import time
from typing import Any

import pytest

from benchmarks.spec.load import from_dict, load_yaml
from benchmarks.spec.model import DEFAULT_LIMITS, Limits, WorkflowValidationError, requests_per_run


def problems(call: Any) -> str:
    with pytest.raises(WorkflowValidationError) as info:
        call()
    return "\n".join(e.message for e in info.value.errors)


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
    start = time.process_time()  # CPU time: a loaded machine's waits do not count
    text = problems(lambda: from_dict(spec, limits=Limits(max_values=10**7)))
    assert "100000 nodes, over the limit of 64" in text
    assert time.process_time() - start < 2
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
    start = time.process_time()
    wf = from_dict(tasks, limits=Limits(max_nodes=3000, max_units=3000))
    assert len(wf.nodes) == 3000 and "sleep_3000" in wf.nodes
    assert time.process_time() - start < 20


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
