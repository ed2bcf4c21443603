"""The credit scheduler end to end: shared-memory gates in real application processes."""

from __future__ import annotations

import json
import multiprocessing as mp
import os
import time
from multiprocessing import shared_memory
from pathlib import Path
from typing import Any

import pytest

from benchmarks.cli import main as cli_main
from benchmarks.clock import now
from benchmarks.runner import run_workflow
from benchmarks.schedulers import SCHEDULERS, get_scheduler
from benchmarks.schedulers.base import NodePlan
from benchmarks.schedulers.credit import CreditScheduler
from benchmarks.schedulers.ledger import CreditParams
from benchmarks.spec.load import load_yaml

# HIGH: requests of five 10 ms steps with an SLO it cannot meet (50 ms > 40 ms), so it stays pressured;
# LOW: a background stream of single 10 ms steps. On a shared test machine a HIGH process can be
# descheduled between two of its steps for several ms, hence the generous linger in the test.
HIGH_AND_LOW = """
chat: {type: Synthetic, steps: 5, step_ms: 10, num_requests: 6, priority: high, slo: ["e2e<=40ms"],
       arrival: {kind: closed, think_time_s: 0.1}}
bg: {type: Synthetic, steps: 1, step_ms: 10, num_requests: 10000, priority: low}
workflows:
  c: {uses: chat}
  b: {uses: bg, background: true}
"""
TEST_PARAMS = CreditParams(linger_s=0.03)


def app(result: dict[str, Any], name: str) -> dict[str, Any]:
    return next(a for a in result["applications"] if a["name"] == name)


def ran(record: dict[str, Any]) -> float:
    """Return how long a one-step request's step ran: its step time less its hold at the gate."""
    return float(record["series"]["step"][0] - record["metrics"]["gate_wait"])


def low_steps_started_inside_high_requests(result: dict[str, Any]) -> tuple[int, int]:
    """Return (LOW steps that began while a HIGH request was in progress, all LOW steps)."""
    busy = [(r["start"], r["end"]) for r in app(result, "c")["requests"]]
    # A LOW request is one step: it began running when the request ended minus how long it ran.
    starts = [r["end"] - ran(r) for r in app(result, "b")["requests"] if r["status"] == "ok"]
    inside = sum(1 for s in starts if any(a + 0.001 < s < b for a, b in busy))
    return inside, len(starts)


def test_low_work_waits_at_step_boundaries_while_high_work_is_busy() -> None:
    workflow = load_yaml(HIGH_AND_LOW, name="t")
    scheduler = CreditScheduler(TEST_PARAMS)
    result = run_workflow(workflow, scheduler=scheduler).model_dump(mode="json")
    assert [n["status"] for n in result["nodes"]] == ["succeeded", "stopped"]
    inside, total = low_steps_started_inside_high_requests(result)
    assert total > 20, "the LOW node should have run between HIGH requests"
    assert inside == 0
    stats = result["scheduler"]["apps"]
    assert stats["c"]["reserved"] == stats["c"]["steps"] == 30 and stats["c"]["delayed"] == 0
    assert stats["b"]["delayed"] >= 5  # held back at least once per HIGH request after the first
    assert stats["b"]["wait_s"] > 0.1

    # The same workflow under greedy: the LOW node's steps land inside HIGH requests.
    greedy_inside, _ = low_steps_started_inside_high_requests(
        run_workflow(workflow, scheduler="greedy").model_dump(mode="json")
    )
    assert greedy_inside >= 10


def test_request_feedback_sets_pressure_from_latency_against_the_slo() -> None:
    result = run_workflow(load_yaml(HIGH_AND_LOW, name="t"), scheduler=CreditScheduler(TEST_PARAMS))
    described = result.scheduler
    e2e = [r.metrics["e2e"] for r in next(a for a in result.applications if a.name == "c").requests]
    trace = [p for p in described["pressure_trace"] if p["node"] == "c"]
    assert len(trace) == len(e2e) == 6
    assert trace[0]["pressure"] == pytest.approx(e2e[0] / 0.040)
    assert described["apps"]["c"]["pressure"] > 1.0  # 50 ms of steps against a 40 ms SLO
    assert described["apps"]["b"]["pressure"] == 0.0  # no SLO: never pressured
    assert described["params"]["linger_s"] == 0.03


