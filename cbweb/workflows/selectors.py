"""Reads for workflows: lists, versions, and the comparison of two versions."""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import yaml
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


@dataclass(frozen=True)
class SpecChange:
    """One difference between two versions: where (``workflow``, a unit or a node), which field
    (empty when the whole unit or node was added or removed), and both values as YAML."""

    where: str
    field: str
    kind: str  # added | removed | changed
    before: str
    after: str


@dataclass(frozen=True)
class VersionDiff:
    """Two versions of one workflow compared: the changed fields and the unified diff of their YAML."""

    old: WorkflowVersion
    new: WorkflowVersion
    changes: list[SpecChange]
    unified: list[str]
    # True when the two versions' YAML together exceed DIFF_MAX_BYTES: nothing is compared.
    too_large: bool = False


def _yaml(value: Any) -> str:
    if value is _ABSENT:
        return ""
    text = yaml.safe_dump(value, default_flow_style=True, sort_keys=False, width=200).strip()
    return text.removesuffix("\n...").strip()


_ABSENT = object()


def _field_changes(where: str, old: Mapping[str, Any], new: Mapping[str, Any]) -> list[SpecChange]:
    out = []
    for key in [*old, *(k for k in new if k not in old)]:
        before, after = old.get(key, _ABSENT), new.get(key, _ABSENT)
        if before != after:
            kind = "added" if before is _ABSENT else "removed" if after is _ABSENT else "changed"
            out.append(SpecChange(where, str(key), kind, _yaml(before), _yaml(after)))
    return out


def _whole(where: str, old: Any, new: Any) -> list[SpecChange]:
    """Return the changes of one unit or node: field by field, or the whole of it added/removed."""
    if old is _ABSENT:
        return [SpecChange(where, "", "added", "", _yaml(new))]
    if new is _ABSENT:
        return [SpecChange(where, "", "removed", _yaml(old), "")]
    if isinstance(old, Mapping) and isinstance(new, Mapping):
        return _field_changes(where, old, new)
    return [SpecChange(where, "", "changed", _yaml(old), _yaml(new))] if old != new else []


# A diff page compares two versions whose YAML together is at most this size: difflib's time grows
# faster than the text, and the page repeats both. Larger versions are offered for download instead.
DIFF_MAX_BYTES = 256 * 1024


def version_diff(*, workflow: Workflow, old: int, new: int) -> VersionDiff:
    """Return versions ``old`` and ``new`` of a workflow compared (Http404 when either is missing):
    each changed workflow setting, unit field and node field (nodes by name, so a renamed node reads
    as one removed and one added), and the unified diff (difflib) of their canonical YAML; when the
    two YAML texts together exceed DIFF_MAX_BYTES, no comparison (``too_large``)."""
    a, b = version_get(workflow=workflow, number=old), version_get(workflow=workflow, number=new)
    if len(a.yaml.encode()) + len(b.yaml.encode()) > DIFF_MAX_BYTES:
        return VersionDiff(a, b, [], [], too_large=True)
    spec_a, spec_b = dict(a.spec), dict(b.spec)
    nodes_a, nodes_b = spec_a.pop("workflows", None) or {}, spec_b.pop("workflows", None) or {}

    def is_unit(value: Any) -> bool:
        return isinstance(value, Mapping) and "type" in value

    keys = [*spec_a, *(k for k in spec_b if k not in spec_a)]
    settings_a = {k: v for k, v in spec_a.items() if not is_unit(v)}
    settings_b = {k: v for k, v in spec_b.items() if not is_unit(v)}
    changes = _field_changes("workflow", settings_a, settings_b)
    for key in keys:
        before, after = spec_a.get(key, _ABSENT), spec_b.get(key, _ABSENT)
        if is_unit(before) or is_unit(after):
            changes += _whole(f"unit '{key}'", before, after)
    for name in [*nodes_a, *(n for n in nodes_b if n not in nodes_a)]:
        changes += _whole(f"node '{name}'", nodes_a.get(name, _ABSENT), nodes_b.get(name, _ABSENT))
    unified = list(
        difflib.unified_diff(
            a.yaml.splitlines(),
            b.yaml.splitlines(),
            fromfile=f"v{a.number}",
            tofile=f"v{b.number}",
            lineterm="",
        )
    )
    return VersionDiff(a, b, changes, unified)
