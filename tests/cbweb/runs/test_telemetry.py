from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

from cbweb.runs.models import TelemetryChunk
from cbweb.runs.selectors import page_metrics, run_telemetry
from cbweb.runs.services import run_store_telemetry
from cbweb.runs.telemetry import TelemetryBuffer, lttb, samples_of_event


def reference_lttb(x: list[float], y: list[float], n_out: int) -> list[int]:
    """Steinarsson's algorithm, written plainly, with the same bucket edges (the oracle)."""
    n = len(x)
    edges = np.linspace(1, n - 1, n_out - 1).astype(int)
    chosen, a = [0], 0
    for b in range(n_out - 2):
        lo, hi = edges[b], edges[b + 1]
        if b + 1 < n_out - 2:
            nlo, nhi = edges[b + 1], edges[b + 2]
            cx, cy = sum(x[nlo:nhi]) / (nhi - nlo), sum(y[nlo:nhi]) / (nhi - nlo)
        else:
            cx, cy = x[-1], y[-1]
        best, best_area = lo, -1.0
        for i in range(lo, hi):
            area = abs((x[a] - cx) * (y[i] - y[a]) - (x[a] - x[i]) * (cy - y[a]))
            if area > best_area:
                best, best_area = i, area
        chosen.append(best)
        a = best
    return [*chosen, n - 1]


@pytest.mark.parametrize(("n", "n_out"), [(1000, 50), (36_000, 2000), (5003, 997), (10, 3)])
def test_lttb_picks_the_same_points_as_the_reference_algorithm(n: int, n_out: int) -> None:
    rng = np.random.default_rng(n)
    x = np.cumsum(rng.uniform(0.01, 0.1, n))
    y = np.sin(x) + rng.normal(0, 0.3, n)
    tx, ty = lttb(x, y, n_out)
    expected = reference_lttb(list(x), list(y), n_out)
    assert len(tx) == n_out
    assert list(tx) == [x[i] for i in expected]
    assert list(ty) == [y[i] for i in expected]


def test_lttb_keeps_a_single_spike() -> None:
    x = np.arange(10_000, dtype=float)
    y = np.zeros(10_000)
    y[7777] = 50.0
    _, ty = lttb(x, y, 100)
    assert ty.max() == 50.0


def test_short_series_are_returned_unchanged() -> None:
    x, y = np.arange(5.0), np.arange(5.0)
    assert lttb(x, y, 10)[0] is x


def test_monitor_batches_become_samples_per_entity_and_column() -> None:
    event = {
        "kind": "telemetry",
        "source": "psutil",
        "columns": ["t", "entity", "cpu_percent", "rss_bytes"],
        "rows": [[0.05, "system", 12.5, None], [0.05, "chat", 3.0, 1000], [0.10, "system", math.inf, None]],
    }
    samples = list(samples_of_event(event))
    assert samples[:3] == [
        ("psutil", "system.cpu_percent", 0.05, 12.5),
        ("psutil", "chat.cpu_percent", 0.05, 3.0),
        ("psutil", "chat.rss_bytes", 0.05, 1000.0),
    ]
    assert samples[3][:3] == ("psutil", "system.cpu_percent", 0.10) and math.isnan(samples[3][3])


def test_buffer_seals_full_chunks_and_rewrites_the_open_one() -> None:
    buffer = TelemetryBuffer(chunk_samples=4)
    for i in range(6):
        buffer.add("nvml", "gpu0.power_w", i * 0.05, float(i))
    first = buffer.take()
    assert [(c.seq, len(c.t)) for c in first] == [(0, 4), (1, 2)]
    assert buffer.take() == []
    buffer.add("nvml", "gpu0.power_w", 0.30, 6.0)
    assert [(c.seq, c.v) for c in buffer.take()] == [(1, [4.0, 5.0, 6.0])]


def test_stored_chunks_are_read_back_in_time_order_and_range(
    alice: Any, make_workflow: Any, make_run: Any
) -> None:
    run = make_run(make_workflow(alice), alice)
    buffer = TelemetryBuffer(chunk_samples=100)
    for i in range(1000):
        buffer.add("nvml", "gpu0.power_w", i * 0.05, float(i % 7))
    run_store_telemetry(run_id=run.pk, chunks=buffer.take())
    assert TelemetryChunk.objects.filter(run=run).count() == 10
    [series] = run_telemetry(run=run, t_min=10.0, t_max=20.0, points=5000)
    assert series["samples"] == 201
    assert series["t"][0] == 10.0 and series["t"][-1] == 20.0
    [small] = run_telemetry(run=run, points=300)
    assert len(small["t"]) == 300 and small["samples"] == 1000


def test_result_page_charts_leave_out_per_core_cpu_series(
    alice: Any, make_workflow: Any, make_run: Any
) -> None:
    run = make_run(make_workflow(alice), alice)
    buffer = TelemetryBuffer(chunk_samples=100)
    for metric in ("cpu0.cpu_percent", "cpu13.cpu_percent", "system.cpu_percent", "app:cpu1.cpu_percent"):
        buffer.add("psutil", metric, 0.05, 1.0)
    buffer.add("nvml", "gpu0.power_w", 0.05, 1.0)
    run_store_telemetry(run_id=run.pk, chunks=buffer.take())
    assert page_metrics(run=run) == ["app:cpu1.cpu_percent", "gpu0.power_w", "system.cpu_percent"]
