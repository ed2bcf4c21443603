"""Runs, their results (per node, per application, per request) and their telemetry.

Telemetry is stored as chunks: one row holds up to ``TELEMETRY_CHUNK_SAMPLES`` samples of one metric
of one source as two little-endian float64 arrays (time since run start, value), so a 30-minute run
at 20 Hz with 12 metrics is ~110 rows instead of 432,000.
"""

from __future__ import annotations

import uuid

from django.conf import settings
from django.db import models

from benchmarks.models import random_substitution, random_weights_name
from benchmarks.results import accelerators, format_shares, scheduler_settings, traced_nodes
from benchmarks.schedulers import scheduler_label
from benchmarks.status import FINISHED as JOBS_FINISHED
from benchmarks.status import JobStatus, NodeStatus, RequestStatus
from cbweb.platforms.models import Platform
from cbweb.workflows.models import WorkflowVersion


class Run(models.Model):
    # The engine's words for a run on a server (benchmarks.status.JobStatus, which the API client
    # reads too), as Django choices.
    class Status(models.TextChoices):
        QUEUED = JobStatus.QUEUED.value
        RUNNING = JobStatus.RUNNING.value
        SUCCEEDED = JobStatus.SUCCEEDED.value
        FAILED = JobStatus.FAILED.value
        CANCELLED = JobStatus.CANCELLED.value

    FINISHED = tuple(sorted(JOBS_FINISHED))

    # The version launched, while its workflow exists; the run keeps its own frozen copy of what it
    # ran (name, version number, spec, YAML), so the owner may delete a workflow others have run.
    workflow_version = models.ForeignKey(
        WorkflowVersion, on_delete=models.SET_NULL, null=True, blank=True, related_name="runs"
    )
    workflow_name = models.CharField(max_length=200)
    version_number = models.PositiveIntegerField()
    spec = models.JSONField(help_text="the canonical spec the run executes (frozen at launch)")
    yaml = models.TextField(help_text="the canonical YAML of that spec")
    platform = models.ForeignKey(
        Platform, on_delete=models.SET_NULL, null=True, blank=True, related_name="runs"
    )
    scheduler = models.CharField(max_length=50)
    scheduler_params = models.JSONField(
        default=dict, blank=True, help_text="the scheduler's effective parameters (defaults filled in)"
    )
    status = models.CharField(max_length=20, choices=Status.choices, default=Status.QUEUED, db_index=True)
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="runs")
    # Repetitions launched together share a batch; the compare page shows their mean and 95 % CI.
    batch = models.UUIDField(default=uuid.uuid4, db_index=True)
    repeat_index = models.PositiveIntegerField(default=1)
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    # Both written with the database's clock (Now()) and compared with it by the sweeper, so the
    # clocks of the web, worker and sweeper hosts never meet (docs/operations.md).
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    dispatched_at = models.DateTimeField(
        null=True, blank=True, help_text="when a queued run was last handed to the broker (none: not yet)"
    )
    dispatches = models.PositiveIntegerField(
        default=0, help_text="how often a queued run was handed to the broker (its re-sends back off)"
    )
    worker = models.CharField(max_length=200, blank=True, help_text="who executes the run (host:pid)")
    cancel_requested = models.BooleanField(default=False)
    error = models.TextField(blank=True)
    progress = models.JSONField(default=dict, blank=True, help_text="live node states while running")
    summary = models.JSONField(null=True, blank=True, help_text="run figures once finished")
    result = models.JSONField(null=True, blank=True, help_text="result.json without the per-request rows")
    bundle_dir = models.CharField(max_length=500, blank=True)
    # Whole-run telemetry downsampled for charts, computed once when the run finishes (the samples
    # of a finished run never change), so result pages do not downsample 12 x 36,000 samples each time.
    telemetry_overview = models.JSONField(null=True, blank=True)
    # Where the run comes from (benchmarks.runmeta checks every value; docs/api.md): the code's commit
    # and branch, the CI job that submitted it, free notes; its tags are RunTag rows (filterable on
    # every database, which a JSON list is not on SQLite).
    commit = models.CharField(max_length=64, blank=True, db_index=True)
    branch = models.CharField(max_length=200, blank=True, db_index=True)
    ci_url = models.CharField(max_length=500, blank=True, help_text="the CI job's page (http or https)")
    notes = models.TextField(blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["status", "created_at"])]

    def __str__(self) -> str:
        return f"run {self.pk} ({self.status})"

    @property
    def is_finished(self) -> bool:
        return self.status in self.FINISHED

    @property
    def tag_names(self) -> list[str]:
        """The run's tags, in the order given (prefetch ``tags`` for lists)."""
        return [t.name for t in self.tags.all()]

    @property
    def workflow_label(self) -> str:
        return f"{self.workflow_name} v{self.version_number}"

    @property
    def scheduler_label(self) -> str:
        """The scheduler with the parameters it ran with that differ from its defaults."""
        return scheduler_label(self.scheduler, self.scheduler_params or {})

    @property
    def accelerators(self) -> list[str]:
        """``node: accelerator`` for each node that ran a model (``benchmarks.results.accelerators``
        over the stored result); empty before the run finished."""
        return accelerators(self.result) if isinstance(self.result, dict) else []

    @property
    def sm_shares(self) -> str | None:
        """Each node's share of the GPU's SMs under an MPS scheduler (partition, credit-mps) as the run
        recorded it, with each share's product check (``benchmarks.results.format_shares``); None for
        the other schedulers and before the run finished."""
        return format_shares(scheduler_settings(self.result)) if isinstance(self.result, dict) else None

    @property
    def traced_nodes(self) -> list[str]:
        """The nodes whose GPU kernels the run traced (``benchmarks.results.traced_nodes``)."""
        return traced_nodes(self.result) if isinstance(self.result, dict) else []

    @property
    def random_weights(self) -> list[str]:
        """``X -> TWIN@random`` for each unit of the run's spec that runs on a random twin
        (``weights: random`` or a model written ``X@random``; docs/models.md)."""
        spec = self.spec if isinstance(self.spec, dict) else {}
        random = spec.get("weights") == "random"
        out = []
        for unit in spec.values():
            model = unit.get("model") if isinstance(unit, dict) else None
            if isinstance(model, str):
                found = random_substitution(random_weights_name(model) if random else model)
                if found is not None:
                    out.append(f"{found[0]} -> {found[1]}")
        return list(dict.fromkeys(out))


