"""Reads for runs: lists, results, chart data (the pages and the API share these), comparisons.

Every number shown comes from the engine (``benchmarks.metrics`` via the stored result); this
module only selects, arranges and downsamples.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import numpy as np
from django.db.models import Prefetch, QuerySet
from django.forms.models import model_to_dict
from django.shortcuts import get_object_or_404

from benchmarks import metrics
from benchmarks.monitor.base import is_core_entity
from benchmarks.results import ApplicationResult as EngineApplicationResult
from benchmarks.results import QualityRow, SloRow, quality_table, shown_metrics, slo_table
from benchmarks.status import RequestStatus
from cbweb.runs.models import ApplicationResult, NodeResult, RequestResult, Run, TelemetryChunk
from cbweb.runs.telemetry import decode, lttb

# Charts get at most this many points per series: enough for a full-width chart, small enough to
# ship and draw in a few milliseconds.
CHART_POINTS = 2000
COMPARE_POINTS = 500
CDF_POINTS = 400
IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".webp", ".gif")
RUN_FILTERS = ("status", "workflow", "platform", "scheduler", "owner", "batch")


def run_list(*, filters: Mapping[str, Any] | None = None) -> QuerySet[Run]:
    """Return runs, newest first, filtered by status, workflow, platform, scheduler, owner or batch."""
    qs = Run.objects.select_related("workflow_version__workflow", "platform", "owner")
    for key, value in (filters or {}).items():
        if value in (None, ""):
            continue
        if key == "workflow":
            qs = qs.filter(workflow_version__workflow_id=value)
        elif key == "owner":
            qs = qs.filter(owner__username=value)
        elif key in RUN_FILTERS:
            qs = qs.filter(**{key: value})
    return qs


def run_get(*, pk: int) -> Run:
    """Return one run (with its workflow and platform) or raise Http404."""
    return get_object_or_404(run_list(), pk=pk)


def run_cancel_requested(*, run_id: int) -> bool:
    """Return whether someone asked to cancel the run."""
    return bool(Run.objects.filter(pk=run_id).values_list("cancel_requested", flat=True).first())


def run_applications(*, run: Run) -> list[ApplicationResult]:
    """Return a run's per-application results, in node order."""
    return list(run.application_results.all())


def run_nodes(*, run: Run) -> list[NodeResult]:
    return list(run.node_results.all())


def _engine_application(app: ApplicationResult) -> EngineApplicationResult:
    """Return a stored application result as the engine's typed one (its requests left out)."""
    data = {k: v for k, v in model_to_dict(app).items() if k in _ENGINE_APPLICATION_FIELDS}
    return EngineApplicationResult.model_validate({**data, "model": app.model or None, "requests": []})


_ENGINE_APPLICATION_FIELDS = set(EngineApplicationResult.model_fields) - {"requests"}


def slo_rows(*, run: Run) -> list[SloRow]:
    """Return the per-application SLO table (the engine's ``slo_table`` over the stored results):
    attainment, p50/p90/p99 per SLO metric, normalised latency."""
    return slo_table(_engine_application(app) for app in run_applications(run=run))


def quality_rows(*, run: Run) -> list[QualityRow]:
    """Return the per-application quality table (the engine's ``quality_table`` over the stored
    results): one row per figure, formatted with its unit; none for runs stored before schema 3."""
    return quality_table(_engine_application(app) for app in run_applications(run=run))


def _quality_ci(results: list[ApplicationResult]) -> list[dict[str, Any]]:
    """Return each quality figure of an application over a group's runs: name, unit, mean and 95 % CI
    of the runs' values (``pct`` for a fraction, shown as a percentage)."""
    units: dict[str, str] = {}
    values: dict[str, list[float]] = defaultdict(list)
    for app in results:
        for name, figure in _engine_application(app).quality.items():
            units.setdefault(name, figure.unit)
            values[name].append(figure.value)
    return [
        {"name": name, "unit": unit, "pct": unit == "fraction", "value": _ci(values[name])}
        for name, unit in units.items()
    ]


def _downsample(t: np.ndarray, v: np.ndarray, points: int) -> tuple[list[float], list[float]]:
    keep = ~np.isnan(v)
    t, v = t[keep], v[keep]
    t, v = lttb(t, v, points)
    return [round(float(x), 4) for x in t], [float(x) for x in v]


