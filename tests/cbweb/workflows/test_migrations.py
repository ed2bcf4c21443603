from __future__ import annotations

from typing import Any

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

BEFORE_UNIQUE_NAMES = [("workflows", "0002_archived")]


@pytest.mark.django_db(transaction=True)
def test_active_workflows_sharing_a_name_keep_the_newest_under_it_and_the_others_get_their_id(
    alice: Any, bob: Any
) -> None:
    import datetime

    executor = MigrationExecutor(connection)
    latest = executor.loader.graph.leaf_nodes()
    executor.migrate(BEFORE_UNIQUE_NAMES)
    old = executor.loader.project_state(BEFORE_UNIQUE_NAMES).apps.get_model("workflows", "Workflow")
    day = datetime.datetime(2026, 11, 1, tzinfo=datetime.UTC)
    made = {}
    for key, owner, name, archived, age in [
        ("old", alice, "nightly", False, 3),
        ("newest", alice, "nightly", False, 1),
        ("middle", alice, "nightly", False, 2),
        ("archived", alice, "nightly", True, 0),
        ("bobs", bob, "nightly", False, 5),
        ("long", alice, "x" * 200, False, 2),
        ("long-newest", alice, "x" * 200, False, 1),
        ("weekly", alice, "weekly", False, 1),
        ("weekly-older", alice, "weekly", False, 2),
    ]:
        made[key] = old.objects.create(owner_id=owner.pk, name=name, archived=archived).pk
        old.objects.filter(pk=made[key]).update(updated_at=day - datetime.timedelta(days=age))

    # An active workflow already has the name the older "weekly" would get.
    made["taken"] = old.objects.create(owner_id=alice.pk, name=f"weekly (#{made['weekly-older']})").pk

    executor = MigrationExecutor(connection)
    executor.migrate(latest)

    from cbweb.workflows.models import Workflow

    names = {key: Workflow.objects.get(pk=pk).name for key, pk in made.items()}
    assert names["newest"] == names["archived"] == names["bobs"] == "nightly"
    assert names["old"] == f"nightly (#{made['old']})" and names["middle"] == f"nightly (#{made['middle']})"
    assert names["long-newest"] == "x" * 200
    assert names["long"].endswith(f" (#{made['long']})") and len(names["long"]) == 200
    assert names["taken"] == f"weekly (#{made['weekly-older']})"
    assert names["weekly-older"] == f"weekly (#{made['weekly-older']}-2)"
    # Nothing else changed: the renamed rows keep their dates.
    assert Workflow.objects.get(pk=made["old"]).updated_at == day - datetime.timedelta(days=3)
