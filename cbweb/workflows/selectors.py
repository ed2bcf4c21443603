"""Reads for workflows."""

from __future__ import annotations

from django.db.models import Count, Max, QuerySet
from django.shortcuts import get_object_or_404

from benchmarks.spec import load as spec_load
from benchmarks.spec import model as spec_model
from cbweb.workflows.limits import spec_limits
from cbweb.workflows.models import Workflow, WorkflowVersion


def workflow_list(
    *, owner_id: int | None = None, search: str | None = None, archived: bool = False
) -> QuerySet[Workflow]:
    """Return workflows, newest first, annotated with ``latest_version`` and ``run_count``: the
    active ones, or the archived ones when ``archived``."""
    qs = Workflow.objects.select_related("owner").annotate(
        latest_version=Max("versions__number"), run_count=Count("versions__runs", distinct=True)
    )
    qs = qs.filter(archived=archived)
    if owner_id is not None:
        qs = qs.filter(owner_id=owner_id)
    if search:
        qs = qs.filter(name__icontains=search)
    return qs


def workflow_get(*, pk: int) -> Workflow:
    """Return one workflow or raise Http404."""
    return get_object_or_404(Workflow.objects.select_related("owner"), pk=pk)


def version_latest(*, workflow: Workflow) -> WorkflowVersion:
    """Return the newest version of a workflow (every workflow has at least one)."""
    return workflow.versions.order_by("-number").first()  # type: ignore[return-value]


def version_get(*, workflow: Workflow, number: int) -> WorkflowVersion:
    """Return version ``number`` of a workflow or raise Http404."""
    return get_object_or_404(WorkflowVersion, workflow=workflow, number=number)


def version_workflow(*, version: WorkflowVersion) -> spec_model.Workflow:
    """Return the engine workflow of a stored version (it was validated when saved)."""
    return spec_load.from_dict(version.spec, name=version.workflow.name, limits=spec_limits())
