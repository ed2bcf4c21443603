"""The ``scheduler:`` key as a name or ``{name, ...params}`` and per-unit memory limits, as loaded."""

from __future__ import annotations

import pytest

from benchmarks.spec.export import dump_yaml
from benchmarks.spec.load import from_dict, load_yaml
from benchmarks.spec.model import WorkflowValidationError

UNIT = "a: {type: Sleep, sleep_time: 0.01, num_requests: 1}\n"


def problems(text: str) -> list[str]:
    with pytest.raises(WorkflowValidationError) as info:
        load_yaml(text, name="t")
    return [str(e) for e in info.value.errors]


def test_a_scheduler_with_parameters_loads_and_round_trips_through_the_canonical_yaml() -> None:
    wf = load_yaml("scheduler: {name: credit, pressure_threshold: 0.4}\n" + UNIT, name="t")
    assert wf.scheduler == "credit"
    assert wf.scheduler_params == {"pressure_threshold": 0.4}
    assert "scheduler:\n  name: credit\n  pressure_threshold: 0.4\n" in dump_yaml(wf)
    assert load_yaml(dump_yaml(wf)) == wf


def test_a_bare_scheduler_name_keeps_working_and_exports_as_a_bare_name() -> None:
    wf = load_yaml("scheduler: credit\n" + UNIT, name="t")
    assert (wf.scheduler, wf.scheduler_params) == ("credit", {})
    assert "scheduler: credit\n" in dump_yaml(wf)


def test_an_out_of_range_parameter_is_reported_at_its_line_with_the_range() -> None:
    text = "scheduler:\n  name: credit\n  pressure_threshold: 1.5\n" + UNIT
    assert problems(text) == [
        "line 3: scheduler.pressure_threshold: must be < 1 (got 1.5; allowed: > 0 and < 1)"
    ]


def test_an_unknown_parameter_is_reported_with_a_suggestion_beside_other_problems() -> None:
    text = "scheduler: {name: credit, pressure_treshold: 0.4}\na: {type: Sleep, num_requests: 0}\n"
    found = problems(text)
    assert any(
        p.startswith(
            "line 1: scheduler.pressure_treshold: unknown parameter (did you mean 'pressure_threshold'?)"
        )
        for p in found
    )
    assert any("num_requests" in p for p in found)


def test_a_scheduler_mapping_without_a_known_name_is_an_error() -> None:
    assert "needs 'name'" in problems("scheduler: {pressure_threshold: 0.4}\n" + UNIT)[0]
    assert problems("scheduler: {name: credt}\n" + UNIT) == [
        "line 1: scheduler.name: unknown scheduler 'credt'; known: greedy, partition, priority, credit, "
        "credit-mps (did you mean 'credit'?)"
    ]


def test_a_parameter_must_be_a_plain_value() -> None:
    assert problems("scheduler: {name: credit, pressure_threshold: [0.4]}\n" + UNIT) == [
        "line 1: scheduler.pressure_threshold: must be a number, string or true/false, not a list"
    ]


def test_the_mapping_form_comes_from_json_too() -> None:
    wf = from_dict({"scheduler": {"name": "partition", "memory_limit": "8G"}, "a": {"type": "Sleep"}})
    assert (wf.scheduler, wf.scheduler_params) == ("partition", {"memory_limit": "8G"})


@pytest.mark.parametrize(("given", "mib"), [("8GiB", 8192), ("512MiB", 512), ("8G", 8192), ("1.5 GB", 1536)])
def test_a_unit_memory_limit_is_read_in_binary_units(given: str, mib: int) -> None:
    wf = load_yaml(
        f"a: {{type: Sleep, sleep_time: 0.01, num_requests: 1, memory_limit: {given}}}\n", name="t"
    )
    assert wf.applications["a"].gpu_memory_limit_mb == mib
    assert load_yaml(dump_yaml(wf)) == wf


def test_a_unit_memory_limit_in_mib_and_bad_limits() -> None:
    wf = load_yaml("a: {type: Sleep, num_requests: 1, gpu_memory_limit_mb: 4096}\n", name="t")
    assert wf.applications["a"].gpu_memory_limit_mb == 4096
    assert problems("a: {type: Sleep, num_requests: 1, memory_limit: lots}\n") == [
        "line 1: a.memory_limit: 'memory_limit' must be a size such as '8GiB' or '512MiB' "
        "(or give 'gpu_memory_limit_mb'), not 'lots'"
    ]
    assert (
        "keep one"
        in problems("a: {type: Sleep, num_requests: 1, memory_limit: 1GiB, gpu_memory_limit_mb: 1024}\n")[0]
    )
    assert "gpu_memory_limit_mb" in problems("a: {type: Sleep, num_requests: 1, gpu_memory_limit_mb: 0}\n")[0]
