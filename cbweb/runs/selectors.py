"""Reads for runs: lists, results, chart data (the pages and the API share these), comparisons.

Every number shown comes from the engine (``benchmarks.metrics`` via the stored result); this
module only selects, arranges and downsamples.
"""

from __future__ import annotations

import io
import math
import zipfile
from collections import defaultdict
from collections.abc import Iterable, Iterator, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
from django.conf import settings
from django.db.models import Max, Prefetch, Q, QuerySet
from django.forms.models import model_to_dict
from django.shortcuts import get_object_or_404

from benchmarks import metrics, regress
from benchmarks.apps import APP_TYPES
from benchmarks.monitor.base import is_core_entity
from benchmarks.results import ApplicationResult as EngineApplicationResult
from benchmarks.results import (
    QualityFigure,
    QualityRow,
    SloRow,
    format_quality,
    quality_table,
    shown_metrics,
    slo_table,
    void_reasons,
)
from benchmarks.results import RequestResult as EngineRequestResult
from benchmarks.spec.load import from_dict
from benchmarks.spec.model import WorkflowValidationError
from benchmarks.status import RequestStatus
from cbweb.platforms.selectors import platform_live
from cbweb.runs.models import ApplicationResult, NodeResult, RequestResult, Run, TelemetryChunk
from cbweb.runs.telemetry import REQUESTS_SOURCE, decode, lttb
from cbweb.workflows.limits import spec_limits

# Charts get at most this many points per series: enough for a full-width chart, small enough to
# ship and draw in a few milliseconds.
CHART_POINTS = 2000
COMPARE_POINTS = 500
CDF_POINTS = 400
# The range of an attainment, a fairness or a fraction: their intervals are cut to it.
FRACTION = (0.0, 1.0)
IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".webp", ".gif")
RUN_FILTERS = (
    "status",
    "workflow",
    "platform",
    "scheduler",
    "owner",
    "batch",
    "commit",
    "branch",
    "tag",
    "search",
)


def run_list(*, filters: Mapping[str, Any] | None = None) -> QuerySet[Run]:
    """Return runs, newest first, filtered by status, workflow, platform, scheduler, owner, batch,
    commit (a prefix, any case), branch, tag (exact) or ``search`` (words found, any case, in the
    workflow name, commit, branch, notes or a tag)."""
    qs = Run.objects.select_related("workflow_version__workflow", "platform", "owner").prefetch_related(
        "tags"
    )
    for key, value in (filters or {}).items():
        if value in (None, ""):
            continue
        if key == "workflow":
            qs = qs.filter(workflow_version__workflow_id=value)
        elif key == "owner":
            qs = qs.filter(owner__username=value)
        elif key == "commit":
            qs = qs.filter(commit__istartswith=value)
        elif key == "tag":
            qs = qs.filter(tags__name=value)
        elif key == "search":
            for word in str(value).split():
                found = (
                    Q(workflow_name__icontains=word)
                    | Q(commit__istartswith=word)
                    | Q(branch__icontains=word)
                    | Q(notes__icontains=word)
                    | Q(tags__name__icontains=word)
                )
                qs = qs.filter(pk__in=Run.objects.filter(found).values("pk"))
        elif key in RUN_FILTERS:
            qs = qs.filter(**{key: value})
    return qs


def run_requests(*, run: Run, application: str | None = None) -> QuerySet[RequestResult]:
    """Return a run's per-request rows, application by application in node order, then by index;
    each with ``application_name`` and ``application_type`` (the regression gate reads them)."""
    qs = (
        RequestResult.objects.filter(application__run=run)
        .select_related("application")
        .order_by("application_id", "index", "id")
    )
    return qs.filter(application__name=application) if application else qs


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


def _engine_application(app: ApplicationResult, *, requests: bool = False) -> EngineApplicationResult:
    """Return a stored application result as the engine's typed one, its requests left out unless
    ``requests``."""
    data = {k: v for k, v in model_to_dict(app).items() if k in _ENGINE_APPLICATION_FIELDS}
    rows = (
        [{**r, "error": r["error"] or None} for r in app.requests.values(*_ENGINE_REQUEST_FIELDS)]
        if requests
        else []
    )
    return EngineApplicationResult.model_validate({**data, "model": app.model or None, "requests": rows})


