"""Leaderboard and platform comparison reads: a workflow's succeeded runs grouped into configurations
(platform x scheduler with its parameters), each figure as a mean over runs with its 95 % CI, ranked by
mean SLO attainment (the statistics: ``benchmarks.metrics.estimate`` and ``rank_estimates``)."""

from __future__ import annotations

import dataclasses
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from datetime import date
from typing import TYPE_CHECKING, Any, TypedDict

from django.db.models import Count, Q, QuerySet

from benchmarks import metrics
from cbweb.runs.models import ApplicationResult, Run
from cbweb.workflows.models import Workflow

if TYPE_CHECKING:
    from django_stubs_ext import WithAnnotations

# What a configuration shows, each a mean over its runs of one figure of the run's summary
# (docs/metrics.md): name -> (how to read it from a summary, the figure's range for clipping its CI).
FIGURES: dict[str, tuple[Callable[[dict[str, Any]], Any], tuple[float, float] | None]] = {
    "attainment": (lambda s: s.get("mean_attainment"), (0.0, 1.0)),
    "fairness": (lambda s: s.get("fairness"), (0.0, 1.0)),
    "makespan": (lambda s: s.get("makespan_s"), (0.0, float("inf"))),
    "gpu_energy_per_request": (
        lambda s: (s.get("telemetry") or {}).get("gpu_energy_per_request_j"),
        (0.0, float("inf")),
    ),
    "cpu_energy_per_request": (
        lambda s: (s.get("telemetry") or {}).get("cpu_energy_per_request_j"),
        (0.0, float("inf")),
    ),
}
# Columns the leaderboard can be sorted by; "rank" is the ranking's order. Lower is better for
# makespan and energy, so those sort ascending; None (not measured) always sorts last.
SORTS = (
    "rank",
    "platform",
    "scheduler",
    "runs",
    "attainment",
    "fairness",
    "makespan",
    "gpu_energy",
    "cpu_energy",
)
_ASCENDING = {"platform", "scheduler", "makespan", "gpu_energy", "cpu_energy"}


def _estimate_out(e: metrics.Estimate | None) -> dict[str, Any] | None:
    return dataclasses.asdict(e) if e is not None else None


def _estimates(runs: Sequence[Run]) -> dict[str, metrics.Estimate | None]:
    out = {}
    for name, (read, bounds) in FIGURES.items():
        values = [float(v) for r in runs if (v := read(r.summary or {})) is not None]
        out[name] = metrics.estimate(values, bounds=bounds)
    return out


def figures_of(runs: Sequence[Run]) -> dict[str, dict[str, Any] | None]:
    """Return each of FIGURES over ``runs`` as ``{n, mean, low, high, note}`` (None: no run has it)."""
    return {name: _estimate_out(e) for name, e in _estimates(runs).items()}


class _Succeeded(TypedDict):
    succeeded: int


def leaderboard_workflows() -> QuerySet[WithAnnotations[Workflow, _Succeeded]]:
    """Return the workflows with at least one succeeded run, with their run count, by name."""
    return (
        Workflow.objects.annotate(
            succeeded=Count("versions__runs", filter=Q(versions__runs__status=Run.Status.SUCCEEDED))
        )
        .filter(succeeded__gt=0)
        .select_related("owner")
        .order_by("name", "id")
    )


def succeeded_runs(
    *,
    workflow: Workflow,
    version: int | None = None,
    platforms: Iterable[int] | None = None,
    scheduler: str | None = None,
    since: date | None = None,
    until: date | None = None,
) -> QuerySet[Run]:
    """Return the succeeded runs of ``workflow`` (all its versions unless ``version``), filtered by
    platform ids, scheduler name and the day they were launched (``since`` and ``until`` included)."""
    runs = Run.objects.filter(status=Run.Status.SUCCEEDED, workflow_version__workflow=workflow)
    if version is not None:
        runs = runs.filter(version_number=version)
    if platforms is not None:
        runs = runs.filter(platform_id__in=list(platforms))
    if scheduler:
        runs = runs.filter(scheduler=scheduler)
    if since is not None:
        runs = runs.filter(created_at__date__gte=since)
    if until is not None:
        runs = runs.filter(created_at__date__lte=until)
    return runs.select_related("platform").order_by("created_at", "id")


def _configurations(runs: Iterable[Run]) -> dict[tuple[int | None, str], list[Run]]:
    # Runs under other scheduler parameters are another configuration, ranked on their own.
    groups: dict[tuple[int | None, str], list[Run]] = defaultdict(list)
    for run in runs:
        groups[(run.platform_id, run.scheduler_label)].append(run)
    return groups


def _sort_key(sort: str) -> Callable[[dict[str, Any]], tuple[Any, ...]]:
    def key(row: dict[str, Any]) -> tuple[Any, ...]:
        if sort == "rank":
            return (row["rank"] is None, row["position"])
        if sort in ("platform", "scheduler"):
            return (False, row[sort].lower())
        if sort == "runs":
            return (False, -row["runs"])
        figure = {"gpu_energy": "gpu_energy_per_request", "cpu_energy": "cpu_energy_per_request"}.get(
            sort, sort
        )
        e = row[figure]
        if e is None:
            return (True, 0.0)
        return (False, e["mean"] if sort in _ASCENDING else -e["mean"])

    return key


