"""The run state machine: every write to a run goes through here.

queued --claim--> running --finish--> succeeded | failed | cancelled
queued --cancel--> cancelled            running --fail--> failed
Run execution (``cbweb/runs/execution.py``) calls ``run_claim``, ``run_progress``, ``run_store_telemetry``,
``run_finish`` and ``run_fail`` with ids only; pages and the API call ``run_cancel``, and launch runs
with ``cbweb.runs.dispatch.run_launch`` (``run_create``, then each run handed to its executor);
the sweeper (``cbweb/runs/sweeper.py``) calls ``run_reap`` (running runs whose worker is lost -> failed)
and ``run_take_for_dispatch`` (queued runs with no message on the broker -> sent again).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping, Sequence
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError
from django.db import connection, transaction
from django.db.models import DateTimeField, ExpressionWrapper, F, Q
from django.db.models.functions import Now
from django.utils import timezone

from benchmarks.platform import gpus
from benchmarks.progress import ProgressState, initial_progress
from benchmarks.results import ResultDocument, headline
from benchmarks.runmeta import MetaError, RunMeta, check_meta
from benchmarks.runner.checks import memory_problems
from benchmarks.schedulers import (
    SCHEDULERS,
    SchedulerError,
    SchedulerParamError,
    effective_choice,
    schedulers_for,
)
from benchmarks.spec import load as spec_load
from benchmarks.spec import model as spec_model
from benchmarks.status import RunStatus
from cbweb.permissions import check_can_edit
from cbweb.platforms.models import Platform
from cbweb.runs.models import ApplicationResult, NodeResult, RequestResult, Run, RunTag, TelemetryChunk
from cbweb.runs.selectors import run_queue_turns, run_queued_count, run_telemetry, run_waiting
from cbweb.runs.telemetry import ChunkWrite, encode
from cbweb.workflows.limits import spec_limits
from cbweb.workflows.models import WorkflowVersion
from cbweb.workflows.services import workflow_check_files

MAX_REPEATS = 50
# Telemetry chunks per INSERT: a full chunk is 2 x 32 KiB of arrays, so 64 rows make statements of
# at most 4 MiB (one round trip for a flush of up to 64 metrics) and 9 x 64 bound parameters, under
# SQLite's limit.
TELEMETRY_WRITE_BATCH = 64
# Request rows are inserted in batches of this size: large enough to amortise round trips, small
# enough to stay under SQLite's bound-parameter limit (12 columns x 500 rows).
REQUEST_BATCH = 500


class RunStateError(Exception):
    """The run is not in a state that allows the operation (HTTP 409)."""


def run_spec_fields(*, version: WorkflowVersion) -> dict[str, Any]:
    """Return the frozen copy of a version a run keeps (workflow name, version number, spec, YAML)."""
    return {
        "workflow_version": version,
        "workflow_name": version.workflow.name,
        "version_number": version.number,
        "spec": version.spec,
        "yaml": version.yaml,
    }


def _check_scheduler(
    workflow: spec_model.Workflow, scheduler: str | None, params: Mapping[str, Any] | None
) -> tuple[str, dict[str, Any]]:
    """Return the run's scheduler and effective parameters; raise ValidationError naming the field
    (``scheduler``, or ``scheduler.<parameter>`` for a bad parameter)."""
    try:
        name, effective = effective_choice(workflow, scheduler, params)
    except SchedulerParamError as exc:
        raise ValidationError(
            {f"scheduler.{param}": f"{exc.scheduler}: {message}" for param, message in exc.problems}
        ) from None
    except SchedulerError as exc:
        raise ValidationError({"scheduler": str(exc)}) from None
    problems = SCHEDULERS[name].spec_problems(workflow)
    if problems:
        raise ValidationError({"scheduler": problems})
    return name, effective


def runnable_schedulers(*, platform: Platform | None) -> tuple[list[str], str]:
    """Return the schedulers a run for ``platform`` can use and the machine's name: the platform's
    (no MPS scheduler without an NVIDIA GPU); with none chosen, this machine's under the local
    executor, every scheduler otherwise (any worker may take it)."""
    if platform is not None:
        return schedulers_for(platform.info.get("gpus") or []), platform.name
    if settings.CB_RUN_EXECUTOR == "local":
        return schedulers_for(gpus()), "this machine"
    return list(SCHEDULERS), "any worker"


def launch_memory_problems(*, workflow: spec_model.Workflow, platform: Platform | None) -> list[str]:
    """Return the run's memory check (``benchmarks.runner.checks.memory_problems``: random models on the
    CPU that cannot fit) made at launch, where the machine is known: against the memory it has in all,
    the chosen platform's (from its fingerprint) or, under the local executor, this machine's. In all,
    not available now: a run ahead of this one in the queue holds memory it gives back before this
    one starts, and the run's own preflight checks what is available then. Empty for "any worker",
    and for a platform whose fingerprint cannot tell (no memory recorded, or macOS, whose Metal GPU
    the fingerprint does not list)."""
    if platform is not None:
        ram = platform.info.get("ram_bytes")
        if not isinstance(ram, int) or str(platform.info.get("os", "")).startswith("Darwin"):
            return []
        gpu, machine = bool(platform.info.get("gpus")), f"platform '{platform.name}'"
    elif settings.CB_RUN_EXECUTOR == "local":
        import psutil

        ram, gpu, machine = int(psutil.virtual_memory().total), None, "this machine"
    else:
        return []
    return memory_problems(
        workflow, ram, gpu=gpu, machine=f"{machine} has {ram / 1e9:.1f} GB of memory in all", alone_too=True
    )


@transaction.atomic
def run_create(
    *,
    version: WorkflowVersion,
    user: Any,
    scheduler: str | None = None,
    scheduler_params: Mapping[str, Any] | None = None,
    platform: Platform | None = None,
    repeats: int = 1,
    meta: Mapping[str, Any] | None = None,
    weights: str | None = None,
) -> list[Run]:
    """Create ``repeats`` queued runs of a workflow version; return them. Nothing is sent to an executor:
    ``cbweb.runs.dispatch.run_launch`` does that once the rows are committed (this module imports no
    executor, so that dispatch, execution and the sweeper can import it).

    ``scheduler`` (default: the workflow's) runs with the workflow's own parameters when it is the
    workflow's scheduler, overridden by ``scheduler_params``; the run stores the effective ones.
    ``meta`` (commit, branch, ci_url, tags, notes) is checked by ``benchmarks.runmeta.check_meta``
    and given to every run of the batch. ``weights`` (``real`` or ``random``) overrides the
    workflow's ``weights:`` in the run's copy of the spec (docs/models.md).
    Raises django ValidationError naming the field (scheduler, scheduler.<parameter>, repeats, a
    metadata field, or platform when the machine cannot hold the run's random models) when the
    request is impossible.
    """
    if not user or not user.is_authenticated:
        raise ValidationError("log in to launch runs")
    if version.workflow.archived:
        raise ValidationError(
            {"workflow": f"workflow '{version.workflow.name}' is archived: restore it to launch runs"}
        )
    try:
        # A version stored before the file access policy, the name rule or today's limits is checked
        # again: a version stored under looser settings cannot be launched.
        spec = version.spec if weights is None else {**version.spec, "weights": weights}
        workflow = spec_load.from_dict(spec, name=version.workflow.name, limits=spec_limits())
        workflow_check_files(workflow=workflow)
    except spec_model.WorkflowValidationError as exc:
        raise ValidationError({"version": [f"{e.path}: {e.message}" for e in exc.errors]}) from None
    scheduler, effective = _check_scheduler(workflow, scheduler, scheduler_params)
    runnable, where = runnable_schedulers(platform=platform)
    if scheduler not in runnable:
        raise ValidationError(
            {
                "scheduler": f"{scheduler} needs an NVIDIA GPU (it uses NVIDIA MPS) and {where} has none; "
                f"choose one of: {', '.join(runnable)}"
            }
        )
    if not 1 <= repeats <= MAX_REPEATS:
        raise ValidationError({"repeats": f"repeats must be between 1 and {MAX_REPEATS}"})
    run_quota_check(user=user, repeats=repeats)
    if memory := launch_memory_problems(workflow=workflow, platform=platform):
        raise ValidationError({"platform": memory})
    checked = run_meta_check(meta or {})
    batch = uuid.uuid4()
    runs = [
        Run.objects.create(
            **{**run_spec_fields(version=version), "spec": spec},
            platform=platform,
            scheduler=scheduler,
            scheduler_params=effective,
            owner=user,
            batch=batch,
            repeat_index=i,
            progress=initial_progress(workflow),
            commit=checked.commit,
            branch=checked.branch,
            ci_url=checked.ci_url,
            notes=checked.notes,
        )
        for i in range(1, repeats + 1)
    ]
    RunTag.objects.bulk_create([RunTag(run=run, name=tag) for run in runs for tag in checked.tags])
    return runs


def run_quota_check(*, user: Any, repeats: int) -> None:
    """Refuse (ValidationError on ``repeats``) a launch that would give ``user`` more queued runs than
    CB_MAX_QUEUED_RUNS_PER_USER. The user's row is locked first, so two launches at once are counted
    one after the other (PostgreSQL; SQLite's write lock already serialises them)."""
    get_user_model().objects.select_for_update().filter(pk=user.pk).first()
    allowed = int(settings.CB_MAX_QUEUED_RUNS_PER_USER)
    queued = run_queued_count(user=user)
    if queued + repeats > allowed:
        raise ValidationError(
            {
                "repeats": f"you have {queued} queued run(s) and the lab allows {allowed} per user: "
                f"{max(allowed - queued, 0)} more can be queued now (wait for yours to start, or cancel some)"
            }
        )


def run_meta_check(meta: Mapping[str, Any]) -> RunMeta:
    """Return checked run metadata (``benchmarks.runmeta.check_meta``); raise ValidationError with a
    message per field that breaks a rule."""
    try:
        return check_meta(meta)
    except MetaError as exc:
        errors: dict[str, list[str]] = {}
        for field, message in exc.problems:
            errors.setdefault(field, []).append(message)
        raise ValidationError(errors) from None


# How many queued runs beyond each user's first a claim tries when others took those first.
CLAIM_TRIES = 100


def run_claim_fair(*, run_id: int, worker: str, same_queue: Callable[[int], bool]) -> int | None:
    """Claim the queued run that is next in turn among those waiting where ``run_id`` waits; return its
    id, or None when none is left to claim.

    The fair queue: a broker message (or the local executor's entry) stands for "a run is waiting on
    this queue", not for one run. The runs waiting on the same platform (``same_queue`` keeps those of
    the same queue when no platform is named) are taken in the users' turns (``run_queue_turns``).
    Every queued run has a message, and every message claims at most one run, so every run is
    claimed; a user with many queued runs no longer holds the queue while another waits.
    """
    platform_id = Run.objects.filter(pk=run_id).values_list("platform_id", flat=True).first()
    turns = run_queue_turns(platform_id=platform_id)
    heads = [queued[0] for _, queued in turns]
    waiting = run_waiting(platform_id=platform_id)
    # Another worker may take a head first: then this message's own run, then any other in order.
    rest = waiting.exclude(pk__in=heads).order_by("pk").values_list("pk", flat=True)[:CLAIM_TRIES]
    for candidate in dict.fromkeys([*heads, run_id, *rest]):
        if (candidate == run_id or same_queue(candidate)) and run_claim(run_id=candidate, worker=worker):
            return candidate
    return None


def run_claim(*, run_id: int, worker: str) -> bool:
    """Atomically move a queued run to running; return False when someone else has it (or it is gone)."""
    changed = Run.objects.filter(pk=run_id, status=Run.Status.QUEUED, cancel_requested=False).update(
        status=Run.Status.RUNNING, started_at=timezone.now(), heartbeat_at=Now(), worker=worker
    )
    return changed == 1


def _db_now_minus(seconds: float) -> ExpressionWrapper:
    """The database's clock minus ``seconds``: heartbeats and dispatch times are compared on one clock."""
    return ExpressionWrapper(Now() - timedelta(seconds=seconds), output_field=DateTimeField())


def run_mark_dispatched(*, run_id: int) -> None:
    """Record that a queued run's message was handed to the broker (or the local executor) just now."""
    Run.objects.filter(pk=run_id, status=Run.Status.QUEUED).update(
        dispatched_at=Now(), dispatches=F("dispatches") + 1
    )


# A run re-sent without a claim is most likely waiting behind long runs, not lost: each re-send doubles
# the wait before the next, up to 2**REDISPATCH_DOUBLINGS x the interval (16 x 120 s = 32 min by
# default), so a queue behind hours-long runs holds a few copies per run, not one per interval.
REDISPATCH_DOUBLINGS = 4


def _redispatch_due(resend_after_s: float) -> Q:
    """The queued runs never handed over, or handed over longer ago than their back-off allows."""
    due = Q(dispatched_at__isnull=True)
    for doublings in range(REDISPATCH_DOUBLINGS + 1):
        if doublings == 0:
            sends = Q(dispatches__lte=1)
        elif doublings < REDISPATCH_DOUBLINGS:
            sends = Q(dispatches=doublings + 1)
        else:
            sends = Q(dispatches__gte=doublings + 1)
        due |= sends & Q(dispatched_at__lt=_db_now_minus(resend_after_s * 2**doublings))
    return due


def run_take_for_dispatch(*, resend_after_s: float) -> list[int]:
    """Return the queued runs to send now, marked as sent: never sent, or sent ``resend_after_s`` ago.

    A run sent long ago may still wait behind others on the broker, or the broker may have lost its
    message (Redis restarted without its data): sending it again is harmless either way, because a
    second delivery finds the run claimed. The wait doubles with every re-send of the same run (up to
    2**REDISPATCH_DOUBLINGS x ``resend_after_s``). Each run is taken by one conditional UPDATE, so
    sweepers running at once send it once per interval. ``run_dispatch_failed`` puts back a run not sent.
    """
    queued = Run.objects.filter(
        _redispatch_due(resend_after_s), status=Run.Status.QUEUED, cancel_requested=False
    )
    taken = []
    for pk, dispatched_at in queued.order_by("pk").values_list("pk", "dispatched_at"):
        changed = Run.objects.filter(pk=pk, status=Run.Status.QUEUED, dispatched_at=dispatched_at).update(
            dispatched_at=Now(), dispatches=F("dispatches") + 1
        )
        if changed:
            taken.append(pk)
    return taken


def run_dispatch_failed(*, run_id: int) -> None:
    """Forget that a queued run was sent (the broker refused it): the next sweep sends it again."""
    Run.objects.filter(pk=run_id, status=Run.Status.QUEUED, dispatches__gt=0).update(
        dispatched_at=None, dispatches=F("dispatches") - 1
    )


def run_set_platform(*, run_id: int, platform: Platform) -> None:
    """Record the machine that executes a run (the worker's platform)."""
    Run.objects.filter(pk=run_id).update(platform=platform)


def run_progress(*, run_id: int, progress: ProgressState) -> None:
    """Store the live progress of a running run and refresh its heartbeat."""
    Run.objects.filter(pk=run_id, status=Run.Status.RUNNING).update(progress=progress, heartbeat_at=Now())


@transaction.atomic
def run_store_telemetry(*, run_id: int, chunks: Sequence[ChunkWrite]) -> None:
    """Insert or overwrite telemetry chunks of a run (one batch in one transaction).

    One ``INSERT ... ON CONFLICT DO UPDATE`` per TELEMETRY_WRITE_BATCH chunks: a worker's flush (the
    open chunk of every metric) is a single statement whatever the number of metrics.
    """
    rows = [
        (run_id, c.source, c.metric, c.seq, c.t[0], c.t[-1], len(c.t), encode(c.t), encode(c.v))
        for c in chunks
        if c.t
    ]
    for lo in range(0, len(rows), TELEMETRY_WRITE_BATCH):
        batch = rows[lo : lo + TELEMETRY_WRITE_BATCH]
        if connection.vendor == "postgresql":
            _upsert_chunks_postgresql(batch)
        else:
            TelemetryChunk.objects.bulk_create(
                [TelemetryChunk(**dict(zip(_CHUNK_FIELDS, row, strict=True))) for row in batch],
                update_conflicts=True,
                unique_fields=["run", "source", "metric", "seq"],
                update_fields=["t_start", "t_end", "count", "t", "v"],
            )


_CHUNK_FIELDS = ("run_id", "source", "metric", "seq", "t_start", "t_end", "count", "t", "v")


def _upsert_chunks_postgresql(rows: Sequence[tuple[Any, ...]]) -> None:
    # Django's psycopg cursor binds parameters on the client: every bytea array travels as hex text
    # the server parses again, which was most of a flush's cost. A server-binding cursor sends the
    # arrays as binary parameters (%b) instead: ~3x faster ingestion (`manage.py bench_ingest`).
    import psycopg

    table = TelemetryChunk._meta.db_table
    sql = (
        f"INSERT INTO {table} ({', '.join(_CHUNK_FIELDS)}) VALUES (%s, %s, %s, %s, %s, %s, %s, %b, %b) "
        "ON CONFLICT (run_id, source, metric, seq) DO UPDATE SET t_start = EXCLUDED.t_start, "
        "t_end = EXCLUDED.t_end, count = EXCLUDED.count, t = EXCLUDED.t, v = EXCLUDED.v"
    )
    connection.ensure_connection()
    with psycopg.Cursor(connection.connection) as cursor:
        cursor.executemany(sql, rows)


def _columns(model: type[Any], data: dict[str, Any]) -> dict[str, Any]:
    """Keep the keys that are columns: fields the engine adds later stay in ``Run.result`` only."""
    names = {f.name for f in model._meta.concrete_fields} - {"id", "run", "application"}
    return {k: v for k, v in data.items() if k in names}


def _status_of(document: ResultDocument) -> tuple[Run.Status, str]:
    """Return the run's status and error from its result (the engine decides what failed)."""
    problem = document.problem()
    if problem is None:
        return Run.Status.SUCCEEDED, ""
    if document.status is RunStatus.CANCELLED:
        return Run.Status.CANCELLED, problem
    return Run.Status.FAILED, problem


def summary_of(document: ResultDocument) -> dict[str, Any]:
    """Return the run figures the API and the lists show (all computed by the engine)."""
    telemetry = document.telemetry.run.model_dump() if document.telemetry else None
    partial = document.partial()
    return {
        "headline": headline(
            document.mean_attainment, document.requests_served, document.requests_requested, partial
        ),
        "partial": partial,
        "requests_served": document.requests_served,
        "requests_requested": document.requests_requested,
        "mean_attainment": document.mean_attainment,
        "fairness": document.fairness,
        "makespan_s": document.makespan_s,
        "telemetry": telemetry,
        "applications": [
            # The SLOs as text ("ttft<=1.0s"), as the API has always shown them.
            {
                "name": a.name,
                "type": a.type,
                "slo_attainment": a.slo_attainment,
                "requests_served": a.requests_counted,
                "requests_requested": a.requests_requested,
                "slo": [str(s) for s in a.slo],
                "quality": {k: q.model_dump() for k, q in a.quality.items()},
            }
            for a in document.applications
        ],
    }


def partial_summary(progress: dict[str, Any]) -> dict[str, Any]:
    """Return the summary of a run that ended without a result (cancelled before it started, worker
    lost): partial, with the requests served and asked for as its live progress last counted them."""
    nodes = (progress or {}).get("nodes", {}).values()
    served = sum(int(n.get("done", 0)) for n in nodes)
    requested = sum(int(n.get("total", 0)) for n in nodes)
    return {
        "headline": headline(None, served, requested, True, measured=False),
        "partial": True,
        "requests_served": served,
        "requests_requested": requested,
        "mean_attainment": None,
        "fairness": None,
        "makespan_s": None,
        "telemetry": None,
        "applications": [],
    }


@transaction.atomic
def run_finish(*, run_id: int, result: ResultDocument, bundle_dir: str = "") -> Run:
    """Store a run's final result (nodes, applications, requests, summary) in one transaction; return it.

    A run that is no longer running (e.g. failed by the reaper) is left as it is and RunStateError
    is raised.
    """
    run = Run.objects.select_for_update().get(pk=run_id)
    if run.status != Run.Status.RUNNING:
        raise RunStateError(f"run {run_id} is {run.status}, not running; its result was not stored")
    status, error = _status_of(result)
    NodeResult.objects.bulk_create(
        NodeResult(run=run, **_columns(NodeResult, {**n.model_dump(), "reason": n.reason or ""}))
        for n in result.nodes
    )
    for app in result.applications:
        data = app.model_dump(mode="json", exclude={"requests"})
        stored = ApplicationResult.objects.create(
            run=run, **_columns(ApplicationResult, {**data, "model": app.model or ""})
        )
        RequestResult.objects.bulk_create(
            (
                RequestResult(
                    application=stored, **_columns(RequestResult, {**r.model_dump(), "error": r.error or ""})
                )
                for r in app.requests
            ),
            batch_size=REQUEST_BATCH,
        )
    stripped = result.model_dump(mode="json", exclude_unset=True)
    for app in stripped["applications"]:
        app["requests"] = []
    run.status = status
    run.error = error
    run.summary = summary_of(result)
    run.result = stripped
    run.bundle_dir = bundle_dir
    run.finished_at = timezone.now()
    run.telemetry_overview = run_telemetry(run=run)
    run.save(
        update_fields=[
            "status",
            "error",
            "summary",
            "result",
            "bundle_dir",
            "finished_at",
            "telemetry_overview",
        ]
    )
    return run


def run_refresh_telemetry_overview(*, run_id: int) -> None:
    """Recompute a finished run's chart overview (after telemetry was added to it, e.g. by an import)."""
    run = Run.objects.get(pk=run_id)
    Run.objects.filter(pk=run_id).update(telemetry_overview=run_telemetry(run=run))


def run_reap(*, lost_after_s: float) -> list[int]:
    """Fail the running runs whose heartbeat is older than ``lost_after_s`` (worker lost); return their ids.

    The progress and telemetry written so far stay with the run (its chart overview is computed from
    them). Heartbeats are written and compared with the database's clock, so a host whose clock is
    off cannot fail a healthy run. Safe to call from several processes at once: each run is failed by
    one conditional UPDATE, and a run that sent a heartbeat meanwhile is left alone.
    """
    cutoff = _db_now_minus(lost_after_s)
    stale = Run.objects.filter(status=Run.Status.RUNNING, heartbeat_at__lt=cutoff)
    reaped = []
    for pk, worker, heartbeat_at in stale.values_list("pk", "worker", "heartbeat_at"):
        error = (
            f"worker lost: {worker or 'the worker'} sent no heartbeat for more than {lost_after_s:g} s "
            f"(last at {heartbeat_at:%Y-%m-%d %H:%M:%S} UTC); the data written until then is kept"
        )
        # The status and the chart overview change together: a reader never sees a failed run
        # without its overview.
        with transaction.atomic():
            lost = Run.objects.filter(pk=pk, status=Run.Status.RUNNING, heartbeat_at__lt=cutoff)
            progress = lost.values_list("progress", flat=True).first()
            changed = lost.update(
                status=Run.Status.FAILED,
                error=error,
                finished_at=timezone.now(),
                summary=partial_summary(progress or {}),
            )
            if changed:
                run_refresh_telemetry_overview(run_id=pk)
                reaped.append(pk)
    return reaped


def run_fail(*, run_id: int, error: str) -> bool:
    """Mark a queued or running run failed with a message (its summary: partial, from its progress);
    return False if it had already finished."""
    with transaction.atomic():
        open_run = Run.objects.select_for_update().filter(
            pk=run_id, status__in=[Run.Status.QUEUED, Run.Status.RUNNING]
        )
        progress = open_run.values_list("progress", flat=True).first()
        changed = open_run.update(
            status=Run.Status.FAILED,
            error=error[:10_000],
            finished_at=timezone.now(),
            summary=partial_summary(progress or {}),
        )
    return changed == 1


@transaction.atomic
def run_cancel(*, run: Run, user: Any) -> Run:
    """Cancel a run: a queued one at once, a running one by raising its cancel flag; return it.

    Raises PermissionDenied for someone else's run and RunStateError for a finished one.
    """
    check_can_edit(user, run, f"run {run.pk}")
    run = Run.objects.select_for_update().get(pk=run.pk)
    if run.status == Run.Status.QUEUED:
        run.status = Run.Status.CANCELLED
        run.cancel_requested = True
        run.error = "cancelled before it started"
        run.finished_at = timezone.now()
        run.summary = partial_summary(run.progress)
        run.save(update_fields=["status", "cancel_requested", "error", "finished_at", "summary"])
    elif run.status == Run.Status.RUNNING:
        # The worker polls the flag and stops the engine within seconds, keeping the partial data.
        run.cancel_requested = True
        run.save(update_fields=["cancel_requested"])
    else:
        raise RunStateError(f"run {run.pk} has already finished ({run.status})")
    return run


@transaction.atomic
def run_delete(*, run: Run, user: Any) -> None:
    """Delete a finished or queued run with its results; a running run must be cancelled first."""
    check_can_edit(user, run, f"run {run.pk}")
    if run.status == Run.Status.RUNNING:
        raise RunStateError(f"run {run.pk} is running; cancel it first")
    run.delete()
