"""``manage.py bench_result_page``: time the result page and the telemetry API on a long run.

Loads a run with 12 telemetry metrics x 36,000 samples (30 minutes at 20 Hz) next to a real finished
Sleep run, then requests the result page and the telemetry API repeatedly and prints a table
(goal: under 300 ms each). Everything happens in one transaction that is rolled back, so the
database it runs against (DATABASE_URL) is left as it was.
"""

from __future__ import annotations

import statistics
import time
from typing import Any

import numpy as np
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandParser
from django.db import connection, transaction
from django.test import Client, override_settings

from benchmarks.table import text_table
from cbweb.runs.execution import run_execute
from cbweb.runs.models import Run, TelemetryChunk
from cbweb.runs.services import run_create, run_refresh_telemetry_overview, run_store_telemetry
from cbweb.runs.telemetry import TelemetryBuffer
from cbweb.workflows.selectors import version_latest
from cbweb.workflows.services import workflow_create

GOAL_MS = 300.0
WORKFLOW = "bench:\n  type: Sleep\n  sleep_time: 0.01\n  num_requests: 20\n  slo: ['e2e<=1s']\n"
METRICS = (
    ("gpm", "gpu0.sm_activity_pct"),
    ("gpm", "gpu0.sm_occupancy_pct"),
    ("gpm", "gpu0.tensor_activity_pct"),
    ("gpm", "gpu0.dram_bw_pct"),
    ("nvml", "gpu0.util_gpu_pct"),
    ("nvml", "gpu0.mem_used_bytes"),
    ("nvml", "gpu0.power_w"),
    ("nvml", "gpu0.energy_j"),
    ("nvml", "gpu0.temperature_c"),
    ("psutil", "system.cpu_percent"),
    ("psutil", "system.mem_used_bytes"),
    ("psutil", "app:bench.rss_bytes"),
)


class _Rollback(Exception):
    pass


class Command(BaseCommand):
    help = "Time the result page and the telemetry API on a run with 12 metrics x 36,000 samples."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--samples", type=int, default=36_000, help="samples per metric (default 30 min at 20 Hz)"
        )
        parser.add_argument("--repeat", type=int, default=7, help="requests per measured page")

    def handle(self, *args: Any, samples: int, repeat: int, **options: Any) -> None:
        try:
            with transaction.atomic(), override_settings(ALLOWED_HOSTS=["*"]):
                self._bench(samples, repeat)
                raise _Rollback
        except _Rollback:
            pass

    def _bench(self, samples: int, repeat: int) -> None:
        user = get_user_model().objects.create_user(username=f"bench-{time.time_ns()}")
        workflow = workflow_create(owner=user, name="result page benchmark", yaml_text=WORKFLOW)
        [run] = run_create(version=version_latest(workflow=workflow), user=user)
        if run_execute(run_id=run.pk, worker="bench") != Run.Status.SUCCEEDED:
            raise RuntimeError(
                f"the benchmark's Sleep run did not succeed: {Run.objects.get(pk=run.pk).error}"
            )
        TelemetryChunk.objects.filter(run=run).delete()

        started = time.perf_counter()
        rng = np.random.default_rng(0)
        t = np.arange(samples) / 20.0
        buffer = TelemetryBuffer()
        for i, (source, metric) in enumerate(METRICS):
            values = 50 + 40 * np.sin(t / (30 + i)) + rng.normal(0, 5, samples)
            for ts, v in zip(t.tolist(), values.tolist(), strict=True):
                buffer.add(source, metric, ts, v)
        run_store_telemetry(run_id=run.pk, chunks=buffer.take())
        load_s = time.perf_counter() - started
        # What run_finish does once per run: the charts' overview of the whole run.
        started = time.perf_counter()
        run_refresh_telemetry_overview(run_id=run.pk)
        overview_s = time.perf_counter() - started
        chunks = TelemetryChunk.objects.filter(run=run).count()

        client = Client()
        base = f"/api/v1/runs/{run.pk}/telemetry/"
        cases = [
            ("result page (HTML, all charts)", f"/runs/{run.pk}/"),
            ("telemetry API, all 12 metrics", base),
            ("telemetry API, 1 metric", f"{base}?metric=gpu0.sm_activity_pct"),
            ("telemetry API, all metrics, 5000 points (no overview)", f"{base}?points=5000"),
            ("telemetry API, 1 metric, 5-min range", f"{base}?metric=gpu0.power_w&t_min=600&t_max=900"),
        ]
        rows = []
        for label, url in cases:
            times, size = [], 0
            for _ in range(repeat):
                t0 = time.perf_counter()
                response = client.get(url)
                times.append((time.perf_counter() - t0) * 1000)
                if response.status_code != 200:
                    raise RuntimeError(f"{url} answered {response.status_code}")
                size = len(response.content)
            rows.append((label, min(times), statistics.median(times), max(times), size))

        db = connection.vendor
        self.stdout.write(
            f"run with {len(METRICS)} metrics x {samples:,} samples ({chunks} chunks) on {db}: stored in "
            f"{load_s:.1f} s, chart overview computed once in {overview_s * 1000:.0f} ms; "
            f"{repeat} requests each"
        )
        header = ("request", "min ms", "median ms", "max ms", "bytes", "goal")
        table = [header] + [
            (
                label,
                f"{lo:.0f}",
                f"{med:.0f}",
                f"{hi:.0f}",
                f"{size:,}",
                "ok" if med < GOAL_MS else f">{GOAL_MS:.0f} ms",
            )
            for label, lo, med, hi, size in rows
        ]
        self.stdout.write(text_table(table))
