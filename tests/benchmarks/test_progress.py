"""Live progress: folded from the runner's events into counters whose size does not grow with a run."""

from __future__ import annotations

import json

from benchmarks.progress import RunProgress
from benchmarks.spec.load import load_yaml


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


def test_a_node_loads_then_runs_and_keeps_the_reason_it_ended_with() -> None:
    progress = RunProgress(load_yaml("a: {type: Sleep, num_requests: 2}\nworkflows:\n  n: {uses: a}\n"))
    node = progress.state["nodes"]["n"]
    assert node == {
        "status": "pending",
        "done": 0,
        "total": 2,
        "type": "Sleep",
        "background": False,
        "last": {},
        "reason": None,
        "serves": [],
    }
    # The runner reports a started process as running; it is loading its model until load_end.
    assert progress.on_event({"kind": "node_status", "node": "n", "t": 0.1, "status": "running"})
    assert node["status"] == "loading"
    progress.on_event({"kind": "load_end", "node": "n", "t": 0.5})
    assert node["status"] == "running"
    progress.on_event(request_end(0) | {"node": "n", "t": 0.7})
    assert node["done"] == 1 and node["last"] == {"e2e": 0.0}
    progress.on_event({"kind": "node_status", "node": "n", "t": 0.9, "status": "failed", "reason": "boom"})
    assert (node["status"], node["reason"], progress.state["t"]) == ("failed", "boom", 0.9)


def test_events_that_are_not_progress_change_nothing() -> None:
    progress = RunProgress(load_yaml("a: {type: Sleep, num_requests: 2}\nworkflows:\n  n: {uses: a}\n"))
    before = json.dumps(progress.state)
    assert not progress.on_event({"kind": "request_start", "node": "n", "index": 0})
    assert not progress.on_event({"kind": "request_end", "node": "elsewhere", "record": {}})
    assert json.dumps(progress.state) == before and not progress.changed
    assert progress.on_event({"kind": "telemetry", "rows": [{}, {}, {}]})
    assert progress.state["telemetry_samples"] == 3 and progress.changed


def test_a_model_server_counts_no_requests_of_its_own_and_names_the_clients_it_serves() -> None:
    text = """
llm: {type: LLMServer, model: smollm2-135m, device: cpu}
chat: {type: Chatbot, server: llm, num_requests: 3}
workflows:
  serve: {uses: llm, background: true}
  a: {uses: chat}
  b: {uses: chat}
"""
    progress = RunProgress(load_yaml(text))
    nodes = progress.state["nodes"]
    assert (nodes["serve"]["total"], nodes["serve"]["serves"]) == (0, ["a", "b"])
    assert (nodes["a"]["total"], nodes["a"]["serves"]) == (3, [])
    # A run stopped before the server loaded still asks for the clients' requests only.
    assert sum(n["total"] for n in nodes.values()) == 6
