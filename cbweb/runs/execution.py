"""Run execution: claim a queued run, execute it with the engine, persist it through the services.

The one home of run execution. The Celery task (``workers/tasks.py``, a few lines) and the web
process's local executor (``cbweb/runs/dispatch.py``, no broker configured) both call ``run_execute``;
neither claims or writes anything itself. The engine (``benchmarks.runner.run_workflow``) does the
work, the run state machine (``cbweb.runs.services``) does the writes. ``run_queue`` chooses the
Celery queue a run is sent to; the queue names live here with it (``workers/celery.py`` decides
which of them a worker listens on; its heartbeat publishes the platform's queue on the Platform row).

This module imports nothing from ``workers`` (import-linter checks it): cbweb hands runs to the
workers through the one sender named by ``settings.CB_RUN_SENDER`` (see ``cbweb/runs/dispatch.py``).
"""

from __future__ import annotations

import contextlib
import functools
import logging
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, TypeVar

from django.db import DatabaseError, InterfaceError, OperationalError

from benchmarks import clock
from cbweb.runs.limits import HardLimit, run_time_limits

log = logging.getLogger(__name__)

# Queues for runs launched for no platform in particular (a platform's runs go to ``Platform.queue``):
# every worker listens on the first, every GPU worker on the second (``workers.celery.worker_queues``).
DEFAULT_QUEUE = "consumerbench"
GPU_QUEUE = "consumerbench.gpu"


def platform_queue(platform_id: str) -> str:
    """Return the queue of one platform (any worker on a machine with this fingerprint id)."""
    return f"cb.{platform_id}"


# The run page polls every second: writing progress twice a second keeps it live without a write
# per event (a chatbot emits one per token).
PROGRESS_FLUSH_S = 0.5
# Telemetry is written every TELEMETRY_FLUSH_S in one transaction: at 20 Hz that is 40 new samples
# per metric, one upsert statement for all metrics.
TELEMETRY_FLUSH_S = 2.0
# Each flush rewrites the open chunk of every metric, so the bytes written per flush grow with the
# open chunk: with 4096-sample chunks an hour of 20 Hz telemetry wrote ~50x its size (720 MiB of row
# versions for 13 MiB of samples, 21k samples/s; `manage.py bench_ingest`). Chunks of 256 samples
# (12.8 s at 20 Hz) bound that to ~4x and keep an hour at ~280 rows per metric.
LIVE_CHUNK_SAMPLES = 256
# The runner polls cancel() every 50 ms; reading the flag from the database every half second
# still stops a run within the required seconds.
CANCEL_POLL_S = 0.5
# Set when the worker is asked to stop (SIGTERM: `docker compose stop`, systemd, Ctrl-C): the run in
# progress is stopped like a cancelled one and stored as failed with its partial data, instead of
# being killed at the end of the grace period and failed by the reaper without its requests.
WORKER_SHUTDOWN = threading.Event()
SHUTDOWN_REASON = "the worker was shut down during the run; the data measured until then is kept"
# What a database restart or a dropped connection raises; other database errors are bugs, not blips.
DB_DOWN = (OperationalError, InterfaceError)
# After a failed write the sink waits before trying again, doubling from the first to the last delay:
# the runner calls it every 50 ms, and each try against a database that is down costs a connection
# attempt. Two seconds at most, so a run's heartbeat is back within seconds of the database.
DB_BACKOFF_S = (0.25, 2.0)

T = TypeVar("T")


def _drop_connection() -> None:
    """Close this thread's database connection after an error, so that the next query reconnects."""
    from django.db import connection

    with contextlib.suppress(DatabaseError):
        connection.close()


def with_db_retry(fn: Callable[[], T], *, what: str) -> T:
    """Return ``fn()``, retrying with backoff for up to ``CB_DB_RETRY_S`` while the database is down.

    For the writes a run cannot lose (its result, its failure): a PostgreSQL restart delays them.
    Raises the last database error once the time is up; other errors at once.
    """
    from django.conf import settings

    deadline = clock.now() + float(settings.CB_DB_RETRY_S)
    delay = DB_BACKOFF_S[0]
    while True:
        try:
            return fn()
        except DB_DOWN as exc:
            _drop_connection()
            if clock.now() + delay > deadline:
                raise
            log.warning("%s: database unavailable (%s); retrying in %g s", what, exc, delay)
            time.sleep(delay)
            # Never slower than the heartbeat: once the database is back, the write lands before
            # the sweeper could take the run's silence for a lost worker.
            delay = min(2 * delay, float(settings.CB_HEARTBEAT_S))


