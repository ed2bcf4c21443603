"""The result bundle: ``result.json`` (schema below, documented in docs/result-format.md) and CSVs.

``ResultDocument`` is ``result.json``: the runner builds it (``benchmarks.runner.result``),
``write_bundle`` writes it, ``load_bundle`` reads it back (any schema version), the web stores it.
Its ``failed_nodes()`` and ``problem()`` are the one decision of what failed in a run; ``slo_table``
and ``quality_table`` are the tables the CLI prints and the result page shows.
"""

from __future__ import annotations

import csv
import json
import re
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from benchmarks.files import bundle_path
from benchmarks.metrics import Attainment, attainment, fairness, not_finite
from benchmarks.spec.model import SLO, parse_slo
from benchmarks.status import NodeStatus, RequestStatus, RunStatus

# Version 2: an application's ``slo`` is a list of {metric, op, threshold_s} (version 1: strings such
# as "ttft<=1.0s"). Version 3: each application has ``quality`` (its quality figures), and
# ``fairness`` is Jain's index over the applications' SLO attainment, which is over the requests the
# workflow asked for (``requests_requested``; version 2: over the served ones, fairness over mean
# latencies). Version 4: every latency includes the scheduler gate's holds (ImageGen's step,
# text_encode and vae_decode, Synthetic's step left them out), each request records ``gate_wait`` and
# each application ``gate_wait_s``. load_bundle and ResultDocument read versions 1 to 3 too
# (see ``upgrade``).
SCHEMA_VERSION = 4


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class RequestResult(_Strict):
    index: int
    arrival: float = Field(description="seconds since run start when the request was due")
    start: float
    end: float
    status: RequestStatus
    warmup: bool
    slo_met: bool | None
    metrics: dict[str, float]
    info: dict[str, Any]
    series: dict[str, list[float]]
    error: str | None


class MetricSummary(_Strict):
    count: float
    mean: float | None = None
    min: float | None = None
    max: float | None = None
    p50: float | None = None
    p90: float | None = None
    p99: float | None = None


class QualityFigure(_Strict):
    """One quality figure of an application (docs/metrics.md): its value, unit and sample size."""

    value: float
    unit: str = Field(description="e.g. tokens/s; a 'fraction' is 0-1 and shown as a percentage")
    count: int = Field(ge=0, description="how many counted requests (or streams) it is computed from")


class ApplicationResult(_Strict):
    name: str = Field(description="the node name")
    unit: str
    type: str
    device: Literal["gpu", "cpu"]
    priority: Literal["high", "medium", "low"]
    model: str | None
    loaded: dict[str, Any]
    slo: list[SLO] = Field(description="the application's SLOs: metric, op (< or <=), threshold_s")
    load_time_s: float | None
    requests_total: int = Field(description="records reported, warm-up and interrupted ones included")
    requests_requested: int = Field(
        ge=0, description="requests the workflow asked for, warm-up left out: the attainment's denominator"
    )
    requests_counted: int
    requests_met: int | None
    slo_attainment: float | None = Field(ge=0, le=1)
    metrics: dict[str, MetricSummary]
    normalized_latency: dict[str, float]
    throughput_rps: float | None = Field(
        description="counted requests per second over the serving window (docs/metrics.md)"
    )
    goodput_rps: float | None = Field(
        None,
        description="requests that met every SLO per second over the same window; none without SLOs "
        "(and in results written before it was recorded)",
    )
    gate_wait_s: float | None = Field(
        None,
        ge=0,
        description="seconds the application's process was held back at the scheduler's gate over the "
        "run, warm-up and interrupted requests included (0 under greedy); None: not recorded (a "
        "process that died, a result of schema version 3 or older)",
    )
    quality: dict[str, QualityFigure] = Field(
        default_factory=dict, description="the type's quality figures (empty before schema version 3)"
    )
    requests: list[RequestResult]


