from __future__ import annotations

from typing import Any

import pytest
from django.core.exceptions import PermissionDenied, ValidationError

from benchmarks.results import ResultDocument
from cbweb.runs.models import ApplicationResult, NodeResult, RequestResult, Run
from cbweb.runs.services import (
    RunStateError,
    run_cancel,
    run_claim,
    run_create,
    run_fail,
    run_finish,
    run_progress,
    run_spec_fields,
)
from cbweb.workflows.selectors import version_latest


def _result(status: str = "completed", node_status: str = "succeeded") -> ResultDocument:
    """A result document as the engine builds it (one node, with an SLO)."""
    request = {
        "index": 0,
        "arrival": 0.1,
        "start": 0.1,
        "end": 0.3,
        "status": "ok",
        "warmup": False,
        "slo_met": True,
        "metrics": {"e2e": 0.2},
        "info": {},
        "series": {},
        "error": None,
    }
    app = {
        "name": "first",
        "unit": "sleep1",
        "type": "Sleep",
        "device": "cpu",
        "priority": "low",
        "model": None,
        "loaded": {},
        "slo": [{"metric": "e2e", "op": "<=", "threshold_s": 1.0}],
        "load_time_s": 0.01,
        "requests_total": 2,
        "requests_requested": 2,
        "requests_counted": 2,
        "requests_met": 2,
        "slo_attainment": 1.0,
        "metrics": {
            "e2e": {"count": 2.0, "mean": 0.2, "min": 0.2, "max": 0.2, "p50": 0.2, "p90": 0.2, "p99": 0.2}
        },
        "normalized_latency": {"e2e": 0.2},
        "throughput_rps": 5.0,
        "requests": [request, {**request, "index": 1}],
    }
    node = {
        "name": "first",
        "uses": "sleep1",
        "background": False,
        "device": "cpu",
        "status": node_status,
        "started_at": 0.0,
        "finished_at": 0.5,
        "load_time_s": 0.01,
        "reason": None if node_status == "succeeded" else "boom",
    }
    document = {
        "schema_version": 3,
        "status": status,
        "reason": None if status == "completed" else "run cancelled",
        "workflow": {},
        "scheduler": {"name": "greedy"},
        "platform": {},
        "repeat_index": 1,
        "started_at_unix": 0.0,
        "clock": {},
        "makespan_s": 0.5,
        "critical_path": ["first"],
        "mean_attainment": 1.0,
        "fairness": 1.0,
        "requests_requested": 2,
        "requests_served": 2,
        "nodes": [node],
        "applications": [app],
    }
    return ResultDocument.model_validate(document)


def test_create_queues_one_run_per_repeat_in_one_batch(alice: Any, make_workflow: Any) -> None:
    version = version_latest(workflow=make_workflow(alice))
    runs = run_create(version=version, user=alice, repeats=3)
    assert [r.status for r in runs] == ["queued"] * 3
    assert [r.repeat_index for r in runs] == [1, 2, 3]
    assert len({r.batch for r in runs}) == 1
    assert runs[0].progress["nodes"]["first"] == {
        "status": "pending",
        "done": 0,
        "total": 3,
        "type": "Sleep",
        "background": False,
        "last": {},
        "reason": None,
        "serves": [],
    }


def test_create_hands_nothing_to_an_executor(
    alice: Any, make_workflow: Any, django_capture_on_commit_callbacks: Any
) -> None:
    # Sending is cbweb.runs.dispatch.run_launch's job (tests/cbweb/runs/test_dispatch.py).
    version = version_latest(workflow=make_workflow(alice))
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        run_create(version=version, user=alice, repeats=2)
    assert callbacks == []


def test_create_rejects_an_unknown_scheduler_and_bad_repeats(alice: Any, make_workflow: Any) -> None:
    version = version_latest(workflow=make_workflow(alice))
    with pytest.raises(ValidationError) as info:
        run_create(version=version, user=alice, scheduler="fastest")
    assert "unknown scheduler 'fastest'" in str(info.value.message_dict["scheduler"])
    with pytest.raises(ValidationError) as info:
        run_create(version=version, user=alice, repeats=0)
    assert "repeats" in info.value.message_dict
    assert not Run.objects.exists()