def run_latency_series(*, run: Run, points: int = CHART_POINTS) -> list[dict[str, Any]]:
    """Return per application and SLO metric the latency of each counted request against its end time.

    Each series: ``{application, metric, slo_s, t: [...], v: [...]}`` (seconds since run start).
    """
    series = []
    rows = RequestResult.objects.filter(
        application__run=run, status=RequestStatus.OK, warmup=False
    ).values_list("application_id", "end", "metrics")
    by_app: dict[int, list[tuple[float, dict[str, float]]]] = defaultdict(list)
    for app_id, end, values in rows:
        by_app[app_id].append((end, values))
    for app in run_applications(run=run):
        thresholds = {slo.metric: slo.threshold_s for slo in _engine_application(app).slo}
        names = list(thresholds) or ["e2e"]
        data = sorted(by_app.get(app.pk, []), key=lambda r: r[0])
        for metric in names:
            pts = [(end, float(vals[metric])) for end, vals in data if metric in vals]
            if not pts:
                continue
            t, v = _downsample(np.array([p[0] for p in pts]), np.array([p[1] for p in pts]), points)
            series.append(
                {"application": app.name, "metric": metric, "slo_s": thresholds.get(metric), "t": t, "v": v}
            )
    return series


def run_gantt(*, run: Run) -> list[dict[str, Any]]:
    """Return one bar per DAG node: start, load end, end (seconds since run start), status, reason."""
    out = []
    for node in run_nodes(run=run):
        if node.started_at is None:
            out.append(
                {"node": node.name, "status": node.status, "start": None, "end": None, "reason": node.reason}
            )
            continue
        out.append(
            {
                "node": node.name,
                "status": node.status,
                "background": node.background,
                "start": node.started_at,
                "end": node.finished_at,
                # The node's own: a model server's node has no application entry to take it from.
                "load_time_s": node.load_time_s,
                "reason": node.reason,
            }
        )
    return out


def run_telemetry_metrics(*, run: Run) -> list[dict[str, str]]:
    """Return the (source, metric) pairs a run has telemetry for."""
    pairs = TelemetryChunk.objects.filter(run=run).values_list("source", "metric").distinct()
    return [{"source": s, "metric": m} for s, m in sorted(set(pairs))]


def run_telemetry(
    *,
    run: Run,
    source: str | None = None,
    metrics_wanted: Iterable[str] | None = None,
    t_min: float | None = None,
    t_max: float | None = None,
    points: int = CHART_POINTS,
) -> list[dict[str, Any]]:
    """Return telemetry series of a run, each downsampled with LTTB to at most ``points`` points.

    Each series: ``{source, metric, samples, t: [...], v: [...]}``; ``samples`` counts the stored
    samples in the range before downsampling. Missing samples (NaN) are left out.
    """
    qs = TelemetryChunk.objects.filter(run=run)
    if source:
        qs = qs.filter(source=source)
    if metrics_wanted is not None:
        wanted = [m for m in metrics_wanted if m]
        if not wanted:
            return []
        qs = qs.filter(metric__in=wanted)
    if t_min is not None:
        qs = qs.filter(t_end__gte=t_min)
    if t_max is not None:
        qs = qs.filter(t_start__lte=t_max)
    grouped: dict[tuple[str, str], list[tuple[bytes, bytes]]] = defaultdict(list)
    for src, metric, t, v in qs.order_by("source", "metric", "seq").values_list("source", "metric", "t", "v"):
        grouped[(src, metric)].append((t, v))
    out = []
    for (src, metric), chunks in grouped.items():
        t = np.concatenate([decode(c[0]) for c in chunks])
        v = np.concatenate([decode(c[1]) for c in chunks])
        if t_min is not None or t_max is not None:
            keep = (t >= (t_min if t_min is not None else -math.inf)) & (
                t <= (t_max if t_max is not None else math.inf)
            )
            t, v = t[keep], v[keep]
        tt, vv = _downsample(t, v, points)
        out.append({"source": src, "metric": metric, "samples": len(t), "t": tt, "v": vv})
    return out