class NodeResult(_Strict):
    name: str
    uses: str
    background: bool
    device: Literal["gpu", "cpu"]
    status: Literal[NodeStatus.SUCCEEDED, NodeStatus.FAILED, NodeStatus.STOPPED, NodeStatus.SKIPPED]
    started_at: float | None
    finished_at: float | None
    load_time_s: float | None
    start_wait_s: float | None = Field(
        None, description="start_together: seconds between the node's load end and its first request's go"
    )
    reason: str | None
    server: dict[str, Any] | None = Field(
        None,
        description="a model server node (LLMServer): what it loaded and where it served "
        "(backend, model, url, port, pid, parallel, n_ctx, threads, rss_mb after load)",
    )
    kernel_trace: str | None = Field(
        None,
        description="the node's kernel trace in the bundle (docs/monitor.md), when it was traced: its "
        "latencies then include CUPTI's cost",
    )


class TelemetrySource(_Strict):
    status: Literal["available", "unavailable"]
    reason: str | None = Field(description="why the source is unavailable")
    columns: list[str]
    samples: int = Field(ge=0, description="rows recorded (one per entity per tick)")
    file: str | None = Field(description="the CSV in the bundle, e.g. telemetry/nvml.csv")


class WindowTelemetry(_Strict):
    """What the device did over a window (the whole run, or one application's active time)."""

    sm_activity_mean_pct: float | None
    sm_activity_source: str | None = Field(description="gpm, dcgm, or nvml (utilisation) as fallback")
    sm_occupancy_mean_pct: float | None
    gpu_energy_j: float | None = Field(description="difference of NVML's energy counter, all visible GPUs")
    gpu_energy_per_request_j: float | None
    cpu_energy_j: float | None = Field(description="difference of the RAPL package counters")
    cpu_energy_per_request_j: float | None


class RunTelemetry(WindowTelemetry):
    gpu_memory_peak_bytes: int | None


class ServingTelemetry(WindowTelemetry):
    active_from_s: float = Field(description="start of the first counted request of any application")
    active_to_s: float = Field(description="end of the last counted request of any application")


class ApplicationTelemetry(WindowTelemetry):
    active_from_s: float | None = Field(description="start of the first counted request")
    active_to_s: float | None = Field(description="end of the last counted request")
    gpu_memory_peak_bytes: int | None = Field(description="the application's own processes")
    cpu_percent_mean: float | None = Field(
        description="its processes, 100 = one core, over its active time (each sample weighted by the "
        "part of its interval inside it)"
    )
    rss_peak_bytes: int | None
    gpu_time_share_pct: float | None = Field(
        None,
        description="its processes' share of the GPU's time over its active time, % (NVML's per-process "
        "SM utilisation: the part of each sampling period in which one of its kernels ran); None "
        "without NVML or under MPS",
    )


class TelemetryResult(_Strict):
    """The system monitor's part of a result (docs/monitor.md); the samples are in telemetry/*.csv."""

    hz: float = Field(gt=0)
    ticks: int = Field(ge=0)
    missed_ticks: int = Field(ge=0)
    monitor_cpu_s: float | None = Field(description="CPU time the sampler process used")
    error: str | None
    sources: dict[str, TelemetrySource]
    run: RunTelemetry
    serving: ServingTelemetry | None = Field(
        None, description="while any application served counted requests (model loads left out)"
    )
    applications: dict[str, ApplicationTelemetry]


