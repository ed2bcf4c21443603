from __future__ import annotations

from typing import Any

from tests.cbweb.leaderboard.test_leaderboard_selectors import finish, launch, platform


def test_the_leaderboard_endpoint_answers_the_pages_rows(api: Any, alice: Any, make_workflow: Any) -> None:
    workflow = make_workflow(alice)
    box = platform("box")
    for run in launch(workflow, alice, 2):
        finish(run, box, 0.5, telemetry={"gpu_energy_per_request_j": 3.0, "cpu_energy_per_request_j": None})
    response = api.get(f"/api/v1/leaderboard/?workflow={workflow.pk}")
    assert response.status_code == 200
    body = response.json()
    assert body["workflow"] == workflow.pk and body["versions"] == [1]
    (row,) = body["rows"]
    assert row["rank"] == 1 and row["runs"] == 2 and row["scheduler_label"] == "greedy"
    assert row["attainment"] == {"n": 2, "mean": 0.5, "low": None, "high": None, "note": "n=2, no CI"}
    assert row["gpu_energy_per_request"]["mean"] == 3.0 and row["cpu_energy_per_request"] is None


def test_the_leaderboard_endpoint_checks_its_parameters(api: Any, alice: Any, make_workflow: Any) -> None:
    workflow = make_workflow(alice)
    assert api.get("/api/v1/leaderboard/").status_code == 400
    assert api.get("/api/v1/leaderboard/?workflow=999999").status_code == 404
    bad = api.get(f"/api/v1/leaderboard/?workflow={workflow.pk}&since=2026-03-02&until=2026-03-01")
    assert bad.status_code == 400 and "until" in str(bad.json())
    assert api.get(f"/api/v1/leaderboard/?workflow={workflow.pk}&sort=nope").status_code == 400
    assert api.get(f"/api/v1/leaderboard/?workflow={workflow.pk}").json()["rows"] == []
