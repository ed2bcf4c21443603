"""Workflow pages: list, detail (DAG, YAML, versions), the form-based editor, import/export, preview."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST

from cbweb.api.throttles import PreviewThrottle, page_write_throttle
from cbweb.permissions import can_edit, check_can_edit, readable
from cbweb.runs.selectors import run_list
from cbweb.workflows import editor, selectors, services
from cbweb.workflows.dag import dag_svg, nodes_of_spec
from cbweb.workflows.forms import VersionDiffForm
from cbweb.workflows.models import Workflow


@readable
def workflow_list(request: HttpRequest) -> HttpResponse:
    search = request.GET.get("q", "").strip()
    archived = request.GET.get("archived") == "1"
    workflows = selectors.workflow_list(search=search, archived=archived)
    return render(request, "workflows/list.html", {"workflows": workflows, "q": search, "archived": archived})


@readable
def workflow_detail(request: HttpRequest, pk: int, number: int | None = None) -> HttpResponse:
    workflow = selectors.workflow_get(pk=pk)
    version = (
        selectors.version_get(workflow=workflow, number=number)
        if number
        else selectors.version_latest(workflow=workflow)
    )
    context = {
        "workflow": workflow,
        "version": version,
        "versions": workflow.versions.all(),
        "svg": dag_svg(nodes_of_spec(version.spec)),
        "runs": run_list(filters={"workflow": workflow.pk})[:20],
        "can_edit": can_edit(request.user, workflow.owner_id),
    }
    return render(request, "workflows/detail.html", context)


@readable
def workflow_diff(request: HttpRequest, pk: int) -> HttpResponse:
    """Two versions of a workflow compared: changed fields and the unified diff of their YAML.
    Without ``old``/``new`` it compares the latest version with the one before it."""
    workflow = selectors.workflow_get(pk=pk)
    numbers = sorted(workflow.versions.values_list("number", flat=True))
    given = {k: request.GET[k] for k in ("old", "new") if k in request.GET}
    if not given and len(numbers) > 1:
        given = {"old": str(numbers[-2]), "new": str(numbers[-1])}
    form = VersionDiffForm(given or None, numbers=numbers)
    diff = None
    if form.is_bound and form.is_valid():
        diff = selectors.version_diff(
            workflow=workflow, old=form.cleaned_data["old"], new=form.cleaned_data["new"]
        )
    context = {"workflow": workflow, "form": form, "diff": diff}
    return render(request, "workflows/diff.html", context, status=400 if form.errors else 200)


@readable
def workflow_yaml(request: HttpRequest, pk: int, number: int) -> HttpResponse:
    version = selectors.version_get(workflow=selectors.workflow_get(pk=pk), number=number)
    response = HttpResponse(version.yaml, content_type="application/x-yaml; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="workflow-{pk}-v{number}.yml"'
    return response


def _editor(request: HttpRequest, workflow: Workflow | None = None) -> HttpResponse:
    """The editor for a new workflow (``workflow`` None) or a new version of an existing one.

    A POST names its action: import (YAML into the editor), add (a card, for pages without
    JavaScript), check, or save (the default).
    """
    action = request.POST.get("action", "save")
    if request.method != "POST":
        state = editor.editor_open(workflow=workflow)
    elif action == "import":
        state = editor.editor_import(
            text=request.POST.get("yaml_text", ""),
            upload=request.FILES.get("yaml_file"),
            name=workflow.name if workflow else "imported",
        )
    elif action == "add":
        state = editor.editor_add_card(data=request.POST)
    elif action == "save":
        state = editor.editor_save(data=request.POST, user=request.user, workflow=workflow)
    else:
        state = editor.editor_check(data=request.POST)
    if state.saved is not None:
        messages.success(request, f"saved '{state.saved.name}'")
        return redirect("workflows:detail", pk=state.saved.pk)
    if state.notice:
        messages.info(request, state.notice)
    context = {"workflow": workflow, **state.context()}
    return render(request, "workflows/editor.html", context, status=state.status)


@login_required
@page_write_throttle()
def workflow_new(request: HttpRequest) -> HttpResponse:
    return _editor(request)


@login_required
@page_write_throttle()
def workflow_edit(request: HttpRequest, pk: int) -> HttpResponse:
    workflow = selectors.workflow_get(pk=pk)
    check_can_edit(request.user, workflow, f"workflow '{workflow.name}'")
    return _editor(request, workflow)


@login_required
@require_POST
@page_write_throttle(PreviewThrottle)
def workflow_preview(request: HttpRequest) -> JsonResponse:
    """The editor's live preview: the DAG as SVG, the node names, and the engine's errors by field."""
    return JsonResponse(editor.editor_check(data=request.POST).preview())


@login_required
@require_POST
@page_write_throttle()
def workflow_delete(request: HttpRequest, pk: int) -> HttpResponse:
    workflow = selectors.workflow_get(pk=pk)
    services.workflow_delete(workflow=workflow, user=request.user)
    messages.success(request, f"deleted '{workflow.name}' (its runs keep the spec they ran)")
    return redirect("workflows:list")


@login_required
@require_POST
@page_write_throttle()
def workflow_archive(request: HttpRequest, pk: int) -> HttpResponse:
    workflow = selectors.workflow_get(pk=pk)
    archived = request.POST.get("archived", "1") == "1"
    try:
        services.workflow_archive(workflow=workflow, user=request.user, archived=archived)
    except services.WorkflowNameTaken as exc:
        messages.error(request, f"not restored: {exc.errors[0].message}")
    else:
        messages.success(request, f"{'archived' if archived else 'restored'} '{workflow.name}'")
    return redirect("workflows:detail", pk=pk)