_ENGINE_APPLICATION_FIELDS = set(EngineApplicationResult.model_fields) - {"requests"}
_ENGINE_REQUEST_FIELDS = tuple(EngineRequestResult.model_fields)


def slo_rows(*, run: Run) -> list[SloRow]:
    """Return the per-application SLO table (the engine's ``slo_table`` over the stored results and
    their requests): attainment with its 95 % interval and its curve against the scaled SLO
    thresholds, p50/p90/p99 per SLO metric, normalised latency."""
    return slo_table(_engine_application(app, requests=True) for app in run_applications(run=run))


def quality_rows(*, run: Run) -> list[QualityRow]:
    """Return the per-application quality table (the engine's ``quality_table`` over the stored
    results): one row per figure, formatted with its unit; none for runs stored before schema 3."""
    return quality_table(_engine_application(app) for app in run_applications(run=run))


def _quality_ci(results: list[ApplicationResult]) -> list[dict[str, Any]]:
    """Return each quality figure of an application over a group's runs: name, unit, mean and 95 % CI
    of the runs' values (``pct`` for a fraction, shown as a percentage), and ``text``: the mean (and
    CI) written by the engine's ``format_quality``, as the result page and the CLI write it."""
    units: dict[str, str] = {}
    values: dict[str, list[float]] = defaultdict(list)
    for app in results:
        for name, figure in _engine_application(app).quality.items():
            units.setdefault(name, figure.unit)
            values[name].append(figure.value)
    out = []
    for name, unit in units.items():
        ci = _ci(values[name], FRACTION if unit == "fraction" else (0.0, math.inf))
        text = _quality_text(ci["mean"], unit) if ci else "-"
        if ci and ci["low"] is not None:
            text += f" [{_quality_text(ci['low'], unit)} - {_quality_text(ci['high'], unit)}]"
        out.append({"name": name, "unit": unit, "pct": unit == "fraction", "value": ci, "text": text})
    return out


def _quality_text(value: float, unit: str) -> str:
    return format_quality(QualityFigure(value=value, unit=unit, count=0))


def _quality_delta(value: float, unit: str) -> str:
    """Return a change of a quality figure: percentage points for a fraction, else with its unit."""
    if unit == "fraction":
        return f"{value * 100:+.1f} pt"
    sign = "+" if value >= 0 else "-"
    return sign + _quality_text(abs(value), unit)


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
    out: list[dict[str, Any]] = []
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
    grouped: dict[tuple[str, str], list[tuple[bytes | memoryview, bytes | memoryview]]] = defaultdict(list)
    rows = qs.order_by("source", "metric", "seq").values_list("source", "metric", "t", "v")
    for src, metric, t_blob, v_blob in rows:
        grouped[(src, metric)].append((t_blob, v_blob))
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


# The bundle download reads files in blocks of this size, so that its memory stays bounded whatever
# the size of the bundle's files (telemetry CSVs of long runs run to tens of MB).
BUNDLE_BLOCK_BYTES = 1 << 20


class _Drain(io.RawIOBase):
    """A write-only stream whose written bytes are taken out in pieces (what zipfile writes to)."""

    def __init__(self) -> None:
        self.buffer = bytearray()

    def writable(self) -> bool:
        return True

    def write(self, data: Any) -> int:
        self.buffer += data
        return len(data)

    def take(self) -> bytes:
        out, self.buffer = bytes(self.buffer), bytearray()
        return out


