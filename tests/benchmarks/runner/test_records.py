"""Request records stream to disk as they arrive; a flood of requests cannot delay cancellation."""

from __future__ import annotations

import json
import time
import tracemalloc
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from benchmarks.runner import RECORDS_DIR, run_workflow
from benchmarks.runner.dag import _Run
from benchmarks.schedulers import get_scheduler
from benchmarks.spec.load import load_yaml
from benchmarks.spec.model import Limits

MANY = 20_000


class Probe:
    """A sink that looks at the runner's own state at two points of the run."""

    def __init__(self) -> None:
        self.run: _Run | None = None
        self.seen = 0
        self.samples: list[tuple[int, int, int]] = []

    def on_event(self, event: Mapping[str, Any]) -> None:
        if event["kind"] != "request_end":
            return
        self.seen += 1
        if self.seen in (2_000, MANY - 1_000):
            assert self.run is not None
            state = self.run.nodes["a"]
            assert state.records is not None and state.records_path is not None
            state.records.flush()
            lines = state.records_path.read_bytes().count(b"\n")
            self.samples.append((tracemalloc.get_traced_memory()[0], lines, state.request_count))


def test_request_records_go_to_a_file_as_they_arrive_and_the_runner_memory_stays_flat(tmp_path: Path) -> None:
    workflow = load_yaml(f"a: {{type: Sleep, sleep_time: 0, num_requests: {MANY}}}\n", name="flood")
    probe = Probe()
    run = _Run(workflow, get_scheduler("greedy"), probe, lambda: False, tmp_path, None, 3.0)
    probe.run = run
    tracemalloc.start()
    try:
        result = run.execute(1)
    finally:
        tracemalloc.stop()
    (early_bytes, early_lines, early_count), (late_bytes, late_lines, late_count) = probe.samples
    # Every record handled so far is on disk ...
    assert (early_lines, late_lines) == (early_count, late_count) == (2_000, MANY - 1_000)
    # ... and 17,000 more records cost the runner no memory (held in a list, they took ~20 MB).
    assert late_bytes - early_bytes < 1_000_000, late_bytes - early_bytes
    # The result is computed from the file: every request, in order, with the same fields.
    requests = [r.model_dump(mode="json") for r in result.applications[0].requests]
    assert [r["index"] for r in requests] == list(range(MANY))
    on_disk = [
        json.loads(line) for line in (tmp_path / RECORDS_DIR / "node-0.jsonl").read_text().splitlines()
    ]
    assert [{k: v for k, v in r.items() if k != "slo_met"} for r in requests] == on_disk


class SlowSink:
    """A sink that takes 0.3 ms per finished request, as the web's database sink may: slower than a
    no-op application produces them, so the pipe never runs dry."""

    def __init__(self) -> None:
        self.first_request_at: float | None = None

    def on_event(self, event: Mapping[str, Any]) -> None:
        if event["kind"] == "request_end":
            if self.first_request_at is None:
                self.first_request_at = time.monotonic()
            time.sleep(0.0003)


@pytest.mark.timeout(60)
def test_cancel_is_prompt_while_an_application_floods_its_pipe_faster_than_the_sink_keeps_up() -> None:
    workflow = load_yaml(
        "a: {type: Sleep, sleep_time: 0, num_requests: 10000000}\n",
        name="flood",
        limits=Limits(max_total_requests=10_000_000),
    )
    # The cancel comes 3 s into the flood (counted from its first request: on a loaded machine the
    # application's process may take seconds to start).
    sink = SlowSink()
    cancelled_at: list[float] = []

    def cancel() -> bool:
        if sink.first_request_at is None or time.monotonic() < sink.first_request_at + 3.0:
            return False
        if not cancelled_at:
            cancelled_at.append(time.monotonic())
        return True

    result = run_workflow(workflow, sink=sink, cancel=cancel, monitor_hz=None)
    late = time.monotonic() - cancelled_at[0]
    assert result.status == "cancelled"
    # The stop grace is 3 s; before the drain was bounded the runner never looked at the flag again.
    assert late < 4.5, f"returned {late:.1f} s after the cancel"
    assert 0 < result.applications[0].requests_total < 10_000_000
