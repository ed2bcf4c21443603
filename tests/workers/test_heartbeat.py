"""The worker heartbeat keeps the worker's platform live; ``run_reap`` fails runs whose worker was lost."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.utils import timezone

from benchmarks.platform import fingerprint
from cbweb.platforms.selectors import platform_live
from cbweb.runs.execution import platform_queue
from cbweb.runs.models import Run, TelemetryChunk
from cbweb.runs.services import run_claim, run_reap, run_store_telemetry
from cbweb.runs.telemetry import ChunkWrite
from workers.heartbeat import WorkerHeartbeat


def _running(make_workflow: Any, make_run: Any, owner: Any, silent_for_s: float) -> Run:
    run = make_run(make_workflow(owner), owner)
    assert run_claim(run_id=run.pk, worker="w1@host:42")
    Run.objects.filter(pk=run.pk).update(heartbeat_at=timezone.now() - timedelta(seconds=silent_for_s))
    return run


def test_a_run_silent_for_longer_than_the_limit_is_failed_as_worker_lost_with_its_telemetry_kept(
    alice: Any, make_workflow: Any, make_run: Any
) -> None:
    run = _running(make_workflow, make_run, alice, silent_for_s=61)
    run_store_telemetry(
        run_id=run.pk,
        chunks=[ChunkWrite("psutil", "system.cpu_percent", 0, [0.0, 0.05, 0.1], [5.0, 7.0, 6.0])],
    )
    assert run_reap(lost_after_s=60) == [run.pk]
    run.refresh_from_db()
    assert run.status == Run.Status.FAILED and run.finished_at is not None
    assert run.error.startswith("worker lost: w1@host:42 sent no heartbeat for more than 60 s")
    assert TelemetryChunk.objects.filter(run=run).count() == 1
    assert [s["metric"] for s in run.telemetry_overview] == ["system.cpu_percent"]


def test_runs_with_a_recent_heartbeat_queued_or_finished_are_left_alone(
    alice: Any, make_workflow: Any, make_run: Any
) -> None:
    fresh = _running(make_workflow, make_run, alice, silent_for_s=30)
    queued = make_run(make_workflow(alice, name="queued"), alice)
    Run.objects.filter(pk=queued.pk).update(heartbeat_at=timezone.now() - timedelta(hours=1))
    done = _running(make_workflow, make_run, alice, silent_for_s=3600)
    Run.objects.filter(pk=done.pk).update(status=Run.Status.SUCCEEDED)
    assert run_reap(lost_after_s=60) == []
    statuses = dict(Run.objects.values_list("pk", "status"))
    assert statuses == {fresh.pk: "running", queued.pk: "queued", done.pk: "succeeded"}


def test_a_beat_registers_the_platform_with_its_queue_and_leaves_runs_to_the_sweeper(
    alice: Any, make_workflow: Any, make_run: Any, settings: Any
) -> None:
    settings.CB_WORKER_LOST_AFTER_S = 60.0
    lost = _running(make_workflow, make_run, alice, silent_for_s=120)
    info = fingerprint()
    WorkerHeartbeat(info).beat()
    [platform] = platform_live()
    assert platform.fingerprint_id == info["id"]
    assert platform.queue == platform_queue(info["id"])
    assert Run.objects.get(pk=lost.pk).status == "running"


def test_a_platform_not_heard_from_for_the_lost_limit_is_no_longer_live(db: Any, settings: Any) -> None:
    settings.CB_WORKER_LOST_AFTER_S = 60.0
    WorkerHeartbeat(fingerprint()).beat()
    assert platform_live().count() == 1
    platform_live().update(last_seen_at=timezone.now() - timedelta(seconds=61))
    assert platform_live().count() == 0
