"""The shared check of model-backed units: the file policy first, then the model, the driver's own
checks and each input, reported together; the base request loop's record of a failed request."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from benchmarks.apps.base import AppContext, AppStopped, Driver, RequestFailed, RequestRecord, check_unit
from benchmarks.apps.datasets import prompts_input
from benchmarks.files import UNRESTRICTED, FilePolicy
from benchmarks.spec.load import load_yaml
from benchmarks.spec.model import Application


def unit(text: str) -> Application:
    (only,) = load_yaml(text, name="t").applications.values()
    return only


def failing(message: str) -> None:
    raise ValueError(message)


def test_a_model_the_policy_refuses_is_the_only_problem_and_nothing_else_is_read(tmp_path: Path) -> None:
    policy = FilePolicy.restricted([tmp_path], [tmp_path])
    read: list[str] = []

    def more() -> list[str]:
        read.append("more")
        return []

    problems = check_unit(
        unit("chat: {type: Chatbot, model: /etc/hosts}\n"),
        policy,
        ("gguf",),
        lambda: read.append("prompts"),
        more=more,
    )
    assert problems == ["path outside the allowed model folders: field 'model' of unit 'chat'"]
    assert read == []


def test_model_own_and_input_problems_are_reported_together_in_that_order(tmp_path: Path) -> None:
    missing = tmp_path / "nope.gguf"
    problems = check_unit(
        unit(f"chat: {{type: Chatbot, model: {missing}}}\n"),
        UNRESTRICTED,
        ("gguf",),
        lambda: failing("bad prompts"),
        lambda: None,
        lambda: failing("bad documents"),
        more=lambda: ["bad option"],
    )
    assert len(problems) == 4 and str(missing.name) in problems[0]
    assert problems[1:] == ["bad option", "bad prompts", "bad documents"]


def test_prompts_come_from_the_named_key_then_the_dataset_then_the_shipped_file() -> None:
    named = prompts_input(
        unit("r: {type: DeepResearch, questions: q.jsonl, dataset: d.jsonl}\n"), "x", "questions"
    )
    dataset = prompts_input(unit("c: {type: Chatbot, dataset: d.jsonl}\n"), "prompts.jsonl")
    shipped = prompts_input(unit("c: {type: Chatbot}\n"), "prompts.jsonl")
    assert (named.key, named.value) == ("questions", "q.jsonl")
    assert (dataset.key, dataset.value) == ("dataset", "d.jsonl")
    assert shipped.key is None and shipped.name == "prompts.jsonl"


class _SecondRequestFails(Driver):
    def load(self) -> dict[str, Any]:
        return {}

    def run_request(self, record: RequestRecord, payload: Any) -> None:
        if record.index == 1:
            raise RequestFailed("the kernel cannot serve this shape")
        record.metrics["work"] = 1.0


class _OpenGate:
    def acquire(self, app: str, kind: str) -> None:
        return None

    def release(self, app: str, kind: str) -> None:
        return None


def test_a_request_that_fails_is_recorded_with_its_reason_and_ends_the_run(tmp_path: Path) -> None:
    events: list[tuple[str, dict[str, Any]]] = []
    ctx = AppContext(
        node="n",
        emit=lambda kind, **fields: events.append((kind, fields)),
        gate=_OpenGate(),  # type: ignore[arg-type]
        stop_requested=lambda: False,
        device="cpu",
        out_dir=tmp_path,
        seed=0,
    )
    driver = _SecondRequestFails(unit("a: {type: Sleep, num_requests: 3, priority: low}"), ctx)
    with pytest.raises(RequestFailed, match="the kernel cannot serve this shape"):
        driver.run()
    records = [fields["record"] for kind, fields in events if kind == "request_end"]
    assert [(r["index"], r["status"], r["error"]) for r in records] == [
        (0, "ok", None),
        (1, "error", "the kernel cannot serve this shape"),
    ]


class Recorder:
    """A gate that records its calls."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str, str]] = []

    def acquire(self, app: str, kind: str) -> None:
        self.calls.append(("acquire", app, kind))

    def release(self, app: str, kind: str) -> None:
        self.calls.append(("release", app, kind))


def step_context(stop: bool = False, server_url: str | None = None) -> tuple[AppContext, Recorder]:
    gate = Recorder()
    ctx = AppContext(
        node="chat",
        emit=lambda kind, **fields: None,
        gate=gate,
        stop_requested=lambda: stop,
        device="cpu",
        out_dir=Path("."),
        seed=0,
        server_url=server_url,
    )
    return ctx, gate


