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
