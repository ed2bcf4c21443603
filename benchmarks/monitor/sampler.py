"""The sampling loop: opens every source, samples them at a fixed rate, hands rows out in batches.

Ticks are scheduled on absolute deadlines (``start + k / hz``), so the rate does not drift with the
time sampling takes; a tick that is late by more than a period is skipped and counted as missed
rather than squeezed in. Timestamps are seconds since ``t0`` on the shared clock (benchmarks.clock).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from benchmarks import clock
from benchmarks.monitor.base import AppProcesses, Row, Source, SourceStatus, SourceUnavailable
from benchmarks.monitor.sources import SOURCES, resolve_sources

DEFAULT_HZ = 20.0
MAX_HZ = 100.0
# Rows leave the sampler at most this often: often enough for a live chart, rarely enough that the
# pipe and the sink (a database insert on the web side) see a few messages per second, not hundreds.
BATCH_S = 0.5
# A source that raises on this many ticks in a row is closed and reported unavailable.
MAX_CONSECUTIVE_ERRORS = 20

Batch = dict[str, Any]


def check_hz(hz: float) -> float:
    """Return ``hz`` as a float; ValueError when it is outside (0, MAX_HZ]."""
    if not 0 < hz <= MAX_HZ:
        raise ValueError(f"monitor rate must be above 0 and at most {MAX_HZ:g} Hz, got {hz:g}")
    return float(hz)


@dataclass
class SamplerStats:
    """How a sampling run went: ticks taken and missed, its duration and the CPU time it cost."""

    hz: float
    ticks: int = 0
    missed: int = 0
    duration_s: float = 0.0
    cpu_s: float = 0.0
    errors: dict[str, int] = field(default_factory=dict)
    # CPU seconds spent in each source's ``sample`` (cpu_s also counts the loop and the batches).
    source_s: dict[str, float] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """Return the stats as a JSON-ready dict."""
        return asdict(self)


class Sampler:
    """Samples a set of sources at ``hz``; used inside the monitor process and by the CLI directly."""

    def __init__(
        self,
        hz: float = DEFAULT_HZ,
        sources: Sequence[str] | None = None,
        t0: float | None = None,
        instances: Sequence[Source] | None = None,
    ) -> None:
        self.hz = check_hz(hz)
        self.t0 = clock.now() if t0 is None else t0
        self.apps = AppProcesses()
        names = resolve_sources(list(sources) if sources is not None else None)
        self.sources: list[Source] = (
            list(instances) if instances is not None else [SOURCES[n]() for n in names]
        )
        self.statuses: dict[str, SourceStatus] = {}
        self.stats = SamplerStats(hz=self.hz)
        self._open: list[Source] = []
        self._pending: dict[str, list[Row]] = {}
        self._failures: dict[str, int] = {}

    def open(self) -> dict[str, SourceStatus]:
        """Open every source; return each one's status (a missing source is reported, never raised)."""
        for src in self.sources:
            status = SourceStatus(src.name, True, None, src.columns, src.description)
            try:
                src.open(self.hz)
            except SourceUnavailable as exc:
                status = SourceStatus(src.name, False, str(exc), src.columns, src.description)
            except Exception as exc:  # a broken driver or tool must not fail the run
                status = SourceStatus(
                    src.name, False, f"{type(exc).__name__}: {exc}", src.columns, src.description
                )
            if status.available:
                self._open.append(src)
                self._pending[src.name] = []
                self._failures[src.name] = 0
            else:
                _close_quietly(src)
            self.statuses[src.name] = status
        return self.statuses

    def tick(self, now: float | None = None) -> None:
        """Sample every open source once, stamping rows with ``now - t0``."""
        now = clock.now() if now is None else now
        t = now - self.t0
        self.apps.refresh(now)
        for src in list(self._open):
            began = time.process_time()
            try:
                rows = src.sample(t, self.apps)
            except SourceUnavailable as exc:
                self._drop(src, str(exc))
                continue
            except Exception as exc:
                self._failures[src.name] += 1
                self.stats.errors[src.name] = self.stats.errors.get(src.name, 0) + 1
                if self._failures[src.name] >= MAX_CONSECUTIVE_ERRORS:
                    self._drop(
                        src, f"failed {MAX_CONSECUTIVE_ERRORS} samples in a row: {type(exc).__name__}: {exc}"
                    )
                continue
            finally:
                spent = time.process_time() - began
                self.stats.source_s[src.name] = self.stats.source_s.get(src.name, 0.0) + spent
            self._failures[src.name] = 0
            self._pending[src.name].extend(rows)
        self.stats.ticks += 1

    def _drop(self, src: Source, reason: str) -> None:
        self._open.remove(src)
        _close_quietly(src)
        self.statuses[src.name] = SourceStatus(
            src.name, False, f"stopped during sampling: {reason}", src.columns, src.description
        )

    def take_batches(self) -> list[Batch]:
        """Return the rows gathered since the last call, one batch per source that has any."""
        batches = []
        for src in self.sources:
            rows = self._pending.get(src.name)
            if rows:
                batches.append({"source": src.name, "columns": ["t", "entity", *src.columns], "rows": rows})
                self._pending[src.name] = []
        return batches

    def run(
        self,
        should_stop: Callable[[], bool],
        on_batch: Callable[[Batch], None],
        wait: Callable[[float], None] = time.sleep,
        batch_s: float = BATCH_S,
        duration_s: float | None = None,
    ) -> SamplerStats:
        """Sample until ``should_stop()`` or ``duration_s``, handing batches to ``on_batch``; return stats.

        ``wait(seconds)`` sleeps between ticks; the monitor process passes one that also reads commands.
        """
        period = 1.0 / self.hz
        start = last_flush = clock.now()
        cpu_start = time.process_time()
        k = 0
        while not should_stop():
            now = clock.now()
            if duration_s is not None and now - start >= duration_s - period / 2:
                break
            self.tick(now)
            if now - last_flush >= batch_s:
                for batch in self.take_batches():
                    on_batch(batch)
                last_flush = now
            k += 1
            late = clock.now() - (start + k * period)
            if late >= period:
                skipped = int(late / period)
                k += skipped
                self.stats.missed += skipped
                late -= skipped * period
            if late < 0:
                wait(-late)
        # The last tick takes every reading, so that counters (energy, CPU time) cover the whole run.
        for src in self._open:
            src.read_all_next()
        self.tick()
        for batch in self.take_batches():
            on_batch(batch)
        self.stats.duration_s = clock.now() - start
        self.stats.cpu_s = time.process_time() - cpu_start
        return self.stats

    def close(self) -> None:
        """Close every source still open."""
        for src in self._open:
            _close_quietly(src)
        self._open = []


def _close_quietly(src: Source) -> None:
    try:
        src.close()
    except Exception:
        return
