from __future__ import annotations

from typing import Any

from cbweb.leaderboard.selectors import leaderboard_rows
from cbweb.runs.models import Run
from cbweb.runs.services import run_create
from cbweb.workflows.selectors import version_latest


def test_rows_group_succeeded_runs_and_rank_by_mean_attainment(alice: Any, make_workflow: Any) -> None:
    workflow = make_workflow(alice)
    runs = run_create(version=version_latest(workflow=workflow), user=alice, repeats=3)
    other = run_create(version=version_latest(workflow=workflow), user=alice, scheduler="credit")[0]
    for run, attainment in zip([*runs, other], [0.5, 0.7, 0.9, 0.95], strict=True):
        Run.objects.filter(pk=run.pk).update(
            status="succeeded",
            summary={"mean_attainment": attainment, "fairness": attainment, "makespan_s": 2.0},
        )
    rows = leaderboard_rows()
    assert [(r["scheduler"], r["runs"]) for r in rows] == [("credit", 1), ("greedy", 3)]
    mean, half = rows[1]["attainment"]
    assert abs(mean - 0.7) < 1e-9 and half is not None and half > 0
    assert abs(rows[1]["fairness"][0] - 0.7) < 1e-9 and rows[0]["fairness"] == (0.95, None)


def test_runs_under_other_scheduler_parameters_rank_as_their_own_configuration(
    alice: Any, make_workflow: Any
) -> None:
    version = version_latest(workflow=make_workflow(alice))
    default = run_create(version=version, user=alice, scheduler="credit")[0]
    tuned = run_create(
        version=version, user=alice, scheduler="credit", scheduler_params={"pressure_threshold": 0.4}
    )[0]
    for run, attainment in ((default, 0.9), (tuned, 1.0)):
        Run.objects.filter(pk=run.pk).update(
            status="succeeded", summary={"mean_attainment": attainment, "makespan_s": 2.0}
        )
    assert [(r["scheduler"], r["runs"]) for r in leaderboard_rows()] == [
        ("credit (pressure_threshold=0.4)", 1),
        ("credit", 1),
    ]


def test_the_page_shows_fairness_and_no_slos_for_a_workflow_without_any(
    client: Any, alice: Any, make_workflow: Any
) -> None:
    (run,) = run_create(version=version_latest(workflow=make_workflow(alice)), user=alice)
    Run.objects.filter(pk=run.pk).update(
        status="succeeded", summary={"mean_attainment": None, "fairness": None, "makespan_s": 2.0}
    )
    page = client.get("/leaderboard/").content.decode()
    assert "<th>Fairness</th>" in page and "<td>no SLOs</td>" in page
