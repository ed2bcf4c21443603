"""Handing runs to the broker: a broker that is down loses no run and fails no request."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from typing import Any

import pytest

from cbweb.runs.dispatch import run_enqueue
from workers.celery import app


@pytest.fixture
def broker_down(settings: Any) -> Iterator[None]:
    """Celery pointed at a port where nothing listens (a broker that is down or restarting)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    saved = {key: app.conf[key] for key in ("broker_url", "task_always_eager")}
    app.conf.update(broker_url=f"redis://127.0.0.1:{port}/0", task_always_eager=False)
    app.close()
    settings.CB_RUN_EXECUTOR = "celery"
    yield
    app.conf.update(saved)
    app.close()


def test_a_run_the_broker_cannot_take_stays_queued_unsent_without_an_error_within_seconds(
    broker_down: None, alice: Any, make_workflow: Any, make_run: Any
) -> None:
    run = make_run(make_workflow(alice), alice)
    started = time.monotonic()
    run_enqueue(run.pk)  # what the commit of run_create calls
    assert time.monotonic() - started < 5
    run.refresh_from_db()
    assert run.status == "queued" and run.dispatched_at is None
