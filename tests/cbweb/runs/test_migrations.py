from __future__ import annotations

from typing import Any

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

BEFORE = [("runs", "0002_telemetry_overview"), ("workflows", "0001_initial")]


@pytest.mark.django_db(transaction=True)
def test_existing_runs_get_the_frozen_copy_of_their_version(alice: Any) -> None:
    executor = MigrationExecutor(connection)
    latest = executor.loader.graph.leaf_nodes()
    executor.migrate(BEFORE)
    old = executor.loader.project_state(BEFORE).apps
    workflow = old.get_model("workflows", "Workflow").objects.create(name="legacy", owner_id=alice.pk)
    version = old.get_model("workflows", "WorkflowVersion").objects.create(
        workflow=workflow,
        number=3,
        spec={"applications": {"nap": {"type": "Sleep"}}},
        yaml="nap:\n  type: Sleep\n",
    )
    run_id = (
        old.get_model("runs", "Run")
        .objects.create(workflow_version=version, scheduler="greedy", owner_id=alice.pk)
        .pk
    )

    executor = MigrationExecutor(connection)
    executor.migrate(latest)

    from cbweb.runs.models import Run
    from cbweb.workflows.models import Workflow

    run = Run.objects.get(pk=run_id)
    assert (run.workflow_name, run.version_number, run.yaml) == ("legacy", 3, "nap:\n  type: Sleep\n")
    assert run.spec == {"applications": {"nap": {"type": "Sleep"}}}
    Workflow.objects.filter(pk=workflow.pk).delete()
    assert Run.objects.get(pk=run_id).workflow_version is None


BEFORE_SCHEMA_2 = [("runs", "0005_redispatch_backoff")]


@pytest.mark.django_db(transaction=True)
def test_runs_stored_with_result_schema_1_get_their_slos_structured(alice: Any) -> None:
    import json
    from pathlib import Path

    v1 = json.loads((Path(__file__).parents[2] / "benchmarks" / "fixtures" / "result-v1.json").read_text())
    executor = MigrationExecutor(connection)
    latest = executor.loader.graph.leaf_nodes()
    executor.migrate(BEFORE_SCHEMA_2)
    old = executor.loader.project_state(BEFORE_SCHEMA_2).apps
    run = old.get_model("runs", "Run").objects.create(
        workflow_name="w",
        version_number=1,
        spec={},
        yaml="",
        scheduler="greedy",
        owner_id=alice.pk,
        result=v1,
    )
    app_ids = [
        old.get_model("runs", "ApplicationResult").objects.create(run=run, name=a["name"], slo=a["slo"]).pk
        for a in v1["applications"]
    ]

    executor = MigrationExecutor(connection)
    executor.migrate(latest)

    from benchmarks.results import SCHEMA_VERSION, ResultDocument
    from cbweb.runs.models import ApplicationResult, Run

    stored = Run.objects.get(pk=run.pk).result
    # Upgraded by the engine's upgrade() to the current version; no quality figures were recorded then.
    assert stored["schema_version"] == SCHEMA_VERSION
    assert stored["applications"][0]["slo"] == [
        {"metric": "e2e", "op": "<=", "threshold_s": 1.0},
        {"metric": "step", "op": "<", "threshold_s": 0.25},
    ]
    assert ResultDocument.model_validate(stored).applications[1].slo[0].threshold_s == 1e-6
    assert [ApplicationResult.objects.get(pk=i).slo for i in app_ids] == [
        a["slo"] for a in stored["applications"]
    ]
    assert [ApplicationResult.objects.get(pk=i).quality for i in app_ids] == [{}, {}]


BEFORE_SCHEDULER_PARAMS = [("runs", "0007_applicationresult_quality")]


@pytest.mark.django_db(transaction=True)
def test_finished_runs_get_the_scheduler_parameters_their_result_recorded(alice: Any) -> None:
    executor = MigrationExecutor(connection)
    latest = executor.loader.graph.leaf_nodes()
    executor.migrate(BEFORE_SCHEDULER_PARAMS)
    Old = executor.loader.project_state(BEFORE_SCHEDULER_PARAMS).apps.get_model("runs", "Run")
    common = {"workflow_name": "w", "version_number": 1, "spec": {}, "yaml": "", "owner_id": alice.pk}
    credit = Old.objects.create(
        scheduler="credit", result={"scheduler": {"name": "credit", "params": {"window": 4}}}, **common
    ).pk
    queued = Old.objects.create(scheduler="greedy", **common).pk

    executor = MigrationExecutor(connection)
    executor.migrate(latest)

    from cbweb.runs.models import Run

    assert Run.objects.get(pk=credit).scheduler_params == {"window": 4}
    assert Run.objects.get(pk=queued).scheduler_params == {}


BEFORE_SCHEMA_3 = [("runs", "0008_run_scheduler_params")]


@pytest.mark.django_db(transaction=True)
def test_runs_stored_with_result_schema_2_get_fairness_over_attainment_and_the_counts_of_requests(
    alice: Any,
) -> None:
    import json
    from pathlib import Path

    v2 = json.loads((Path(__file__).parents[2] / "benchmarks" / "fixtures" / "result-v2.json").read_text())
    executor = MigrationExecutor(connection)
    latest = executor.loader.graph.leaf_nodes()
    executor.migrate(BEFORE_SCHEMA_3)
    old = executor.loader.project_state(BEFORE_SCHEMA_3).apps
    summary = {"mean_attainment": 0.5, "fairness": v2["fairness"], "makespan_s": 1.0, "applications": []}
    run = old.get_model("runs", "Run").objects.create(
        workflow_name="w",
        version_number=1,
        spec={},
        yaml="",
        scheduler="greedy",
        owner_id=alice.pk,
        status="succeeded",
        result=v2,
        summary=summary,
    )
    app_ids = [
        old.get_model("runs", "ApplicationResult")
        .objects.create(run=run, name=a["name"], requests_counted=a["requests_counted"])
        .pk
        for a in v2["applications"]
    ]

    executor = MigrationExecutor(connection)
    executor.migrate(latest)

    from benchmarks.results import SCHEMA_VERSION, ResultDocument
    from cbweb.runs.models import ApplicationResult, Run

    stored = Run.objects.get(pk=run.pk)
    assert stored.result["schema_version"] == SCHEMA_VERSION and stored.result["fairness"] == 0.5
    assert ResultDocument.model_validate(stored.result).requests_served == 3
    assert stored.summary["fairness"] == 0.5 and stored.summary["mean_attainment"] == 0.5
    assert stored.summary["headline"] == "mean SLO attainment 50.0%"
    assert (
        stored.summary["partial"],
        stored.summary["requests_served"],
        stored.summary["requests_requested"],
    ) == (
        False,
        3,
        3,
    )
    assert [ApplicationResult.objects.get(pk=i).requests_requested for i in app_ids] == [2, 1]
