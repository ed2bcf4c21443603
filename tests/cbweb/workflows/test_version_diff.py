"""Two versions of a workflow compared: changed fields by unit and node, and the unified YAML diff."""

from __future__ import annotations

from typing import Any

from django.test import Client

from cbweb.workflows.selectors import SpecChange, version_diff
from cbweb.workflows.services import workflow_update
from tests.cbweb.conftest import SLEEP_YAML

V2 = (
    SLEEP_YAML.replace("sleep_time: 0.05\n  num_requests: 2", "sleep_time: 0.2\n  num_requests: 2")
    .replace("  first:\n    uses: sleep1", "  start:\n    uses: sleep1")
    .replace("depend_on: [first]", "depend_on: [start]")
)


def test_the_diff_names_each_changed_field_of_units_and_nodes(alice: Any, make_workflow: Any) -> None:
    workflow = make_workflow(alice)
    workflow_update(workflow=workflow, user=alice, yaml_text=V2)
    diff = version_diff(workflow=workflow, old=1, new=2)
    assert SpecChange("unit 'sleep2'", "sleep_time", "changed", "0.05", "0.2") in diff.changes
    assert SpecChange("node 'second'", "depend_on", "changed", "[first]", "[start]") in diff.changes
    whole = {(c.where, c.kind) for c in diff.changes if not c.field}
    assert whole == {("node 'first'", "removed"), ("node 'start'", "added")}
    assert not [c for c in diff.changes if c.where == "unit 'sleep1'"]
    assert diff.unified[:2] == ["--- v1", "+++ v2"]
    assert "+  start:" in diff.unified and "-  first:" in diff.unified


def test_the_diff_page_compares_the_latest_two_versions_and_refuses_unknown_ones(
    alice: Any, make_workflow: Any
) -> None:
    workflow = make_workflow(alice)
    client = Client()
    client.force_login(alice)
    alone = client.get(f"/workflows/{workflow.pk}/diff/")
    assert alone.status_code == 200 and alone.context["diff"] is None
    assert b"one version" in alone.content
    workflow_update(workflow=workflow, user=alice, yaml_text=V2)
    page = client.get(f"/workflows/{workflow.pk}/diff/")
    assert page.status_code == 200
    assert (page.context["diff"].old.number, page.context["diff"].new.number) == (1, 2)
    detail = client.get(f"/workflows/{workflow.pk}/").content.decode()
    assert f'href="/workflows/{workflow.pk}/diff/?old=1&amp;new=2"' in detail
    for bad in ("old=1&new=9", "old=x&new=2", "old=1&new=%00"):
        refused = client.get(f"/workflows/{workflow.pk}/diff/?{bad}")
        assert refused.status_code == 400, bad
        assert b"Select a valid choice" in refused.content
    assert client.get("/workflows/999999/diff/").status_code == 404


def test_the_diff_of_a_version_with_itself_has_no_changes(alice: Any, make_workflow: Any) -> None:
    workflow = make_workflow(alice)
    diff = version_diff(workflow=workflow, old=1, new=1)
    assert diff.changes == [] and diff.unified == []