class ResultDocument(_Strict):
    """``result.json``: what the runner returns, write_bundle writes and load_bundle reads."""

    schema_version: Literal[4]
    status: Literal[RunStatus.COMPLETED, RunStatus.CANCELLED, RunStatus.FAILED]
    reason: str | None
    workflow: dict[str, Any]
    scheduler: dict[str, Any]
    platform: dict[str, Any]
    repeat_index: int = Field(ge=1)
    started_at_unix: float
    clock: dict[str, Any]
    makespan_s: float | None
    critical_path: list[str]
    mean_attainment: float | None = Field(ge=0, le=1)
    fairness: float | None = Field(gt=0, le=1.0000001)
    requests_requested: int = Field(ge=0, description="over the applications")
    requests_served: int = Field(ge=0, description="counted requests over the applications")
    nodes: list[NodeResult]
    applications: list[ApplicationResult]
    telemetry: TelemetryResult | None = Field(None, description="None when the run had the monitor off")

    @model_validator(mode="before")
    @classmethod
    def _read_older_versions(cls, data: Any) -> Any:
        return upgrade(data) if isinstance(data, dict) else data

    def failed_nodes(self) -> list[NodeResult]:
        """Return the nodes that did not do their work (failed, or skipped), in workflow order."""
        return [n for n in self.nodes if n.status.failing]

    def partial(self) -> bool:
        """Return whether the run did not do all its work: cancelled, failed, or a node failed."""
        return self.problem() is not None

    def problem(self) -> str | None:
        """Return why the run did not succeed, or None when it did (it completed and no node failed).

        The run's own reason when it was cancelled or failed as a whole, else each failed node's.
        """
        if self.status is not RunStatus.COMPLETED:
            return self.reason or ("cancelled" if self.status is RunStatus.CANCELLED else "the run failed")
        failed = self.failed_nodes()
        if not failed:
            return None
        return "; ".join(f"node '{n.name}' {n.status}: {n.reason or 'no reason given'}" for n in failed)


def accelerators(result: Mapping[str, Any]) -> list[str]:
    """Return ``node: accelerator`` for each node that ran a model, from a ``result.json`` mapping (a
    ``ResultDocument``'s ``model_dump()`` or what the web stores): the accelerator it really used
    (``cuda:0 (NVIDIA H200)``, ``mps (Apple silicon)``, ``cpu``; ``benchmarks.platform.accelerator``),
    the captions backend ``backend: auto`` chose and why, and for a model server's client the server
    that ran its model. Results written before the accelerator was recorded give none."""
    lines = []
    for node in result.get("nodes", []):
        server = node.get("server") or {}
        if server.get("accelerator"):
            lines.append(f"{node['name']}: {server['accelerator']} ({server.get('backend', 'server')})")
    for app in result.get("applications", []):
        loaded = app.get("loaded") or {}
        if loaded.get("accelerator"):
            line = f"{app['name']}: {loaded['accelerator']}"
            if loaded.get("backend_choice"):
                line += f" ({loaded.get('backend')}; {loaded['backend_choice']})"
            lines.append(line)
        elif loaded.get("backend") == "server" and loaded.get("server"):
            lines.append(f"{app['name']}: through model server '{loaded['server']}'")
    return lines


def traced_nodes(result: Mapping[str, Any]) -> list[str]:
    """Return the nodes whose GPU kernels were traced (``nodes[].kernel_trace``), from a ``result.json``
    mapping: their latencies include CUPTI's cost (docs/monitor.md, "Kernel traces")."""
    return [
        str(n.get("name")) for n in result.get("nodes", []) if isinstance(n, dict) and n.get("kernel_trace")
    ]


def scheduler_settings(result: Mapping[str, Any]) -> dict[str, Any]:
    """Return what a run's scheduler ran with, read from its result (not from the sweep file, which may
    have changed since): its parameters (defaults filled in; None when not recorded) and, for an MPS
    scheduler (partition, or credit-mps's ``mps``), each node's SM share in percent and each share's
    product check (None: the result records none, as before the check existed). A value of the wrong
    type (an old or hand-edited result) reads as not recorded."""
    scheduler = _mapping(result.get("scheduler"))
    mps = _mapping(scheduler.get("mps")) or scheduler
    params = scheduler.get("params")
    out: dict[str, Any] = {"params": params if isinstance(params, dict) else None}
    if shares := _mapping(mps.get("shares_percent")):
        checks = _mapping(mps.get("product_check"))
        out["shares_percent"] = shares
        out["product_check"] = (
            {share: _mapping(check).get("status") for share, check in checks.items()} if checks else None
        )
    return out


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def format_shares(settings: Mapping[str, Any]) -> str | None:
    """Return the SM shares of ``scheduler_settings`` as text, each share's product check after them
    ("chat 25 %, image 50 %, captions 25 % (product check: 25 % passed, 50 % passed)"; "no product
    check recorded" for a run from before the check), or None when the run had none (a scheduler
    without MPS)."""
    shares = settings.get("shares_percent")
    if not shares:
        return None
    text = ", ".join(f"{node} {share} %" for node, share in shares.items())
    checks = settings.get("product_check")
    if checks is None:
        return text + " (no product check recorded)"
    return (
        text
        + " (product check: "
        + ", ".join(f"{k} % {v or 'not recorded'}" for k, v in checks.items())
        + ")"
    )


