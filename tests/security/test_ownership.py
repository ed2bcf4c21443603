"""Ownership (issue 17, item 6): another user's runs of my workflow no longer pin it. Runs keep the
frozen spec they ran, so the owner can delete or archive the workflow and every page still renders."""

from __future__ import annotations

from typing import Any

import pytest
from rest_framework.test import APIClient

from cbweb.runs.execution import run_execute

SHARED = "nap:\n  type: Sleep\n  sleep_time: 0.01\n  num_requests: 2\n  slo: ['e2e<1s']\n"


@pytest.fixture
def as_user(make_token: Any) -> Any:
    def client(user: Any) -> APIClient:
        api = APIClient()
        api.credentials(HTTP_AUTHORIZATION=f"Token {make_token(user)}")
        return api

    return client


@pytest.fixture
def shared(alice: Any, bob: Any, as_user: Any) -> dict[str, Any]:
    """Alice's workflow, and two finished runs of it that Bob launched through the API."""
    alice_api, bob_api = as_user(alice), as_user(bob)
    created = alice_api.post("/api/v1/workflows/", {"name": "shared", "yaml": SHARED}, format="json")
    assert created.status_code == 201, created.json()
    workflow = created.json()["id"]
    launched = bob_api.post("/api/v1/runs/", {"workflow": workflow, "repeats": 2}, format="json")
    assert launched.status_code == 201, launched.json()
    runs = launched.json()["ids"]
    for run in runs:
        run_execute(run_id=run, worker="test")
    return {"alice": alice_api, "bob": bob_api, "workflow": workflow, "runs": runs}


def test_the_owner_deletes_a_workflow_others_ran_and_their_runs_stay_whole(
    shared: dict[str, Any], client: Any, bob: Any
) -> None:
    alice_api, bob_api, workflow, runs = shared["alice"], shared["bob"], shared["workflow"], shared["runs"]
    yaml_before = alice_api.get(f"/api/v1/workflows/{workflow}/").json()["yaml"]
    assert alice_api.delete(f"/api/v1/workflows/{workflow}/").status_code == 204
    assert alice_api.get(f"/api/v1/workflows/{workflow}/").status_code == 404

    for run in runs:
        detail = bob_api.get(f"/api/v1/runs/{run}/").json()
        assert detail["status"] == "succeeded"
        assert (detail["workflow"], detail["workflow_name"], detail["workflow_version"]) == (
            None,
            "shared",
            1,
        )
        assert detail["summary"]["mean_attainment"] == 1.0
        result = bob_api.get(f"/api/v1/runs/{run}/result/").json()
        assert len(result["applications"][0]["requests"]) == 2
    assert {r["id"] for r in bob_api.get("/api/v1/runs/?owner=bob").json()["results"]} == set(runs)

    # The pages: result, its YAML (the spec it ran), the list, compare, the leaderboard.
    page = client.get(f"/runs/{runs[0]}/")
    assert page.status_code == 200
    assert "shared v1" in page.content.decode() and "workflow deleted" in page.content.decode()
    assert client.get(f"/runs/{runs[0]}/workflow.yml").content.decode() == yaml_before
    assert client.get("/runs/").status_code == 200
    compare = client.get(f"/runs/compare/?runs={runs[0]}&runs={runs[1]}")
    assert compare.status_code == 200 and "shared v1" in compare.content.decode()
    # The leaderboard shows one existing workflow at a time (docs/web.md): it renders, and no longer
    # offers the deleted one, whose runs stay listed above.
    board = client.get("/leaderboard/")
    assert board.status_code == 200 and "shared" not in board.content.decode()
    listed = client.get("/runs/").content.decode()
    assert all(f"/runs/{run}/" in listed for run in runs)

    # Nothing left to launch; the runs themselves are still Bob's to delete.
    assert bob_api.post("/api/v1/runs/", {"workflow": workflow}, format="json").status_code == 404
    assert bob_api.delete(f"/api/v1/runs/{runs[0]}/").status_code == 204


def test_only_the_owner_may_delete_or_archive_the_workflow(shared: dict[str, Any]) -> None:
    bob_api, workflow = shared["bob"], shared["workflow"]
    assert bob_api.delete(f"/api/v1/workflows/{workflow}/").status_code == 403
    refused = bob_api.post(f"/api/v1/workflows/{workflow}/archive/", {}, format="json")
    assert refused.status_code == 403 and "only the owner" in refused.json()["message"]
    assert APIClient().post(f"/api/v1/workflows/{workflow}/archive/", {}, format="json").status_code == 401
    assert shared["alice"].get(f"/api/v1/workflows/{workflow}/").json()["archived"] is False


def test_an_archived_workflow_leaves_the_lists_and_cannot_be_launched(
    shared: dict[str, Any], client: Any, bob: Any
) -> None:
    alice_api, bob_api, workflow = shared["alice"], shared["bob"], shared["workflow"]
    archived = alice_api.post(f"/api/v1/workflows/{workflow}/archive/", {"archived": True}, format="json")
    assert archived.status_code == 200 and archived.json()["archived"] is True
    assert workflow not in [w["id"] for w in bob_api.get("/api/v1/workflows/").json()["results"]]
    assert [w["id"] for w in bob_api.get("/api/v1/workflows/?archived=true").json()["results"]] == [workflow]
    assert "shared" not in client.get("/workflows/").content.decode()
    assert "shared" in client.get("/workflows/?archived=true").content.decode()

    refused = bob_api.post("/api/v1/runs/", {"workflow": workflow}, format="json")
    assert refused.status_code == 400
    assert refused.json()["errors"][0]["field"] == "workflow" and "archived" in refused.json()["message"]
    from cbweb.workflows.models import WorkflowVersion

    client.force_login(bob)
    version = WorkflowVersion.objects.get(workflow_id=workflow).pk
    form = {"version": version, "scheduler": "greedy", "repeats": 1, "platform": ""}
    page = client.post(f"/runs/launch/{workflow}/", form)
    assert page.status_code == 400 and "is archived" in page.content.decode()
    # Its page and its runs stay readable.
    assert client.get(f"/workflows/{workflow}/").status_code == 200
    assert all(bob_api.get(f"/api/v1/runs/{r}/").status_code == 200 for r in shared["runs"])

    restored = alice_api.post(f"/api/v1/workflows/{workflow}/archive/", {"archived": False}, format="json")
    assert restored.json()["archived"] is False
    assert bob_api.post("/api/v1/runs/", {"workflow": workflow}, format="json").status_code == 201
