"""Telemetry: turning the runner's ``telemetry`` events into chunked arrays, and LTTB downsampling.

The monitor sends batches of samples through the runner's sink as events of kind ``telemetry``
(one source per batch, ``columns`` and ``rows``); counted requests' latencies are kept the same way
while a run goes on (``REQUESTS_SOURCE``). ``TelemetryBuffer`` groups samples into
chunks of ``TELEMETRY_CHUNK_SAMPLES`` per (source, metric); ``lttb`` reduces a long series to a few
thousand points for charts while keeping its visual shape (peaks survive, unlike plain decimation).
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from benchmarks.status import RequestStatus

# One row per 4096 samples: 3.4 minutes of one metric at 20 Hz, 64 KiB of arrays, so a 30-minute run
# has ~9 rows per metric; bigger rows make the live rewrite of the open chunk costlier, smaller ones
# multiply rows and index entries.
TELEMETRY_CHUNK_SAMPLES = 4096
DTYPE = "<f8"


@dataclass
class ChunkWrite:
    """One chunk to insert or overwrite: samples ``seq * TELEMETRY_CHUNK_SAMPLES`` onwards."""

    source: str
    metric: str
    seq: int
    t: list[float]
    v: list[float]


def encode(values: Any) -> bytes:
    """Return values as little-endian float64 bytes."""
    return np.asarray(values, dtype=DTYPE).tobytes()


def decode(blob: bytes | memoryview) -> np.ndarray:
    """Return the float64 array stored by ``encode``."""
    return np.frombuffer(bytes(blob), dtype=DTYPE)


def _number(value: Any) -> float | None:
    if isinstance(value, bool):
        return float(value)
    if isinstance(value, int | float):
        return float(value) if math.isfinite(value) else math.nan
    return None


def metric_name(entity: Any, column: str) -> str:
    """Return the stored name of one column for one entity: ``system.cpu_percent``, ``gpu0.power_w``."""
    return f"{entity}.{column}" if entity not in (None, "") else column


def samples_of_event(event: Mapping[str, Any]) -> Iterator[tuple[str, str, float, float]]:
    """Yield ``(source, metric, t, value)`` for every value in a monitor ``telemetry`` event.

    The event carries one source's batch as ``columns`` (``t``, ``entity``, then the source's
    columns) and ``rows`` (docs/monitor.md). Empty cells mean "not measured for this entity" (a
    system row has no RSS) and are skipped; non-finite numbers are kept as NaN (a gap in the chart).
    """
    source = str(event.get("source") or "monitor")
    columns, rows = event.get("columns"), event.get("rows")
    if not isinstance(columns, list) or not isinstance(rows, list) or "t" not in columns:
        return
    ti = columns.index("t")
    ei = columns.index("entity") if "entity" in columns else None
    wanted = [(j, str(c)) for j, c in enumerate(columns) if j not in (ti, ei)]
    for row in rows:
        if not isinstance(row, list | tuple) or len(row) != len(columns):
            continue
        t = _number(row[ti])
        if t is None or math.isnan(t):
            continue
        entity = row[ei] if ei is not None else None
        for j, column in wanted:
            value = _number(row[j])
            if value is not None:
                yield source, metric_name(entity, column), t, value


# The live run page's latency charts: the run's sink stores each counted request's metrics as samples
# of this source (metric ``<node>.<metric>``, t = the request's end), so they grow through the
# telemetry API while the run goes on; a finished run's charts read its stored requests instead.
REQUESTS_SOURCE = "requests"


def samples_of_request(event: Mapping[str, Any]) -> Iterator[tuple[str, str, float, float]]:
    """Yield ``(REQUESTS_SOURCE, "<node>.<metric>", end, value)`` for each numeric metric of a
    ``request_end`` event's record when the request counts (finished normally, not warm-up)."""
    record = event.get("record")
    if not isinstance(record, Mapping) or record.get("status") != RequestStatus.OK or record.get("warmup"):
        return
    end = _number(record.get("end"))
    values = record.get("metrics")
    if end is None or math.isnan(end) or not isinstance(values, Mapping):
        return
    for name, value in values.items():
        number = _number(value)
        if number is not None and not isinstance(value, bool):
            yield REQUESTS_SOURCE, metric_name(event.get("node"), str(name)), end, number


@dataclass
class _Series:
    seq: int = 0
    t: list[float] = field(default_factory=list)
    v: list[float] = field(default_factory=list)
    dirty: bool = False