def run_bundle_zip(*, run: Run) -> Iterator[bytes]:
    """Yield the run's result bundle as a ZIP archive, piece by piece (never whole in memory): the
    files of ``run_bundle_files`` under the folder ``run-<id>/``; a file that does not resolve inside
    the bundle (a link pointing out of it) is left out."""
    sink = _Drain()
    with zipfile.ZipFile(sink, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for entry in run_bundle_files(run=run):
            path = run_bundle_file(run=run, rel=entry["path"])
            if path is None:
                continue
            with path.open("rb") as source, archive.open(f"run-{run.pk}/{entry['path']}", "w") as target:
                while block := source.read(BUNDLE_BLOCK_BYTES):
                    target.write(block)
                    yield sink.take()
            yield sink.take()
    yield sink.take()


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
    would be one panel per core on a big machine, and the live request latencies, which the page
    draws from the stored requests (the API still serves both)."""
    return sorted(
        {
            m["metric"]
            for m in run_telemetry_metrics(run=run)
            if not is_core_entity(m["metric"].split(".", 1)[0]) and m["source"] != REQUESTS_SOURCE
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


# Which monitor sources each column of the "Device during the run" table comes from (docs/monitor.md):
# a column reads "-" when none of its sources was available, and the page says why.
TELEMETRY_COLUMN_SOURCES = {
    "SM activity": ("gpm", "dcgm", "nvml"),
    "SM occupancy": ("gpm", "dcgm"),
    "GPU energy": ("nvml",),
    "GPU memory peak": ("nvml",),
    "CPU energy": ("rapl",),
    "GPU time share": ("nvml",),
}


def telemetry_unavailable(*, run: Run) -> list[dict[str, Any]]:
    """Return why telemetry figures are missing: for each table column none of whose sources was
    available, the column and each of its sources with the reason the monitor recorded."""
    sources = ((run.result or {}).get("telemetry") or {}).get("sources") or {}
    out = []
    for column, names in TELEMETRY_COLUMN_SOURCES.items():
        known = [n for n in names if n in sources]
        if not known or any(sources[n].get("status") == "available" for n in known):
            continue
        out.append(
            {
                "column": column,
                "sources": [
                    {"source": n, "reason": sources[n].get("reason") or "no reason recorded"} for n in known
                ],
            }
        )
    return out


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


def _ci(values: list[float], bounds: tuple[float, float] = (0.0, math.inf)) -> dict[str, Any] | None:
    """Return the mean of a figure over runs with its 95 % t interval cut to the figure's ``bounds``
    (``metrics.estimate``; every figure these pages average is at least 0): ``{mean, low, high, n}``,
    ``low`` and ``high`` None for a single run."""
    e = metrics.estimate(values, bounds=bounds, min_runs=2)
    return None if e is None else {"mean": e.mean, "low": e.low, "high": e.high, "n": e.n}


def _cdf(values: list[float], points: int = CDF_POINTS) -> dict[str, list[float]]:
    ordered = np.sort(np.asarray(values, dtype=float))
    n = len(ordered)
    p = np.arange(1, n + 1) / n
    if n > points:
        pick = np.unique(np.linspace(0, n - 1, points).astype(int))
        ordered, p = ordered[pick], p[pick]
    return {"x": [float(x) for x in ordered], "p": [float(x) for x in p]}


def _delta(
    value: dict[str, Any] | None, base: dict[str, Any] | None, kind: str, claim: bool = False
) -> str | None:
    """Return the change of a column's mean against the first column's, as text (None when either
    is missing): ``pct`` in percentage points, ``s`` in seconds with the relative change, else plain.
    With ``claim`` and both intervals known, what they say (``metrics.claim_between``: "beats" only
    when they separate, else "not distinguishable")."""
    if not value or not base:
        return None
    d = value["mean"] - base["mean"]
    if kind == "pct":
        text = f"{d * 100:+.1f} pt"
        if claim and value["low"] is not None and base["low"] is not None:
            verdict = metrics.claim_between((value["low"], value["high"]), (base["low"], base["high"]))
            text += f", {verdict.value}"
        return text
    if kind == "s":
        relative = f" ({d / base['mean'] * 100:+.0f} %)" if base["mean"] else ""
        return f"{d:+.2f} s{relative}"
    return f"{d:+.3f}"


def _runs_text(pks: list[int]) -> str:
    return f"run{'s' if len(pks) > 1 else ''} {', '.join(map(str, pks))}"


def compare_warnings(*, runs: list[Run]) -> list[dict[str, Any]]:
    """Return what makes the compared runs not like for like: different workflows, or different
    versions of one workflow (with the version numbers to compare: ``workflow``, ``old``, ``new``)."""
    by_workflow: dict[Any, dict[int, list[int]]] = defaultdict(lambda: defaultdict(list))
    names: dict[Any, str] = {}
    for run in runs:
        key = run.workflow_version.workflow_id if run.workflow_version else f"deleted:{run.workflow_name}"
        by_workflow[key][run.version_number].append(run.pk)
        names[key] = run.workflow_name
    if len(by_workflow) > 1:
        listed = "; ".join(
            f"{names[key]} ({_runs_text([pk for v in versions.values() for pk in v])})"
            for key, versions in by_workflow.items()
        )
        return [
            {
                "message": f"These runs ran different workflows: {listed}. Applications of the same name "
                "may do different work; compare their figures with care."
            }
        ]
    ((key, versions),) = by_workflow.items()
    if len(versions) > 1:
        listed = "; ".join(f"v{n} ({_runs_text(pks)})" for n, pks in sorted(versions.items()))
        return [
            {
                "message": f"These runs ran different versions of workflow {names[key]}: {listed}.",
                "workflow": key if isinstance(key, int) else None,
                "old": min(versions),
                "new": max(versions),
            }
        ]
    return []


def run_compare(*, runs: list[Run]) -> dict[str, Any]:
    """Compare runs: groups (repetitions of one launch form one group, shown as mean and 95 % CI),
    run-level rows and a per-application table with deltas against the first group, latency CDFs of
    every latency metric of each application, telemetry overlays, and warnings when the runs did not
    run the same workflow version. A void run (``benchmarks.results.void_reasons``: a failed product
    check, outputs not finite) is left out of its group's figures and listed with its reason (``void``).
    An application's attainment also has the Wilson interval over its group's requests, and its change
    against the first group says whether the intervals separate (``metrics.claim_between``).
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
        why = {r.pk: void_reasons(r.result or {}) for r in batch_runs}
        void = [f"run {pk}: {'; '.join(reasons)}" for pk, reasons in why.items() if reasons]
        sound = [r for r in batch_runs if not why[r.pk]]
        summaries = [r.summary or {} for r in sound]
        column: dict[str, Any] = {
            "label": f"{label} · {first.workflow_label} · {first.scheduler_label}",
            "runs": [r.pk for r in batch_runs],
            "void": void,
            "mean_attainment": _ci(
                [s["mean_attainment"] for s in summaries if s.get("mean_attainment") is not None], FRACTION
            ),
            "fairness": _ci([s["fairness"] for s in summaries if s.get("fairness") is not None], FRACTION),
            "requests_served": sum(s.get("requests_served") or 0 for s in summaries),
            "requests_requested": sum(s.get("requests_requested") or 0 for s in summaries),
            "partial": any(s.get("partial") for s in summaries),
            "makespan_s": _ci([s["makespan_s"] for s in summaries if s.get("makespan_s") is not None]),
            "applications": {},
        }
        names = {n for r in sound for n in by_run[r.pk]}
        for name in sorted(names):
            results = [by_run[r.pk][name] for r in sound if name in by_run[r.pk]]
            engine = _engine_application(results[0])
            shown = shown_metrics(engine) or ["e2e"]
            metric = shown[0]
            # Every latency metric the application recorded, those of its SLOs first.
            latency_metrics = list(dict.fromkeys([*shown, *(m for a in results for m in a.metrics)]))
            requests = [r.metrics for a in results for r in a.requests.all()]
            met = sum(a.requests_met or 0 for a in results)
            due = sum(max(a.requests_requested, a.requests_counted) for a in results)
            pooled = metrics.proportion_interval(met, due) if engine.slo and due else None
            column["applications"][name] = {
                "metric": metric,
                "has_slo": bool(engine.slo),
                "requests": None
                if pooled is None
                else {"met": met, "due": due, "low": pooled[0], "high": pooled[1]},
                "attainment": _ci(
                    [a.slo_attainment for a in results if a.slo_attainment is not None], FRACTION
                ),
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
                "cdfs": {
                    m: _cdf([float(values[m]) for values in requests if m in values])
                    for m in latency_metrics
                    if any(m in values for values in requests)
                },
            }
        columns.append(column)
    base = columns[0] if columns else None
    run_rows = [
        {
            "label": label,
            "pct": kind == "pct",
            "empty": empty,
            "cells": [
                {
                    "value": col[key],
                    "delta": _delta(col[key], base[key], kind, claim=kind == "pct")
                    if col is not base
                    else None,
                    # A partial run's attainment is over the requests asked for (docs/metrics.md).
                    "of_requested": key == "mean_attainment" and col["partial"],
                }
                for col in columns
            ],
        }
        # What a column without the figure shows instead (docs/metrics.md says when each is missing).
        for label, key, kind, empty in (
            ("Mean SLO attainment", "mean_attainment", "pct", "no SLOs"),
            ("Fairness", "fairness", "plain", "none: fewer than two applications with SLOs"),
            ("Makespan (s)", "makespan_s", "s", "-"),
        )
        if base is not None
    ]
    app_names = sorted({n for c in columns for n in c["applications"]})
    table = []
    for name in app_names:
        cells = []
        base_cell = base["applications"].get(name) if base else None
        base_quality = {q["name"]: q for q in base_cell["quality"]} if base_cell else {}
        for col in columns:
            cell = col["applications"].get(name)
            delta = None
            if cell and base_cell and col is not base:
                delta = _delta(cell["attainment"], base_cell["attainment"], "pct")
                if delta and cell["requests"] and base_cell["requests"]:
                    verdict = metrics.claim_between(
                        (cell["requests"]["low"], cell["requests"]["high"]),
                        (base_cell["requests"]["low"], base_cell["requests"]["high"]),
                    )
                    delta += f", {verdict.value}"
                for q in cell["quality"]:
                    other = base_quality.get(q["name"])
                    if other and q["value"] and other["value"]:
                        q["delta"] = _quality_delta(q["value"]["mean"] - other["value"]["mean"], q["unit"])
            cells.append({"cell": cell, "delta_attainment": delta, "partial": col["partial"]})
        table.append({"application": name, "cells": cells})
    telemetry = {
        col["label"]: run_telemetry(
            run=groups_first, metrics_wanted=page_metrics(run=groups_first), points=COMPARE_POINTS
        )
        for col, groups_first in zip(columns, [g[0] for g in groups.values()], strict=True)
    }
    return {
        "columns": columns,
        "run_rows": run_rows,
        "table": table,
        "telemetry": telemetry,
        "warnings": compare_warnings(runs=runs),
        "void": any(col["void"] for col in columns),
    }


# --------------------------------------------------------------------------------------------------
# Live run page
# --------------------------------------------------------------------------------------------------


def _frozen_workflow(run: Run) -> Any:
    """Return the engine's Workflow of the spec the run froze, or None when it no longer loads."""
    try:
        return from_dict(run.spec, name=run.workflow_name, limits=spec_limits())
    except WorkflowValidationError:
        return None


def run_live_nodes(*, run: Run) -> list[dict[str, Any]]:
    """Return the run's nodes in DAG order (each after its dependencies), each with its live progress:
    ``{name, depends_on, type, slo: {metric: threshold_s}, status, done, total, background, last,
    reason, serves}``; ``done`` counts the requests served and ``total`` the requests asked for
    (docs/metrics.md); ``serves``: a model server's client nodes (it serves no requests of its own)."""
    progress = (run.progress or {}).get("nodes") or {}
    workflow = _frozen_workflow(run)
    order = workflow.topological_order() if workflow is not None else list(progress)
    nodes = []
    for name in order:
        n = progress.get(name) or {}
        nodes.append(
            {
                "name": name,
                "depends_on": list(workflow.nodes[name].depend_on) if workflow is not None else [],
                "type": n.get("type") or (workflow.unit_of(name).type if workflow is not None else ""),
                "slo": {s.metric: s.threshold_s for s in workflow.unit_of(name).slo} if workflow else {},
                "status": n.get("status", "pending"),
                "done": int(n.get("done", 0)),
                "total": int(n.get("total", 0)),
                "background": bool(n.get("background")),
                "last": n.get("last") or {},
                "reason": n.get("reason") or "",
                "serves": [str(c) for c in n.get("serves") or []],
            }
        )
    return nodes


def run_queued_count(*, user: Any) -> int:
    """Return how many runs ``user`` has queued."""
    return Run.objects.filter(owner=user, status=Run.Status.QUEUED).count()


def run_waiting(*, platform_id: int | None) -> QuerySet[Run]:
    """Return the runs queued for a platform (None: for any worker) that a worker may still start."""
    where = Q(platform__isnull=True) if platform_id is None else Q(platform_id=platform_id)
    return Run.objects.filter(where, status=Run.Status.QUEUED, cancel_requested=False)


def run_queue_turns(*, platform_id: int | None) -> list[tuple[int, list[int]]]:
    """Return the users with runs queued for a platform (None: for any worker) in the order their
    turns come, each with their queued run ids, oldest first.

    A user's turn comes before another's when their last run started earlier (or they never ran
    one); between users whose last starts tie, the one whose oldest queued run is older goes first.
    Cancel-requested runs are left out: no worker will start them.
    """
    queued: dict[int, list[int]] = {}
    for owner_id, pk in run_waiting(platform_id=platform_id).order_by("pk").values_list("owner_id", "pk"):
        queued.setdefault(owner_id, []).append(pk)
    served = dict(
        Run.objects.filter(owner_id__in=list(queued), started_at__isnull=False)
        .values("owner_id")
        .annotate(last=Max("started_at"))
        .values_list("owner_id", "last")
    )
    never = datetime.min.replace(tzinfo=UTC)
    return sorted(queued.items(), key=lambda item: (served.get(item[0]) or never, item[1][0]))


def run_ahead_in_queue(*, run: Run) -> int:
    """Return how many queued runs start before ``run`` if no other run is queued meanwhile: the users
    take turns (``run_queue_turns``), one run each, in that order."""
    turns = run_queue_turns(platform_id=run.platform_id)
    mine = next((i for i, (_, ids) in enumerate(turns) if run.pk in ids), None)
    if mine is None:
        return 0
    k = turns[mine][1].index(run.pk)  # the user's earlier runs: k rounds before this one's
    return k + sum(min(len(ids), k + (i < mine)) for i, (_, ids) in enumerate(turns) if i != mine)


def run_wait_reason(*, run: Run) -> str | None:
    """Return why a queued run has not started, from the workers' heartbeats (``Platform.last_seen_at``)
    and the runs ahead of it; None for a run that is not queued."""
    if run.status != Run.Status.QUEUED:
        return None
    ahead = run_ahead_in_queue(run=run)
    running = Run.objects.filter(status=Run.Status.RUNNING).count()
    queue = f"{ahead} queued run(s) ahead of it (users take turns) and {running} running"
    if settings.CB_RUN_EXECUTOR == "local":
        return f"The web server executes runs one at a time (no broker is configured): {queue}."
    lost = f"no worker heartbeat within the last {settings.CB_WORKER_LOST_AFTER_S:g} s"
    live = list(platform_live())
    if run.platform is not None:
        if run.platform.pk not in {p.pk for p in live}:
            seen = run.platform.last_seen_at
            when = f"last seen {seen:%Y-%m-%d %H:%M:%S}" if seen else "never seen"
            return (
                f"It waits for a worker on {run.platform.name}, which is not live ({lost}; {when}): "
                "start `consumerbench worker` on that machine."
            )
        return f"Its platform's worker is live; it waits its turn: {queue}."
    workflow = _frozen_workflow(run)
    gpu_nodes = sorted(
        name
        for name in (workflow.nodes if workflow is not None else ())
        if workflow.unit_of(name).device == "gpu"
    )
    if gpu_nodes:
        if not [p for p in live if p.info.get("gpus")]:
            return (
                f"It needs a GPU (device: gpu on {', '.join(gpu_nodes)}) and no GPU worker is live ({lost}): "
                "start `consumerbench worker --gpu N` on a machine with an NVIDIA GPU."
            )
        return f"A GPU worker is live; it waits its turn: {queue}."
    if not live:
        return f"No worker is live ({lost}): start `consumerbench worker` on a machine."
    return f"A worker is live; it waits its turn: {queue}."


# --------------------------------------------------------------------------------------------------
# History of a workflow: its runs over time or commit, with regressions marked
# --------------------------------------------------------------------------------------------------

# The history page reads at most this many of a workflow's latest succeeded runs: each costs a
# comparison of its request rows with the previous run's.
HISTORY_RUNS = 60
HISTORY_ORDERS = ("time", "commit")


def _key_metrics(app: ApplicationResult) -> list[str]:
    """Return an application's key latencies: its type's SLO-able metrics that the run measured."""
    declared = APP_TYPES[app.type].slo_metrics if app.type in APP_TYPES else ()
    return [m for m in declared if (app.metrics.get(m) or {}).get("count")]


def _history_samples(run_ids: list[int]) -> dict[int, list[dict[str, Any]]]:
    """Return each run's request rows as the regression comparison reads them."""
    rows: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for run_id, app, status, warmup, values in RequestResult.objects.filter(
        application__run_id__in=run_ids
    ).values_list("application__run_id", "application__name", "status", "warmup", "metrics"):
        rows[run_id].append({"application": app, "status": status, "warmup": warmup, "metrics": values})
    return rows


def run_history(*, workflow_id: int, order: str = "time") -> dict[str, Any]:
    """Return the history of a workflow's succeeded runs (its latest ``HISTORY_RUNS``) for the
    history page and its charts.

    Points, oldest first: with ``order="time"`` one per batch (runs launched together), with
    ``order="commit"`` one per commit (runs without a commit: one per workflow version), placed at
    its first run. Per point and application: SLO attainment and the p50 and p99 of each key latency,
    each the mean over the point's runs with its 95 % t interval (``metrics.mean_ci95``; none for a
    single run). Each run is compared with the run before it on the same platform under the same
    scheduler and parameters (``benchmarks.regress.compare_runs``, as ``consumerbench submit
    --baseline``); a point lists its runs' regressions.
    """
    if order not in HISTORY_ORDERS:
        raise ValueError(f"order is one of {HISTORY_ORDERS}")
    runs = list(
        Run.objects.filter(workflow_version__workflow_id=workflow_id, status=Run.Status.SUCCEEDED)
        .order_by("-created_at", "-id")
        .prefetch_related("application_results")[:HISTORY_RUNS]
    )[::-1]
    samples = _history_samples([r.pk for r in runs])
    regressions: dict[int, list[dict[str, Any]]] = {}
    # A run is compared with the previous run of the same configuration (platform and scheduler with
    # its parameters): a change of scheduler is not a regression of the code.
    previous: dict[tuple[int | None, str], Run] = {}
    for run in runs:
        config = (run.platform_id, run.scheduler_label)
        before = previous.get(config)
        previous[config] = run
        if before is None:
            continue
        regressions[run.pk] = [
            {"run": run.pk, "against": before.pk, "application": c.application, "metric": c.metric,
             "ratio": c.ratio, "p_value": c.p_value}
            for c in regress.regressed(regress.compare_runs(samples[before.pk], samples[run.pk]))
        ]  # fmt: skip
    groups: dict[str, list[Run]] = {}
    for run in runs:
        key = (run.commit or f"v{run.version_number}") if order == "commit" else str(run.batch)
        groups.setdefault(key, []).append(run)
    applications: dict[str, dict[str, Any]] = {}
    points: list[dict[str, Any]] = []
    for key, members in groups.items():
        per_app: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
        for run in members:
            for app in run.application_results.all():
                info = applications.setdefault(
                    app.name, {"type": app.type, "slo": bool(app.slo), "metrics": []}
                )
                figures = per_app[app.name]
                if app.slo_attainment is not None:
                    figures["attainment"].append(app.slo_attainment)
                for metric in _key_metrics(app):
                    if metric not in info["metrics"]:
                        info["metrics"].append(metric)
                    for q in ("p50", "p99"):
                        figures[f"{metric} {q}"].append(app.metrics[metric][q])
        first = members[0]
        label = (
            (key[:10] if first.commit else key)
            if order == "commit"
            else f"#{first.pk}" + (f"-{members[-1].pk}" if len(members) > 1 else "")
        )
        points.append(
            {
                "label": label,
                "runs": [r.pk for r in members],
                "created_at": first.created_at.strftime("%Y-%m-%d %H:%M"),
                "commit": first.commit,
                "branch": first.branch,
                "version": first.version_number,
                "applications": {
                    name: {
                        figure: _ci(values, FRACTION if figure == "attainment" else (0.0, math.inf))
                        for figure, values in figures.items()
                    }
                    for name, figures in per_app.items()
                },
                "regressions": [x for r in members for x in regressions.get(r.pk, [])],
            }
        )
    # The table's columns, application by application: attainment (when it has SLOs), then the p50
    # and p99 of each key latency; each point's cells in that order.
    columns = [
        {"application": name, "figure": figure, "pct": figure == "attainment"}
        for name, info in applications.items()
        for figure in (["attainment"] if info["slo"] else [])
        + [f"{m} {q}" for m in info["metrics"] for q in ("p50", "p99")]
    ]
    for point in points:
        point["cells"] = [
            {"value": point["applications"].get(c["application"], {}).get(c["figure"]), "pct": c["pct"]}
            for c in columns
        ]
    spans = [
        {"application": name, "span": sum(c["application"] == name for c in columns)} for name in applications
    ]
    return {
        "order": order,
        "applications": applications,
        "columns": columns,
        "column_groups": [g for g in spans if g["span"]],
        "points": points,
        "limit": HISTORY_RUNS,
    }
