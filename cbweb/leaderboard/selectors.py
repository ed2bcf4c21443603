"""Leaderboard queries: per workflow and platform, the succeeded runs ranked by mean SLO attainment."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from benchmarks import metrics
from cbweb.runs.models import Run


def leaderboard_rows() -> list[dict[str, Any]]:
    """Return one row per (workflow, platform, scheduler with its parameters): run count, mean
    attainment, fairness and makespan (mean and 95 % CI over the runs), best first within each
    workflow."""
    runs = Run.objects.filter(status=Run.Status.SUCCEEDED).select_related(
        "workflow_version__workflow", "platform"
    )
    groups: dict[tuple[Any, ...], list[Run]] = defaultdict(list)
    fields = (
        "summary",
        "scheduler",
        "scheduler_params",
        "workflow_name",
        "workflow_version__workflow__name",
        "platform__name",
    )
    for run in runs.only(*fields):
        # A deleted workflow's runs still rank, under the name they ran with (workflow_id None).
        workflow = run.workflow_version.workflow if run.workflow_version else None
        key = (
            workflow.pk if workflow else None,
            workflow.name if workflow else run.workflow_name,
            run.platform.name if run.platform else "-",
            # Runs under other parameters are another configuration, ranked on their own.
            run.scheduler_label,
        )
        groups[key].append(run)
    rows = []
    for (wf_id, wf_name, platform, scheduler), group in groups.items():
        att = [
            r.summary["mean_attainment"]
            for r in group
            if r.summary and r.summary.get("mean_attainment") is not None
        ]
        fair = [r.summary["fairness"] for r in group if r.summary and r.summary.get("fairness") is not None]
        mk = [r.summary["makespan_s"] for r in group if r.summary and r.summary.get("makespan_s") is not None]
        rows.append(
            {
                "workflow_id": wf_id,
                "workflow": wf_name,
                "platform": platform,
                "scheduler": scheduler,
                "runs": len(group),
                "attainment": metrics.mean_ci95(att) if att else None,
                "fairness": metrics.mean_ci95(fair) if fair else None,
                "makespan": metrics.mean_ci95(mk) if mk else None,
            }
        )
    rows.sort(key=lambda r: (r["workflow"], -(r["attainment"][0] if r["attainment"] else -1)))
    return rows