class TelemetryBuffer:
    """Collects samples per (source, metric) and hands out chunk writes in batches.

    The open chunk of each series is rewritten on every flush until it holds
    ``TELEMETRY_CHUNK_SAMPLES`` samples; then it is sealed and the next one starts. So telemetry is
    visible while the run goes on and every stored chunk but the last is full.
    """

    def __init__(self, chunk_samples: int = TELEMETRY_CHUNK_SAMPLES) -> None:
        self.chunk_samples = chunk_samples
        self.series: dict[tuple[str, str], _Series] = {}
        self.sealed: list[ChunkWrite] = []
        self.samples = 0

    def add(self, source: str, metric: str, t: float, value: float) -> None:
        s = self.series.setdefault((source, metric), _Series())
        s.t.append(t)
        s.v.append(value)
        s.dirty = True
        self.samples += 1
        if len(s.t) >= self.chunk_samples:
            self.sealed.append(ChunkWrite(source, metric, s.seq, s.t, s.v))
            self.series[(source, metric)] = _Series(seq=s.seq + 1)

    def add_event(self, event: Mapping[str, Any]) -> None:
        """Add the samples of a monitor ``telemetry`` event or of a counted ``request_end``."""
        kind = event.get("kind")
        samples = samples_of_request(event) if kind == "request_end" else samples_of_event(event)
        for source, metric, t, value in samples:
            self.add(source, metric, t, value)

    def take(self) -> list[ChunkWrite]:
        """Return the chunks to write now (sealed ones and the open ones that changed)."""
        out, self.sealed = self.sealed, []
        for (source, metric), s in self.series.items():
            if s.dirty and s.t:
                out.append(ChunkWrite(source, metric, s.seq, list(s.t), list(s.v)))
                s.dirty = False
        return out


# Buckets are processed in blocks so that the (buckets x anchors x candidates) array stays small.
_LTTB_BLOCK_ELEMENTS = 2_000_000


def lttb(x: np.ndarray, y: np.ndarray, n_out: int) -> tuple[np.ndarray, np.ndarray]:
    """Return ``n_out`` points of (x, y) chosen by Largest-Triangle-Three-Buckets (Steinarsson 2013).

    Exact LTTB, vectorised: for each bucket the best candidate is computed for every possible anchor
    of the previous bucket at once, then the chain of choices is followed. ``x`` must be sorted.
    Series with at most ``n_out`` points are returned unchanged.
    """
    n = len(x)
    if n_out >= n or n <= 2:
        return x, y
    if n_out < 3:
        raise ValueError("lttb needs n_out >= 3 (the first and last points plus one bucket)")
    nb = n_out - 2
    edges = np.linspace(1, n - 1, nb + 1).astype(np.int64)
    sizes = np.diff(edges)
    m = int(sizes.max())
    offsets = np.arange(m)
    valid = offsets[None, :] < sizes[:, None]
    idx = np.where(valid, edges[:-1, None] + offsets[None, :], edges[:-1, None])
    bx, by = x[idx], y[idx]
    avg_x = np.where(valid, bx, 0.0).sum(axis=1) / sizes
    avg_y = np.where(valid, by, 0.0).sum(axis=1) / sizes
    cx = np.append(avg_x[1:], x[-1])
    cy = np.append(avg_y[1:], y[-1])
    ax = np.empty((nb, m))
    ay = np.empty((nb, m))
    ax[0], ay[0] = x[0], y[0]
    ax[1:], ay[1:] = bx[:-1], by[:-1]
    # Twice the triangle area (a, b, c) is |A*by + B*bx + C| with A, B, C fixed per anchor a: one
    # multiply-add pass over (anchors x candidates) instead of the textbook formula's six.
    coef_a = ax - cx[:, None]
    coef_b = cy[:, None] - ay
    coef_c = cx[:, None] * ay - ax * cy[:, None]
    penalty = np.where(valid, 0.0, -np.inf)
    best = np.empty((nb, m), dtype=np.int64)
    block = max(1, _LTTB_BLOCK_ELEMENTS // (m * m))
    for lo in range(0, nb, block):
        hi = min(nb, lo + block)
        area = coef_a[lo:hi, :, None] * by[lo:hi, None, :]
        area += coef_b[lo:hi, :, None] * bx[lo:hi, None, :]
        area += coef_c[lo:hi, :, None]
        np.abs(area, out=area)
        area += penalty[lo:hi, None, :]
        best[lo:hi] = area.argmax(axis=2)
    chosen = []
    j = 0
    for row in best.tolist():
        j = row[j]
        chosen.append(j)
    picked = idx[np.arange(nb), np.asarray(chosen)]
    keep = np.concatenate(([0], picked, [n - 1]))
    return x[keep], y[keep]
