from __future__ import annotations

import time
from typing import Any

import pytest
from rest_framework.test import APIClient

from cbweb.runs.execution import run_execute
from cbweb.runs.models import Run
from cbweb.runs.services import run_claim


def test_post_run_answers_201_with_id_url_and_status(api: Any, alice: Any, make_workflow: Any) -> None:
    workflow = make_workflow(alice)
    response = api.post("/api/v1/runs/", {"workflow": workflow.pk, "scheduler": "greedy"}, format="json")
    assert response.status_code == 201, response.json()
    body = response.json()
    assert body["status"] == "queued"
    assert body["url"] == f"http://testserver/api/v1/runs/{body['id']}/"
    run = Run.objects.get(pk=body["id"])
    assert (
        run.workflow_version.number == 1
        and run.version_number == 1
        and run.spec == workflow.versions.get().spec
    )


def test_unknown_scheduler_is_a_400_naming_the_field(api: Any, alice: Any, make_workflow: Any) -> None:
    response = api.post(
        "/api/v1/runs/", {"workflow": make_workflow(alice).pk, "scheduler": "nope"}, format="json"
    )
    assert response.status_code == 400
    assert response.json()["errors"][0]["field"] == "scheduler"


@pytest.mark.django_db(transaction=True)
def test_run_creation_never_waits_for_the_run(
    alice: Any, make_workflow: Any, make_token: Any, settings: Any
) -> None:
    settings.CB_RUN_EXECUTOR = "local"
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {make_token(alice)}")
    workflow = make_workflow(alice, yaml_text="long:\n  type: Sleep\n  sleep_time: 0.5\n  num_requests: 8\n")
    started = time.monotonic()
    response = client.post("/api/v1/runs/", {"workflow": workflow.pk}, format="json")
    elapsed = time.monotonic() - started
    assert response.status_code == 201 and response.json()["status"] == "queued"
    # The run takes more than 4 s; the answer came long before (the executor runs it in the background).
    assert elapsed < 1.5
    run_id = response.json()["id"]
    deadline = time.monotonic() + 60
    while Run.objects.get(pk=run_id).status in ("queued", "running") and time.monotonic() < deadline:
        time.sleep(0.2)
    detail = client.get(f"/api/v1/runs/{run_id}/").json()
    assert detail["status"] == "succeeded"
    assert time.monotonic() - started > 4.0


def test_finished_run_detail_has_the_summary(api: Any, alice: Any, make_workflow: Any, make_run: Any) -> None:
    run = make_run(
        make_workflow(alice, yaml_text="s:\n  type: Sleep\n  sleep_time: 0.01\n  slo: ['e2e<1s']\n"), alice
    )
    assert api.get(f"/api/v1/runs/{run.pk}/").json()["summary"] is None
    run_execute(run_id=run.pk, worker="test")
    body = api.get(f"/api/v1/runs/{run.pk}/").json()
    assert body["status"] == "succeeded"
    summary = body["summary"]
    # One application with an SLO: no fairness (the index of one application says nothing).
    assert summary["mean_attainment"] == 1.0 and summary["fairness"] is None and summary["makespan_s"] > 0
    assert summary["applications"][0]["slo_attainment"] == 1.0
    assert summary["partial"] is False and summary["requests_served"] == summary["requests_requested"] == 1
    assert summary["headline"] == "mean SLO attainment 100.0%"
    result = api.get(f"/api/v1/runs/{run.pk}/result/").json()
    assert len(result["applications"][0]["requests"]) == 1


@pytest.mark.django_db(transaction=True)
def test_a_cancelled_runs_api_summary_and_page_say_partial_with_what_was_served(
    alice: Any, make_workflow: Any, make_token: Any, settings: Any
) -> None:
    settings.CB_RUN_EXECUTOR = "local"
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {make_token(alice)}")
    workflow = make_workflow(
        alice, yaml_text="nap:\n  type: Sleep\n  sleep_time: 0.1\n  num_requests: 200\n  slo: ['e2e<=5s']\n"
    )
    run_id = client.post("/api/v1/runs/", {"workflow": workflow.pk}, format="json").json()["id"]
    deadline = time.monotonic() + 60
    # Cancel once the run has served a few requests.
    while time.monotonic() < deadline:
        progress = Run.objects.get(pk=run_id).progress.get("nodes", {}).get("nap", {})
        if progress.get("done", 0) >= 3:
            break
        time.sleep(0.1)
    assert client.post(f"/api/v1/runs/{run_id}/cancel/").status_code == 200
    while Run.objects.get(pk=run_id).status == "running" and time.monotonic() < deadline:
        time.sleep(0.2)
    body = client.get(f"/api/v1/runs/{run_id}/").json()
    assert body["status"] == "cancelled"
    summary = body["summary"]
    served = summary["requests_served"]
    assert summary["partial"] is True and 3 <= served < 200 and summary["requests_requested"] == 200
    assert summary["headline"].startswith(f"partial: served {served} of 200, ")
    # The requests never served are misses: the attainment is over the 200 asked for.
    assert summary["mean_attainment"] == pytest.approx(served / 200)
    page = client.get(f"/runs/{run_id}/").content.decode()
    assert f"partial: served {served} of 200 requests" in page
    assert f"{served} / {served} / 200" in page  # met / served / requested in the SLO table
    assert f"partial: served {served} of 200" in client.get("/runs/").content.decode()


