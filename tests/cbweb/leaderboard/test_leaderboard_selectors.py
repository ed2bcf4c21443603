from __future__ import annotations

from datetime import date, timedelta
from typing import Any

import pytest
from django.utils import timezone

from cbweb.leaderboard.selectors import leaderboard, leaderboard_workflows, platform_comparison
from cbweb.platforms.services import platform_register
from cbweb.runs.models import ApplicationResult, Run
from cbweb.runs.services import run_create
from cbweb.workflows.selectors import version_latest


def platform(name: str, gpu: bool = False) -> Any:
    gpus = [{"name": "NVIDIA H200", "memory_total_bytes": 150 * 2**30}] if gpu else []
    return platform_register(fingerprint={"id": name, "host": name, "cpu": "AMD EPYC", "gpus": gpus})


def finish(run: Run, on: Any, attainment: float | None, **more: Any) -> Run:
    """Mark ``run`` succeeded on platform ``on`` with a summary of the given figures."""
    summary = {"mean_attainment": attainment, "fairness": more.pop("fairness", None), "makespan_s": 2.0}
    summary.update(more)
    Run.objects.filter(pk=run.pk).update(status="succeeded", platform=on, summary=summary)
    return run


def launch(workflow: Any, user: Any, n: int = 1, **kwargs: Any) -> list[Run]:
    return run_create(version=version_latest(workflow=workflow), user=user, repeats=n, **kwargs)


def test_one_workflow_per_board_and_one_row_per_platform_and_scheduler_configuration(
    alice: Any, make_workflow: Any
) -> None:
    chosen, other = make_workflow(alice), make_workflow(alice, name="other")
    laptop, desktop = platform("laptop"), platform("desktop", gpu=True)
    for run, a in zip(launch(chosen, alice, 3), [0.5, 0.7, 0.9], strict=True):
        finish(run, laptop, a, fairness=a)
    finish(launch(chosen, alice, scheduler="credit")[0], laptop, 0.95)
    finish(
        launch(chosen, alice, scheduler="credit", scheduler_params={"pressure_threshold": 0.4})[0],
        laptop,
        1.0,
    )
    finish(launch(chosen, alice)[0], desktop, 0.2)
    finish(launch(other, alice)[0], laptop, 1.0)  # another workflow: never on chosen's board
    rows = leaderboard(workflow=chosen)["rows"]
    assert [(r["platform"], r["scheduler_label"], r["runs"]) for r in rows] == [
        ("laptop (AMD EPYC)", "credit (pressure_threshold=0.4)", 1),
        ("laptop (AMD EPYC)", "credit", 1),
        ("laptop (AMD EPYC)", "greedy", 3),
        ("desktop (NVIDIA H200)", "greedy", 1),
    ]
    greedy = rows[2]
    assert greedy["attainment"]["mean"] == pytest.approx(0.7) and greedy["attainment"]["note"] is None
    assert greedy["attainment"]["high"] == 1.0  # 0.7 + 0.497, clipped to 100 %
    # The single runs have no CI and say so; the greedy interval overlaps both credit means.
    assert rows[0]["attainment"]["note"] == "n=1, no CI" and rows[0]["rank"] == 1
    assert rows[2]["tied"] and 1 in rows[2]["tied_with"]
    assert rows[3]["rank"] == 4 and rows[3]["fairness"] is None
    assert [w.name for w in leaderboard_workflows()] == ["other", "sleepy"]


def test_three_identical_runs_say_all_runs_equal_and_energy_is_not_measured_without_a_counter(
    alice: Any, make_workflow: Any
) -> None:
    workflow, box = make_workflow(alice), platform("box")
    telemetry = {"gpu_energy_per_request_j": None, "cpu_energy_per_request_j": 1.5}
    for run in launch(workflow, alice, 3):
        finish(run, box, 1.0, telemetry=telemetry)
    (row,) = leaderboard(workflow=workflow)["rows"]
    assert row["attainment"] == {"n": 3, "mean": 1.0, "low": 1.0, "high": 1.0, "note": "all 3 runs equal"}
    assert row["gpu_energy_per_request"] is None
    assert row["cpu_energy_per_request"]["mean"] == 1.5


