"""Handing queued runs to an executor: Celery (a broker is configured) or a local background thread.

cbweb imports no worker module, not even inside a function (import-linter forbids it): the web side
hands a run to the Celery workers through ONE small interface, the sender that
``settings.CB_RUN_SENDER`` names by dotted path (``workers.tasks.run_send``), called as
``send(run_id=..., queue=...)`` with the queue ``cbweb.runs.execution.run_queue`` chose. Why a named
sender rather than ``send_task("workers.execute_run")`` on a Celery app of cbweb's own: the Celery app
and its configuration keep one home (``workers/celery.py``), which a web-side app would duplicate
(and ``celery.current_app`` is a default app with the wrong broker unless ``workers.celery`` was
imported first); the task's name, its retry options and the broker stay the workers' business; the
web side owns only its decisions (when, and to which queue). The dependency is configuration, as
Django's ``EMAIL_BACKEND`` is, and is loaded only when ``CB_RUN_EXECUTOR`` is ``celery``.

The local executor is the zero-setup default (``make demo``, the dev server): one daemon thread per
web process executes runs one at a time, like a worker with concurrency 1, and a second one sweeps
(``cbweb/runs/sweeper.py``). It claims runs with the same atomic ``run_claim`` as Celery workers, so
two processes never execute the same run.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import queue
import socket
import threading
from collections.abc import Mapping
from typing import Any

from django.conf import settings
from django.db import DatabaseError, close_old_connections, connection, transaction
from django.utils.module_loading import import_string

from cbweb.platforms.models import Platform
from cbweb.runs import services
from cbweb.runs.models import Run
from cbweb.workflows.models import WorkflowVersion

log = logging.getLogger(__name__)


@transaction.atomic
def run_launch(
    *,
    version: WorkflowVersion,
    user: Any,
    scheduler: str | None = None,
    scheduler_params: Mapping[str, Any] | None = None,
    platform: Platform | None = None,
    repeats: int = 1,
    meta: Mapping[str, Any] | None = None,
    weights: str | None = None,
) -> list[Run]:
    """Queue ``repeats`` runs of a workflow version (``services.run_create``) and hand each to its
    executor once the transaction commits; return the runs.

    Raises django ValidationError naming the field (scheduler, scheduler.<parameter>, repeats) when
    the request is impossible.
    """
    runs = services.run_create(
        version=version,
        user=user,
        scheduler=scheduler,
        scheduler_params=scheduler_params,
        platform=platform,
        repeats=repeats,
        meta=meta,
        weights=weights,
    )
    for run in runs:
        # Enqueue only once the rows are visible to the worker; the request never waits for a run.
        transaction.on_commit(functools.partial(run_enqueue, run.pk))
    return runs


def run_dispatch(run_id: int) -> None:
    """Hand a queued run to the configured executor now; raises when the broker cannot take it."""
    if settings.CB_RUN_EXECUTOR == "celery":
        from cbweb.runs.execution import run_queue

        send = import_string(settings.CB_RUN_SENDER)
        send(run_id=run_id, queue=run_queue(run_id))
    else:
        LocalExecutor.instance().submit(run_id)


def run_enqueue(run_id: int) -> None:
    """Send a run just queued (called after the transaction commits); never raises.

    With the broker down the run stays queued, not marked as sent, and the sweeper sends it once the
    broker is back: the submitter gets their run (201), not an error for a row that was committed.
    """
    try:
        run_dispatch(run_id)
    except Exception as exc:
        log.warning(
            "run %s: the broker did not take it (%s: %s); the sweeper will send it",
            run_id,
            type(exc).__name__,
            exc,
        )
        return
    try:
        services.run_mark_dispatched(run_id=run_id)
    except DatabaseError:
        # Sent but not marked: the sweeper sends it once more, which the claim makes harmless.
        log.warning("run %s: sent, but its dispatch time was not stored", run_id)


def start_local_executor() -> None:
    """Start this process's local executor and sweeper when runs execute locally (no broker)."""
    if settings.CB_RUN_EXECUTOR != "local":
        return
    try:
        LocalExecutor.instance()
    except DatabaseError as exc:
        # Not migrated yet, or the database is down: the first run queued starts it instead.
        log.warning("local executor not started (%s); it starts with the first run queued", exc)


class LocalExecutor:
    """A background thread that executes runs of this process one after the other."""

    _instance: LocalExecutor | None = None
    _lock = threading.Lock()

    def __init__(self) -> None:
        from cbweb.runs.sweeper import RunSweeper

        self.queue: queue.Queue[int | None] = queue.Queue()
        self.worker = f"{socket.gethostname()}:{os.getpid()}:local"
        # Runs queued before this process started (a restarted dev server) are picked up too; a run
        # queued twice is harmless, the second claim finds it taken.
        waiting = Run.objects.filter(status=Run.Status.QUEUED).order_by("pk")
        for run_id in waiting.values_list("pk", flat=True):
            self.queue.put(run_id)
        self.thread = threading.Thread(target=self._loop, name="cb-local-executor", daemon=True)
        self.thread.start()
        # Without a broker this process is also the sweeper: runs left running by a process that died
        # (a restarted dev server) are failed, queued runs nobody executes are picked up. Its own
        # thread, so that a long run does not hold it up.
        self.sweeper = RunSweeper(self.submit)
        self.stopping = threading.Event()
        self.sweeping = threading.Thread(
            target=self.sweeper.forever, args=(self.stopping,), name="cb-run-sweeper", daemon=True
        )
        self.sweeping.start()

    @classmethod
    def instance(cls) -> LocalExecutor:
        with cls._lock:
            if cls._instance is None or not cls._instance.thread.is_alive():
                cls._instance = cls()
            return cls._instance

    def submit(self, run_id: int) -> None:
        self.queue.put(run_id)

    @classmethod
    def shutdown(cls, timeout: float = 30) -> None:
        """Stop this process's executor and sweeper threads once the run in progress has ended.

        For a process that changes executors (the test suite): a sweeper left running would hand
        other tests' queued runs to this thread. Queued runs stay queued.
        """
        with cls._lock:
            executor, cls._instance = cls._instance, None
        if executor is not None:
            executor.stopping.set()
            executor.queue.put(None)
            executor.thread.join(timeout)
            executor.sweeping.join(timeout)

    def _loop(self) -> None:
        from cbweb.runs.execution import run_execute

        while True:
            run_id = self.queue.get()
            if run_id is None:  # shutdown()
                return
            close_old_connections()
            try:
                run_execute(run_id=run_id, worker=self.worker)
            except Exception:
                # run_execute records failures on the run; this only guards the thread itself (a
                # database error before the claim leaves the run queued, and the sweeper re-sends it).
                log.exception("local executor: run %s", run_id)
            finally:
                with contextlib.suppress(DatabaseError):
                    connection.close()
                self.queue.task_done()
