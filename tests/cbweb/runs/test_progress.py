"""Live progress: folded from the runner's events into counters whose size does not grow with a run."""

from __future__ import annotations

import json

from benchmarks.spec import load_yaml
from cbweb.runs.progress import RunProgress


def request_end(i: int) -> dict[str, object]:
    record = {"index": i, "status": "ok", "metrics": {"e2e": 0.01 * (i % 7)}, "info": {"x": "y" * 50}}
    return {"kind": "request_end", "node": "n", "t": float(i), "record": record}


def test_progress_counts_requests_of_every_session_and_keeps_no_record() -> None:
    progress = RunProgress(
        load_yaml("a: {type: Sleep, num_requests: 5000, concurrency: 4}\nworkflows:\n  n: {uses: a}\n")
    )
    assert progress.state["nodes"]["n"]["total"] == 20_000
    for i in range(100):
        progress.on_event(request_end(i))
    size_after_100 = len(json.dumps(progress.state))
    for i in range(100, 20_000):
        progress.on_event(request_end(i))
    assert progress.state["nodes"]["n"]["done"] == 20_000
    assert len(json.dumps(progress.state)) <= size_after_100 + 10  # the counters' digits, nothing more
