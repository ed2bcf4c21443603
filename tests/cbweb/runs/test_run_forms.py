"""The launch form offers only platforms with a live worker, and says when there is none."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from django.utils import timezone

from cbweb.platforms.models import Platform
from cbweb.runs.forms import RunLaunchForm
from cbweb.workflows.services import workflow_update


def _platform(name: str, seen_s_ago: float | None) -> Platform:
    seen = None if seen_s_ago is None else timezone.now() - timedelta(seconds=seen_s_ago)
    return Platform.objects.create(fingerprint_id=name, name=name, queue=f"cb.{name}", last_seen_at=seen)


def test_with_a_broker_only_platforms_with_a_live_worker_are_offered(
    alice: Any, make_workflow: Any, settings: Any
) -> None:
    settings.CB_RUN_EXECUTOR = "celery"
    settings.CB_WORKER_LOST_AFTER_S = 60.0
    live = _platform("live", 5)
    _platform("gone", 600)
    _platform("never", None)
    field = RunLaunchForm(workflow=make_workflow(alice)).fields["platform"]
    assert list(field.queryset) == [live]
    assert field.empty_label == "any live worker"


def test_with_a_broker_and_no_live_worker_the_form_says_so(
    alice: Any, make_workflow: Any, settings: Any
) -> None:
    settings.CB_RUN_EXECUTOR = "celery"
    _platform("gone", 3600)
    field = RunLaunchForm(workflow=make_workflow(alice)).fields["platform"]
    assert not field.queryset.exists()
    assert "No worker is live" in field.help_text


def test_without_a_broker_the_run_executes_on_this_machine(
    alice: Any, make_workflow: Any, settings: Any
) -> None:
    settings.CB_RUN_EXECUTOR = "local"
    _platform("live", 5)
    field = RunLaunchForm(workflow=make_workflow(alice)).fields["platform"]
    assert not field.queryset.exists()
    assert field.empty_label.startswith("this machine")


def test_the_versions_are_offered_newest_first_with_their_creation_time(
    alice: Any, make_workflow: Any
) -> None:
    workflow = make_workflow(alice)
    workflow_update(workflow=workflow, user=alice, yaml_text="only:\n  type: Sleep\n  sleep_time: 0.2\n")
    for number, day in ((1, 3), (2, 4)):
        workflow.versions.filter(number=number).update(created_at=datetime(2026, 12, day, 9, 30, tzinfo=UTC))
    field = RunLaunchForm(workflow=workflow).fields["version"]
    assert [label for _, label in field.choices] == ["v2 (2026-12-04 09:30)", "v1 (2026-12-03 09:30)"]