def void_reasons(result: Mapping[str, Any]) -> list[str]:
    """Return why a run's figures are void, from a ``result.json`` mapping: a failed product check of
    its MPS shares (its applications computed on wrong products), or applications whose outputs were
    not all finite (a ``finite_*`` quality figure below 100 %). Empty for a sound run. A void run
    leaves every mean of the summaries and of the compare page, listed with these reasons."""
    reasons = []
    checks = scheduler_settings(result).get("product_check") or {}
    if failed := [share for share, status in checks.items() if status == "failed"]:
        reasons.append("product check failed at " + ", ".join(f"{share} %" for share in failed))
    applications = [a for a in result.get("applications", []) if isinstance(a, Mapping)]
    if nan := not_finite(applications):
        reasons.append(
            "outputs not finite: "
            + ", ".join(f"{app} {100 * share:.0f} % finite" for app, share in nan.items())
        )
    return reasons


def upgrade(data: dict[str, Any]) -> dict[str, Any]:
    """Return a ``result.json`` mapping of an earlier schema version in the current shape (JSON types
    only), or ``data`` itself when it is not of an earlier version.

    Version 1 -> 2: each application's SLO strings ("ttft<=1.0s") become {metric, op, threshold_s}.
    Version 2 -> 3: ``quality`` was not recorded (it reads as empty); those bundles did not record
    what the workflow asked for, so an application's ``requests_requested`` is its counted requests
    (its attainment stays over them), and the fairness is recomputed from the applications'
    attainment (benchmarks.metrics.fairness).
    Version 3 -> 4: ``gate_wait_s`` was not recorded (it reads as None); the times stay as measured
    (an ImageGen step of version 3 leaves out the gate's holds: docs/result-format.md).
    Raises ValueError for an SLO string that does not parse.
    """
    version = data.get("schema_version")
    if version == 3:
        return {**data, "schema_version": SCHEMA_VERSION}
    if version not in (1, 2):
        return data
    applications = data.get("applications")
    if not isinstance(applications, list) or not all(isinstance(a, dict) for a in applications):
        return {**data, "schema_version": SCHEMA_VERSION}
    if version == 1:
        applications = [{**app, "slo": [slo_of_v1(s) for s in app.get("slo", [])]} for app in applications]
    applications = [{**app, "requests_requested": app.get("requests_counted")} for app in applications]
    return {
        **data,
        "schema_version": SCHEMA_VERSION,
        "applications": applications,
        "fairness": fairness([a.get("slo_attainment") for a in applications]),
        "requests_requested": sum(_count(a.get("requests_counted")) for a in applications),
        "requests_served": sum(_count(a.get("requests_counted")) for a in applications),
    }


def _count(value: Any) -> int:
    # Validation refuses a non-integer count where it stands; the sum leaves it out.
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


# Beside the SLO attainment of a partial run wherever it is shown (headline, CLI tables, pages): it is
# over every request the workflow asked for, the ones never served counted as misses (docs/metrics.md).
ATTAINMENT_OF_REQUESTED = "of requested"