class DatabaseSink:
    """The runner's sink for a web run: folds events into progress and telemetry, writes in batches."""

    def __init__(self, run_id: int, workflow: Any) -> None:
        from benchmarks.progress import RunProgress
        from cbweb.runs.telemetry import TelemetryBuffer

        self.run_id = run_id
        self.progress = RunProgress(workflow)
        self.telemetry = TelemetryBuffer(chunk_samples=LIVE_CHUNK_SAMPLES)
        self.last_progress = self.last_telemetry = self.last_cancel_check = clock.now()
        self.cancelled = False
        # Telemetry chunks a write could not store (the database was down), by (source, metric, seq):
        # sent again with the next flush, the newer copy of a chunk replacing the older.
        self.unsaved: dict[tuple[str, str, int], Any] = {}
        self.db_retry_at = 0.0
        self.db_backoff = 0.0
        # Without any event (a long request, the monitor off) progress is still written this often,
        # so the run's heartbeat shows the reaper that its worker is alive.
        from django.conf import settings

        self.heartbeat_s = float(settings.CB_HEARTBEAT_S)

    def on_event(self, event: Mapping[str, Any]) -> None:
        # Counted requests' latencies too: the live run page charts them (REQUESTS_SOURCE).
        if event.get("kind") in ("telemetry", "request_end"):
            self.telemetry.add_event(event)
        self.progress.on_event(event)
        self.tick()

    def tick(self) -> None:
        """Write what is due: progress every PROGRESS_FLUSH_S, telemetry every TELEMETRY_FLUSH_S."""
        now = clock.now()
        since = now - self.last_progress
        if (self.progress.changed and since >= PROGRESS_FLUSH_S) or since >= self.heartbeat_s:
            self.flush_progress()
        if now - self.last_telemetry >= TELEMETRY_FLUSH_S:
            self.flush_telemetry()

    def _write(self, what: str, fn: Callable[[], T]) -> tuple[bool, T | None]:
        """Run a database call unless backing off; return (done, its value). A blip is not an error:
        the run goes on, the data stays buffered and the next due write sends it."""
        now = clock.now()
        if now < self.db_retry_at:
            return False, None
        try:
            value = fn()
        except DB_DOWN as exc:
            _drop_connection()
            if not self.db_backoff:
                log.warning("run %s: database unavailable (%s); buffering %s", self.run_id, exc, what)
            self.db_backoff = min(max(DB_BACKOFF_S[0], 2 * self.db_backoff), DB_BACKOFF_S[1])
            self.db_retry_at = now + self.db_backoff
            return False, None
        if self.db_backoff:
            log.warning("run %s: database back; writing again", self.run_id)
        self.db_backoff = self.db_retry_at = 0.0
        return True, value

    def flush_progress(self) -> bool:
        """Write the progress and the run's heartbeat; return False when the database is down."""
        from cbweb.runs.services import run_progress

        done, _ = self._write(
            "progress", lambda: run_progress(run_id=self.run_id, progress=self.progress.state)
        )
        if done:
            self.progress.changed = False
            self.last_progress = clock.now()
        return done

    def flush_telemetry(self) -> bool:
        """Write new telemetry chunks and those a failed write kept; False when the database is down."""
        from cbweb.runs.services import run_store_telemetry

        for chunk in self.telemetry.take():
            self.unsaved[(chunk.source, chunk.metric, chunk.seq)] = chunk
        self.last_telemetry = clock.now()
        if not self.unsaved:
            return True
        chunks = list(self.unsaved.values())
        done, _ = self._write("telemetry", lambda: run_store_telemetry(run_id=self.run_id, chunks=chunks))
        if done:
            self.unsaved.clear()
        return done

    def flush(self) -> None:
        """Write everything still buffered, waiting for the database (up to CB_DB_RETRY_S) if it is down."""

        def both() -> None:
            self.db_retry_at = 0.0
            if not (self.flush_progress() and self.flush_telemetry()):
                raise OperationalError("the database is still unavailable")

        with_db_retry(both, what=f"run {self.run_id}: final progress and telemetry")

    def cancel_requested(self) -> bool:
        """The runner's cancel callable: reads the run's cancel flag (at most every CANCEL_POLL_S)."""
        from cbweb.runs.selectors import run_cancel_requested

        now = clock.now()
        if WORKER_SHUTDOWN.is_set():
            self.cancelled = True
        elif not self.cancelled and now - self.last_cancel_check >= CANCEL_POLL_S:
            _, asked = self._write("cancel poll", lambda: run_cancel_requested(run_id=self.run_id))
            self.cancelled = bool(asked)
            self.last_cancel_check = now
        # The runner calls this every 50 ms even when no event arrives: pending progress goes out too.
        self.tick()
        return self.cancelled


