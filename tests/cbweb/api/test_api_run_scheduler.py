"""The run-create API takes ``scheduler`` as a name or ``{name, ...params}``; the schema documents it."""

from __future__ import annotations

from typing import Any

import yaml

from cbweb.runs.models import Run


def test_a_scheduler_object_launches_with_its_parameters_and_the_run_shows_them(
    api: Any, alice: Any, make_workflow: Any
) -> None:
    body = {"workflow": make_workflow(alice).pk, "scheduler": {"name": "credit", "pressure_threshold": 0.4}}
    response = api.post("/api/v1/runs/", body, format="json")
    assert response.status_code == 201, response.json()
    run = Run.objects.get(pk=response.json()["id"])
    assert run.scheduler == "credit" and run.scheduler_params["pressure_threshold"] == 0.4
    shown = api.get(f"/api/v1/runs/{run.pk}/").json()
    assert shown["scheduler"] == "credit"
    assert shown["scheduler_params"]["pressure_threshold"] == 0.4
    assert shown["scheduler_params"]["window"] == 10


def test_an_object_without_name_sets_parameters_of_the_workflow_scheduler(
    api: Any, alice: Any, make_workflow: Any
) -> None:
    workflow = make_workflow(alice, yaml_text="scheduler: credit\na: {type: Sleep, num_requests: 1}\n")
    response = api.post("/api/v1/runs/", {"workflow": workflow.pk, "scheduler": {"window": 4}}, format="json")
    assert response.status_code == 201, response.json()
    assert Run.objects.get().scheduler_params["window"] == 4


def test_an_out_of_range_or_unknown_parameter_is_a_400_naming_it(
    api: Any, alice: Any, make_workflow: Any
) -> None:
    body = {
        "workflow": make_workflow(alice).pk,
        "scheduler": {"name": "credit", "pressure_threshold": 1.5, "pressure_treshold": 0.4},
    }
    response = api.post("/api/v1/runs/", body, format="json")
    assert response.status_code == 400
    errors = {e["field"]: e["message"] for e in response.json()["errors"]}
    assert errors["scheduler.pressure_threshold"] == "credit: must be < 1 (got 1.5; allowed: > 0 and < 1)"
    assert "did you mean 'pressure_threshold'?" in errors["scheduler.pressure_treshold"]
    assert not Run.objects.exists()


def test_a_malformed_scheduler_is_a_400(api: Any, alice: Any, make_workflow: Any) -> None:
    workflow = make_workflow(alice).pk
    for scheduler, field in (
        (["credit"], "scheduler"),
        ({"name": "fastest"}, "scheduler"),
        ({"name": None}, "scheduler.name"),
        ({"name": "credit", "window": [1]}, "scheduler.window"),
    ):
        response = api.post("/api/v1/runs/", {"workflow": workflow, "scheduler": scheduler}, format="json")
        assert response.status_code == 400, scheduler
        assert response.json()["errors"][0]["field"] == field


def test_the_openapi_schema_documents_the_scheduler_as_a_name_or_an_object(api: Any) -> None:
    schema = yaml.safe_load(api.get("/api/v1/schema/").content)
    scheduler = schema["components"]["schemas"]["CreateInputRequest"]["properties"]["scheduler"]
    kinds = [s["type"] for s in scheduler["oneOf"]]
    assert kinds == ["string", "object"]
    assert "credit" in scheduler["oneOf"][0]["enum"]
    assert "scheduler_params" in schema["components"]["schemas"]["RunOutput"]["properties"]


def test_an_mps_scheduler_for_a_platform_without_an_nvidia_gpu_is_a_400(
    api: Any, alice: Any, make_workflow: Any
) -> None:
    from cbweb.platforms.services import platform_register

    cpu = platform_register(fingerprint={"id": "cpu-box", "host": "cpu-box", "cpu": "EPYC", "gpus": []})
    response = api.post(
        "/api/v1/runs/",
        {"workflow": make_workflow(alice).pk, "platform": cpu.pk, "scheduler": "credit-mps"},
        format="json",
    )
    assert response.status_code == 400
    assert "credit-mps needs an NVIDIA GPU (it uses NVIDIA MPS) and cpu-box (EPYC) has none" in str(
        response.json()
    )