class RunTag(models.Model):
    """One tag of a run (``benchmarks.runmeta.TAG_RE``), e.g. ``nightly`` or ``v1.2``."""

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="tags")
    name = models.CharField(max_length=64, db_index=True)

    class Meta:
        ordering = ["run", "id"]
        constraints = [models.UniqueConstraint(fields=["run", "name"], name="run_tag_unique")]

    def __str__(self) -> str:
        return self.name


class NodeResult(models.Model):
    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="node_results")
    name = models.CharField(max_length=200)
    uses = models.CharField(max_length=200)
    background = models.BooleanField(default=False)
    device = models.CharField(max_length=10)
    status = models.CharField(max_length=20, choices=[(s.value, s.value) for s in NodeStatus if s.terminal])
    started_at = models.FloatField(null=True, help_text="seconds since the run started")
    finished_at = models.FloatField(null=True)
    load_time_s = models.FloatField(null=True)
    reason = models.TextField(blank=True)

    class Meta:
        ordering = ["run", "id"]


class ApplicationResult(models.Model):
    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="application_results")
    name = models.CharField(max_length=200, help_text="the node name")
    unit = models.CharField(max_length=200)
    type = models.CharField(max_length=50)
    device = models.CharField(max_length=10)
    priority = models.CharField(max_length=10)
    model = models.CharField(max_length=500, blank=True)
    slo = models.JSONField(default=list, help_text="[{metric, op, threshold_s}] (benchmarks.spec.SLO)")
    slo_attainment = models.FloatField(null=True)
    requests_total = models.PositiveIntegerField(default=0)
    requests_requested = models.PositiveIntegerField(
        default=0, help_text="what the workflow asked for: the attainment's denominator"
    )
    requests_counted = models.PositiveIntegerField(default=0)
    requests_met = models.PositiveIntegerField(null=True)
    load_time_s = models.FloatField(null=True)
    throughput_rps = models.FloatField(null=True)
    goodput_rps = models.FloatField(null=True, help_text="requests that met every SLO per second")
    metrics = models.JSONField(default=dict, help_text="per-metric summaries from benchmarks.metrics")
    normalized_latency = models.JSONField(default=dict)
    quality = models.JSONField(
        default=dict, help_text="{figure: {value, unit, count}} (benchmarks.results.QualityFigure)"
    )
    loaded = models.JSONField(default=dict)

    class Meta:
        ordering = ["run", "id"]


class RequestResult(models.Model):
    application = models.ForeignKey(ApplicationResult, on_delete=models.CASCADE, related_name="requests")
    index = models.PositiveIntegerField()
    arrival = models.FloatField()
    start = models.FloatField()
    end = models.FloatField()
    status = models.CharField(max_length=20, choices=[(s.value, s.value) for s in RequestStatus])
    warmup = models.BooleanField(default=False)
    slo_met = models.BooleanField(null=True)
    metrics = models.JSONField(default=dict)
    info = models.JSONField(default=dict)
    series = models.JSONField(default=dict)
    error = models.TextField(blank=True)

    class Meta:
        ordering = ["application", "index"]


class TelemetryChunk(models.Model):
    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="telemetry_chunks")
    source = models.CharField(max_length=50)
    metric = models.CharField(max_length=100)
    seq = models.PositiveIntegerField()
    t_start = models.FloatField()
    t_end = models.FloatField()
    count = models.PositiveIntegerField()
    t = models.BinaryField(help_text="little-endian float64 seconds since the run started")
    v = models.BinaryField(help_text="little-endian float64 values (NaN where a sample was missing)")

    class Meta:
        ordering = ["run", "source", "metric", "seq"]
        constraints = [
            models.UniqueConstraint(fields=["run", "source", "metric", "seq"], name="telemetry_chunk_unique")
        ]