def test_partition_with_shares_over_100_is_refused(alice: Any, make_workflow: Any) -> None:
    yaml_text = "a: {type: Sleep, mps: 70}\nb: {type: Sleep, mps: 60}\n"
    version = version_latest(workflow=make_workflow(alice, yaml_text=yaml_text))
    with pytest.raises(ValidationError, match="130 %"):
        run_create(version=version, user=alice, scheduler="partition")


def test_claim_succeeds_once(alice: Any, make_workflow: Any, make_run: Any) -> None:
    run = make_run(make_workflow(alice), alice)
    assert run_claim(run_id=run.pk, worker="w1") is True
    assert run_claim(run_id=run.pk, worker="w2") is False
    run.refresh_from_db()
    assert (run.status, run.worker) == ("running", "w1")
    assert run.started_at is not None


def test_cancelling_a_queued_run_finishes_it_and_blocks_its_claim(
    alice: Any, make_workflow: Any, make_run: Any
) -> None:
    run = make_run(make_workflow(alice), alice)
    run_cancel(run=run, user=alice)
    run.refresh_from_db()
    assert run.status == "cancelled"
    assert run_claim(run_id=run.pk, worker="w") is False
    # Nothing of what the workflow asked for was served.
    assert run.summary["partial"] is True
    assert (run.summary["requests_served"], run.summary["requests_requested"]) == (0, 3 + 2)
    assert run.summary["headline"] == "partial: served 0 of 5"


def test_a_run_failed_without_a_result_is_partial_with_what_its_progress_counted(
    alice: Any, make_workflow: Any, make_run: Any
) -> None:
    run = make_run(make_workflow(alice), alice)
    run_claim(run_id=run.pk, worker="w")
    progress = run.progress
    progress["nodes"]["first"]["done"] = 1
    run_progress(run_id=run.pk, progress=progress)
    assert run_fail(run_id=run.pk, error="worker lost")
    run.refresh_from_db()
    assert (run.summary["partial"], run.summary["requests_served"], run.summary["requests_requested"]) == (
        True,
        1,
        3 + 2,
    )


def test_cancelling_a_running_run_raises_its_flag_only(alice: Any, make_workflow: Any, make_run: Any) -> None:
    run = make_run(make_workflow(alice), alice)
    run_claim(run_id=run.pk, worker="w")
    run_cancel(run=run, user=alice)
    run.refresh_from_db()
    assert (run.status, run.cancel_requested) == ("running", True)


def test_a_user_cannot_cancel_another_users_run(
    alice: Any, bob: Any, make_workflow: Any, make_run: Any
) -> None:
    run = make_run(make_workflow(alice), alice)
    with pytest.raises(PermissionDenied):
        run_cancel(run=run, user=bob)
    run.refresh_from_db()
    assert run.status == "queued"


def test_a_finished_run_cannot_be_cancelled(alice: Any, make_workflow: Any, make_run: Any) -> None:
    run = make_run(make_workflow(alice), alice)
    run_claim(run_id=run.pk, worker="w")
    run_fail(run_id=run.pk, error="boom")
    with pytest.raises(RunStateError, match="already finished"):
        run_cancel(run=run, user=alice)


def test_progress_is_stored_only_while_running(alice: Any, make_workflow: Any, make_run: Any) -> None:
    run = make_run(make_workflow(alice), alice)
    run_progress(run_id=run.pk, progress={"t": 1.0})
    run.refresh_from_db()
    assert run.progress["t"] == 0.0
    run_claim(run_id=run.pk, worker="w")
    run_progress(run_id=run.pk, progress={"t": 1.0})
    run.refresh_from_db()
    assert run.progress == {"t": 1.0}