def test_filters_by_platform_scheduler_version_and_day_and_sorts_by_a_column(
    alice: Any, make_workflow: Any
) -> None:
    workflow = make_workflow(alice)
    a, b = platform("a"), platform("b")
    old = finish(launch(workflow, alice)[0], a, 0.9, makespan_s=5.0)
    Run.objects.filter(pk=old.pk).update(created_at=timezone.now() - timedelta(days=10))
    finish(launch(workflow, alice)[0], a, 0.5, makespan_s=1.0)
    finish(launch(workflow, alice, scheduler="credit")[0], b, 0.8, makespan_s=3.0)
    assert [r["platform"] for r in leaderboard(workflow=workflow, platform=b.pk)["rows"]] == ["b (AMD EPYC)"]
    assert [r["scheduler"] for r in leaderboard(workflow=workflow, scheduler="credit")["rows"]] == ["credit"]
    recent = leaderboard(workflow=workflow, since=date.today() - timedelta(days=1))["rows"]
    assert [(r["platform"], r["runs"]) for r in recent] == [("b (AMD EPYC)", 1), ("a (AMD EPYC)", 1)]
    assert leaderboard(workflow=workflow, version=2)["rows"] == []
    by_makespan = leaderboard(workflow=workflow, sort="makespan")["rows"]
    assert [r["makespan"]["mean"] for r in by_makespan] == [3.0, 3.0]  # a: (5 + 1) / 2, b: 3
    assert [r["scheduler"] for r in leaderboard(workflow=workflow, sort="scheduler")["rows"]] == [
        "credit",
        "greedy",
    ]
    with pytest.raises(ValueError, match="sort must be one of"):
        leaderboard(workflow=workflow, sort="owner")


def test_a_workflow_without_slos_is_listed_unranked(alice: Any, make_workflow: Any) -> None:
    workflow = make_workflow(alice)
    finish(launch(workflow, alice)[0], platform("box"), None)
    (row,) = leaderboard(workflow=workflow)["rows"]
    assert row["rank"] is None and row["attainment"] is None and row["makespan"]["mean"] == 2.0


def test_platform_comparison_puts_each_platform_in_a_column_with_application_latencies(
    alice: Any, make_workflow: Any
) -> None:
    workflow = make_workflow(alice)
    m1, x86 = platform("m1"), platform("x86")
    for on, p50s in ((m1, [0.1, 0.2, 0.3]), (x86, [0.5])):
        for run, p50 in zip(launch(workflow, alice, len(p50s)), p50s, strict=True):
            finish(run, on, 0.9)
            ApplicationResult.objects.create(
                run=run,
                name="first",
                unit="sleep1",
                type="Sleep",
                device="cpu",
                priority="medium",
                slo_attainment=0.9,
                metrics={"e2e": {"p50": p50, "p99": 2 * p50}},
            )
    out = platform_comparison(workflow=workflow, platforms=[x86.pk, m1.pk])
    assert [c["platform"] for c in out["columns"]] == ["x86 (AMD EPYC)", "m1 (AMD EPYC)"]
    assert out["rows"] == [("first", "e2e")]
    x86_cell, m1_cell = (c["applications"]["first"]["metrics"]["e2e"] for c in out["columns"])
    assert x86_cell["p50"]["note"] == "n=1, no CI"
    assert m1_cell["p50"]["mean"] == pytest.approx(0.2) and m1_cell["p99"]["low"] is not None
    assert out["columns"][1]["figures"]["attainment"]["note"] == "all 3 runs equal"
    assert (
        platform_comparison(workflow=workflow, platforms=[m1.pk], scheduler_label="credit")["columns"] == []
    )