def leaderboard(
    *,
    workflow: Workflow,
    version: int | None = None,
    platform: int | None = None,
    scheduler: str | None = None,
    since: date | None = None,
    until: date | None = None,
    sort: str = "rank",
) -> dict[str, Any]:
    """Return the leaderboard of one workflow: ``rows``, one per platform x scheduler configuration,
    ranked by mean SLO attainment (rank, ties: the rows whose 95 % CIs overlap), sorted by ``sort``;
    and ``versions``, the workflow versions the rows' runs ran (more than one: specs may differ)."""
    if sort not in SORTS:
        raise ValueError(f"sort must be one of {', '.join(SORTS)}")
    runs = list(
        succeeded_runs(
            workflow=workflow,
            version=version,
            platforms=[platform] if platform is not None else None,
            scheduler=scheduler,
            since=since,
            until=until,
        ).only("summary", "scheduler", "scheduler_params", "platform__name", "version_number", "created_at")
    )
    groups = _configurations(runs)
    estimates = {key: _estimates(group) for key, group in groups.items()}
    ranking = metrics.rank_estimates([(key, e["attainment"]) for key, e in estimates.items()])
    rows = []
    for position, entry in enumerate(ranking):
        group = groups[entry.key]
        platform_obj = group[0].platform
        rows.append(
            {
                "position": position,
                "rank": entry.rank,
                "tied": bool(entry.tied_with),
                # Ranks of the rows this one's CI overlaps (what the page lists as its ties).
                "tied_with": [ranking[j].rank for j in entry.tied_with],
                "platform_id": platform_obj.pk if platform_obj else None,
                "platform": platform_obj.name if platform_obj else "unknown platform",
                "scheduler": group[0].scheduler,
                "scheduler_label": entry.key[1],
                "scheduler_params": group[0].scheduler_params,
                "runs": len(group),
                "run_ids": [r.pk for r in group],
                "versions": sorted({r.version_number for r in group}),
                **{name: _estimate_out(e) for name, e in estimates[entry.key].items()},
            }
        )
    rows.sort(key=_sort_key(sort))
    return {"rows": rows, "versions": sorted({r.version_number for r in runs})}


def platform_comparison(
    *, workflow: Workflow, platforms: Sequence[int], scheduler_label: str | None = None
) -> dict[str, Any]:
    """Return the same workflow on several platforms side by side: ``columns``, one per platform and
    scheduler configuration (only ``scheduler_label``'s when given), each with the run figures
    (FIGURES) and, per application and latency metric, its p50 and p99 as a mean over runs with a
    95 % CI; ``applications``, the application names; ``rows``, the (application, metric) pairs that
    have percentiles; ``schedulers``, every configuration these platforms ran the workflow under."""
    runs = list(succeeded_runs(workflow=workflow, platforms=platforms))
    groups = _configurations(runs)
    schedulers = sorted({label for _, label in groups})
    if scheduler_label:
        groups = {k: v for k, v in groups.items() if k[1] == scheduler_label}
    apps: dict[int, list[ApplicationResult]] = defaultdict(list)
    for app in ApplicationResult.objects.filter(run__in=runs).only(
        "run_id", "name", "slo_attainment", "metrics"
    ):
        apps[app.run_id].append(app)
    rows: set[tuple[str, str]] = set()
    order: dict[int | None, int] = {pk: i for i, pk in enumerate(platforms)}
    columns = []
    for (platform_id, label), group in sorted(
        groups.items(), key=lambda kv: (order.get(kv[0][0], 0), kv[0][1])
    ):
        per_app: dict[str, dict[str, Any]] = {}
        names = sorted({a.name for r in group for a in apps[r.pk]})
        for name in names:
            results = [a for r in group for a in apps[r.pk] if a.name == name]
            latency = sorted({m for a in results for m in a.metrics if "p50" in a.metrics[m]})
            cell: dict[str, Any] = {
                "attainment": _estimate_out(
                    metrics.estimate(
                        [a.slo_attainment for a in results if a.slo_attainment is not None], bounds=(0.0, 1.0)
                    )
                ),
                "metrics": {},
            }
            for metric in latency:
                rows.add((name, metric))
                cell["metrics"][metric] = {
                    q: _estimate_out(
                        metrics.estimate(
                            [
                                a.metrics[metric][q]
                                for a in results
                                if a.metrics.get(metric, {}).get(q) is not None
                            ]
                        )
                    )
                    for q in ("p50", "p99")
                }
            per_app[name] = cell
        platform_obj = group[0].platform
        columns.append(
            {
                "platform_id": platform_id,
                "platform": platform_obj.name if platform_obj else "unknown platform",
                "scheduler_label": label,
                "runs": len(group),
                "run_ids": [r.pk for r in group],
                "figures": figures_of(group),
                "applications": per_app,
            }
        )
    return {
        "columns": columns,
        "applications": sorted({name for name, _ in rows}),
        "rows": sorted(rows),
        "schedulers": schedulers,
    }
