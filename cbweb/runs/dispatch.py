"""Handing queued runs to an executor: Celery (a broker is configured) or a local background thread.

The local executor is the zero-setup default (``make demo``, the dev server): one daemon thread per
web process executes runs one at a time, like a worker with concurrency 1. It claims runs with the
same atomic ``run_claim`` as Celery workers, so two processes never execute the same run.
"""

from __future__ import annotations

import logging
import os
import queue
import socket
import threading

from django.conf import settings
from django.db import close_old_connections, connection

log = logging.getLogger(__name__)


def run_enqueue(run_id: int) -> None:
    """Send a queued run to the configured executor (called after the transaction commits)."""
    if settings.CB_RUN_EXECUTOR == "celery":
        from workers.tasks import run_send

        run_send(run_id)
    else:
        LocalExecutor.instance().submit(run_id)


class LocalExecutor:
    """A background thread that executes runs of this process one after the other."""

    _instance: LocalExecutor | None = None
    _lock = threading.Lock()

    def __init__(self) -> None:
        from cbweb.runs.models import Run

        self.queue: queue.Queue[int] = queue.Queue()
        self.worker = f"{socket.gethostname()}:{os.getpid()}:local"
        # Runs queued before this process started (a restarted dev server) are picked up too; a run
        # queued twice is harmless, the second claim finds it taken.
        waiting = Run.objects.filter(status=Run.Status.QUEUED).order_by("pk")
        for run_id in waiting.values_list("pk", flat=True):
            self.queue.put(run_id)
        self.thread = threading.Thread(target=self._loop, name="cb-local-executor", daemon=True)
        self.thread.start()

    @classmethod
    def instance(cls) -> LocalExecutor:
        with cls._lock:
            if cls._instance is None or not cls._instance.thread.is_alive():
                cls._instance = cls()
            return cls._instance

    def submit(self, run_id: int) -> None:
        self.queue.put(run_id)

    def _loop(self) -> None:
        from cbweb.runs.services import run_reap
        from workers.tasks import run_execute

        while True:
            try:
                run_id: int | None = self.queue.get(timeout=settings.CB_HEARTBEAT_S)
            except queue.Empty:
                run_id = None
            close_old_connections()
            try:
                # Runs left running by a process that died (a restarted dev server) are failed here,
                # as a Celery worker's heartbeat does (workers/heartbeat.py).
                run_reap(lost_after_s=settings.CB_WORKER_LOST_AFTER_S)
                if run_id is not None:
                    run_execute(run_id=run_id, worker=self.worker)
            except Exception:
                # run_execute records failures on the run; this only guards the thread itself.
                log.exception("local executor: run %s", run_id)
            finally:
                connection.close()
                if run_id is not None:
                    self.queue.task_done()