def headline(
    mean_attainment: float | None, served: int, requested: int, partial: bool, *, measured: bool = True
) -> str:
    """Return a run's headline figure: "mean SLO attainment 93.0%" or "no SLOs", prefixed by
    "partial: served N of M, " when the run did not do all its work, its attainment then followed by
    "of requested" (ATTAINMENT_OF_REQUESTED); only "partial: served N of M" for a run that ended
    without a result (``measured`` false). The CLI, ``submit``, the API and the pages all show this
    text."""
    figure = "no SLOs" if mean_attainment is None else f"mean SLO attainment {mean_attainment:.1%}"
    if not partial:
        return figure
    if mean_attainment is not None:
        figure = f"{figure} {ATTAINMENT_OF_REQUESTED}"
    served_text = f"partial: served {served} of {requested}"
    return f"{served_text}, {figure}" if measured else served_text


def slo_of_v1(slo: Any) -> Any:
    """Return a version 1 SLO string as a version 2 mapping {metric, op, threshold_s}; anything else as
    it is (a mapping already, or what validation will refuse)."""
    return parse_slo(slo).model_dump() if isinstance(slo, str) else slo


def default_out_dir(workflow_name: str, root: Path = Path("results")) -> Path:
    """Return ``results/<workflow>-<UTC timestamp>/`` (a fresh, not yet existing directory)."""
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime())
    safe = re.sub(r"[^A-Za-z0-9_.-]+", "_", workflow_name).strip("_") or "workflow"
    path = root / f"{safe}-{stamp}"
    n = 2
    while path.exists():
        path = root / f"{safe}-{stamp}-{n}"
        n += 1
    return path


def write_bundle(result: ResultDocument, out_dir: Path) -> Path:
    """Write ``result.json`` and one CSV of requests per application; return the result.json path.

    The JSON is written to a temporary name and renamed, so a reader never sees half a file. Fields
    a summary leaves out (a metric without values has only ``count``) stay out of the JSON.
    """
    out_dir.mkdir(parents=True, exist_ok=True)
    for app in result.applications:
        # Node names are identifiers (benchmarks.spec), so each maps to its own file, checked to stay here.
        _write_requests_csv(app, bundle_path(out_dir, f"{app.name}.csv"))
    path = out_dir / "result.json"
    tmp = path.with_suffix(".json.tmp")
    document = result.model_dump(mode="json", exclude_unset=True)
    # Written as it is encoded: a long run's result.json is never held as one string as well.
    with tmp.open("w", encoding="utf-8") as fh:
        for chunk in json.JSONEncoder(indent=1, allow_nan=False).iterencode(document):
            fh.write(chunk)
    tmp.replace(path)
    return path


def _write_requests_csv(app: ApplicationResult, path: Path) -> None:
    metric_names = sorted({m for r in app.requests for m in r.metrics})
    info_names = sorted({k for r in app.requests for k, v in r.info.items() if _scalar(v)})
    with path.open("w", newline="") as fh:
        writer = csv.writer(fh)
        writer.writerow(
            [
                "index",
                "arrival_s",
                "start_s",
                "end_s",
                "status",
                "warmup",
                "slo_met",
                *[f"{m}_s" for m in metric_names],
                *info_names,
            ]
        )
        for r in app.requests:
            writer.writerow(
                [
                    r.index,
                    f"{r.arrival:.6f}",
                    f"{r.start:.6f}",
                    f"{r.end:.6f}",
                    r.status,
                    int(r.warmup),
                    "" if r.slo_met is None else int(r.slo_met),
                    *[_fmt(r.metrics.get(m)) for m in metric_names],
                    *[r.info.get(k, "") for k in info_names],
                ]
            )


def _scalar(value: Any) -> bool:
    return isinstance(value, str | int | float | bool) or value is None


def _fmt(value: float | None) -> str:
    return "" if value is None else f"{value:.6f}"


def load_bundle(path: Path) -> ResultDocument:
    """Read and validate a ``result.json`` (or the bundle directory holding it); return it in the
    current schema (a version 1 bundle is upgraded as it is read)."""
    if path.is_dir():
        path = path / "result.json"
    return ResultDocument.model_validate_json(path.read_text())