def run_execute(*, run_id: int, worker: str) -> str:
    """Execute the run whose turn it is on the queue where run ``run_id`` waits (``run_id`` itself
    unless other users' runs wait there: ``services.run_claim_fair``); return the executed run's final
    status, or 'skipped' when no run is left to claim."""
    from django.conf import settings

    from benchmarks.platform import fingerprint
    from benchmarks.results import write_bundle
    from benchmarks.runner import run_workflow
    from benchmarks.status import RunStatus
    from cbweb.platforms.services import platform_register
    from cbweb.runs import services
    from cbweb.runs.models import Run
    from cbweb.workflows.services import file_policy

    # A database error here propagates: the run is still queued, and the task is retried.
    queue = functools.cache(lambda: run_queue(run_id))
    claimed = services.run_claim_fair(
        run_id=run_id, worker=worker, same_queue=lambda other: run_queue(other) == queue()
    )
    if claimed is None:
        log.info("run %s: not claimed, nor any other in its queue (taken, cancelled or gone)", run_id)
        return "skipped"
    if claimed != run_id:
        log.info("run %s: run %s's turn came first (the fair queue)", run_id, claimed)
    run_id = claimed
    log.info("run %s: claimed by %s", run_id, worker)
    try:
        run = with_db_retry(lambda: Run.objects.get(pk=run_id), what=f"run {run_id}: loading")
        from benchmarks.spec.load import from_dict
        from cbweb.workflows.limits import spec_limits

        # The run's frozen spec: its workflow may have been deleted since it was queued.
        workflow = from_dict(run.spec, name=run.workflow_name, limits=spec_limits())
        with_db_retry(
            lambda: services.run_set_platform(
                run_id=run_id, platform=platform_register(fingerprint=fingerprint())
            ),
            what=f"run {run_id}: recording its platform",
        )
        out_dir = Path(settings.CB_RESULTS_DIR) / f"run-{run_id}"
        sink = DatabaseSink(run_id, workflow)
        limits = run_time_limits(workflow)
        with HardLimit(run_id, limits.hard_s):
            result = run_workflow(
                workflow,
                scheduler=run.scheduler,
                scheduler_params=run.scheduler_params,
                sink=sink,
                cancel=sink.cancel_requested,
                out_dir=out_dir,
                time_limit_s=limits.soft_s,
                repeat_index=run.repeat_index,
                # Defence in depth: a version stored before the policy existed is refused here too.
                files=file_policy(),
            )
        sink.flush()
        if WORKER_SHUTDOWN.is_set() and result.status is RunStatus.CANCELLED:
            result = result.model_copy(update={"status": RunStatus.FAILED, "reason": SHUTDOWN_REASON})
        write_bundle(result, out_dir)
        # The bundle is on disk; the result goes to the database as soon as the database takes it.
        finished = with_db_retry(
            lambda: services.run_finish(run_id=run_id, result=result, bundle_dir=str(out_dir)),
            what=f"run {run_id}: storing its result",
        )
        return str(finished.status)
    except services.RunStateError as exc:
        log.warning("run %s: %s", run_id, exc)
        return "lost"
    except Exception as exc:
        log.exception("run %s failed", run_id)
        error = f"{type(exc).__name__}: {exc}"
        with_db_retry(lambda: services.run_fail(run_id=run_id, error=error), what=f"run {run_id}: failing it")
        return Run.Status.FAILED


def run_queue(run_id: int) -> str:
    """Return the queue a run is sent to: its platform's, else the GPU workers' when it needs a GPU."""
    from benchmarks.spec.load import from_dict
    from benchmarks.spec.model import WorkflowValidationError
    from cbweb.runs.models import Run
    from cbweb.workflows.limits import spec_limits

    run = Run.objects.select_related("platform").get(pk=run_id)
    if run.platform is not None and run.platform.queue:
        return run.platform.queue
    try:
        workflow = from_dict(run.spec, name=run.workflow_name, limits=spec_limits())
    except WorkflowValidationError:
        # Stored before a rule existed (names, limits; issue 17): any worker fails it with the reason.
        return DEFAULT_QUEUE
    needs_gpu = any(unit.device == "gpu" for unit in workflow.applications.values())
    return GPU_QUEUE if needs_gpu else DEFAULT_QUEUE
