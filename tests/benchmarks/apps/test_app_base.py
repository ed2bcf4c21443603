"""The shared check of model-backed units: the file policy first, then the model, the driver's own
checks and each input, reported together; the base request loop's record of a failed request."""

from __future__ import annotations

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
