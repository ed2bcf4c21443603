"""Handing runs to the broker: a broker that is down loses no run and fails no request."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from typing import Any

import pytest
from django.test import Client

from cbweb.runs.dispatch import LocalExecutor, run_enqueue, run_launch, start_local_executor
from cbweb.runs.models import Run
from cbweb.workflows.selectors import version_latest
from tests.cbweb.conftest import celery_broker


@pytest.fixture
def broker_down(settings: Any) -> Iterator[None]:
    """Celery pointed at a port where nothing listens (a broker that is down or restarting)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    settings.CB_RUN_EXECUTOR = "celery"
    with celery_broker(f"redis://127.0.0.1:{port}/0"):
        yield


def test_launch_sends_each_run_only_after_the_commit(
    alice: Any, make_workflow: Any, django_capture_on_commit_callbacks: Any
) -> None:
    version = version_latest(workflow=make_workflow(alice))
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        runs = run_launch(version=version, user=alice, repeats=2)
        assert [r.status for r in runs] == ["queued", "queued"]
    assert len(callbacks) == 2
    assert Run.objects.filter(dispatched_at__isnull=True).count() == 2


def test_a_run_the_broker_cannot_take_stays_queued_unsent_without_an_error_within_seconds(
    broker_down: None, alice: Any, make_workflow: Any, make_run: Any
) -> None:
    run = make_run(make_workflow(alice), alice)
    started = time.monotonic()
    run_enqueue(run.pk)  # what the commit of run_launch calls
    assert time.monotonic() - started < 5
    run.refresh_from_db()
    assert run.status == "queued" and run.dispatched_at is None


def test_the_api_answers_201_with_the_run_queued_when_the_broker_is_down(
    broker_down: None, api: Any, make_workflow: Any, alice: Any, django_capture_on_commit_callbacks: Any
) -> None:
    workflow = make_workflow(alice)
    with django_capture_on_commit_callbacks(execute=True) as sent:
        response = api.post("/api/v1/runs/", {"workflow": workflow.pk}, format="json")
    assert len(sent) == 1  # the send was tried, and refused
    assert response.status_code == 201, response.content
    run = Run.objects.get(pk=response.json()["id"])
    assert run.status == "queued" and run.dispatched_at is None


def test_the_launch_form_queues_the_run_and_redirects_to_it_when_the_broker_is_down(
    broker_down: None, make_workflow: Any, alice: Any, django_capture_on_commit_callbacks: Any
) -> None:
    workflow = make_workflow(alice)
    client = Client()
    client.force_login(alice)
    version = workflow.versions.get().pk
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(
            f"/runs/launch/{workflow.pk}/", {"version": version, "scheduler": "greedy", "repeats": 1}
        )
    run = Run.objects.get()
    assert response.status_code == 302 and response["Location"] == f"/runs/{run.pk}/"
    assert run.status == "queued" and run.dispatched_at is None


def test_without_a_broker_the_web_process_starts_its_executor_and_sweeper_at_once(
    db: Any, settings: Any
) -> None:
    settings.CB_RUN_EXECUTOR = "celery"
    start_local_executor()
    assert LocalExecutor._instance is None
    settings.CB_RUN_EXECUTOR = "local"
    start_local_executor()
    executor = LocalExecutor._instance
    assert executor is not None and executor.thread.is_alive() and executor.sweeping.is_alive()
