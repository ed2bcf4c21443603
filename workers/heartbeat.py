"""The worker's heartbeat: keep its platform live.

A thread of the worker process (started when Celery says the worker is ready) registers or refreshes
the worker's Platform (fingerprint, queue, ``last_seen_at``) every ``CB_HEARTBEAT_S``; the launch
form offers the platforms heard from within ``CB_WORKER_LOST_AFTER_S``. A running run has a heartbeat
of its own (``Run.heartbeat_at``, written by the run's DatabaseSink); the sweeper, outside the
workers (``cbweb/runs/sweeper.py``), fails a run whose heartbeat stopped, even if no worker is left.
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
        from cbweb.runs.execution import platform_queue

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

    def beat(self) -> None:
        """Register or refresh this worker's platform."""
        from cbweb.platforms.services import platform_register

        platform_register(fingerprint=self.fingerprint, queue=self.queue)

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
