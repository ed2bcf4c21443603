"""Run metadata through the API (commit, branch, CI URL, tags, notes), its filters, and the
per-request rows the regression gate reads."""

from __future__ import annotations

from typing import Any

import pytest

from benchmarks.client import Client
from cbweb.runs.execution import run_execute
from cbweb.runs.models import Run
from cbweb.runs.services import run_create
from cbweb.workflows.selectors import version_latest

META = {
    "commit": "ABCDEF1234",
    "branch": "feature/gate",
    "ci_url": "https://ci.example.org/jobs/7",
    "tags": ["nightly", "gpu-a"],
    "notes": "after the driver update",
}


def _launch(api: Any, workflow: Any, **body: Any) -> Any:
    return api.post("/api/v1/runs/", {"workflow": workflow.pk, "scheduler": "greedy", **body}, format="json")


def test_a_run_keeps_its_metadata_and_answers_it(api: Any, alice: Any, make_workflow: Any) -> None:
    response = _launch(api, make_workflow(alice), repeats=2, **META)
    assert response.status_code == 201, response.json()
    for run_id in response.json()["ids"]:
        body = api.get(f"/api/v1/runs/{run_id}/").json()
        assert {k: body[k] for k in META} == {**META, "commit": "abcdef1234"}
    run = Run.objects.get(pk=response.json()["id"])
    assert run.tag_names == ["nightly", "gpu-a"] and run.branch == "feature/gate"


def test_a_run_without_metadata_has_empty_fields(api: Any, alice: Any, make_workflow: Any) -> None:
    body = api.get(f"/api/v1/runs/{_launch(api, make_workflow(alice)).json()['id']}/").json()
    assert (body["commit"], body["branch"], body["ci_url"], body["tags"], body["notes"]) == (
        "",
        "",
        "",
        [],
        "",
    )


def test_bad_metadata_is_a_400_naming_each_field_and_nothing_is_queued(
    api: Any, alice: Any, make_workflow: Any
) -> None:
    response = _launch(
        api,
        make_workflow(alice),
        commit="not-hex",
        ci_url="javascript:alert(1)",
        tags=["ok", "bad tag"],
        notes="x" * 2001,
    )
    assert response.status_code == 400
    fields = {e["field"]: e["message"] for e in response.json()["errors"]}
    assert set(fields) == {"commit", "ci_url", "tags", "notes"}
    assert "http:// or https://" in fields["ci_url"] and "'bad tag'" in fields["tags"]
    assert Run.objects.count() == 0


def test_runs_filter_by_commit_prefix_branch_tag_and_search(api: Any, alice: Any, make_workflow: Any) -> None:
    workflow = make_workflow(alice)
    a = _launch(api, workflow, **META).json()["id"]
    b = _launch(api, workflow, commit="1234abcd", branch="main", tags=["release"], notes="baseline").json()[
        "id"
    ]

    def ids(query: str) -> list[int]:
        response = api.get(f"/api/v1/runs/?{query}")
        assert response.status_code == 200, response.json()
        return [r["id"] for r in response.json()["results"]]

    assert ids("commit=abcd") == [a] and ids("commit=ABCDEF1234") == [a]
    assert ids("branch=main") == [b] and ids("branch=feature/gate") == [a]
    assert ids("tag=nightly") == [a] and ids("tag=release") == [b] and ids("tag=night") == []
    assert ids("search=DRIVER") == [a] and ids("search=baseline+release") == [b]
    assert ids("search=gate") == [a] and ids("search=1234") == [b]
    assert api.get("/api/v1/runs/?commit=zz").status_code == 400


def test_the_requests_of_a_run_come_in_bounded_pages(
    api: Any, alice: Any, make_workflow: Any, make_run: Any
) -> None:
    run = make_run(make_workflow(alice), alice)  # sleep1: 3 requests, sleep2: 2
    run_execute(run_id=run.pk, worker="test")
    page = api.get(f"/api/v1/runs/{run.pk}/requests/?limit=2").json()
    assert page["count"] == 5 and len(page["results"]) == 2 and page["next"]
    first = page["results"][0]
    assert (first["application"], first["type"], first["index"], first["status"]) == (
        "first",
        "Sleep",
        0,
        "ok",
    )
    assert first["metrics"]["e2e"] > 0.04
    rows = api.get(f"/api/v1/runs/{run.pk}/requests/?application=second").json()["results"]
    assert [r["application"] for r in rows] == ["second", "second"]
    assert api.get(f"/api/v1/runs/{run.pk}/requests/?limit=5000").status_code == 400
    assert api.get("/api/v1/runs/999999/requests/").status_code == 404


@pytest.mark.django_db(transaction=True)
def test_the_client_reads_every_page_of_a_runs_requests(
    live_server: Any, alice: Any, make_workflow: Any, make_token: Any
) -> None:
    # run_create, not run_launch: in a transactional test a launch would also hand the run to the
    # local executor at once, which would race this test's own execution of it.
    (run,) = run_create(version=version_latest(workflow=make_workflow(alice)), user=alice)
    run_execute(run_id=run.pk, worker="test")
    assert Run.objects.get(pk=run.pk).status == "succeeded"
    rows = Client(live_server.url, make_token(alice)).run_requests(run.pk, page_size=2)
    assert [(r["application"], r["index"]) for r in rows] == [
        ("first", 0),
        ("first", 1),
        ("first", 2),
        ("second", 0),
        ("second", 1),
    ]
