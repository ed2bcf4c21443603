"""Time limits of one run: a soft limit the engine honours and a hard limit the worker enforces.

Celery's own soft/hard limits need the prefork pool, which cannot run the engine (its children are
daemonic and may not start the applications' processes), so they are implemented here:
- soft: handed to ``run_workflow(time_limit_s=...)``; the engine stops the applications gracefully,
  keeps what they measured and the run ends ``failed`` ("time limit of ... exceeded");
- hard: a backstop for an engine that does not come back: the run is marked failed and every process
  the engine started is killed, so the worker is free for the next run.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from dataclasses import dataclass
from types import TracebackType
from typing import Any

import psutil

from benchmarks.spec.model import requests_per_run

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class RunTimeLimits:
    soft_s: float
    hard_s: float


def run_time_limits(workflow: Any) -> RunTimeLimits:
    """Return the limits of a run of ``workflow``: grows with its nodes and requests, capped by a setting.

    soft = CB_RUN_TIME_PER_NODE_S x nodes + CB_RUN_TIME_PER_REQUEST_S x requests (the engine's count,
    ``requests_per_run``: warm-up included, times each unit's concurrent sessions), at most
    CB_RUN_TIME_LIMIT_S; hard = soft + CB_RUN_HARD_LIMIT_GRACE_S.
    """
    from django.conf import settings

    requests = sum(requests_per_run(workflow).values())
    soft = (
        settings.CB_RUN_TIME_PER_NODE_S * len(workflow.nodes) + settings.CB_RUN_TIME_PER_REQUEST_S * requests
    )
    soft = min(soft, settings.CB_RUN_TIME_LIMIT_S)
    return RunTimeLimits(soft_s=soft, hard_s=soft + settings.CB_RUN_HARD_LIMIT_GRACE_S)


class HardLimit:
    """Context manager: if the block still runs after ``seconds``, fail the run and kill its processes.

    The processes killed are the children of this process that did not exist when the block began
    (the applications, the monitor, an MPS daemon): the runner then sees them gone and returns.
    """

    def __init__(self, run_id: int, seconds: float) -> None:
        self.run_id = run_id
        self.seconds = seconds
        self.fired = threading.Event()
        self.timer = threading.Timer(seconds, self._fire)
        self.timer.daemon = True
        self.before: set[int] = set()

    def __enter__(self) -> HardLimit:
        self.before = {p.pid for p in psutil.Process().children(recursive=True)}
        self.timer.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.timer.cancel()

    def _fire(self) -> None:
        from django.db import DatabaseError, connection

        from cbweb.runs.services import run_fail

        self.fired.set()
        log.error(
            "run %s: hard time limit of %g s exceeded; killing its processes", self.run_id, self.seconds
        )
        try:
            run_fail(
                run_id=self.run_id,
                error=f"hard time limit of {self.seconds:g} s exceeded: the engine did not stop in time "
                "and its processes were killed",
            )
        except DatabaseError:
            # The processes are killed all the same; the sweeper fails the run once its heartbeat stops.
            log.exception("run %s: could not be marked failed", self.run_id)
        finally:
            with contextlib.suppress(DatabaseError):
                connection.close()
        for proc in psutil.Process().children(recursive=True):
            if proc.pid not in self.before:
                with contextlib.suppress(psutil.NoSuchProcess):
                    proc.kill()
