"""The thin run task and the sender cbweb dispatches through.

Execution itself is tested in tests/cbweb/runs/test_execution.py."""

from __future__ import annotations

import json
from typing import Any

import pytest

from cbweb.runs.dispatch import run_dispatch
from cbweb.runs.execution import GPU_QUEUE
from cbweb.runs.models import ApplicationResult, Run
from tests.cbweb.conftest import celery_broker
from tests.conftest import REDIS_URL
from workers.tasks import execute_run, run_send


def test_a_second_delivery_of_the_same_run_does_nothing(
    alice: Any, make_workflow: Any, make_run: Any
) -> None:
    run = make_run(make_workflow(alice), alice)
    assert execute_run.apply(args=[run.pk]).get() == "succeeded"
    finished = Run.objects.get(pk=run.pk).finished_at
    assert execute_run.apply(args=[run.pk]).get() == "skipped"
    assert Run.objects.get(pk=run.pk).finished_at == finished
    assert ApplicationResult.objects.filter(run=run).count() == 2


def test_the_web_side_sends_runs_through_the_sender_its_setting_names(settings: Any) -> None:
    from django.utils.module_loading import import_string

    assert import_string(settings.CB_RUN_SENDER) is run_send


@pytest.mark.broker
def test_dispatch_puts_the_execute_task_for_the_run_on_the_queue_the_web_side_chose(
    alice: Any, make_workflow: Any, make_run: Any, settings: Any
) -> None:
    import redis

    client = redis.Redis.from_url(REDIS_URL)
    client.flushdb()
    settings.CB_RUN_EXECUTOR = "celery"
    run = make_run(make_workflow(alice, name="g", yaml_text="g:\n  type: Sleep\n  device: gpu\n"), alice)
    with celery_broker(REDIS_URL):
        run_dispatch(run.pk)
    # Kombu's Redis transport keeps each queue as a list named after it: one message, for this run.
    messages = [json.loads(m) for m in client.lrange(GPU_QUEUE, 0, -1)]
    client.flushdb()
    assert [(m["headers"]["task"], m["headers"]["argsrepr"]) for m in messages] == [
        ("workers.execute_run", f"({run.pk},)")
    ]
    assert Run.objects.get(pk=run.pk).status == "queued"
