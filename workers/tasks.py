"""The run task: the Celery side of ``cbweb.runs.execution``, and the sender cbweb dispatches through.

Thin on purpose: ``execute_run`` names the worker and calls ``run_execute``, which claims the run,
executes it with the engine and persists it through cbweb's services; the local executor of the web
process calls the same function. ``run_send`` is the sender ``settings.CB_RUN_SENDER`` names: cbweb
chooses the queue (``cbweb.runs.execution.run_queue``) and hands the run over through it, without
importing this module.
"""

from __future__ import annotations

import os
import socket
from typing import Any

from cbweb.runs.execution import DB_DOWN, run_execute
from workers.celery import app


@app.task(
    name="workers.execute_run",
    bind=True,
    acks_late=True,
    # The database was unreachable before the claim (PostgreSQL restarting): the run is still queued,
    # so the task is sent again with growing delays (1, 2, 4 ... 60 s) instead of being acknowledged
    # as done. Should every try fail, the sweeper re-sends the run later.
    autoretry_for=DB_DOWN,
    retry_backoff=1,
    retry_backoff_max=60,
    retry_jitter=False,
    max_retries=20,
)
def execute_run(self: Any, run_id: int) -> str:
    """Celery task: execute one run by id (a duplicate delivery finds it claimed and does nothing).

    Returns the run's final status, 'skipped' or 'lost'; stored only when a result backend is set.
    """
    node = self.request.hostname or socket.gethostname()
    return run_execute(run_id=run_id, worker=f"{node}:{os.getpid()}")


def run_send(*, run_id: int, queue: str) -> None:
    """Send a queued run to the broker on ``queue`` (the id is the whole message); raises if it is down."""
    execute_run.apply_async(args=(run_id,), queue=queue)
