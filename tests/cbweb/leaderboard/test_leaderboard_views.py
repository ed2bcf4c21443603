from __future__ import annotations

from typing import Any

from tests.cbweb.leaderboard.test_leaderboard_selectors import finish, launch, platform


def test_the_page_shows_the_busiest_workflow_first_with_its_methodology(
    client: Any, alice: Any, make_workflow: Any
) -> None:
    quiet, busy = make_workflow(alice, name="quiet"), make_workflow(alice, name="busy")
    box = platform("box")
    finish(launch(quiet, alice)[0], box, 0.1)
    for run in launch(busy, alice, 3):
        finish(run, box, 1.0)
    response = client.get("/leaderboard/")
    page = response.content.decode()
    assert response.status_code == 200
    assert f'<option value="{busy.pk}" selected>' in page
    assert '100.0 % <span class="ci"' in page and "(all 3 runs equal)" in page
    assert 'id="methodology"' in page and "Student&#x27;s t" not in page and "Student's t" in page
    other = client.get(f"/leaderboard/?workflow={quiet.pk}").content.decode()
    assert '10.0 % <span class="ci-note">(n=1, no CI)</span>' in other


def test_the_page_shows_no_slos_and_not_measured_energy(client: Any, alice: Any, make_workflow: Any) -> None:
    workflow = make_workflow(alice)
    finish(launch(workflow, alice)[0], platform("box"), None, telemetry=None)
    page = client.get(f"/leaderboard/?workflow={workflow.pk}").content.decode()
    assert "no SLOs" in page and page.count("not measured") >= 2 and "unranked" in page


def test_bad_filters_are_a_400_that_names_the_field(client: Any, alice: Any, make_workflow: Any) -> None:
    workflow = make_workflow(alice)
    finish(launch(workflow, alice)[0], platform("box"), 0.5)
    for query, field in (
        ("workflow=999999", "workflow"),
        ("workflow=abc", "workflow"),
        (f"workflow={workflow.pk}&since=2026-02-30", "since"),
        (f"workflow={workflow.pk}&since=2026-03-02&until=2026-03-01", "until"),
        (f"workflow={workflow.pk}&sort=owner", "sort"),
        (f"workflow={workflow.pk}&scheduler=nope", "scheduler"),
    ):
        response = client.get(f"/leaderboard/?{query}")
        assert response.status_code == 400, query
        assert f"<li>{field}: " in response.content.decode(), query
    assert (
        "no workflow with a succeeded run has this id"
        in client.get("/leaderboard/?workflow=999999").content.decode()
    )


def test_an_empty_leaderboard_says_so(client: Any, db: Any) -> None:
    response = client.get("/leaderboard/")
    assert response.status_code == 200 and "No succeeded runs yet" in response.content.decode()
