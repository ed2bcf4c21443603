"""The priority scheduler: static priority at step boundaries, with no feedback, in real processes."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

from benchmarks.cli import main as cli_main
from benchmarks.clock import now
from benchmarks.runner import run_workflow
from benchmarks.schedulers import SCHEDULERS, get_scheduler
from benchmarks.schedulers.base import NodePlan
from benchmarks.schedulers.priority import PriorityParams, PriorityScheduler
from benchmarks.spec.load import load_yaml
from tests.benchmarks.schedulers.test_credit import HIGH_AND_LOW, low_steps_started_inside_high_requests

# The chat meets its SLO with room to spare, so credit would lend the device to the LOW node between
# its steps; static priority holds the LOW node back whatever the latencies.
RELAXED = HIGH_AND_LOW.replace('slo: ["e2e<=40ms"]', 'slo: ["e2e<=10s"]')


def test_priority_is_registered_and_runs_from_the_command_line(tmp_path: Path) -> None:
    assert isinstance(get_scheduler("priority"), PriorityScheduler) and "priority" in SCHEDULERS
    wf = tmp_path / "wf.yml"
    wf.write_text(
        "s: {type: Synthetic, steps: 2, step_ms: 1, num_requests: 2, priority: high}\n"
        "workflows:\n  n: {uses: s}\n"
    )
    assert cli_main(["run", str(wf), "--scheduler", "priority", "--out", str(tmp_path / "out")]) == 0
    result = json.loads((tmp_path / "out" / "result.json").read_text())
    assert result["scheduler"]["name"] == "priority"
    assert result["scheduler"]["params"] == PriorityParams().model_dump(mode="json")
    assert result["scheduler"]["apps"]["n"]["steps"] == 4


def test_priority_admits_the_high_application_first_with_no_feedback_state() -> None:
    workflow = load_yaml(RELAXED, name="t")
    plans = {
        "c": NodePlan("c", "chat", "cpu", "high", None, False),
        "b": NodePlan("b", "bg", "cpu", "low", None, True),
    }
    scheduler = PriorityScheduler(PriorityParams(linger_s=0.0))
    scheduler.start(workflow, plans)
    try:
        high = scheduler.gate_for(plans["c"]).open()
        low = scheduler.gate_for(plans["b"]).open()
        began, at_once = threading.Event(), []

        def step_for_300_ms() -> None:
            at_once.append(high.acquire("c", "step") == 0.0)
            began.set()
            time.sleep(0.3)
            high.release("c", "step")

        threading.Thread(target=step_for_300_ms).start()
        assert began.wait(10) and at_once == [True]
        t = now()
        held = low.acquire("b", "step")
        waited = now() - t
        low.release("b", "step")
        assert 0.25 < held <= waited < 1.0
        before = scheduler.snapshot()
        # No feedback: a request far over its SLO changes nothing the rule reads.
        scheduler.on_request_end("c", {"status": "ok", "end": 1.0, "metrics": {"e2e": 99.0}})
        assert scheduler.snapshot() == before
        assert before["c"]["reserved"] == 1 and before["b"]["delayed"] == 1
        described = scheduler.describe()
        assert set(described) == {"name", "params", "apps"}
        assert all("pressure" not in app for app in described["apps"].values())
    finally:
        scheduler.stop()


def test_under_priority_low_work_never_starts_inside_a_high_request_though_the_high_one_has_slack() -> None:
    workflow = load_yaml(RELAXED, name="t")
    result = run_workflow(workflow, scheduler="priority", scheduler_params={"linger_s": 0.03})
    doc = result.model_dump(mode="json")
    assert [n["status"] for n in doc["nodes"]] == ["succeeded", "stopped"]
    inside, total = low_steps_started_inside_high_requests(doc)
    assert total > 20 and inside == 0
    apps = {a["name"]: a for a in doc["applications"]}
    assert apps["c"]["gate_wait_s"] == 0.0 and apps["b"]["gate_wait_s"] > 0.1
