"""The recorded runs the page tests finish their runs with (tests/cbweb/recorded.py) stay what the engine
and a worker produce today: same files, same result fields, same events, the same rows stored."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from benchmarks.results import load_bundle
from cbweb.runs.execution import run_execute
from cbweb.runs.models import Run
from tests.cbweb.recorded import EVENTS, RECORDINGS, WORKFLOWS, events, record

NEEDS = {"chat": [pytest.mark.models]}
NAMES = [pytest.param(name, marks=NEEDS.get(name, [])) for name in sorted(WORKFLOWS)]


def files(folder: Path) -> list[str]:
    return sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file())


def keys(document: Any) -> Any:
    """The shape of a JSON document: its keys, nested; a list as the shape of its first item."""
    if isinstance(document, dict):
        return {k: keys(v) for k, v in document.items()}
    if isinstance(document, list):
        return [keys(document[0])] if document else []
    return type(document).__name__ if document is not None else None


def kinds(recorded: list[dict[str, Any]]) -> set[str]:
    return {e["kind"] for e in recorded}


@pytest.mark.parametrize("name", NAMES)
def test_a_recording_has_the_files_fields_and_events_of_a_fresh_run_of_its_workflow(
    name: str, tmp_path: Path
) -> None:
    fresh = record(name, tmp_path / name)
    stored = RECORDINGS / name
    hint = "re-record with `python -m tests.cbweb.recorded`"
    assert files(fresh) == files(stored), hint
    new, old = load_bundle(fresh), load_bundle(stored)
    assert new.schema_version == old.schema_version, hint
    assert [(n.name, n.status) for n in new.nodes] == [(n.name, n.status) for n in old.nodes], hint
    assert [(a.name, len(a.requests)) for a in new.applications] == [
        (a.name, len(a.requests)) for a in old.applications
    ], hint
    new_json = json.loads((fresh / "result.json").read_text())
    old_json = json.loads((stored / "result.json").read_text())
    assert sorted(new_json) == sorted(old_json), hint
    assert keys(new_json["applications"][0]) == keys(old_json["applications"][0]), hint
    fresh_events = [json.loads(line) for line in (fresh / EVENTS).read_text().splitlines()]
    assert kinds(fresh_events) == kinds(events(name)), hint


def stored_rows(run: Run) -> dict[str, Any]:
    """What the database holds of a finished run, without values that differ from run to run."""
    return {
        "status": run.status,
        "nodes": sorted((n.name, n.status) for n in run.node_results.all()),
        "applications": sorted(
            (a.name, a.requests.count(), sorted(a.metrics)) for a in run.application_results.all()
        ),
        "telemetry": sorted({(c.source, c.metric) for c in run.telemetry_chunks.all()}),
        "summary": sorted(run.summary),
        "result": sorted(run.result),
        "progress": sorted(run.progress),
        "bundle": files(Path(run.bundle_dir)),
        "platform": run.platform is not None,
    }


def test_a_recorded_run_is_stored_as_a_worker_stores_an_executed_one(
    alice: Any, make_workflow: Any, make_run: Any, finish_run: Any
) -> None:
    workflow = make_workflow(alice, yaml_text=WORKFLOWS["slo"])
    executed, recorded = make_run(workflow, alice), make_run(workflow, alice)
    assert run_execute(run_id=executed.pk, worker="test") == "succeeded"
    executed = Run.objects.get(pk=executed.pk)
    recorded = finish_run(recorded, "slo")
    assert stored_rows(recorded) == stored_rows(executed)