def run_telemetry_overview(*, run: Run, metrics_wanted: Iterable[str] | None = None) -> list[dict[str, Any]]:
    """Return whole-run telemetry at ``CHART_POINTS``: the overview stored when the run finished, or
    computed now while it is still running. Same series shape as ``run_telemetry``."""
    if run.telemetry_overview is None:
        return run_telemetry(run=run, metrics_wanted=metrics_wanted)
    if metrics_wanted is None:
        return list(run.telemetry_overview)
    wanted = set(metrics_wanted)
    return [s for s in run.telemetry_overview if s["metric"] in wanted]


def run_bundle_files(*, run: Run) -> list[dict[str, Any]]:
    """Return the files of the run's result bundle (relative path, size, whether it is an image)."""
    if not run.bundle_dir:
        return []
    root = Path(run.bundle_dir)
    if not root.is_dir():
        return []
    files = []
    for path in sorted(root.rglob("*")):
        if path.is_file() and not path.name.endswith(".tmp"):
            rel = path.relative_to(root).as_posix()
            files.append(
                {"path": rel, "size": path.stat().st_size, "image": path.suffix.lower() in IMAGE_SUFFIXES}
            )
    return files


def run_bundle_file(*, run: Run, rel: str) -> Path | None:
    """Return the absolute path of one bundle file, or None when it is not inside the bundle."""
    if not run.bundle_dir:
        return None
    root = Path(run.bundle_dir).resolve()
    path = (root / rel).resolve()
    if root not in path.parents or not path.is_file():
        return None
    return path


def run_result_document(*, run: Run) -> dict[str, Any] | None:
    """Return the run's full result.json (requests included) rebuilt from the database, or None."""
    if run.result is None:
        return None
    doc = dict(run.result)
    requests: dict[str, list[dict[str, Any]]] = defaultdict(list)
    fields = (
        "index",
        "arrival",
        "start",
        "end",
        "status",
        "warmup",
        "slo_met",
        "metrics",
        "info",
        "series",
        "error",
    )
    for app_name, *values in RequestResult.objects.filter(application__run=run).values_list(
        "application__name", *fields
    ):
        row = dict(zip(fields, values, strict=True))
        row["error"] = row["error"] or None
        requests[app_name].append(row)
    doc["applications"] = [
        {**a, "requests": requests.get(a["name"], [])} for a in doc.get("applications", [])
    ]
    return doc


def page_metrics(*, run: Run) -> list[str]:
    """Return the telemetry metrics the result page charts: all but the per-core CPU series, which
    would be one panel per core on a big machine (the API still serves them)."""
    return sorted(
        {
            m["metric"]
            for m in run_telemetry_metrics(run=run)
            if not is_core_entity(m["metric"].split(".", 1)[0])
        }
    )


def telemetry_rows(*, run: Run) -> list[dict[str, Any]]:
    """Return the monitor's summaries from the result: the whole run, while serving, then each
    application."""
    telemetry = (run.result or {}).get("telemetry") or {}
    rows = []
    if telemetry.get("run"):
        rows.append({"window": "whole run", **telemetry["run"]})
    if telemetry.get("serving"):
        rows.append({"window": "serving (any application)", **telemetry["serving"]})
    for name, values in (telemetry.get("applications") or {}).items():
        rows.append({"window": name, **values})
    return rows


def run_charts(*, run: Run) -> dict[str, Any]:
    """Return the data of the result page's charts: latency, Gantt, telemetry (the API serves the
    same series from ``run_telemetry``)."""
    duration = (run.summary or {}).get("makespan_s")
    gantt = run_gantt(run=run)
    ends = [g["end"] for g in gantt if g.get("end") is not None]
    return {
        "duration_s": max([*ends, duration or 0.0]) if ends or duration else None,
        "latency": run_latency_series(run=run),
        "gantt": gantt,
        "telemetry": run_telemetry_overview(run=run, metrics_wanted=page_metrics(run=run)),
    }


# --------------------------------------------------------------------------------------------------
# Compare
# --------------------------------------------------------------------------------------------------


def _ci(values: list[float]) -> dict[str, Any] | None:
    if not values:
        return None
    mean, half = metrics.mean_ci95(values)
    return {"mean": mean, "ci95": half, "n": len(values)}


