"""Recorded runs: what the engine reported and wrote for a workflow, so that a web test that needs a
finished run stores one as a worker does, without executing the engine.

A recording (``tests/cbweb/recordings/<name>/``) is a result bundle (``result.json``, the request
CSVs, ``telemetry/``) written by ``benchmarks.runner.run_workflow``, plus ``events.jsonl``: every event
the run's sink received, in order. ``finish_run`` (the ``finish_run`` fixture of tests/cbweb/conftest.py)
replays the events into the worker's ``DatabaseSink`` and stores the bundle with ``services.run_finish``,
the calls ``cbweb.runs.execution.run_execute`` makes after the engine returns. The tests about execution
itself call ``run_execute``; tests/cbweb/runs/test_recorded.py checks that each recording still has the
shape a fresh run of its workflow has.

Re-record after a change of the result format or of the events: ``python -m tests.cbweb.recorded``.
"""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

RECORDINGS = Path(__file__).parent / "recordings"

# The workflows recorded, by recording name (the tests launch runs of the same YAML).
SLO_YAML = """\
chat:
  type: Sleep
  sleep_time: 0.02
  num_requests: 4
  slo: ["e2e<=1s"]
spin:
  type: Synthetic
  steps: 2
  step_ms: 1
  num_requests: 3
  slo: ["step<=1s"]
"""
# One application fails at its second request: a failed run with partial data.
PARTIAL_YAML = """\
chat:
  type: Sleep
  sleep_time: 0.01
  num_requests: 2
  slo: ["e2e<=1s"]
crash:
  type: Synthetic
  steps: 1
  step_ms: 1
  num_requests: 4
  fail_at_request: 1
  slo: ["step<=1s"]
"""
# The packaged SmolLM2: a run with quality figures (tokens, decode rate); recording it needs the model.
CHAT_YAML = """\
chat:
  type: Chatbot
  model: smollm2-135m
  device: cpu
  num_requests: 2
  max_tokens: 8
  temperature: 0
"""
WORKFLOWS = {"slo": SLO_YAML, "partial": PARTIAL_YAML, "chat": CHAT_YAML}
EVENTS = "events.jsonl"


class EventLog:
    """A run sink that keeps every event as the JSON it would be sent as."""

    def __init__(self) -> None:
        self.lines: list[str] = []

    def on_event(self, event: Mapping[str, Any]) -> None:
        self.lines.append(json.dumps(event, allow_nan=False, separators=(",", ":")))


def record(name: str, into: Path) -> Path:
    """Run recording ``name``'s workflow with the engine and write its bundle and events into ``into``
    (a folder that must not exist); return ``into``."""
    from benchmarks.results import write_bundle
    from benchmarks.runner import run_workflow
    from benchmarks.spec.load import load_yaml

    log = EventLog()
    result = run_workflow(load_yaml(WORKFLOWS[name], name=name), sink=log, out_dir=into)
    write_bundle(result, into)
    (into / EVENTS).write_text("\n".join(log.lines) + "\n")
    return into


def events(name: str) -> list[dict[str, Any]]:
    """Return the events recording ``name`` holds, in the order the run sent them."""
    lines = (RECORDINGS / name / EVENTS).read_text().splitlines()
    return [json.loads(line) for line in lines if line]


def finish_run(run_id: int, name: str, results_dir: Path) -> None:
    """Store recording ``name`` as the result of queued run ``run_id``, as a worker stores what the
    engine returned: claim, platform, the events through the DatabaseSink, the bundle, run_finish."""
    from benchmarks.platform import fingerprint
    from benchmarks.results import load_bundle
    from benchmarks.spec.load import from_dict
    from cbweb.platforms.services import platform_register
    from cbweb.runs import services
    from cbweb.runs.execution import DatabaseSink
    from cbweb.runs.models import Run
    from cbweb.workflows.limits import spec_limits

    run = Run.objects.get(pk=run_id)
    workflow = from_dict(run.spec, name=run.workflow_name, limits=spec_limits())
    result = load_bundle(RECORDINGS / name)
    recorded = sorted(n.name for n in result.nodes)
    assert sorted(workflow.nodes) == recorded, f"run {run_id} does not run recording '{name}' ({recorded})"
    assert services.run_claim(run_id=run_id, worker="test"), f"run {run_id} could not be claimed"
    services.run_set_platform(run_id=run_id, platform=platform_register(fingerprint=fingerprint()))
    sink = DatabaseSink(run_id, workflow)
    for event in events(name):
        sink.on_event(event)
    sink.flush()
    out_dir = results_dir / f"run-{run_id}"
    # Run ids start again in each test's database: a folder of an earlier test's run is replaced.
    shutil.rmtree(out_dir, ignore_errors=True)
    shutil.copytree(RECORDINGS / name, out_dir, ignore=shutil.ignore_patterns(EVENTS))
    services.run_finish(run_id=run_id, result=result, bundle_dir=str(out_dir))


def main(argv: list[str]) -> int:
    """Re-record the recordings named (all of them when none is)."""
    for name in argv or sorted(WORKFLOWS):
        with tempfile.TemporaryDirectory() as tmp:
            fresh = record(name, Path(tmp) / name)
            shutil.rmtree(RECORDINGS / name, ignore_errors=True)
            shutil.copytree(fresh, RECORDINGS / name)
        print(f"recorded {RECORDINGS / name}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
