"""The live run page: nodes in DAG order with one request count, why a queued run waits, and the
request latencies stored while the run goes on (the live charts read them through the telemetry API)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.test import Client
from django.utils import timezone

from cbweb.platforms.services import platform_register
from cbweb.runs.execution import run_execute
from cbweb.runs.models import Run
from cbweb.runs.selectors import page_metrics, run_live_nodes, run_telemetry, run_wait_reason
from cbweb.runs.telemetry import REQUESTS_SOURCE, TelemetryBuffer, samples_of_request

# Defined out of DAG order: "report" comes first in the file but depends on both others.
OUT_OF_ORDER = """\
report:
  type: Sleep
  sleep_time: 0.01
  num_requests: 1
load:
  type: Sleep
  sleep_time: 0.01
  num_requests: 6
warm:
  type: Sleep
  sleep_time: 0.01
  num_requests: 2
workflows:
  report:
    uses: report
    depend_on: [load, warm]
  load:
    uses: load
    depend_on: [warm]
  warm:
    uses: warm
"""
GPU = "g:\n  type: Synthetic\n  load: torch\n  device: gpu\n"


def test_nodes_come_in_dag_order_with_served_of_requested(
    alice: Any, make_workflow: Any, make_run: Any
) -> None:
    run = make_run(make_workflow(alice, yaml_text=OUT_OF_ORDER), alice)
    nodes = run_live_nodes(run=run)
    assert [(n["name"], n["depends_on"], n["done"], n["total"]) for n in nodes] == [
        ("warm", [], 0, 2),
        ("load", ["warm"], 0, 6),
        ("report", ["load", "warm"], 0, 1),
    ]
    html = Client().get(f"/runs/{run.pk}/").content.decode()
    assert html.index('data-node="warm"') < html.index('data-node="load"') < html.index('data-node="report"')
    assert '<td class="done">0 of 6</td>' in html and "0/6" not in html
    progress = Client().get(f"/runs/{run.pk}/progress/").json()
    assert [n["name"] for n in progress["nodes"]] == ["warm", "load", "report"]


def test_the_local_executor_says_runs_go_one_at_a_time(
    alice: Any, make_workflow: Any, make_run: Any, settings: Any
) -> None:
    settings.CB_RUN_EXECUTOR = "local"
    workflow = make_workflow(alice)
    first, second = make_run(workflow, alice), make_run(workflow, alice)
    Run.objects.filter(pk=first.pk).update(created_at=timezone.now() - timedelta(seconds=5))
    assert run_wait_reason(run=Run.objects.get(pk=second.pk)) == (
        "The web server executes runs one at a time (no broker is configured): "
        "1 queued run(s) ahead of it (users take turns) and 0 running."
    )


def test_a_gpu_run_without_a_live_gpu_worker_says_so_on_its_page(
    alice: Any, make_workflow: Any, make_run: Any, settings: Any
) -> None:
    settings.CB_RUN_EXECUTOR = "celery"
    run = Run.objects.get(pk=make_run(make_workflow(alice, yaml_text=GPU), alice).pk)
    assert "no worker heartbeat" in (run_wait_reason(run=run) or "")
    # A live CPU-only worker does not help a GPU run.
    platform_register(fingerprint={"id": "cpu-box", "host": "cpu-box", "cpu": "EPYC", "gpus": []})
    reason = run_wait_reason(run=run) or ""
    assert reason.startswith("It needs a GPU (device: gpu on g) and no GPU worker is live")
    page = Client().get(f"/runs/{run.pk}/").content.decode()
    assert 'id="wait-reason">Waiting: It needs a GPU' in page
    assert Client().get(f"/runs/{run.pk}/progress/").json()["wait_reason"] == reason
    gpu_box = platform_register(
        fingerprint={"id": "gpu-box", "host": "gpu-box", "cpu": "EPYC", "gpus": [{"name": "H200"}]}
    )
    assert (
        run_wait_reason(run=run)
        == "A GPU worker is live; it waits its turn: 0 queued run(s) ahead of it (users take turns) "
        "and 0 running."
    )
    # Gone quiet: its heartbeat is older than CB_WORKER_LOST_AFTER_S.
    gpu_box.last_seen_at = timezone.now() - timedelta(seconds=settings.CB_WORKER_LOST_AFTER_S + 1)
    gpu_box.save()
    assert (run_wait_reason(run=run) or "").startswith("It needs a GPU")


def test_a_run_for_a_platform_whose_worker_is_gone_names_the_platform(
    alice: Any, make_workflow: Any, make_run: Any, settings: Any
) -> None:
    settings.CB_RUN_EXECUTOR = "celery"
    box = platform_register(fingerprint={"id": "box", "host": "box", "cpu": "EPYC", "gpus": []})
    box.last_seen_at = None
    box.save()
    run = make_run(make_workflow(alice), alice)
    Run.objects.filter(pk=run.pk).update(platform=box)
    reason = run_wait_reason(run=Run.objects.get(pk=run.pk)) or ""
    assert (
        reason.startswith("It waits for a worker on box (EPYC), which is not live") and "never seen" in reason
    )
    Run.objects.filter(pk=run.pk).update(status="running")
    assert run_wait_reason(run=Run.objects.get(pk=run.pk)) is None


def test_only_counted_requests_become_live_latency_samples() -> None:
    def event(**record: Any) -> dict[str, Any]:
        return {"kind": "request_end", "node": "chat", "record": {"status": "ok", "warmup": False, **record}}

    ok = event(end=1.5, metrics={"ttft": 0.2, "e2e": 1.0, "tokens": True})
    assert sorted(samples_of_request(ok)) == [
        (REQUESTS_SOURCE, "chat.e2e", 1.5, 1.0),
        (REQUESTS_SOURCE, "chat.ttft", 1.5, 0.2),
    ]
    assert list(samples_of_request(event(end=1.0, warmup=True, metrics={"e2e": 1.0}))) == []
    assert list(samples_of_request(event(end=1.0, status="interrupted", metrics={"e2e": 1.0}))) == []
    assert list(samples_of_request(event(end=None, metrics={"e2e": 1.0}))) == []
    buffer = TelemetryBuffer()
    buffer.add_event(ok)
    assert sorted((c.source, c.metric, c.t, c.v) for c in buffer.take()) == [
        (REQUESTS_SOURCE, "chat.e2e", [1.5], [1.0]),
        (REQUESTS_SOURCE, "chat.ttft", [1.5], [0.2]),
    ]


def test_an_executed_run_stores_each_served_requests_latency_as_it_goes(
    alice: Any, make_workflow: Any, make_run: Any
) -> None:
    run = make_run(make_workflow(alice), alice)
    assert run_execute(run_id=run.pk, worker="test") == "succeeded"
    run = Run.objects.get(pk=run.pk)
    live = {s["metric"]: s for s in run_telemetry(run=run, source=REQUESTS_SOURCE)}
    assert live["first.e2e"]["samples"] == 3 and live["second.e2e"]["samples"] == 2
    assert all(0.05 <= v < 1 for v in live["first.e2e"]["v"])
    # The result page draws latency from the stored requests, not from these samples.
    assert not any(m.startswith(("first.", "second.")) for m in page_metrics(run=run))


def test_the_launch_form_refuses_an_mps_scheduler_on_a_platform_without_an_nvidia_gpu(
    alice: Any, make_workflow: Any, client: Any, settings: Any
) -> None:
    from cbweb.workflows.selectors import version_latest

    settings.CB_RUN_EXECUTOR = "celery"
    workflow = make_workflow(alice)
    cpu = platform_register(fingerprint={"id": "cpu-box", "host": "cpu-box", "cpu": "EPYC", "gpus": []})
    gpu = platform_register(
        fingerprint={"id": "gpu-box", "host": "gpu-box", "cpu": "EPYC", "gpus": [{"name": "H200"}]}
    )
    client.force_login(alice)
    page = client.get(f"/runs/launch/{workflow.pk}/")
    support = page.context["form"].scheduler_support
    assert support[str(cpu.pk)] == ["greedy", "credit"]
    assert support[str(gpu.pk)] == ["greedy", "partition", "credit", "credit-mps"]
    assert 'id="scheduler-support"' in page.content.decode()
    data = {"version": version_latest(workflow=workflow).pk, "repeats": 1, "platform": cpu.pk}
    refused = client.post(f"/runs/launch/{workflow.pk}/", {**data, "scheduler": "partition"})
    assert refused.status_code == 400
    assert refused.context["form"].errors["scheduler"] == [
        "partition needs an NVIDIA GPU (it uses NVIDIA MPS) and cpu-box (EPYC) has none; "
        "choose one of: greedy, credit"
    ]
    assert not Run.objects.exists()
    assert client.post(f"/runs/launch/{workflow.pk}/", {**data, "scheduler": "credit"}).status_code == 302


def test_under_the_local_executor_the_launch_form_offers_what_this_machine_runs(
    alice: Any, make_workflow: Any, settings: Any
) -> None:
    from benchmarks.platform import gpus
    from cbweb.runs.forms import RunLaunchForm

    settings.CB_RUN_EXECUTOR = "local"
    form = RunLaunchForm(workflow=make_workflow(alice))
    expected = ["greedy", "partition", "credit", "credit-mps"] if gpus() else ["greedy", "credit"]
    assert form.scheduler_support == {"": expected}


def test_the_launch_form_refuses_random_models_the_chosen_machine_cannot_hold(
    alice: Any, make_workflow: Any, client: Any, settings: Any
) -> None:
    from cbweb.workflows.selectors import version_latest

    settings.CB_RUN_EXECUTOR = "celery"
    # A 3B Llama twin on the CPU holds 6.4 GB: a 4 GB box cannot run it, a GPU box runs it on its GPU.
    workflow = make_workflow(alice, yaml_text="chat: {type: chatbot, model: llama-3.2-3b@random}\n")
    small = platform_register(
        fingerprint={"id": "small", "host": "small", "cpu": "EPYC", "gpus": [], "ram_bytes": 4 * 10**9}
    )
    gpu = platform_register(
        fingerprint={
            "id": "gpu",
            "host": "gpu",
            "cpu": "EPYC",
            "gpus": [{"name": "H200"}],
            "ram_bytes": 10**9,
        }
    )
    client.force_login(alice)
    data = {"version": version_latest(workflow=workflow).pk, "repeats": 1, "scheduler": "greedy"}
    refused = client.post(f"/runs/launch/{workflow.pk}/", {**data, "platform": small.pk})
    assert refused.status_code == 400
    [message] = refused.context["form"].errors["platform"]
    assert message == (
        "node chat (llama-3.2-3b@random, 6.4 GB) loads a random model on the CPU and platform "
        "'small (EPYC)' has 4.0 GB of memory in all; use device: gpu or a smaller model"
    )
    assert "loads a random model on the CPU" in refused.content.decode()
    assert not Run.objects.exists()
    assert client.post(f"/runs/launch/{workflow.pk}/", {**data, "platform": gpu.pk}).status_code == 302
