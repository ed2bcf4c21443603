from __future__ import annotations

from typing import Any

import pytest
from django.core.exceptions import PermissionDenied

from benchmarks.spec.load import load_yaml
from benchmarks.spec.model import WorkflowValidationError
from cbweb.workflows.models import Workflow, WorkflowVersion
from cbweb.workflows.selectors import version_latest, version_workflow, workflow_list
from cbweb.workflows.services import workflow_archive, workflow_create, workflow_delete, workflow_update

TASK_LIST = """\
content:
  tasks:
    - type: Sleep
      sleep_time: 0.01
    - type: Synthetic
      steps: 2
      depends_on: [Sleep]
"""


def test_create_stores_the_engines_canonical_spec_as_version_1(alice: Any) -> None:
    from tests.cbweb.conftest import SLEEP_YAML

    workflow = workflow_create(owner=alice, name="sleepy", yaml_text=SLEEP_YAML)
    version = version_latest(workflow=workflow)
    assert version.number == 1
    assert version_workflow(version=version) == load_yaml(SLEEP_YAML, name="sleepy")
    assert load_yaml(version.yaml) == load_yaml(SLEEP_YAML, name="sleepy")


def test_task_list_dialect_is_normalised_and_named_after_the_record(alice: Any) -> None:
    workflow = workflow_create(owner=alice, name="my content", yaml_text=TASK_LIST)
    spec = version_latest(workflow=workflow).spec
    assert spec["name"] == "my content"
    assert spec["workflows"]["synthetic"]["depend_on"] == ["sleep"]


def test_invalid_yaml_writes_nothing_and_reports_lines(alice: Any) -> None:
    with pytest.raises(WorkflowValidationError) as info:
        workflow_create(owner=alice, name="bad", yaml_text="a:\n  type: Sleep\n  sleep_tim: 1\n")
    assert [(e.line, e.path) for e in info.value.errors] == [(3, "a.sleep_tim")]
    assert not Workflow.objects.exists()


def test_a_duplicate_key_and_a_refused_file_are_reported_with_the_other_problems_at_their_lines(
    alice: Any,
) -> None:
    text = (
        "a:\n  type: Sleep\n  type: Sleep\n  num_requests: 0\n"
        "b:\n  type: Sleep\n  arrival: {kind: trace, trace: /etc/hostname}\n"
    )
    with pytest.raises(WorkflowValidationError) as info:
        workflow_create(owner=alice, name="bad", yaml_text=text)
    assert [(e.line, e.path) for e in info.value.errors] == [
        (3, "a.type"),
        (4, "a.num_requests"),
        (7, "b.arrival.trace"),
    ], info.value.errors
    assert not Workflow.objects.exists()


def test_update_adds_a_version_and_keeps_the_old_one(alice: Any, make_workflow: Any) -> None:
    workflow = make_workflow(alice)
    v2 = workflow_update(workflow=workflow, user=alice, yaml_text="only:\n  type: Sleep\n  sleep_time: 0.2\n")
    assert v2.number == 2
    v1 = WorkflowVersion.objects.get(workflow=workflow, number=1)
    assert set(v1.spec["workflows"]) == {"first", "second"}
    assert set(v2.spec["workflows"]) == {"only"}


def test_another_user_cannot_update_or_delete_but_staff_can(
    alice: Any, bob: Any, make_user: Any, make_workflow: Any
) -> None:
    workflow = make_workflow(alice)
    with pytest.raises(PermissionDenied):
        workflow_update(workflow=workflow, user=bob, yaml_text="x:\n  type: Sleep\n")
    with pytest.raises(PermissionDenied):
        workflow_delete(workflow=workflow, user=bob)
    staff = make_user("root", staff=True)
    assert workflow_update(workflow=workflow, user=staff, yaml_text="x:\n  type: Sleep\n").number == 2


def test_delete_keeps_everyones_runs_with_the_spec_they_ran(
    alice: Any, bob: Any, make_workflow: Any, make_run: Any
) -> None:
    from cbweb.runs.models import Run

    workflow = make_workflow(alice)
    spec = workflow.versions.get().spec
    run = make_run(workflow, bob)
    workflow_delete(workflow=workflow, user=alice)
    assert not Workflow.objects.filter(pk=workflow.pk).exists()
    assert not WorkflowVersion.objects.filter(workflow_id=workflow.pk).exists()
    run = Run.objects.get(pk=run.pk)
    assert run.workflow_version is None
    assert (run.workflow_name, run.version_number, run.spec) == ("sleepy", 1, spec)
    assert "sleep1:" in run.yaml


def test_archived_workflows_leave_the_list_and_cannot_be_launched(
    alice: Any, bob: Any, make_workflow: Any, make_run: Any
) -> None:
    from django.core.exceptions import ValidationError

    workflow = make_workflow(alice, name="old")
    make_workflow(alice, name="new")
    with pytest.raises(PermissionDenied):
        workflow_archive(workflow=workflow, user=bob)
    workflow_archive(workflow=workflow, user=alice)
    assert [w.name for w in workflow_list()] == ["new"]
    assert [w.name for w in workflow_list(archived=True)] == ["old"]
    with pytest.raises(ValidationError, match="archived"):
        make_run(workflow, bob)
    workflow_archive(workflow=workflow, user=alice, archived=False)
    assert make_run(workflow, bob).status == "queued"


def test_list_annotates_latest_version_and_filters_by_name(alice: Any, make_workflow: Any) -> None:
    make_workflow(alice, name="alpha")
    beta = make_workflow(alice, name="beta")
    workflow_update(workflow=beta, user=alice, yaml_text="x:\n  type: Sleep\n")
    rows = {w.name: w.latest_version for w in workflow_list()}
    assert rows == {"alpha": 1, "beta": 2}
    assert [w.name for w in workflow_list(search="ALP")] == ["alpha"]


def test_an_owners_active_workflows_have_distinct_names(alice: Any, bob: Any, make_workflow: Any) -> None:
    from cbweb.workflows.services import WorkflowNameTaken

    first = make_workflow(alice, name="nightly")
    with pytest.raises(WorkflowNameTaken, match=rf"named 'nightly' \(#{first.pk}\)") as info:
        make_workflow(alice, name=" nightly ")
    assert info.value.existing == first and [e.path for e in info.value.errors] == ["name"]
    make_workflow(bob, name="nightly")  # another owner's name is another name
    other = make_workflow(alice, name="weekly")
    with pytest.raises(WorkflowNameTaken):
        workflow_update(workflow=other, user=alice, name="nightly", yaml_text="b: {type: Sleep}\n")
    assert Workflow.objects.get(pk=other.pk).name == "weekly" and other.versions.count() == 1
    # A new version under its own name is no clash.
    workflow_update(workflow=other, user=alice, yaml_text="b: {type: Sleep}\n")
    # An archived workflow frees its name; restoring it while the name is taken is refused.
    workflow_archive(workflow=first, user=alice)
    again = make_workflow(alice, name="nightly")
    with pytest.raises(WorkflowNameTaken, match=rf"\(#{again.pk}\)"):
        workflow_archive(workflow=first, user=alice, archived=False)
    assert Workflow.objects.get(pk=first.pk).archived
    assert Workflow.objects.filter(owner=alice, name="nightly").count() == 2


def test_the_database_refuses_two_active_workflows_of_one_name(alice: Any, make_workflow: Any) -> None:
    from django.db import IntegrityError, transaction

    make_workflow(alice, name="nightly")
    Workflow.objects.create(owner=alice, name="nightly", archived=True)
    with pytest.raises(IntegrityError), transaction.atomic():
        Workflow.objects.create(owner=alice, name="nightly")
