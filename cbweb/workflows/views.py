"""Workflow pages: list, detail (DAG, YAML, versions), the form-based editor, import/export, preview."""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST

from benchmarks.spec import export as spec_export
from benchmarks.spec import load as spec_load
from benchmarks.spec import model as spec_model
from cbweb.permissions import can_edit, check_can_edit, readable
from cbweb.runs.selectors import run_list
from cbweb.workflows import selectors, services
from cbweb.workflows.dag import dag_svg, nodes_of_spec
from cbweb.workflows.forms import (
    attach_errors,
    build_editor,
    cards_from_bound,
    default_card,
    editor_to_dict,
    node_names_in,
    workflow_to_editor,
)
from cbweb.workflows.limits import spec_limits


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
def workflow_yaml(request: HttpRequest, pk: int, number: int) -> HttpResponse:
    version = selectors.version_get(workflow=selectors.workflow_get(pk=pk), number=number)
    response = HttpResponse(version.yaml, content_type="application/x-yaml; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="workflow-{pk}-v{number}.yml"'
    return response


def _imported(request: HttpRequest) -> tuple[str | None, str | None]:
    """Return (YAML text, problem) from the import box or the uploaded file."""
    upload = request.FILES.get("yaml_file")
    if upload is not None:
        max_bytes = spec_limits().max_bytes
        if upload.size and upload.size > max_bytes:
            return None, f"the file is {upload.size} bytes, over the limit of {max_bytes} bytes"
        try:
            return upload.read().decode("utf-8"), None
        except UnicodeDecodeError:
            return None, "the uploaded file is not UTF-8 text"
    text = request.POST.get("yaml_text", "")
    return (text, None) if text.strip() else (None, "paste YAML or choose a file to import")


def _editor(request: HttpRequest, workflow: Any = None) -> HttpResponse:
    """The editor for a new workflow (``workflow`` None) or a new version of an existing one."""
    action = request.POST.get("action", "save") if request.method == "POST" else None
    general: list[str] = []
    import_errors: list[dict[str, Any]] = []
    svg = None
    if action == "import":
        text, problem = _imported(request)
        meta, formset = build_editor()
        if problem:
            general.append(problem)
        else:
            try:
                parsed = spec_load.load_yaml(
                    text or "", name=workflow.name if workflow else "imported", limits=spec_limits()
                )
                services.workflow_check_files(workflow=parsed)
            except spec_model.WorkflowValidationError as exc:
                import_errors = exc.to_json()
            else:
                meta_initial, cards = workflow_to_editor(parsed)
                meta, formset = build_editor(meta_initial=meta_initial, cards_initial=cards)
                svg = dag_svg(nodes_of_spec(spec_export.to_dict(parsed)))
                messages.info(request, f"imported {len(cards)} node(s); review and save")
    elif action is not None:
        meta, formset = build_editor(data=request.POST)
        if action == "add":
            cards = cards_from_bound(formset)
            cards.append(default_card(len(cards) + 1))
            meta, formset = build_editor(
                meta_initial={k: meta[k].data for k in meta.fields}, cards_initial=cards
            )
        elif meta.is_valid() and formset.is_valid():
            cards = [
                f.cleaned_data for f in formset.forms if f.cleaned_data and not f.cleaned_data.get("DELETE")
            ]
            data, problems = editor_to_dict(meta.cleaned_data, cards)
            general.extend(problems)
            svg = dag_svg(nodes_of_spec(data))
            if not problems:
                try:
                    if action == "save":
                        name = meta.cleaned_data["name"]
                        if workflow is None:
                            workflow = services.workflow_create(owner=request.user, name=name, spec=data)
                        else:
                            services.workflow_update(
                                workflow=workflow, user=request.user, name=name, spec=data
                            )
                        messages.success(request, f"saved '{workflow.name}'")
                        return redirect("workflows:detail", pk=workflow.pk)
                    services.workflow_parse(name=meta.cleaned_data["name"], spec=data)
                    messages.info(request, "the workflow is valid")
                except spec_model.WorkflowValidationError as exc:
                    general.extend(attach_errors(meta, formset, exc.errors))
    elif workflow is not None:
        version = selectors.version_latest(workflow=workflow)
        try:
            meta_initial, cards = workflow_to_editor(selectors.version_workflow(version=version))
        except spec_model.WorkflowValidationError as exc:
            # A version saved before a rule existed (names, issue 17): show why; the user re-imports it.
            meta, formset = build_editor()
            import_errors = exc.to_json()
            general.append(f"version {version.number} no longer validates: fix its YAML and import it")
        else:
            meta, formset = build_editor(meta_initial=meta_initial, cards_initial=cards)
        svg = dag_svg(nodes_of_spec(version.spec))
    else:
        meta, formset = build_editor()
    status = (
        400
        if action is not None
        and (
            general
            or import_errors
            or (action in ("save", "check") and (meta.errors or formset.total_error_count()))
        )
        else 200
    )
    context = {
        "workflow": workflow,
        "meta": meta,
        "formset": formset,
        "general_errors": general,
        "import_errors": import_errors,
        "svg": svg,
    }
    return render(request, "workflows/editor.html", context, status=status)


@login_required
def workflow_new(request: HttpRequest) -> HttpResponse:
    return _editor(request)


@login_required
def workflow_edit(request: HttpRequest, pk: int) -> HttpResponse:
    workflow = selectors.workflow_get(pk=pk)
    check_can_edit(request.user, workflow, f"workflow '{workflow.name}'")
    return _editor(request, workflow)


@login_required
@require_POST
def workflow_preview(request: HttpRequest) -> JsonResponse:
    """The editor's live preview: the DAG as SVG, the node names, and the engine's errors by field."""
    meta, formset = build_editor(data=request.POST)
    errors: list[dict[str, Any]] = []
    svg = ""
    if meta.is_valid() and formset.is_valid():
        cards = [f.cleaned_data for f in formset.forms if f.cleaned_data and not f.cleaned_data.get("DELETE")]
        data, problems = editor_to_dict(meta.cleaned_data, cards)
        svg = dag_svg(nodes_of_spec(data))
        errors += [{"field": None, "message": p} for p in problems]
        try:
            services.workflow_parse(name=meta.cleaned_data["name"], spec=data)
        except spec_model.WorkflowValidationError as exc:
            errors += [{"field": None, "message": m} for m in attach_errors(meta, formset, exc.errors)]
    for name, messages_ in meta.errors.items():
        errors += [{"field": f"{name}", "message": m} for m in messages_]
    for form in formset.forms:
        for name, messages_ in form.errors.items():
            field = form.add_prefix(name) if name != "__all__" else form.prefix
            errors += [{"field": field, "message": m} for m in messages_]
    errors += [{"field": None, "message": m} for m in formset.non_form_errors()]
    return JsonResponse({"svg": svg, "nodes": node_names_in(request.POST), "errors": errors})


@login_required
@require_POST
def workflow_delete(request: HttpRequest, pk: int) -> HttpResponse:
    workflow = selectors.workflow_get(pk=pk)
    services.workflow_delete(workflow=workflow, user=request.user)
    messages.success(request, f"deleted '{workflow.name}' (its runs keep the spec they ran)")
    return redirect("workflows:list")


@login_required
@require_POST
def workflow_archive(request: HttpRequest, pk: int) -> HttpResponse:
    workflow = selectors.workflow_get(pk=pk)
    archived = request.POST.get("archived", "1") == "1"
    services.workflow_archive(workflow=workflow, user=request.user, archived=archived)
    messages.success(request, f"{'archived' if archived else 'restored'} '{workflow.name}'")
    return redirect("workflows:detail", pk=pk)
