"""Scheduler parameters on the web: stored on the run, executed, shown, and set from the launch form."""

from __future__ import annotations

from typing import Any

import pytest
from django.core.exceptions import ValidationError

from cbweb.runs.dispatch import run_launch
from cbweb.runs.execution import run_execute
from cbweb.runs.forms import RunLaunchForm
from cbweb.runs.models import Run
from cbweb.workflows.selectors import version_latest

CREDIT_YAML = (
    "scheduler: {name: credit, pressure_threshold: 0.4}\n"
    "chat: {type: Synthetic, steps: 2, step_ms: 1, num_requests: 2, priority: high, slo: ['e2e<=1s']}\n"
)


def test_a_run_stores_executes_and_records_the_workflow_scheduler_parameters(
    alice: Any, make_workflow: Any, client: Any
) -> None:
    workflow = make_workflow(alice, yaml_text=CREDIT_YAML)
    [run] = run_launch(version=version_latest(workflow=workflow), user=alice)
    assert run.scheduler == "credit"
    assert run.scheduler_params["pressure_threshold"] == 0.4
    assert run.scheduler_params["max_wait_s"] == 2.0  # defaults filled in
    assert run_execute(run_id=run.pk, worker="test") == "succeeded"
    run.refresh_from_db()
    assert run.result["scheduler"]["params"] == run.scheduler_params
    client.force_login(alice)
    page = client.get(f"/runs/{run.pk}/").content.decode()
    assert '<table class="compact" id="scheduler-params">' in page
    assert "<th>pressure_threshold</th><td>0.4</td>" in page


def test_parameters_given_at_launch_override_the_workflow_and_bad_ones_name_the_parameter(
    alice: Any, make_workflow: Any
) -> None:
    version = version_latest(workflow=make_workflow(alice, yaml_text=CREDIT_YAML))
    [run] = run_launch(version=version, user=alice, scheduler_params={"window": 4})
    assert (run.scheduler_params["pressure_threshold"], run.scheduler_params["window"]) == (0.4, 4)
    [run] = run_launch(version=version, user=alice, scheduler="greedy")
    assert run.scheduler_params == {}
    with pytest.raises(ValidationError) as info:
        run_launch(version=version, user=alice, scheduler_params={"pressure_threshold": 1.5, "windw": 3})
    errors = info.value.message_dict
    assert errors["scheduler.pressure_threshold"] == ["credit: must be < 1 (got 1.5; allowed: > 0 and < 1)"]
    assert "did you mean 'window'?" in errors["scheduler.windw"][0]
    assert not Run.objects.filter(scheduler_params__window=3).exists()


def test_the_launch_form_derives_a_field_for_every_scheduler_parameter(
    alice: Any, make_workflow: Any
) -> None:
    form = RunLaunchForm(workflow=make_workflow(alice))
    field = form.fields["credit__pressure_threshold"]
    assert field.initial == 0.3 and field.required is False  # credit's default
    assert "allowed: > 0 and < 1" in field.help_text
    assert field.widget.attrs["data-scheduler"] == "credit"
    assert "partition__memory_limit" in form.fields and "credit-mps__memory_limit" in form.fields
    assert not [name for name in form.fields if name.startswith("greedy__")]
    # A value the field accepts but the scheduler's model refuses is reported at the field too.
    bound = RunLaunchForm(
        {"version": "", "scheduler": "credit", "repeats": 1, "credit__pressure_threshold": "1"},
        workflow=make_workflow(alice, name="other"),
    )
    assert not bound.is_valid()
    assert bound.errors["credit__pressure_threshold"] == ["must be < 1 (got 1.0; allowed: > 0 and < 1)"]


def test_the_launch_form_states_a_parameters_bound_as_the_scheduler_does(
    alice: Any, make_workflow: Any
) -> None:
    # max_wait_s is gt=0 (strictly positive), window ge=1: each error is at its own field, says > or >=
    # as the model does, and is the same sentence the CLI and the API give.
    bound = RunLaunchForm(
        {"scheduler": "credit", "repeats": 1, "credit__max_wait_s": "-1", "credit__window": "0"},
        workflow=make_workflow(alice),
    )
    assert not bound.is_valid()
    assert bound.errors["credit__max_wait_s"] == ["must be > 0 (got -1.0; allowed: > 0 and <= 3600)"]
    assert bound.errors["credit__window"] == ["must be >= 1 (got 0; allowed: >= 1 and <= 10000)"]
    assert "repeats" not in bound.errors


def test_the_launch_page_starts_from_the_workflow_parameters_and_launches_with_the_form_values(
    alice: Any, make_workflow: Any, client: Any
) -> None:
    workflow = make_workflow(alice, yaml_text=CREDIT_YAML)
    client.force_login(alice)
    page = client.get(f"/runs/launch/{workflow.pk}/").content.decode()
    assert 'name="credit__pressure_threshold" value="0.4"' in page
    version = version_latest(workflow=workflow).pk
    data = {"version": version, "scheduler": "credit", "repeats": 1, "credit__pressure_threshold": "0.3"}
    assert client.post(f"/runs/launch/{workflow.pk}/", data).status_code == 302
    assert Run.objects.get().scheduler_params["pressure_threshold"] == 0.3


def test_the_launch_form_refuses_an_out_of_range_parameter_at_its_field(
    alice: Any, make_workflow: Any, client: Any
) -> None:
    workflow = make_workflow(alice, yaml_text=CREDIT_YAML)
    client.force_login(alice)
    data = {
        "version": version_latest(workflow=workflow).pk,
        "scheduler": "credit",
        "repeats": 1,
        "credit__pressure_threshold": "1.5",
        # Another scheduler's fields are not read.
        "partition__memory_limit": "lots",
    }
    response = client.post(f"/runs/launch/{workflow.pk}/", data)
    assert response.status_code == 400
    assert list(response.context["form"].errors) == ["credit__pressure_threshold"]
    assert not Run.objects.exists()
