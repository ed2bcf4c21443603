"""The result document of a run, built from the runner's node states and the records on disk.

Nobody re-derives it: the CLI, the web and the sweeps read this ``ResultDocument``
(benchmarks.results, docs/result-format.md).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from benchmarks import metrics
from benchmarks.apps import app_type
from benchmarks.monitor.run import RunMonitor
from benchmarks.platform import fingerprint
from benchmarks.results import SCHEMA_VERSION, ApplicationResult, NodeResult, RequestResult, ResultDocument
from benchmarks.runner.records import read_records
from benchmarks.runner.state import NodeState
from benchmarks.spec.export import to_dict
from benchmarks.spec.model import Workflow
from benchmarks.status import NodeStatus, RequestStatus, RunStatus

# What the monitor needs of each application's requests: when they ran, and whether they count.
_REQUEST_TIMES: dict[str, Any] = {"name": True, "requests": {"__all__": {"status", "warmup", "start", "end"}}}


def build_result(
    workflow: Workflow,
    nodes: Mapping[str, NodeState],
    *,
    status: RunStatus,
    reason: str | None,
    scheduler: dict[str, Any],
    monitor: RunMonitor,
    t0: float,
    started_wall: float,
    repeat_index: int,
) -> ResultDocument:
    """Return the run's result: its nodes, its applications (requests read back from their records
    files) and the run's figures; times relative to ``t0``, the run's start on the shared clock."""
    # A model server's node serves its clients' requests and has none of its own: it is a node of the
    # result, not an application (its memory is in the telemetry, under its node's name).
    applications = [application_result(state) for state in nodes.values() if not app_type(state.unit).serves]
    foreground_ends = [s.finished_at for s in nodes.values() if not s.background and s.finished_at]
    all_ends = [s.finished_at for s in nodes.values() if s.finished_at]
    ends = foreground_ends or all_ends
    makespan = max(ends) - t0 if ends else None
    summary = metrics.run_summary(
        [a.model_dump(include={"slo_attainment", "normalized_latency"}) for a in applications], makespan
    )
    spans = [a.model_dump(include=_REQUEST_TIMES) for a in applications]
    spans += [{"name": s.name, "requests": []} for s in nodes.values() if app_type(s.unit).serves]
    return ResultDocument(
        schema_version=SCHEMA_VERSION,
        status=status,
        reason=reason,
        workflow=to_dict(workflow),
        scheduler=scheduler,
        platform=fingerprint(),
        repeat_index=repeat_index,
        started_at_unix=started_wall,
        clock={"t0_monotonic": t0, "unit": "seconds since t0"},
        makespan_s=makespan,
        critical_path=critical_path(workflow, nodes),
        mean_attainment=summary["mean_attainment"],
        fairness=summary["fairness"],
        requests_requested=sum(a.requests_requested for a in applications),
        requests_served=sum(a.requests_counted for a in applications),
        nodes=[node_result(state, t0) for state in nodes.values()],
        applications=applications,
        telemetry=monitor.result(spans, max(all_ends) - t0 if all_ends else None),
    )


def _load_time(state: NodeState) -> float | None:
    if state.load_finished is None or state.load_started is None:
        return None
    return state.load_finished - state.load_started


def node_result(state: NodeState, t0: float) -> NodeResult:
    """Return a node's ``nodes`` entry: status, reason unless it succeeded, times since ``t0``."""
    return NodeResult(
        name=state.name,
        uses=state.unit.name,
        background=state.background,
        device=state.device,
        status=state.status,
        started_at=None if state.started_at is None else state.started_at - t0,
        finished_at=None if state.finished_at is None else state.finished_at - t0,
        load_time_s=_load_time(state),
        start_wait_s=(
            max(0.0, state.released_at - state.load_finished)
            if state.released_at is not None and state.load_finished is not None
            else None
        ),
        reason=state.reason if state.status is not NodeStatus.SUCCEEDED else None,
        server=server_record(state),
        kernel_trace=state.trace_name if state.trace_file and state.trace_file.is_file() else None,
    )


def server_record(state: NodeState) -> dict[str, Any] | None:
    """Return a model server node's ``server`` record: what it loaded and the seconds its batches were
    held back at the scheduler's gate (``gate_wait_s``); None for any other node."""
    if not app_type(state.unit).serves:
        return None
    return {**state.loaded, "gate_wait_s": state.gate_wait_s} if state.loaded else None


def requested(state: NodeState) -> int:
    """Return the requests the workflow asked of a node (warm-up left out): those its driver planned
    once loaded (a stream's chunks), else ``num_requests`` per session; for a node the runner stopped
    by design (a background node once the foreground finished), only those it began and was not
    stopped in."""
    if state.stopped_by_design:
        return state.began
    if state.planned is not None:
        return state.planned
    return state.unit.num_requests * state.unit.concurrency


def application_result(state: NodeState) -> ApplicationResult:
    """Return a node's ``applications`` entry: its requests read back from its records file (bounded
    by the workflow's requests per run, spec.Limits), each judged against the unit's SLOs, their
    figures, attainment over the requests the workflow asked for (``requested``), and the quality
    figures its application type declares (``AppType.quality``)."""
    unit, slos = state.unit, state.unit.slo
    # One record at a time from the file into its typed form: the records are held once, not also
    # as the dicts they were read as (the metrics read the models' own field mappings, vars()).
    requests = [
        RequestResult.model_validate({**r, "slo_met": None}) for r in read_records(state.records_path)
    ]
    for r in requests:
        r.slo_met = metrics.request_slo_met(vars(r), slos) if r.status is RequestStatus.OK else None
    records = [vars(r) for r in requests]
    asked = requested(state)
    figures = metrics.application_metrics(records, slos, asked)
    quality = metrics.quality_figures(records, app_type(unit).quality)
    return ApplicationResult.model_validate(
        {
            "name": state.name,
            "unit": unit.name,
            "type": unit.type,
            "device": state.device,
            "priority": unit.priority,
            "model": unit.model,
            "loaded": state.loaded,
            "slo": slos,
            "load_time_s": _load_time(state),
            "requests_total": len(requests),
            "requests_requested": max(asked, figures["requests_counted"]),
            **figures,
            "gate_wait_s": state.gate_wait_s,
            "quality": quality,
            "requests": requests,
        }
    )


def critical_path(workflow: Workflow, nodes: Mapping[str, NodeState]) -> list[str]:
    """Return the critical path: walk back from the last foreground node to finish through its
    latest-finishing foreground dependency (empty when no foreground node finished). Background
    nodes are never on it: they run until the foreground ends, so they finish last by design."""
    done = {n: s for n, s in nodes.items() if s.finished_at is not None and not s.background}
    if not done:
        return []
    current: str | None = max(done, key=lambda n: done[n].finished_at or 0.0)
    path: list[str] = []
    while current is not None:
        path.append(current)
        deps = [d for d in workflow.nodes[current].depend_on if d in done]
        current = max(deps, key=lambda d: done[d].finished_at or 0.0) if deps else None
    return path[::-1]
