"""The sampling loop: rate, timestamps, statuses, misbehaving sources, cost accounting."""

from __future__ import annotations

import itertools
from typing import Any, ClassVar

import pytest

from benchmarks import clock
from benchmarks.monitor.base import AppProcesses, Row, Source, SourceUnavailable
from benchmarks.monitor.sampler import MAX_CONSECUTIVE_ERRORS, Sampler, check_hz


def _run(sampler: Sampler, seconds: float) -> list[dict[str, Any]]:
    batches: list[dict[str, Any]] = []
    sampler.open()
    try:
        sampler.run(lambda: False, batches.append, duration_s=seconds, batch_s=0.25)
    finally:
        sampler.close()
    return batches


def _rows(batches: list[dict[str, Any]], source: str, entity: str) -> list[list[Any]]:
    return [list(r) for b in batches if b["source"] == source for r in b["rows"] if r[1] == entity]


@pytest.mark.parametrize("hz", [20, 50])
def test_psutil_samples_at_the_asked_rate_within_ten_percent(hz):
    seconds = 1.5
    sampler = Sampler(hz, ["psutil"])
    batches = _run(sampler, seconds)
    rows = _rows(batches, "psutil", "system")
    assert abs(len(rows) - hz * seconds) <= 0.1 * hz * seconds
    span = rows[-1][0] - rows[0][0]
    assert abs(span / (len(rows) - 1) - 1 / hz) <= 0.1 / hz
    assert sampler.stats.ticks == len(rows)


def test_per_core_and_application_rows_come_at_most_every_200_ms_the_system_row_every_tick():
    import os

    from benchmarks.monitor.sources.psutil import DETAIL_INTERVAL_S

    seconds, hz = 1.5, 50
    sampler = Sampler(hz, ["psutil"])
    sampler.open()
    sampler.apps.watch("me", os.getpid())
    batches: list[dict[str, Any]] = []
    try:
        sampler.run(lambda: False, batches.append, duration_s=seconds, batch_s=0.25)
    finally:
        sampler.close()
    detail = seconds / DETAIL_INTERVAL_S
    for entity in ("cpu0", "app:me"):
        rows = _rows(batches, "psutil", entity)
        # ... and one more from the last tick, which reads everything whenever it comes.
        assert detail - 1 <= len(rows) <= detail + 2, entity
        assert all(b[0] - a[0] >= DETAIL_INTERVAL_S - 1e-9 for a, b in itertools.pairwise(rows[:-1]))
        assert all(0 <= r[2] <= 100 * os.cpu_count() for r in rows)
    assert len(_rows(batches, "psutil", "system")) == sampler.stats.ticks


def test_timestamps_are_monotonic_and_count_from_t0_on_the_shared_clock():
    t0 = clock.now() - 100.0
    before = clock.now() - t0
    batches = _run(Sampler(40, ["psutil"], t0=t0), 0.5)
    after = clock.now() - t0
    times = [r[0] for r in _rows(batches, "psutil", "system")]
    assert all(b > a for a, b in itertools.pairwise(times))
    assert before <= times[0] and times[-1] <= after


def test_every_row_of_a_batch_has_the_columns_the_batch_names():
    batches = _run(Sampler(20, ["psutil"]), 0.3)
    for batch in batches:
        assert batch["columns"][:2] == ["t", "entity"]
        assert all(len(r) == len(batch["columns"]) for r in batch["rows"])
    entities = {r[1] for b in batches for r in b["rows"]}
    assert "system" in entities and "cpu0" in entities


@pytest.mark.parametrize("hz", [0, -5, 100.5, 1000])
def test_a_rate_outside_0_to_100_hz_is_refused_naming_the_limit(hz):
    with pytest.raises(ValueError, match="at most 100 Hz"):
        check_hz(hz)
    with pytest.raises(ValueError, match="at most 100 Hz"):
        Sampler(hz, ["psutil"])


def test_an_unknown_source_is_refused_with_the_known_ones_listed():
    with pytest.raises(ValueError, match=r"unknown monitor source\(s\): nvlm; known: psutil, nvml"):
        Sampler(20, ["psutil", "nvlm"])


class _Flaky(Source):
    """A plug-in that opens but then raises on every sample (a driver gone bad)."""

    name: ClassVar[str] = "flaky"
    description: ClassVar[str] = "raises"
    columns = ("x",)

    def __init__(self) -> None:
        self.closed = False

    def open(self, hz: float) -> None:
        return None

    def sample(self, t: float, apps: AppProcesses) -> list[Row]:
        raise OSError("device went away")

    def close(self) -> None:
        self.closed = True


class _Gone(_Flaky):
    name: ClassVar[str] = "gone"

    def open(self, hz: float) -> None:
        raise SourceUnavailable("no such device here")


def test_a_source_that_keeps_failing_is_closed_and_reported_while_the_others_go_on():
    flaky = _Flaky()
    sampler = Sampler(100, instances=[flaky, _Gone()])
    statuses = sampler.open()
    assert statuses["flaky"].available
    assert statuses["gone"].describe() == "unavailable: no such device here"
    for _ in range(MAX_CONSECUTIVE_ERRORS - 1):
        sampler.tick()
    assert sampler.statuses["flaky"].available and not flaky.closed
    sampler.tick()
    assert flaky.closed
    assert sampler.statuses["flaky"].describe() == (
        f"unavailable: stopped during sampling: failed {MAX_CONSECUTIVE_ERRORS} samples in a row: "
        "OSError: device went away"
    )
    assert sampler.stats.errors == {"flaky": MAX_CONSECUTIVE_ERRORS}
    sampler.tick()  # a dropped source is no longer asked
    assert sampler.stats.errors == {"flaky": MAX_CONSECUTIVE_ERRORS}


def test_run_reports_the_cpu_time_it_cost_and_the_time_spent_in_each_source():
    sampler = Sampler(50, ["psutil"])
    _run(sampler, 0.5)
    stats = sampler.stats
    # It stops once the duration is up (a loaded machine may deschedule it for a while past that).
    assert 0.45 <= stats.duration_s <= 1.5
    assert 0 < stats.cpu_s < stats.duration_s
    assert 0 < stats.source_s["psutil"] < stats.duration_s
    # Each of the 25 periods is a tick or a tick counted as missed (none on an idle machine), then the
    # closing tick; a missed tick is never lost from the count.
    assert 24 <= stats.ticks - 1 + stats.missed <= 26, (stats.ticks, stats.missed)