def test_finish_stores_nodes_applications_requests_and_summary(
    alice: Any, make_workflow: Any, make_run: Any
) -> None:
    run = make_run(make_workflow(alice), alice)
    run_claim(run_id=run.pk, worker="w")
    run = run_finish(run_id=run.pk, result=_result())
    assert run.status == "succeeded"
    assert run.summary["mean_attainment"] == 1.0
    # The API's summary shows SLOs as text, as it always has; the result holds them structured.
    assert run.summary["applications"] == [
        {
            "name": "first",
            "type": "Sleep",
            "slo_attainment": 1.0,
            "requests_served": 2,
            "requests_requested": 2,
            "slo": ["e2e<=1.0s"],
            "quality": {},
        }
    ]
    assert (run.summary["partial"], run.summary["requests_served"], run.summary["requests_requested"]) == (
        False,
        2,
        2,
    )
    assert NodeResult.objects.get(run=run).status == "succeeded"
    app = ApplicationResult.objects.get(run=run)
    assert app.metrics["e2e"]["p99"] == 0.2
    assert (
        app.slo == run.result["applications"][0]["slo"] == [{"metric": "e2e", "op": "<=", "threshold_s": 1.0}]
    )
    assert ResultDocument.model_validate(run.result).applications[0].slo == _result().applications[0].slo
    assert RequestResult.objects.filter(application=app).count() == 2
    assert run.result["applications"][0]["requests"] == []


@pytest.mark.parametrize(
    ("status", "node_status", "expected", "error"),
    [
        ("cancelled", "stopped", "cancelled", "run cancelled"),
        ("completed", "failed", "failed", "node 'first' failed: boom"),
    ],
)
def test_finish_maps_the_engine_status(
    alice: Any, make_workflow: Any, make_run: Any, status: str, node_status: str, expected: str, error: str
) -> None:
    run = make_run(make_workflow(alice), alice)
    run_claim(run_id=run.pk, worker="w")
    run = run_finish(run_id=run.pk, result=_result(status, node_status))
    assert (run.status, run.error) == (expected, error)


def test_finish_of_a_run_no_longer_running_stores_nothing(
    alice: Any, make_workflow: Any, make_run: Any
) -> None:
    run = make_run(make_workflow(alice), alice)
    run_claim(run_id=run.pk, worker="w")
    run_fail(run_id=run.pk, error="worker lost")
    with pytest.raises(RunStateError):
        run_finish(run_id=run.pk, result=_result())
    assert not ApplicationResult.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_concurrent_claims_let_exactly_one_worker_win(alice: Any, make_workflow: Any) -> None:
    import threading

    from django.db import connection

    # Created without run_create: a committed run_create would hand the run to the local executor.
    run = Run.objects.create(
        **run_spec_fields(version=version_latest(workflow=make_workflow(alice))),
        scheduler="greedy",
        owner=alice,
    )
    barrier = threading.Barrier(6)
    wins: list[str] = []

    def claim(name: str) -> None:
        try:
            barrier.wait()
            if run_claim(run_id=run.pk, worker=name):
                wins.append(name)
        finally:
            connection.close()

    threads = [threading.Thread(target=claim, args=(f"w{i}",)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(wins) == 1
    assert Run.objects.get(pk=run.pk).worker == wins[0]


def test_finishing_stores_the_telemetry_overview_the_pages_use(
    alice: Any, make_workflow: Any, make_run: Any
) -> None:
    from cbweb.runs.selectors import run_telemetry_overview
    from cbweb.runs.services import run_store_telemetry
    from cbweb.runs.telemetry import TelemetryBuffer

    run = make_run(make_workflow(alice), alice)
    run_claim(run_id=run.pk, worker="w")
    buffer = TelemetryBuffer()
    for i in range(5000):
        buffer.add("nvml", "gpu0.power_w", i * 0.05, float(i % 13))
    run_store_telemetry(run_id=run.pk, chunks=buffer.take())
    run = run_finish(run_id=run.pk, result=_result())
    [series] = run.telemetry_overview
    assert series["samples"] == 5000 and len(series["t"]) == 2000
    # The stored overview is what the pages serve, not a recomputation.
    Run.objects.filter(pk=run.pk).update(telemetry_overview=[{**series, "v": [0.0] * 2000}])
    assert run_telemetry_overview(run=Run.objects.get(pk=run.pk))[0]["v"] == [0.0] * 2000
