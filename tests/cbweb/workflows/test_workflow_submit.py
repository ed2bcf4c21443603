"""Workflows stored by name per owner, as `consumerbench submit` stores them."""

from __future__ import annotations

from typing import Any

import pytest

from benchmarks.spec.model import WorkflowValidationError
from cbweb.workflows.models import Workflow
from cbweb.workflows.services import workflow_submit

NAMED = "name: nightly-sleep\nnap:\n  type: Sleep\n  sleep_time: 0.01\n  num_requests: 2\n"


def test_the_same_file_twice_is_one_workflow_with_one_version(alice: Any) -> None:
    wf, v1, created, added = workflow_submit(owner=alice, yaml_text=NAMED, default_name="file-stem")
    assert (wf.name, v1.number, created, added) == ("nightly-sleep", 1, True, False)
    again, same, created, added = workflow_submit(owner=alice, yaml_text=NAMED, default_name="file-stem")
    assert (again.pk, same.pk, created, added) == (wf.pk, v1.pk, False, False)
    # A change of the spec adds a version to the same workflow.
    changed, v2, created, added = workflow_submit(
        owner=alice, yaml_text=NAMED.replace("0.01", "0.03"), default_name="file-stem"
    )
    assert (changed.pk, v2.number, created, added) == (wf.pk, 2, False, True)
    assert Workflow.objects.count() == 1


def test_the_name_is_explicit_else_the_files_else_the_default(alice: Any) -> None:
    unnamed = NAMED.split("\n", 1)[1]
    assert workflow_submit(owner=alice, yaml_text=unnamed, default_name="ci-file")[0].name == "ci-file"
    assert workflow_submit(owner=alice, yaml_text=NAMED, name="override")[0].name == "override"
    tasks = "my-tasks:\n  tasks:\n    - {type: Sleep, sleep_time: 0.01}\n"
    assert workflow_submit(owner=alice, yaml_text=tasks, default_name="x")[0].name == "my-tasks"


def test_owners_and_archived_workflows_are_kept_apart(alice: Any, bob: Any) -> None:
    mine = workflow_submit(owner=alice, yaml_text=NAMED)[0]
    theirs = workflow_submit(owner=bob, yaml_text=NAMED)[0]
    assert mine.pk != theirs.pk
    mine.archived = True
    mine.save()
    assert workflow_submit(owner=alice, yaml_text=NAMED)[0].pk not in (mine.pk, theirs.pk)


def test_an_overlong_name_in_the_file_is_refused(alice: Any) -> None:
    with pytest.raises(WorkflowValidationError) as info:
        workflow_submit(owner=alice, yaml_text=NAMED.replace("nightly-sleep", "n" * 201))
    assert info.value.errors[0].loc == ("name",) and Workflow.objects.count() == 0


def test_the_submit_api_answers_201_then_200_with_what_it_did(api: Any) -> None:
    first = api.post("/api/v1/workflows/submit/", {"yaml": NAMED, "default_name": "f"}, format="json")
    assert first.status_code == 201, first.json()
    assert (first.json()["name"], first.json()["workflow_created"], first.json()["version"]) == (
        "nightly-sleep",
        True,
        1,
    )
    second = api.post("/api/v1/workflows/submit/", {"yaml": NAMED}, format="json")
    assert second.status_code == 200 and second.json()["id"] == first.json()["id"]
    assert (second.json()["workflow_created"], second.json()["version_created"]) == (False, False)
    bad = api.post(
        "/api/v1/workflows/submit/", {"yaml": "a:\n  type: Sleep\n  sleep_tme: 1\n"}, format="json"
    )
    assert bad.status_code == 400 and bad.json()["errors"][0]["line"] == 3


@pytest.mark.django_db(transaction=True)
def test_first_submits_of_one_name_at_the_same_moment_make_one_workflow(alice: Any) -> None:
    import threading

    from django.db import connection

    if connection.vendor != "postgresql":
        pytest.skip("threads cannot share SQLite's in-memory test database; make test runs it on PostgreSQL")
    barrier = threading.Barrier(4)
    created: list[bool] = []

    def submit() -> None:
        try:
            barrier.wait()
            created.append(workflow_submit(owner=alice, yaml_text=NAMED, default_name="x")[2])
        finally:
            connection.close()

    threads = [threading.Thread(target=submit) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(created) == [False, False, False, True]
    assert Workflow.objects.filter(owner=alice, name="nightly-sleep").count() == 1
    assert Workflow.objects.get(owner=alice).versions.count() == 1
