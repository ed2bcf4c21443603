"""The worker's heartbeat: keep its platform live and reap runs whose worker was lost.

A thread of the worker process (started when Celery says the worker is ready) does, every
``CB_HEARTBEAT_S``: register or refresh the worker's Platform (fingerprint, queue, ``last_seen_at``),
then ``run_reap``: any running run whose own heartbeat (written by the run's DatabaseSink) is older
than ``CB_WORKER_LOST_AFTER_S`` is marked failed. Every worker reaps, so a worker killed with SIGKILL
mid-run is noticed by any other worker, or by itself once restarted, within
``CB_WORKER_LOST_AFTER_S + CB_HEARTBEAT_S``.
"""

from __future__ import annotations

import logging
import threading
from typing import Any, ClassVar

log = logging.getLogger(__name__)


class WorkerHeartbeat:
    """The heartbeat thread of this process (one per worker)."""

    _current: ClassVar[WorkerHeartbeat | None] = None

    def __init__(self, fingerprint: dict[str, Any]) -> None:
        from workers.celery import platform_queue

        self.fingerprint = fingerprint
        self.queue = platform_queue(str(fingerprint["id"]))
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._loop, name="cb-worker-heartbeat", daemon=True)

    @classmethod
    def start(cls) -> WorkerHeartbeat:
        """Start this process's heartbeat (once); return it. The first beat happens at once."""
        from benchmarks.platform import fingerprint

        if cls._current is None or not cls._current.thread.is_alive():
            cls._current = cls(fingerprint())
            cls._current.thread.start()
        return cls._current

    @classmethod
    def stop(cls) -> None:
        if cls._current is not None:
            cls._current.stopping.set()
            cls._current.thread.join(timeout=5)
            cls._current = None

    def beat(self) -> list[int]:
        """Refresh the platform and reap lost runs; return the ids of the runs reaped."""
        from django.conf import settings

        from cbweb.platforms.services import platform_register
        from cbweb.runs.services import run_reap

        platform_register(fingerprint=self.fingerprint, queue=self.queue)
        reaped = run_reap(lost_after_s=settings.CB_WORKER_LOST_AFTER_S)
        for run_id in reaped:
            log.warning("run %s: its worker was lost; marked failed", run_id)
        return reaped

    def _loop(self) -> None:
        from django.conf import settings
        from django.db import close_old_connections, connection

        while True:
            close_old_connections()
            try:
                self.beat()
            except Exception:
                # The database may be restarting: keep beating, the next beat may get through.
                log.exception("worker heartbeat failed")
            finally:
                connection.close()
            if self.stopping.wait(settings.CB_HEARTBEAT_S):
                return
