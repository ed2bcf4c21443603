"""Writes for workflows. The engine validates; a version stores its canonical spec and YAML."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import transaction

from benchmarks.apps import app_type
from benchmarks.files import FilePolicy
from benchmarks.spec import export as spec_export
from benchmarks.spec import load as spec_load
from benchmarks.spec import model as spec_model
from cbweb.permissions import check_can_edit
from cbweb.workflows.limits import spec_limits
from cbweb.workflows.models import Workflow, WorkflowVersion


class WorkflowNameTaken(spec_model.WorkflowValidationError):
    """The owner already has an active workflow of that name (HTTP 409). A name is its owner's handle
    on a workflow (``submit`` finds the workflow by it, the lists and the leaderboard show it), so two
    active workflows of one owner never share one; archived ones may."""

    def __init__(self, existing: Workflow) -> None:
        self.existing = existing
        super().__init__(
            [
                spec_model.SpecError(
                    ("name",),
                    None,
                    f"you already have a workflow named '{existing.name}' (#{existing.pk}): edit that one "
                    "(or submit to it), archive it, or choose another name",
                )
            ]
        )


def _claim_name(*, owner: Any, name: str, workflow: Workflow | None = None, restoring: bool = False) -> None:
    """Raise WorkflowNameTaken when another active workflow of ``owner`` is named ``name``.

    The owner's row is locked first, so writes of one owner take turns: two first saves of one name
    at the same moment cannot both find the name free, nor a rename and a restore (the partial unique
    index is the last guard). ``workflow`` (renamed, or ``restoring``) is read again under the lock:
    while it stays archived it holds no name, and may take any.
    """
    get_user_model().objects.select_for_update().only("pk").get(pk=owner.pk)
    if (
        workflow is not None
        and not restoring
        and Workflow.objects.filter(pk=workflow.pk, archived=True).exists()
    ):
        return
    others = Workflow.objects.filter(owner=owner, name=name, archived=False)
    if workflow is not None:
        others = others.exclude(pk=workflow.pk)
    clash = others.first()
    if clash is not None:
        raise WorkflowNameTaken(clash)


def workflow_parse(
    *,
    name: str,
    yaml_text: str | None = None,
    spec: Any = None,
    own_name: bool = False,
    check_here: bool = False,
) -> spec_model.Workflow:
    """Validate YAML (any dialect) or a mapping with the engine; return the canonical workflow named
    ``name``; with ``own_name``, named as the input names itself (native ``name:``, the task list's
    key) and ``name`` only when it names none.

    The input limits are the deployment's (settings CB_MAX_*). ``check_here`` also checks that each
    unit's model (through the engine's model resolver) and input files resolve on this machine, as
    ``consumerbench validate --check-files`` does, with its words. Raises
    ``benchmarks.spec.model.WorkflowValidationError`` with every problem (path, line, message).
    """
    if (yaml_text is None) == (spec is None):
        raise spec_model.WorkflowValidationError(
            [spec_model.SpecError((), None, "give the workflow either as 'yaml' text or as a 'spec' mapping")]
        )
    # The file access policy's refusals come with every other problem, each at its line.
    policy = file_policy()
    checks: list[spec_load.UnitCheck] = [policy.unit_problems]
    if check_here:
        checks.append(lambda unit: _unit_problems_here(unit, policy))
    if yaml_text is not None:
        parsed = spec_load.load_yaml(yaml_text, name=name, limits=spec_limits(), unit_checks=checks)
    else:
        parsed = spec_load.from_dict(spec, name=name, limits=spec_limits(), unit_checks=checks)
    if own_name:
        return parsed
    # The record's name is the workflow's name, so that exports and results agree with the list.
    return parsed.model_copy(update={"name": name}) if name else parsed


def _unit_problems_here(unit: spec_model.Application, policy: FilePolicy) -> list[tuple[Any, str]]:
    """Return (path inside the unit, message) for what of a unit does not resolve here: its type's own
    check (the model through ``benchmarks.models``, then its input files). Not the device: the web
    server is not where runs run, a worker with a GPU is."""
    if policy.unit_problems(unit):
        return []  # a refused file is the policy's problem, already reported
    check = app_type(unit).check
    return [((), message) for message in (check(unit, policy) if check else [])]


def file_policy() -> FilePolicy:
    """Return the file access policy of this server: the folders of CB_DATA_DIRS and CB_MODEL_DIRS."""
    return FilePolicy.restricted(settings.CB_DATA_DIRS, settings.CB_MODEL_DIRS)


def workflow_check_files(*, workflow: spec_model.Workflow) -> None:
    """Refuse a workflow that names a file outside the allowed folders (WorkflowValidationError).

    For a stored spec, which has no lines (a new input is checked by ``workflow_parse`` with its
    lines). The errors name the field and the unit and say nothing about the file itself.
    """
    problems = file_policy().workflow_problems(workflow)
    if problems:
        raise spec_model.WorkflowValidationError(
            [spec_model.SpecError(loc, None, message) for loc, message in problems]
        )


def _add_version(*, workflow: Workflow, parsed: spec_model.Workflow, user: Any) -> WorkflowVersion:
    last = workflow.versions.order_by("-number").values_list("number", flat=True).first() or 0
    return WorkflowVersion.objects.create(
        workflow=workflow,
        number=last + 1,
        spec=spec_export.to_dict(parsed),
        yaml=spec_export.dump_yaml(parsed),
        created_by=user,
    )


@transaction.atomic
def workflow_create(
    *, owner: Any, name: str, yaml_text: str | None = None, spec: Any = None, description: str | None = None
) -> Workflow:
    """Validate and store a new workflow with its first version; return it.

    Raises WorkflowValidationError (nothing is written) when the engine rejects the input, and its
    subclass WorkflowNameTaken when the owner has an active workflow of that name.
    """
    name = name.strip()
    parsed = workflow_parse(name=name, yaml_text=yaml_text, spec=spec)
    _claim_name(owner=owner, name=parsed.name)
    workflow = Workflow.objects.create(
        name=parsed.name, description=parsed.description if description is None else description, owner=owner
    )
    _add_version(workflow=workflow, parsed=parsed, user=owner)
    return workflow


@transaction.atomic
def workflow_submit(
    *,
    owner: Any,
    yaml_text: str | None = None,
    spec: Any = None,
    name: str | None = None,
    default_name: str = "workflow",
) -> tuple[Workflow, WorkflowVersion, bool, bool]:
    """Store a workflow as CI submits it: by name per owner. Return (workflow, version, whether the
    workflow was created, whether a version was added).

    The name is ``name`` if given, else the one the input gives itself (native ``name:``, the task
    list's key), else ``default_name``. The owner's active workflow of that name (there is at most
    one) is reused; a new version is added only when the canonical spec differs from its latest
    version's. Archived workflows are not reused.
    Raises WorkflowValidationError (nothing is written) when the engine rejects the input.
    """
    if name and name.strip():
        parsed = workflow_parse(name=name.strip(), yaml_text=yaml_text, spec=spec)
    else:
        parsed = workflow_parse(name=default_name.strip(), yaml_text=yaml_text, spec=spec, own_name=True)
    limit = Workflow._meta.get_field("name").max_length or 200
    if len(parsed.name) > limit:
        raise spec_model.WorkflowValidationError(
            [spec_model.SpecError(("name",), None, f"the workflow's name is longer than {limit} characters")]
        )
    # Submits of one owner take turns (the owner's row is the lock: a first submit has no workflow row
    # to lock yet), so two CI jobs submitting the same file at once make one workflow with one version.
    get_user_model().objects.select_for_update().only("pk").get(pk=owner.pk)
    workflow = (
        Workflow.objects.select_for_update().filter(owner=owner, name=parsed.name, archived=False).first()
    )
    if workflow is None:
        workflow = Workflow.objects.create(name=parsed.name, description=parsed.description, owner=owner)
        return workflow, _add_version(workflow=workflow, parsed=parsed, user=owner), True, False
    latest = workflow.versions.order_by("-number").first()
    if latest is not None and latest.spec == spec_export.to_dict(parsed):
        return workflow, latest, False, False
    workflow.description = parsed.description
    workflow.save(update_fields=["description", "updated_at"])
    return workflow, _add_version(workflow=workflow, parsed=parsed, user=owner), False, True


@transaction.atomic
def workflow_update(
    *,
    workflow: Workflow,
    user: Any,
    name: str | None = None,
    yaml_text: str | None = None,
    spec: Any = None,
    description: str | None = None,
) -> WorkflowVersion:
    """Save a new version of ``workflow`` (versions are never changed in place); return the version.

    Raises PermissionDenied for someone else's workflow, WorkflowValidationError for a bad spec and
    WorkflowNameTaken for a new name the owner's other active workflow has.
    """
    check_can_edit(user, workflow, f"workflow '{workflow.name}'")
    new_name = (name or workflow.name).strip()
    parsed = workflow_parse(name=new_name, yaml_text=yaml_text, spec=spec)
    if parsed.name != workflow.name:
        _claim_name(owner=workflow.owner, name=parsed.name, workflow=workflow)
    workflow.name = parsed.name
    workflow.description = parsed.description if description is None else description
    workflow.save(update_fields=["name", "description", "updated_at"])
    return _add_version(workflow=workflow, parsed=parsed, user=user)


@transaction.atomic
def workflow_delete(*, workflow: Workflow, user: Any) -> None:
    """Delete a workflow with its versions. Runs of it, anyone's, stay: each keeps the frozen spec
    it ran (name, version number, spec, YAML) and loses only its link to the version.

    Raises PermissionDenied for someone else's workflow.
    """
    check_can_edit(user, workflow, f"workflow '{workflow.name}'")
    workflow.delete()


@transaction.atomic
def workflow_archive(*, workflow: Workflow, user: Any, archived: bool = True) -> Workflow:
    """Archive a workflow (hidden from lists, no new runs; its page and runs stay) or restore it;
    return it. Raises PermissionDenied for someone else's workflow, and WorkflowNameTaken when the
    owner has since made another active workflow of its name (rename one of them first)."""
    check_can_edit(user, workflow, f"workflow '{workflow.name}'")
    if workflow.archived and not archived:
        _claim_name(owner=workflow.owner, name=workflow.name, workflow=workflow, restoring=True)
    workflow.archived = archived
    workflow.save(update_fields=["archived", "updated_at"])
    return workflow