def test_a_user_cannot_cancel_another_users_run(
    api: Any, alice: Any, bob: Any, make_workflow: Any, make_run: Any
) -> None:
    run = make_run(make_workflow(bob, name="bobs"), bob)
    response = api.post(f"/api/v1/runs/{run.pk}/cancel/")
    assert response.status_code == 403
    assert "owner" in response.json()["message"]
    assert Run.objects.get(pk=run.pk).status == "queued"


def test_owner_cancels_and_a_finished_run_answers_409(
    api: Any, alice: Any, make_workflow: Any, make_run: Any
) -> None:
    run = make_run(make_workflow(alice), alice)
    run_claim(run_id=run.pk, worker="w")
    response = api.post(f"/api/v1/runs/{run.pk}/cancel/")
    assert response.status_code == 200 and response.json()["cancel_requested"] is True
    Run.objects.filter(pk=run.pk).update(status="failed")
    assert api.post(f"/api/v1/runs/{run.pk}/cancel/").status_code == 409


def test_list_filters_by_status_and_workflow(api: Any, alice: Any, make_workflow: Any, make_run: Any) -> None:
    a, b = make_workflow(alice, name="a"), make_workflow(alice, name="b")
    ra, rb = make_run(a, alice), make_run(b, alice)
    run_claim(run_id=rb.pk, worker="w")
    assert [r["id"] for r in api.get("/api/v1/runs/", {"status": "running"}).json()["results"]] == [rb.pk]
    assert [r["id"] for r in api.get("/api/v1/runs/", {"workflow": a.pk}).json()["results"]] == [ra.pk]
    assert api.get("/api/v1/runs/", {"status": "bogus"}).status_code == 400


def test_telemetry_is_served_downsampled_by_metric_and_range(
    api: Any, alice: Any, make_workflow: Any, make_run: Any
) -> None:
    from cbweb.runs.services import run_store_telemetry
    from cbweb.runs.telemetry import TelemetryBuffer

    run = make_run(make_workflow(alice), alice)
    buffer = TelemetryBuffer()
    for i in range(20_000):
        buffer.add("nvml", "gpu0.power_w", i * 0.05, 100.0 + (i % 10))
        buffer.add("nvml", "gpu0.util_gpu_pct", i * 0.05, 50.0)
    run_store_telemetry(run_id=run.pk, chunks=buffer.take())
    body = api.get(
        f"/api/v1/runs/{run.pk}/telemetry/",
        {"metric": "gpu0.power_w", "points": 500, "t_min": 100, "t_max": 200},
    ).json()
    [series] = body["series"]
    assert series["metric"] == "gpu0.power_w" and len(series["t"]) == 500 and series["samples"] == 2001
    assert series["t"][0] >= 100 and series["t"][-1] <= 200
    assert {m["metric"] for m in body["available"]} == {"gpu0.power_w", "gpu0.util_gpu_pct"}
    bad = api.get(f"/api/v1/runs/{run.pk}/telemetry/", {"t_min": 5, "t_max": 1})
    assert bad.status_code == 400 and bad.json()["errors"][0]["field"] == "t_min"


def test_schema_is_served_as_openapi(db: Any) -> None:
    response = APIClient().get("/api/v1/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json")
    assert response.status_code == 200
    paths = response.json()["paths"]
    assert {
        "/api/v1/workflows/",
        "/api/v1/runs/",
        "/api/v1/runs/{id}/cancel/",
        "/api/v1/runs/{id}/telemetry/",
    } <= set(paths)
