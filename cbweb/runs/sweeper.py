"""The sweeper: repairs every run that is neither queued with a message, running with a heartbeating
worker, nor ended with a reason (docs/operations.md).

Every ``CB_SWEEP_S`` it
- sends the queued runs that have no message: never handed to the broker (it was down when the run
  was submitted) or handed over more than ``CB_REDISPATCH_AFTER_S`` ago (the broker may have lost
  the message); a duplicate message is harmless, the claim is atomic;
- fails the running runs whose heartbeat is older than ``CB_WORKER_LOST_AFTER_S`` (worker lost),
  whether or not another worker lives.

It runs outside the workers, so that a run is repaired even when every worker is gone:
``manage.py sweep_runs`` (the docker-compose ``sweeper`` service, or cron with ``--once``), and the
local executor's thread when there is no broker.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from django.conf import settings
from django.db import DatabaseError, close_old_connections, connection

log = logging.getLogger(__name__)


@dataclass
class Sweep:
    """What one sweep did (run ids)."""

    sent: list[int] = field(default_factory=list)
    not_sent: list[int] = field(default_factory=list)
    reaped: list[int] = field(default_factory=list)
    # False while the sweeper has not seen the database for CB_WORKER_LOST_AFTER_S (see RunSweeper).
    reaping: bool = True


class RunSweeper:
    """Sweeps runs; ``send`` hands a run to its executor (``run_send`` with Celery) and may raise.

    Clock sanity: a heartbeat is old by the database's clock, but old heartbeats are also what a
    database outage leaves behind while every worker is healthy (their writes failed). So runs are
    reaped only once this sweeper has reached the database for ``CB_WORKER_LOST_AFTER_S`` in a row:
    after an outage, every live worker has had that long to write a heartbeat again.
    """

    def __init__(self, send: Callable[[int], None]) -> None:
        self.send = send
        self.connected_since: float | None = None

    def sweep(self) -> Sweep:
        """Send queued runs that need it and reap lost ones; return what was done.

        Raises DatabaseError when the database cannot be reached (the next sweep tries again).
        """
        try:
            return self._sweep()
        except DatabaseError:
            self.connected_since = None
            with contextlib.suppress(DatabaseError):
                connection.close()
            raise

    def _sweep(self) -> Sweep:
        from cbweb.runs import services

        out = Sweep()
        taken = services.run_take_for_dispatch(resend_after_s=settings.CB_REDISPATCH_AFTER_S)
        now = time.monotonic()
        if self.connected_since is None:
            self.connected_since = now
        for run_id in taken:
            if out.not_sent:
                # The broker refused the previous run: it would refuse this one too, after its own
                # publish retries. Left for the next sweep.
                services.run_dispatch_failed(run_id=run_id)
                out.not_sent.append(run_id)
                continue
            try:
                self.send(run_id)
            except Exception as exc:
                # The broker is down: the run stays queued, marked unsent, and the next sweep retries.
                log.warning("run %s: could not be sent (%s: %s)", run_id, type(exc).__name__, exc)
                services.run_dispatch_failed(run_id=run_id)
                out.not_sent.append(run_id)
            else:
                out.sent.append(run_id)
        lost_after = float(settings.CB_WORKER_LOST_AFTER_S)
        out.reaping = now - self.connected_since >= lost_after
        if out.reaping:
            out.reaped = services.run_reap(lost_after_s=lost_after)
        for run_id in out.reaped:
            log.warning("run %s: its worker was lost; marked failed", run_id)
        if out.sent:
            log.info("sent queued runs %s", ", ".join(map(str, out.sent)))
        return out

    def forever(self, stop: threading.Event | None = None) -> None:
        """Sweep every ``CB_SWEEP_S`` until ``stop`` is set, surviving database and broker outages."""
        stop = stop or threading.Event()
        while True:
            close_old_connections()
            try:
                self.sweep()
            except Exception:
                log.exception("sweep failed; trying again in %g s", settings.CB_SWEEP_S)
            finally:
                with contextlib.suppress(DatabaseError):
                    connection.close()
            if stop.wait(settings.CB_SWEEP_S):
                return
