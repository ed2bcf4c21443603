"""``manage.py bench_ingest``: telemetry ingestion into the database, in samples per second, and its size.

Feeds one hour (``--seconds``) of 20 Hz telemetry of 12 metrics, shaped as the monitor's ``telemetry``
events (a batch every 0.5 s per source), through the worker's own path: ``TelemetryBuffer`` then
``run_store_telemetry`` every ``TELEMETRY_FLUSH_S`` of run time, each flush one committed transaction
(the live path). Then the same samples again as sealed chunks in one call (the bulk path: an import,
or a flush that caught up). Prints samples/s of each (goal: >= 100,000 on PostgreSQL) and the size on
disk of one hour of telemetry (PostgreSQL: table, TOAST and index growth). The rows, runs and user it
creates are deleted at the end.
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Sequence
from typing import Any

import numpy as np
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandParser
from django.db import connection

from benchmarks.monitor.sampler import BATCH_S
from benchmarks.table import text_table
from cbweb.runs.execution import LIVE_CHUNK_SAMPLES, TELEMETRY_FLUSH_S
from cbweb.runs.management.commands.bench_result_page import METRICS, WORKFLOW
from cbweb.runs.models import Run, TelemetryChunk
from cbweb.runs.services import run_spec_fields, run_store_telemetry
from cbweb.runs.telemetry import TelemetryBuffer
from cbweb.workflows.models import Workflow
from cbweb.workflows.selectors import version_latest
from cbweb.workflows.services import workflow_create

GOAL_SAMPLES_S = 100_000


def monitor_events(seconds: float, hz: float, seed: int = 0) -> list[dict[str, Any]]:
    """Return the monitor's ``telemetry`` events for ``seconds`` of METRICS at ``hz``, in time order."""
    rng = np.random.default_rng(seed)
    n = int(seconds * hz)
    # Sample times jitter by a millisecond around the nominal rate, as the sampler's do.
    t = np.arange(n) / hz + rng.uniform(0, 0.001, n)
    by_source: dict[str, dict[str, list[str]]] = defaultdict(lambda: defaultdict(list))
    for source, metric in METRICS:
        entity, column = metric.split(".", 1)
        by_source[source][entity].append(column)
    values = {
        metric: 50 + 40 * np.sin(t / (30 + i)) + rng.normal(0, 5, n) for i, (_, metric) in enumerate(METRICS)
    }
    per_batch = max(1, int(BATCH_S * hz))
    events = []
    for lo in range(0, n, per_batch):
        hi = min(n, lo + per_batch)
        for source, entities in by_source.items():
            columns = sorted({c for cols in entities.values() for c in cols})
            rows = []
            for k in range(lo, hi):
                for entity, cols in entities.items():
                    cells = [values[f"{entity}.{c}"][k] if c in cols else None for c in columns]
                    rows.append([float(t[k]), entity, *cells])
            events.append({"kind": "telemetry", "t": float(t[hi - 1]), "source": source,
                           "columns": ["t", "entity", *columns], "rows": rows})  # fmt: skip
    return events


def table_bytes() -> int | None:
    """Return the telemetry table's size on disk with its TOAST data and indexes (PostgreSQL only)."""
    if connection.vendor != "postgresql":
        return None
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_total_relation_size(%s)", [TelemetryChunk._meta.db_table])
        return int(cursor.fetchone()[0])


