"""Scheduler parameters: each scheduler's ``Params`` model, checked by the registry with clear errors."""

from __future__ import annotations

import pytest

from benchmarks.schedulers import (
    SCHEDULERS,
    SchedulerError,
    SchedulerParamError,
    effective_choice,
    get_scheduler,
    param_problems,
    scheduler_for,
    scheduler_label,
)
from benchmarks.schedulers.credit import CreditScheduler
from benchmarks.schedulers.credit_mps import CreditMpsScheduler
from benchmarks.schedulers.partition import PartitionScheduler
from benchmarks.spec.load import load_yaml

UNIT = "a: {type: Sleep, sleep_time: 0.01, num_requests: 1}\n"


def test_every_scheduler_declares_its_parameters_and_records_them_with_defaults_filled_in() -> None:
    assert set(SCHEDULERS["greedy"].Params.model_fields) == set()
    assert {"pressure_threshold", "medium_floor", "burst_s", "max_wait_s"} <= set(
        SCHEDULERS["credit"].Params.model_fields
    )
    assert {"memory_limit", "stop_timeout_s"} == set(SCHEDULERS["partition"].Params.model_fields)
    assert {"pressure_threshold", "memory_limit"} <= set(SCHEDULERS["credit-mps"].Params.model_fields)
    for name in SCHEDULERS:
        described = get_scheduler(name).describe()
        assert described["name"] == name
        assert described["params"] == SCHEDULERS[name].Params().model_dump(mode="json")


def test_parameters_given_as_text_are_converted_and_the_rest_keep_their_defaults() -> None:
    scheduler = get_scheduler("credit", {"pressure_threshold": "0.4", "window": "20"})
    assert isinstance(scheduler, CreditScheduler)
    assert scheduler.params.pressure_threshold == 0.4
    assert scheduler.params.window == 20
    assert scheduler.params.max_wait_s == 2.0
    assert scheduler.describe()["params"]["pressure_threshold"] == 0.4


def test_an_out_of_range_value_names_the_parameter_the_bound_and_the_range() -> None:
    assert param_problems("credit", {"pressure_threshold": 1.5}) == [
        ("pressure_threshold", "must be < 1 (got 1.5; allowed: > 0 and < 1)")
    ]
    with pytest.raises(SchedulerParamError, match=r"scheduler\.window: must be >= 1 \(got 0"):
        get_scheduler("credit", {"window": 0})


def test_an_unknown_parameter_is_refused_with_a_suggestion_and_the_known_ones() -> None:
    [(param, message)] = param_problems("credit", {"presure_threshold": 0.4})
    assert param == "presure_threshold"
    assert "did you mean 'pressure_threshold'?" in message and "credit takes: pressure_threshold" in message
    assert param_problems("greedy", {"pressure_threshold": 0.4}) == [
        ("pressure_threshold", "unknown parameter; greedy takes no parameters")
    ]


def test_a_memory_limit_mps_would_not_read_is_refused_when_the_parameters_are_checked() -> None:
    [(param, message)] = param_problems("partition", {"memory_limit": "lots"})
    assert param == "memory_limit" and "'lots'" in message and "'8G'" in message
    scheduler = get_scheduler("credit-mps", {"memory_limit": "8GiB", "pressure_threshold": 0.4})
    assert isinstance(scheduler, CreditMpsScheduler)
    assert scheduler.partition.memory_limit == "8GiB"
    assert isinstance(get_scheduler("partition", {"memory_limit": "8G"}), PartitionScheduler)


def test_an_unknown_scheduler_is_an_error_naming_the_known_ones() -> None:
    with pytest.raises(SchedulerError, match=r"unknown scheduler 'fair'; known: greedy"):
        get_scheduler("fair")


def test_the_workflow_parameters_apply_to_its_own_scheduler_and_overrides_win() -> None:
    wf = load_yaml("scheduler: {name: credit, pressure_threshold: 0.4, window: 5}\n" + UNIT, name="t")
    name, params = effective_choice(wf)
    assert name == "credit" and params["pressure_threshold"] == 0.4 and params["window"] == 5
    _, params = effective_choice(wf, "credit", {"pressure_threshold": "0.3"})
    assert params["pressure_threshold"] == 0.3 and params["window"] == 5
    # Another scheduler does not inherit credit's parameters.
    assert effective_choice(wf, "greedy") == ("greedy", {})
    with pytest.raises(SchedulerParamError, match="pressure_threshold"):
        scheduler_for(wf, "greedy", {"pressure_threshold": 0.3})


def test_a_label_names_the_parameters_that_differ_from_the_defaults() -> None:
    defaults = get_scheduler("credit").describe()["params"]
    assert scheduler_label("credit", defaults) == "credit"
    assert (
        scheduler_label("credit", {**defaults, "pressure_threshold": 0.4})
        == "credit (pressure_threshold=0.4)"
    )
    assert scheduler_label("greedy", {}) == "greedy"


def test_a_platform_without_an_nvidia_gpu_runs_no_mps_scheduler() -> None:
    from benchmarks.schedulers import schedulers_for

    assert schedulers_for([]) == ["greedy", "priority", "credit"]
    assert schedulers_for([{"name": "NVIDIA H200"}]) == [
        "greedy",
        "partition",
        "priority",
        "credit",
        "credit-mps",
    ]