def test_medium_work_is_slowed_to_its_floor_share_not_stopped_by_pressured_high_work() -> None:
    # start_together: the MEDIUM node begins with the HIGH request, not whenever its process happens to
    # be up (on a loaded machine, after the HIGH request has ended: nothing to measure).
    text = """
start_together: true
chat: {type: Synthetic, steps: 40, step_ms: 10, num_requests: 1, priority: high, slo: ["e2e<=100ms"]}
img: {type: Synthetic, steps: 1, step_ms: 20, num_requests: 10000, priority: medium}
workflows:
  c: {uses: chat}
  m: {uses: img, background: true}
"""
    result = run_workflow(load_yaml(text, name="t"), scheduler=CreditScheduler(TEST_PARAMS)).model_dump(
        mode="json"
    )
    chat = app(result, "c")["requests"][0]
    window = chat["end"] - chat["start"]
    steps = [r for r in app(result, "m")["requests"] if r["status"] == "ok"]
    busy = sum(ran(r) for r in steps if chat["start"] < r["end"] - ran(r) < chat["end"])
    # Floor 0.2 of the HIGH request's ~0.4 s plus the burst: some MEDIUM work, far from all of it.
    assert 0.02 <= busy <= 0.2 * window + TEST_PARAMS.burst_s + 0.04
    assert result["scheduler"]["apps"]["m"]["credit"] > 0


def test_the_shared_table_is_removed_when_the_run_ends() -> None:
    scheduler = CreditScheduler()
    names: set[str] = set()

    class Sink:
        def on_event(self, event: Any) -> None:
            if scheduler.shm_name:
                names.add(scheduler.shm_name)

    text = HIGH_AND_LOW.replace("num_requests: 6", "num_requests: 1")
    run_workflow(load_yaml(text, name="t"), scheduler=scheduler, sink=Sink())
    assert len(names) == 1
    with pytest.raises(FileNotFoundError):
        shared_memory.SharedMemory(name=names.pop())


def _hold_then_release(spec: Any, hold_s: float, started: Any) -> None:
    gate = spec.open()
    gate.acquire("h", "step")
    started.set()
    time.sleep(hold_s)
    gate.release("h", "step")


def test_a_gate_in_another_process_holds_back_a_low_gate_until_it_releases() -> None:
    workflow = load_yaml(HIGH_AND_LOW, name="t")
    plans = {
        "c": NodePlan("c", "chat", "cpu", "high", None, False),
        "b": NodePlan("b", "bg", "cpu", "low", None, True),
    }
    scheduler = CreditScheduler(CreditParams(linger_s=0.0))
    scheduler.start(workflow, plans)
    try:
        ctx = mp.get_context("spawn")
        started = ctx.Event()
        high = ctx.Process(target=_hold_then_release, args=(scheduler.gate_for(plans["c"]), 0.3, started))
        high.start()
        assert started.wait(30)
        low = scheduler.gate_for(plans["b"]).open()
        t = now()
        low.acquire("b", "step")
        waited = now() - t
        low.release("b", "step")
        high.join(10)
        assert 0.15 < waited < 1.0
        assert scheduler.snapshot()["b"]["lent"] == 1 and scheduler.snapshot()["b"]["delayed"] == 1
    finally:
        scheduler.stop()


def _die_mid_step(spec: Any) -> None:
    spec.open().acquire("h", "step")
    os._exit(0)