class Command(BaseCommand):
    help = "Measure telemetry ingestion (samples/s) and size on disk per hour of 20 Hz telemetry."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--seconds", type=float, default=3600.0, help="run time simulated (default 1 h)")
        parser.add_argument("--hz", type=float, default=20.0, help="samples per second per metric")

    def handle(self, *args: Any, seconds: float, hz: float, **options: Any) -> None:
        user = get_user_model().objects.create_user(username=f"bench-ingest-{time.time_ns()}")
        workflow = workflow_create(owner=user, name="ingestion benchmark", yaml_text=WORKFLOW)
        try:
            self._bench(user, workflow, seconds, hz)
        finally:
            Run.objects.filter(owner=user).delete()
            Workflow.objects.filter(pk=workflow.pk).delete()
            user.delete()

    def _run(self, user: Any, workflow: Workflow) -> Run:
        # A row to hang chunks on, never handed to an executor (run_create would enqueue it).
        return Run.objects.create(
            **run_spec_fields(version=version_latest(workflow=workflow)),
            scheduler="greedy",
            owner=user,
            status=Run.Status.RUNNING,
        )

    def _bench(self, user: Any, workflow: Workflow, seconds: float, hz: float) -> None:
        events = monitor_events(seconds, hz)
        rows = []

        live = self._run(user, workflow)
        size_before = table_bytes()
        buffer = TelemetryBuffer(chunk_samples=LIVE_CHUNK_SAMPLES)
        db_s = 0.0
        started = time.perf_counter()
        next_flush = TELEMETRY_FLUSH_S
        for event in events:
            buffer.add_event(event)
            if event["t"] >= next_flush:
                t0 = time.perf_counter()
                run_store_telemetry(run_id=live.pk, chunks=buffer.take())
                db_s += time.perf_counter() - t0
                next_flush += TELEMETRY_FLUSH_S
        t0 = time.perf_counter()
        run_store_telemetry(run_id=live.pk, chunks=buffer.take())
        db_s += time.perf_counter() - t0
        total_s = time.perf_counter() - started
        live_bytes = None if size_before is None else (table_bytes() or 0) - size_before
        samples = buffer.samples
        flushes = int(seconds / TELEMETRY_FLUSH_S) + 1
        rows.append((f"live: {LIVE_CHUNK_SAMPLES}-sample chunks, flush every {TELEMETRY_FLUSH_S:g} s of run "
                     f"({flushes:,} commits)", samples,
                     total_s, db_s))  # fmt: skip

        bulk = self._run(user, workflow)
        size_before = table_bytes()
        buffer = TelemetryBuffer()
        started = time.perf_counter()
        for event in events:
            buffer.add_event(event)
        t0 = time.perf_counter()
        chunks = buffer.take()
        run_store_telemetry(run_id=bulk.pk, chunks=chunks)
        db_s = time.perf_counter() - t0
        total_s = time.perf_counter() - started
        bulk_bytes = None if size_before is None else (table_bytes() or 0) - size_before
        rows.append((f"bulk: sealed chunks, one call ({len(chunks)} rows)", buffer.samples, total_s, db_s))

        self.stdout.write(
            f"{len(METRICS)} metrics x {seconds:g} s at {hz:g} Hz = {samples:,} samples into "
            f"{connection.vendor}; monitor batches of {BATCH_S:g} s"
        )
        header = ("path", "samples", "total s", "samples/s", "db s", "db samples/s", "goal")
        table = [header]
        for label, n, total, db in rows:
            rate = n / total
            goal = "ok" if rate >= GOAL_SAMPLES_S else f"<{GOAL_SAMPLES_S:,}"
            table.append(
                (label, f"{n:,}", f"{total:.2f}", f"{rate:,.0f}", f"{db:.2f}", f"{n / db:,.0f}", goal)
            )
        self._print(table)
        hours = seconds / 3600
        payload = samples * 16  # a float64 time and a float64 value per sample
        self.stdout.write("")
        size_rows = [("size on disk per hour of telemetry", f"{len(METRICS)} metrics", "per metric")]
        size_rows.append(
            ("payload (16 B/sample)", _mib(payload / hours), _mib(payload / hours / len(METRICS)))
        )
        for label, grown in (("stored, bulk (what a finished run keeps)", bulk_bytes),
                             ("stored, live (with row versions autovacuum frees)", live_bytes)):  # fmt: skip
            if grown is None:
                size_rows.append((label, "n/a (PostgreSQL only)", ""))
            else:
                size_rows.append((label, _mib(grown / hours), _mib(grown / hours / len(METRICS))))
        self._print(size_rows)

    def _print(self, table: Sequence[tuple[str, ...]]) -> None:
        self.stdout.write(text_table(table))


def _mib(n: float) -> str:
    return f"{n / 2**20:.2f} MiB"
