"""A workflow's history: points per launch or per commit, CIs over repeated runs, regressions found
by the regression gate's comparison of each run with the one before it."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

from cbweb.runs.execution import run_execute
from cbweb.runs.selectors import run_history
from cbweb.runs.services import run_create
from cbweb.workflows.selectors import version_latest
from cbweb.workflows.services import workflow_update

NAP = "nap:\n  type: Sleep\n  sleep_time: {t}\n  num_requests: 8\n  slo: ['e2e<=1s']\n"


def _run(workflow: Any, user: Any, repeats: int = 1, **meta: Any) -> list[Any]:
    # Created and executed here (run_create hands nothing to an executor).
    runs = run_create(version=version_latest(workflow=workflow), user=user, repeats=repeats, meta=meta)
    for run in runs:
        run_execute(run_id=run.pk, worker="test")
    return runs


@pytest.fixture
def history(alice: Any, make_workflow: Any) -> tuple[Any, list[Any]]:
    workflow = make_workflow(alice, yaml_text=NAP.format(t=0.02))
    runs = _run(workflow, alice, commit="aaaa1111")
    runs += _run(workflow, alice, repeats=2, commit="aaaa1111")
    workflow_update(workflow=workflow, user=alice, yaml_text=NAP.format(t=0.06))
    runs += _run(workflow, alice, commit="bbbb2222")
    return workflow, runs


def test_time_order_has_a_point_per_launch_and_marks_the_slower_run(history: tuple[Any, list[Any]]) -> None:
    workflow, runs = history
    out = run_history(workflow_id=workflow.pk)
    assert [p["runs"] for p in out["points"]] == [[runs[0].pk], [runs[1].pk, runs[2].pk], [runs[3].pk]]
    assert out["applications"] == {"nap": {"type": "Sleep", "slo": True, "metrics": ["e2e"]}}
    assert [c["figure"] for c in out["columns"]] == ["attainment", "e2e p50", "e2e p99"]
    repeated = out["points"][1]["applications"]["nap"]["e2e p50"]
    assert (
        repeated["n"] == 2
        and repeated["mean"] == pytest.approx(0.02, rel=0.2)
        # The t interval of two runs, cut at 0: a latency is never negative.
        and 0 <= repeated["low"] <= repeated["mean"] <= repeated["high"]
    )
    attainment = out["points"][0]["applications"]["nap"]["attainment"]
    assert attainment == {"mean": 1.0, "low": None, "high": None, "n": 1}
    assert [p["regressions"] for p in out["points"][:2]] == [[], []]
    (regression,) = out["points"][2]["regressions"]
    assert (regression["run"], regression["against"]) == (runs[3].pk, runs[2].pk)
    assert (regression["application"], regression["metric"]) == ("nap", "e2e")
    assert regression["ratio"] == pytest.approx(3, rel=0.2) and regression["p_value"] < 0.01


def test_commit_order_pools_the_runs_of_a_commit(history: tuple[Any, list[Any]]) -> None:
    workflow = history[0]
    out = run_history(workflow_id=workflow.pk, order="commit")
    assert [(p["label"], len(p["runs"])) for p in out["points"]] == [("aaaa1111", 3), ("bbbb2222", 1)]
    assert out["points"][0]["applications"]["nap"]["e2e p50"]["n"] == 3
    assert out["points"][1]["regressions"][0]["metric"] == "e2e"
    with pytest.raises(ValueError):
        run_history(workflow_id=workflow.pk, order="size")


def test_the_history_page_shows_the_table_and_a_missing_workflow_is_404(
    alice: Any, history: tuple[Any, list[Any]]
) -> None:
    workflow = history[0]
    client = Client()
    client.force_login(alice)
    page = client.get(f"/runs/history/{workflow.pk}/?order=nonsense")
    assert page.status_code == 200 and page.context["order"] == "time"
    html = page.content.decode()
    assert 'id="history-table"' in html and "▲ nap e2e" in html and 'id="history-data"' in html
    assert client.get("/runs/history/999999/").status_code == 404
    assert f'href="/runs/history/{workflow.pk}/"' in client.get(f"/workflows/{workflow.pk}/").content.decode()


def test_a_workflow_without_succeeded_runs_says_so(alice: Any, make_workflow: Any) -> None:
    workflow = make_workflow(alice)
    client = Client()
    client.force_login(alice)
    html = client.get(f"/runs/history/{workflow.pk}/").content.decode()
    assert 'id="no-history"' in html and "history-data" not in html


def test_a_run_under_another_scheduler_is_not_compared_with_the_previous_configuration(
    alice: Any, make_workflow: Any
) -> None:
    workflow = make_workflow(alice, yaml_text=NAP.format(t=0.02))
    greedy = _run(workflow, alice)
    workflow_update(workflow=workflow, user=alice, yaml_text=NAP.format(t=0.06))
    (credit,) = run_create(version=version_latest(workflow=workflow), user=alice, scheduler="credit")
    run_execute(run_id=credit.pk, worker="test")
    later = _run(workflow, alice)  # greedy again, three times slower than the first greedy run
    out = run_history(workflow_id=workflow.pk)
    assert [p["runs"] for p in out["points"]] == [[greedy[0].pk], [credit.pk], [later[0].pk]]
    assert out["points"][1]["regressions"] == []
    assert [(r["run"], r["against"]) for r in out["points"][2]["regressions"]] == [
        (later[0].pk, greedy[0].pk)
    ]
