"""Run metadata on the pages: the launch form's fields, the run page, the runs list's filters."""

from __future__ import annotations

from typing import Any

from django.test import Client

from cbweb.runs.models import Run


def _client(user: Any) -> Client:
    client = Client()
    client.force_login(user)
    return client


def _launch(client: Client, workflow: Any, **meta: str) -> Any:
    version = workflow.versions.get().pk
    return client.post(
        f"/runs/launch/{workflow.pk}/", {"version": version, "scheduler": "greedy", "repeats": 1, **meta}
    )


def test_the_launch_form_stores_metadata_and_the_run_page_shows_it(alice: Any, make_workflow: Any) -> None:
    client = _client(alice)
    workflow = make_workflow(alice)
    form = client.get(f"/runs/launch/{workflow.pk}/").content.decode()
    for field in ("commit", "branch", "ci_url", "tags", "notes"):
        assert f'name="{field}"' in form
    response = _launch(
        client,
        workflow,
        commit="0123abcd",
        branch="main",
        ci_url="https://ci.example.org/1",
        tags="nightly, gpu-a  v2",
        notes="first <b>try</b>",
    )
    run = Run.objects.get()
    assert response.status_code == 302 and run.tag_names == ["nightly", "gpu-a", "v2"]
    page = client.get(f"/runs/{run.pk}/").content.decode()
    assert 'id="run-commit"' in page and "0123abcd" in page and "?branch=main" in page
    assert 'href="https://ci.example.org/1"' in page and "?tag=gpu-a" in page
    assert "first &lt;b&gt;try&lt;/b&gt;" in page  # notes are text, never markup


def test_bad_metadata_in_the_launch_form_is_shown_at_its_field(alice: Any, make_workflow: Any) -> None:
    response = _launch(_client(alice), make_workflow(alice), ci_url="ftp://x/y", tags="ok bad!tag")
    assert response.status_code == 400 and Run.objects.count() == 0
    form = response.context["form"]
    assert "http:// or https://" in form.errors["ci_url"][0] and "'bad!tag'" in form.errors["tags"][0]


def test_the_runs_list_filters_by_branch_tag_commit_and_search(alice: Any, make_workflow: Any) -> None:
    client = _client(alice)
    workflow = make_workflow(alice)
    _launch(client, workflow, branch="main", tags="nightly", commit="aaaa1111", notes="driver 550")
    _launch(client, workflow, branch="dev", tags="pr", commit="bbbb2222")
    first, second = Run.objects.order_by("pk")

    def listed(query: str) -> set[int]:
        response = client.get(f"/runs/?{query}")
        assert response.status_code == 200
        return {r.pk for r in response.context["runs"]}

    assert listed("branch=main") == {first.pk} and listed("tag=pr") == {second.pk}
    assert listed("commit=BBBB") == {second.pk} and listed("search=driver") == {first.pk}
    assert listed("search=nothing-like-it") == set() and listed("") == {first.pk, second.pk}
    assert "aaaa1111" in client.get("/runs/").content.decode()  # the commit under the workflow


def test_the_admin_shows_metadata_read_only_and_searches_it(make_user: Any, make_workflow: Any) -> None:
    staff = make_user("root", staff=True)
    staff.is_superuser = True
    staff.save()
    client = _client(staff)
    _launch(client, make_workflow(staff), commit="abcd1234", ci_url="https://ci/1")
    run = Run.objects.get()
    page = client.get(f"/admin/runs/run/{run.pk}/change/").content.decode()
    assert "https://ci/1" in page and 'name="ci_url"' not in page  # shown, not editable
    assert str(run.pk) in client.get("/admin/runs/run/?q=abcd1234").content.decode()