def test_a_process_that_dies_mid_step_stops_holding_back_the_others() -> None:
    plans = {
        "c": NodePlan("c", "chat", "cpu", "high", None, False),
        "b": NodePlan("b", "bg", "cpu", "low", None, True),
    }
    scheduler = CreditScheduler()
    scheduler.start(load_yaml(HIGH_AND_LOW, name="t"), plans)
    try:
        high = mp.get_context("spawn").Process(target=_die_mid_step, args=(scheduler.gate_for(plans["c"]),))
        high.start()
        high.join(30)
        assert high.exitcode == 0
        scheduler.poll()
        low = scheduler.gate_for(plans["b"]).open()
        t = now()
        low.acquire("b", "step")
        low.release("b", "step")
        assert now() - t < 0.5 * scheduler.params.max_wait_s  # admitted, not forced through
        assert scheduler.snapshot()["b"]["lent"] == 1
    finally:
        scheduler.stop()


def test_credit_and_partition_are_selectable_by_name_and_on_the_command_line(tmp_path: Path) -> None:
    assert {"greedy", "partition", "credit"} <= set(SCHEDULERS)
    assert isinstance(get_scheduler("credit"), CreditScheduler)
    wf = tmp_path / "wf.yml"
    wf.write_text(
        "s: {type: Synthetic, steps: 2, step_ms: 1, num_requests: 2, priority: high}\n"
        "workflows:\n  n: {uses: s}\n"
    )
    assert cli_main(["run", str(wf), "--scheduler", "credit", "--out", str(tmp_path / "out")]) == 0
    result = json.loads((tmp_path / "out" / "result.json").read_text())
    assert result["scheduler"]["name"] == "credit"
    assert result["scheduler"]["apps"]["n"]["steps"] == 4


SERVED = """
llm: {type: LLMServer, model: smollm2-135m, device: cpu, parallel: 2, priority: high}
chat: {type: Chatbot, server: llm, num_requests: 2, priority: medium, slo: ["ttft<=100ms"]}
notes: {type: Chatbot, server: llm, num_requests: 2, priority: low, slo: []}
alone: {type: Synthetic, steps: 1, step_ms: 1, num_requests: 1, priority: low}
workflows:
  serve: {uses: llm, background: true}
  c: {uses: chat}
  n: {uses: notes}
  a: {uses: alone}
"""


def test_a_model_server_steps_in_its_clients_most_urgent_class_under_their_greatest_pressure() -> None:
    workflow = load_yaml(SERVED, name="served")
    plans = {
        name: NodePlan(name, workflow.nodes[name].uses, "cpu", workflow.unit_of(name).priority, None, False)
        for name in workflow.nodes
    }
    scheduler = CreditScheduler()
    scheduler.start(workflow, plans)
    try:
        apps = scheduler.snapshot()
        # The server unit says high; its clients are medium and low, so its batches run as medium.
        assert apps["serve"]["priority"] == "medium"
        assert apps["a"]["priority"] == "low"
        # Before any request ends: its SLO-bound client's initial pressure (assumed at risk).
        assert apps["serve"]["pressure"] == apps["c"]["pressure"] == 1.0
        assert apps["n"]["pressure"] == 0.0
        # A fast first turn of the client with an SLO: the server follows that client's pressure down.
        scheduler.on_request_end("c", {"status": "ok", "end": 1.0, "metrics": {"ttft": 0.02}})
        apps = scheduler.snapshot()
        assert apps["c"]["pressure"] == pytest.approx(0.2)
        assert apps["serve"]["pressure"] == pytest.approx(0.2)
        # A client without an SLO never raises it; the other application's pressure never reaches it.
        scheduler.on_request_end("n", {"status": "ok", "end": 1.1, "metrics": {"ttft": 5.0}})
        assert scheduler.snapshot()["serve"]["pressure"] == pytest.approx(0.2)
        trace = [(p["node"], p["pressure"]) for p in scheduler.describe()["pressure_trace"]]
        assert trace == [("c", pytest.approx(0.2)), ("serve", pytest.approx(0.2))]
    finally:
        scheduler.stop()