@dataclass(frozen=True)
class SloRow:
    """One row of the SLO table: one application's figures on one of its SLO metrics.

    An application has one row per SLO metric (or one ``e2e`` row without SLOs); the per-application
    cells (attainment, request counts, load time, throughput, goodput) belong to its ``first`` row, which
    spans ``span`` rows.
    """

    application: str
    type: str
    first: bool
    span: int
    metric: str  # "-" when the application has neither an SLO nor an e2e figure
    slo: SLO | None  # the SLO on this metric (shown as "ttft<=1.0s"); None when none
    attainment: float | None
    requests_met: int | None
    requests_counted: int
    requests_requested: int
    requests_total: int
    p50: float | None
    p90: float | None
    p99: float | None
    normalized: float | None
    load_time_s: float | None
    throughput_rps: float | None
    goodput_rps: float | None
    # The attainment's 95 % interval and its curve against the scaled SLO thresholds, from the
    # application's requests (None when the result at hand holds no request or the application no SLO).
    attainment_detail: Attainment | None = None


def shown_metrics(application: ApplicationResult) -> list[str]:
    """Return the metrics the SLO table shows for an application: those of its SLOs, else ``e2e``
    when it has that figure, else none; then ``gate_wait`` when the scheduler's gate held it back at
    all (what scheduling cost it, beside the latencies that include it)."""
    shown = [s.metric for s in application.slo] or [m for m in ("e2e",) if m in application.metrics]
    if application.gate_wait_s and "gate_wait" in application.metrics and "gate_wait" not in shown:
        shown.append("gate_wait")
    return shown


def slo_table(applications: Iterable[ApplicationResult]) -> list[SloRow]:
    """Return the SLO table of a result's ``applications`` (the CLI prints it, the result page shows
    it): per application one row per shown metric, in the result's order; the attainment's interval
    and curve (``metrics.attainment``) come from the applications' requests."""
    rows = []
    for app in applications:
        shown = shown_metrics(app)
        detail = (
            attainment([r.model_dump() for r in app.requests], app.slo, app.requests_requested)
            if app.requests
            else None
        )
        for i, metric in enumerate(shown or ["-"]):
            summary = app.metrics.get(metric)
            rows.append(
                SloRow(
                    application=app.name,
                    type=app.type,
                    first=i == 0,
                    span=len(shown) or 1,
                    metric=metric,
                    slo=next((s for s in app.slo if s.metric == metric), None),
                    attainment=app.slo_attainment,
                    requests_met=app.requests_met,
                    requests_counted=app.requests_counted,
                    requests_requested=app.requests_requested,
                    requests_total=app.requests_total,
                    p50=summary.p50 if summary else None,
                    p90=summary.p90 if summary else None,
                    p99=summary.p99 if summary else None,
                    normalized=app.normalized_latency.get(metric),
                    load_time_s=app.load_time_s,
                    throughput_rps=app.throughput_rps,
                    goodput_rps=app.goodput_rps,
                    attainment_detail=detail,
                )
            )
    return rows


def format_quality(figure: QualityFigure) -> str:
    """Return a quality figure as shown in tables: a fraction as a percentage ("12.5 %"), anything
    else with three significant digits and its unit ("41.2 tokens/s")."""
    if figure.unit == "fraction":
        return f"{figure.value:.1%}".replace("%", " %")
    return f"{figure.value:.3g} {figure.unit}"


@dataclass(frozen=True)
class QualityRow:
    """One row of the quality table: one figure of one application, formatted with its unit."""

    application: str
    type: str
    first: bool
    span: int
    name: str
    value: str
    count: int


def quality_table(applications: Iterable[ApplicationResult]) -> list[QualityRow]:
    """Return the quality table of a result's ``applications`` (the CLI prints it, the result page
    shows it): per application one row per quality figure, in the result's order; an application
    without figures has no row."""
    rows = []
    for app in applications:
        for i, (name, figure) in enumerate(app.quality.items()):
            rows.append(
                QualityRow(
                    application=app.name,
                    type=app.type,
                    first=i == 0,
                    span=len(app.quality),
                    name=name,
                    value=format_quality(figure),
                    count=figure.count,
                )
            )
    return rows