def _cdf(values: list[float], points: int = CDF_POINTS) -> dict[str, list[float]]:
    ordered = np.sort(np.asarray(values, dtype=float))
    n = len(ordered)
    p = np.arange(1, n + 1) / n
    if n > points:
        pick = np.unique(np.linspace(0, n - 1, points).astype(int))
        ordered, p = ordered[pick], p[pick]
    return {"x": [float(x) for x in ordered], "p": [float(x) for x in p]}


def run_compare(*, runs: list[Run]) -> dict[str, Any]:
    """Compare runs: groups (repetitions of one launch form one group, shown as mean and 95 % CI),
    a per-application SLO table with deltas against the first group, latency CDFs, telemetry overlays.
    """
    groups: dict[Any, list[Run]] = {}
    for run in runs:
        groups.setdefault(run.batch, []).append(run)
    apps = ApplicationResult.objects.filter(run__in=runs).prefetch_related(
        Prefetch(
            "requests",
            queryset=RequestResult.objects.filter(status=RequestStatus.OK, warmup=False).only(
                "application_id", "metrics"
            ),
        )
    )
    by_run: dict[int, dict[str, ApplicationResult]] = defaultdict(dict)
    for app in apps:
        by_run[app.run_id][app.name] = app
    columns = []
    for batch_runs in groups.values():
        first = batch_runs[0]
        label = (
            f"run {first.pk}" if len(batch_runs) == 1 else f"runs {', '.join(str(r.pk) for r in batch_runs)}"
        )
        summaries = [r.summary or {} for r in batch_runs]
        column: dict[str, Any] = {
            "label": f"{label} · {first.workflow_label} · {first.scheduler_label}",
            "runs": [r.pk for r in batch_runs],
            "mean_attainment": _ci(
                [s["mean_attainment"] for s in summaries if s.get("mean_attainment") is not None]
            ),
            "fairness": _ci([s["fairness"] for s in summaries if s.get("fairness") is not None]),
            "requests_served": sum(s.get("requests_served") or 0 for s in summaries),
            "requests_requested": sum(s.get("requests_requested") or 0 for s in summaries),
            "partial": any(s.get("partial") for s in summaries),
            "makespan_s": _ci([s["makespan_s"] for s in summaries if s.get("makespan_s") is not None]),
            "applications": {},
        }
        names = {n for r in batch_runs for n in by_run[r.pk]}
        for name in sorted(names):
            results = [by_run[r.pk][name] for r in batch_runs if name in by_run[r.pk]]
            metric = (shown_metrics(_engine_application(results[0])) or ["e2e"])[0] if results else "e2e"
            column["applications"][name] = {
                "metric": metric,
                "attainment": _ci([a.slo_attainment for a in results if a.slo_attainment is not None]),
                "p50": _ci(
                    [
                        a.metrics[metric]["p50"]
                        for a in results
                        if a.metrics.get(metric, {}).get("p50") is not None
                    ]
                ),
                "p99": _ci(
                    [
                        a.metrics[metric]["p99"]
                        for a in results
                        if a.metrics.get(metric, {}).get("p99") is not None
                    ]
                ),
                "quality": _quality_ci(results),
                "cdf": _cdf(
                    [
                        float(r.metrics[metric])
                        for a in results
                        for r in a.requests.all()
                        if metric in r.metrics
                    ]
                ),
            }
        columns.append(column)
    base = columns[0] if columns else None
    app_names = sorted({n for c in columns for n in c["applications"]})
    table = []
    for name in app_names:
        cells = []
        for col in columns:
            cell = col["applications"].get(name)
            base_cell = base["applications"].get(name) if base else None
            delta = None
            if cell and base_cell and cell["attainment"] and base_cell["attainment"] and col is not base:
                delta = cell["attainment"]["mean"] - base_cell["attainment"]["mean"]
            cells.append({"cell": cell, "delta_attainment": delta})
        table.append({"application": name, "cells": cells})
    telemetry = {
        col["label"]: run_telemetry(
            run=groups_first, metrics_wanted=page_metrics(run=groups_first), points=COMPARE_POINTS
        )
        for col, groups_first in zip(columns, [g[0] for g in groups.values()], strict=True)
    }
    return {"columns": columns, "table": table, "telemetry": telemetry}