def test_a_gpu_step_holds_the_gate_for_its_body_and_releases_it_when_the_body_raises() -> None:
    ctx, gate = step_context()
    with ctx.gpu_step("prefill"):
        assert gate.calls == [("acquire", "chat", "prefill")]
    with pytest.raises(ValueError, match="boom"), ctx.gpu_step("decode"):
        raise ValueError("boom")
    assert gate.calls == [
        ("acquire", "chat", "prefill"),
        ("release", "chat", "prefill"),
        ("acquire", "chat", "decode"),
        ("release", "chat", "decode"),
    ]


def test_a_stop_request_ends_a_step_before_the_gate_and_a_server_client_never_takes_the_gate() -> None:
    ctx, gate = step_context(stop=True)
    with pytest.raises(AppStopped), ctx.gpu_step("decode"):
        pytest.fail("the body ran after a stop request")
    ctx, gate = step_context(server_url="http://127.0.0.1:1")
    with ctx.gpu_step("decode"):
        pass
    assert gate.calls == []


class _Holds(Driver):
    """Requests that each take HOLD seconds of wall time; they may overlap when ``overlap`` says so."""

    HOLD = 0.3
    overlap = True
    fail_index: int | None = None

    def load(self) -> dict[str, Any]:
        return {}

    def overlaps_requests(self) -> bool:
        return self.overlap

    def run_request(self, record: RequestRecord, payload: Any) -> None:
        if record.index == self.fail_index:
            raise RequestFailed("the server refused it")
        time.sleep(self.HOLD)


def run_holds(
    tmp_path: Path, arrival: str, *, overlap: bool = True, fail_index: int | None = None
) -> tuple[list[dict[str, Any]], BaseException | None]:
    """Run a _Holds driver of 6 requests with ``arrival``; return its records in index order and the
    error its run raised (None when it raised none)."""
    records: list[dict[str, Any]] = []
    ctx = AppContext(
        node="n",
        emit=lambda kind, **fields: records.append(fields["record"]) if kind == "request_end" else None,
        gate=_OpenGate(),  # type: ignore[arg-type]
        stop_requested=lambda: False,
        device="cpu",
        out_dir=tmp_path,
        seed=0,
    )
    driver = _Holds(unit(f"a: {{type: Sleep, num_requests: 6, priority: low, arrival: {arrival}}}"), ctx)
    driver.overlap, driver.fail_index = overlap, fail_index
    error = None
    try:
        driver.run()
    except Exception as exc:
        error = exc
    return sorted(records, key=lambda r: r["index"]), error


def most_in_flight(records: list[dict[str, Any]]) -> int:
    """Return the most records whose [start, end] intervals overlap at one time."""
    edges = sorted([(r["start"], 1) for r in records] + [(r["end"], -1) for r in records])
    level = peak = 0
    for _, step in edges:
        level += step
        peak = max(peak, level)
    return peak


def test_an_open_loop_sends_each_request_when_due_up_to_its_in_flight_cap(tmp_path: Path) -> None:
    # 20 requests/s against 0.3 s each: without a cap six would be in flight; the cap holds three.
    records, error = run_holds(tmp_path, "{kind: fixed, rate: 20, max_in_flight: 3}")
    assert error is None
    assert [r["status"] for r in records] == ["ok"] * 6
    due = [r["arrival"] - records[0]["arrival"] for r in records]
    assert due == pytest.approx([i / 20 for i in range(6)], abs=1e-6)
    assert most_in_flight(records) == 3
    # The first three start when due; the fourth waits for a slot, and its latency counts from its due time.
    assert all(r["start"] - r["arrival"] < 0.1 for r in records[:3])
    assert records[3]["start"] >= records[0]["end"] - 1e-3
    assert records[3]["metrics"]["e2e"] >= records[3]["end"] - records[3]["start"] + 0.1


def test_a_closed_loop_and_a_driver_that_cannot_overlap_send_one_request_at_a_time(tmp_path: Path) -> None:
    closed, _ = run_holds(tmp_path, "{kind: closed}")
    assert len(closed) == 6 and most_in_flight(closed) == 1
    one_model, _ = run_holds(tmp_path, "{kind: poisson, rate: 50, seed: 1}", overlap=False)
    assert len(one_model) == 6 and most_in_flight(one_model) == 1
    # Each still counts from when it was due: the queue behind the model is in its latency.
    assert one_model[-1]["metrics"]["e2e"] > 2 * _Holds.HOLD


def test_an_open_loop_sends_nothing_after_a_failed_request_and_ends_with_its_error(tmp_path: Path) -> None:
    # Due every 0.2 s, each taking 0.3 s: request 1 fails when it is sent, while request 0 is in flight.
    records, error = run_holds(tmp_path, "{kind: fixed, rate: 5, max_in_flight: 4}", fail_index=1)
    assert isinstance(error, RequestFailed) and str(error) == "the server refused it"
    # Request 0 was let finish; nothing was sent after the failure.
    assert [(r["index"], r["status"]) for r in records] == [(0, "ok"), (1, "error")]
