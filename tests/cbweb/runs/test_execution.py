"""Run execution with the real engine: Sleep/Synthetic workflows in real application processes."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from cbweb.runs.execution import DEFAULT_QUEUE, GPU_QUEUE, platform_queue, run_execute, run_queue
from cbweb.runs.models import ApplicationResult, RequestResult, Run, TelemetryChunk
from cbweb.runs.selectors import run_telemetry
from cbweb.runs.services import run_cancel
from tests.waiting import wait_until

SLOW = "slow:\n  type: Sleep\n  sleep_time: 0.1\n  num_requests: 200\n"
FAILING = "boom:\n  type: Synthetic\n  num_requests: 3\n  fail_at_request: 1\n"


def test_a_run_executes_and_stores_results_telemetry_and_bundle(
    alice: Any, make_workflow: Any, make_run: Any
) -> None:
    run = make_run(make_workflow(alice), alice)
    assert run_execute(run_id=run.pk, worker="test") == "succeeded"
    run.refresh_from_db()
    assert run.status == "succeeded" and run.error == ""
    assert [a.requests_total for a in ApplicationResult.objects.filter(run=run)] == [3, 2]
    assert RequestResult.objects.filter(application__run=run, status="ok").count() == 5
    assert run.platform is not None and run.platform.info["cpu_threads"] >= 1
    assert run.progress["nodes"]["second"]["done"] == 2
    assert (Path(run.bundle_dir) / "result.json").is_file()
    # The monitor's psutil source works on every machine: its samples are stored as chunks.
    assert TelemetryChunk.objects.filter(run=run, source="psutil").exists()
    series = {s["metric"]: s for s in run_telemetry(run=run)}
    assert series["system.cpu_percent"]["samples"] >= 2
    assert series["system.cpu_percent"]["t"] == sorted(series["system.cpu_percent"]["t"])


def test_a_failing_application_fails_the_run_with_its_reason(
    alice: Any, make_workflow: Any, make_run: Any
) -> None:
    run = make_run(make_workflow(alice, yaml_text=FAILING), alice)
    assert run_execute(run_id=run.pk, worker="test") == "failed"
    run.refresh_from_db()
    assert "node 'boom' failed: RuntimeError: synthetic failure injected" in run.error
    assert RequestResult.objects.filter(application__run=run, status="ok").count() == 1


def test_a_run_that_cannot_start_here_is_failed_with_the_preflight_message(
    alice: Any, make_workflow: Any, make_run: Any
) -> None:
    from benchmarks.platform import gpus

    if gpus():
        pytest.skip("this machine has a GPU, so device: gpu can start")
    run = make_run(make_workflow(alice, yaml_text="g: {type: Synthetic, load: torch, device: gpu}\n"), alice)
    assert run_execute(run_id=run.pk, worker="test") == "failed"
    run.refresh_from_db()
    assert run.error.startswith("PreflightError: the run cannot start")
    assert "NVML sees no NVIDIA GPU and it is not Apple silicon" in run.error


@pytest.mark.django_db(transaction=True)
def test_cancel_stops_a_running_run_within_seconds_and_keeps_partial_data(
    alice: Any, make_workflow: Any, make_run: Any, settings: Any
) -> None:
    # Committed for real: run_launch hands the run to the local executor, as in `make demo`.
    settings.CB_RUN_EXECUTOR = "local"
    run = make_run(make_workflow(alice, yaml_text=SLOW), alice)
    wait_until(
        lambda: Run.objects.get(pk=run.pk).progress["nodes"]["slow"]["done"] >= 3, "the run never got going"
    )
    cancelled_at = time.monotonic()
    run_cancel(run=Run.objects.get(pk=run.pk), user=alice)
    wait_until(lambda: Run.objects.get(pk=run.pk).is_finished, "the run did not stop")
    assert time.monotonic() - cancelled_at < 10
    run.refresh_from_db()
    assert run.status == "cancelled"
    done = RequestResult.objects.filter(application__run=run, status="ok").count()
    assert 3 <= done < 200


def test_a_run_for_a_platform_goes_to_that_platforms_queue(
    alice: Any, make_workflow: Any, make_run: Any
) -> None:
    from benchmarks.platform import fingerprint
    from cbweb.platforms.services import platform_register

    info = fingerprint()
    platform = platform_register(fingerprint=info, queue=platform_queue(info["id"]))
    run = make_run(make_workflow(alice), alice)
    Run.objects.filter(pk=run.pk).update(platform=platform)
    assert run_queue(run.pk) == f"cb.{info['id']}"


def test_a_run_for_any_worker_goes_to_the_gpu_queue_only_when_it_asks_for_a_gpu(
    alice: Any, make_workflow: Any, make_run: Any
) -> None:
    cpu = make_run(make_workflow(alice), alice)
    gpu = make_run(make_workflow(alice, name="g", yaml_text="g:\n  type: Sleep\n  device: gpu\n"), alice)
    auto = make_run(make_workflow(alice, name="a", yaml_text="a:\n  type: Sleep\n  device: auto\n"), alice)
    assert (run_queue(cpu.pk), run_queue(gpu.pk), run_queue(auto.pk)) == (
        DEFAULT_QUEUE,
        GPU_QUEUE,
        DEFAULT_QUEUE,
    )
