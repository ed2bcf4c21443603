"""``weights`` on the run-create API and the launch form: the run's copy of the spec says it, the run
runs the random twins, and the run page names each substitution."""

from __future__ import annotations

from typing import Any

from django.test import Client

from benchmarks.spec.load import from_dict
from cbweb.runs.models import Run

CAPTIONS = "captions: {type: LiveCaptions, model: whisper-tiny.en, device: cpu, num_requests: 1}\n"


def test_weights_random_runs_the_twins_and_the_run_page_names_each_substitution(
    api: Any, alice: Any, make_workflow: Any
) -> None:
    workflow = make_workflow(alice, yaml_text=CAPTIONS)
    response = api.post("/api/v1/runs/", {"workflow": workflow.pk, "weights": "random"}, format="json")
    assert response.status_code == 201, response.json()
    run = Run.objects.get(pk=response.json()["id"])
    assert run.spec["weights"] == "random" and workflow.versions.get().spec.get("weights") is None
    assert from_dict(run.spec).applications["captions"].model == "whisper-tiny.en@random"
    client = Client()
    client.force_login(alice)
    page = client.get(f"/runs/{run.pk}/").content.decode()
    assert "random weights: whisper-tiny.en -&gt; whisper-tiny@random" in page


def test_without_weights_the_run_keeps_the_real_models(api: Any, alice: Any, make_workflow: Any) -> None:
    workflow = make_workflow(alice, yaml_text=CAPTIONS)
    response = api.post("/api/v1/runs/", {"workflow": workflow.pk}, format="json")
    run = Run.objects.get(pk=response.json()["id"])
    assert "weights" not in run.spec and run.random_weights == []


def test_an_unknown_weights_value_is_a_400_naming_the_field(api: Any, alice: Any, make_workflow: Any) -> None:
    body = {"workflow": make_workflow(alice, yaml_text=CAPTIONS).pk, "weights": "fake"}
    response = api.post("/api/v1/runs/", body, format="json")
    assert response.status_code == 400
    assert response.json()["errors"][0]["field"] == "weights"
    assert not Run.objects.exists()


def test_the_launch_form_takes_weights(alice: Any, make_workflow: Any) -> None:
    workflow = make_workflow(alice, yaml_text=CAPTIONS)
    client = Client()
    client.force_login(alice)
    form = client.get(f"/runs/launch/{workflow.pk}/").content.decode()
    assert 'name="weights"' in form and "random (the models&#x27; random twins)" in form
    version = workflow.versions.get().pk
    body = {"version": version, "scheduler": "greedy", "repeats": 1, "weights": "random"}
    assert client.post(f"/runs/launch/{workflow.pk}/", body).status_code == 302
    assert Run.objects.get().random_weights == ["whisper-tiny.en -> whisper-tiny@random"]
