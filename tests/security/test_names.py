"""Issue 17's name attacks, end to end: unit and node names are identifiers in every dialect, and a
run's files stay inside its own folder, one file per name."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from django.test import Client

from cbweb.runs.execution import run_execute
from cbweb.runs.models import Run
from cbweb.runs.services import run_spec_fields
from cbweb.workflows.models import Workflow, WorkflowVersion

RULE = (
    "is not an identifier: use letters, digits, '_' and '-', starting with a letter or digit, "
    "at most 64 characters"
)
# A tiny ImageGen unit's keys, indented for a task of a task list.
IMAGEGEN = (
    "type: ImageGen\n    model: sd-tiny@random\n    steps: 2\n    height: 64\n    width: 64\n    device: cpu"
)


def post(api: Any, **body: Any) -> Any:
    return api.post("/api/v1/workflows/", {"name": "names", **body}, format="json")


def errors_of(response: Any) -> list[tuple[str, str]]:
    assert response.status_code == 400, response.content
    return [(e["field"], e["message"]) for e in response.json()["errors"]]


def test_an_imagegen_node_named_dotdot_is_a_400_in_every_dialect(api: Any) -> None:
    unit = IMAGEGEN.replace("\n    ", "\n  ")
    native = f"img:\n  {unit}\nworkflows:\n  ../../x:\n    uses: img\n"
    assert errors_of(post(api, yaml=native)) == [('workflows."../../x"', f'node name "../../x" {RULE}')]
    task_list = f"wf:\n  tasks:\n  - name: ../../x\n    {IMAGEGEN}\n"
    assert errors_of(post(api, yaml=task_list)) == [("wf.tasks[0].name", f'task name "../../x" {RULE}')]
    as_json = {"../../x": {"type": "ImageGen", "model": "sd-tiny@random"}}
    assert errors_of(post(api, spec=as_json)) == [('"../../x"', f'unit name "../../x" {RULE}')]
    assert Workflow.objects.count() == 0


def test_two_non_ascii_names_are_each_refused_with_their_path(api: Any) -> None:
    # The old bundle writer turned both into "caf_.csv": one overwrote the other.
    text = "café: {type: Sleep}\ncafè: {type: Sleep}\n"
    assert errors_of(post(api, yaml=text)) == [
        ('"café"', f'unit name "café" {RULE}'),
        ('"cafè"', f'unit name "cafè" {RULE}'),
    ]


@pytest.mark.parametrize("name", ["-rf", "_hidden", "a b", "a.csv", "x" * 65, "名前", "a/b", ""])
def test_names_outside_the_rule_are_refused(api: Any, name: str) -> None:
    [(field, message)] = errors_of(
        post(api, spec={"ok": {"type": "Sleep"}, "workflows": {name: {"uses": "ok"}}})
    )
    assert field.startswith("workflows") and RULE in message


def test_names_that_differ_only_in_case_are_refused(api: Any) -> None:
    [(field, message)] = errors_of(post(api, yaml="Chat: {type: Sleep}\nchat: {type: Sleep}\n"))
    assert field == "chat" and "differ only in case" in message


def test_the_editor_refuses_a_node_name_that_is_not_an_identifier(alice: Any) -> None:
    from benchmarks.spec.load import load_yaml
    from cbweb.workflows.editor import workflow_to_editor
    from cbweb.workflows.forms import build_editor
    from tests.cbweb.workflows.test_editor import post_data

    browser = Client()
    browser.force_login(alice)
    meta_initial, cards = workflow_to_editor(load_yaml("img: {type: Sleep}\n"))
    cards[0]["node"] = "../../x"
    meta, formset = build_editor(meta_initial=meta_initial, cards_initial=cards)
    saved = browser.post("/workflows/new/", post_data(meta, formset))
    assert saved.status_code == 400
    shown = [
        *saved.context["general_errors"],
        *(e for f in saved.context["formset"].forms for e in f.non_field_errors()),
    ]
    assert any('"../../x" is not an identifier' in e for e in shown), shown
    assert Workflow.objects.count() == 0


def test_a_stored_workflow_with_a_bad_name_is_neither_launched_nor_run(
    api: Any, alice: Any, settings: Any, tmp_path: Path
) -> None:
    settings.CB_RESULTS_DIR = tmp_path / "results"
    spec = {"name": "old", "img": {"type": "Sleep"}, "workflows": {"../../x": {"uses": "img"}}}
    workflow = Workflow.objects.create(name="old", owner=alice)
    version = WorkflowVersion.objects.create(
        workflow=workflow, number=1, spec=spec, yaml="", created_by=alice
    )
    response = api.post("/api/v1/runs/", {"workflow": workflow.pk}, format="json")
    assert response.status_code == 400 and RULE in response.json()["errors"][0]["message"]
    run = Run.objects.create(**run_spec_fields(version=version), owner=alice, scheduler="greedy")
    assert run_execute(run_id=run.pk, worker="test") == "failed"
    assert RULE in Run.objects.get(pk=run.pk).error
    assert not any(tmp_path.rglob("*.csv")) and not any(tmp_path.rglob("*.png"))


def test_every_node_gets_its_own_csv_inside_the_run_folder(
    api: Any, alice: Any, settings: Any, tmp_path: Path
) -> None:
    settings.CB_RESULTS_DIR = tmp_path / "results"
    text = "".join(f"{name}: {{type: Sleep, sleep_time: 0}}\n" for name in ("a-1", "a_1", "A2"))
    assert post(api, yaml=text).status_code == 201
    run = api.post("/api/v1/runs/", {"workflow": Workflow.objects.get().pk}, format="json").json()
    assert run_execute(run_id=run["id"], worker="test") == "succeeded"
    folder = tmp_path / "results" / f"run-{run['id']}"
    assert sorted(p.name for p in folder.glob("*.csv")) == ["A2.csv", "a-1.csv", "a_1.csv"]
    assert all(p.is_relative_to(folder) for p in tmp_path.rglob("*") if p.is_file())


@pytest.mark.models
def test_imagegen_writes_its_images_inside_the_run_folder_and_records_their_names(
    api: Any, alice: Any, settings: Any, tmp_path: Path
) -> None:
    settings.CB_RESULTS_DIR = tmp_path / "results"
    text = f"wf:\n  tasks:\n  - name: img-1\n    num_requests: 2\n    {IMAGEGEN}\n"
    assert post(api, yaml=text).status_code == 201
    run = api.post("/api/v1/runs/", {"workflow": Workflow.objects.get().pk}, format="json").json()
    assert run_execute(run_id=run["id"], worker="test") == "succeeded"
    folder = tmp_path / "results" / f"run-{run['id']}"
    images = sorted(p.relative_to(folder).as_posix() for p in tmp_path.rglob("*.png"))
    assert images == ["artifacts/img-1/image-0000.png", "artifacts/img-1/image-0001.png"]
    result = api.get(f"/api/v1/runs/{run['id']}/result/").json()
    assert [r["info"]["image"] for r in result["applications"][0]["requests"]] == [
        "image-0000.png",
        "image-0001.png",
    ]
    assert str(tmp_path) not in json.dumps(result)


def test_editing_a_workflow_stored_with_a_bad_name_shows_why_instead_of_failing(alice: Any) -> None:
    spec = {"name": "old", "a b": {"type": "Sleep"}}
    workflow = Workflow.objects.create(name="old", owner=alice)
    WorkflowVersion.objects.create(workflow=workflow, number=1, spec=spec, yaml="", created_by=alice)
    browser = Client()
    browser.force_login(alice)
    page = browser.get(f"/workflows/{workflow.pk}/edit/")
    assert page.status_code == 200
    assert page.context["general_errors"] == ["version 1 no longer validates: fix its YAML and import it"]
    assert 'unit name "a b" is not an identifier' in page.context["import_errors"][0]["message"]
