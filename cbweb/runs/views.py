"""Run pages: list, launch, live progress and result, downloads, cancel, compare."""

from __future__ import annotations

import json
import mimetypes

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.http import (
    FileResponse,
    Http404,
    HttpRequest,
    HttpResponse,
    JsonResponse,
    StreamingHttpResponse,
)
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_POST

from cbweb.api.throttles import page_write_throttle
from cbweb.permissions import can_edit, readable
from cbweb.runs import dispatch, selectors, services
from cbweb.runs.forms import RunLaunchForm
from cbweb.runs.models import Run
from cbweb.workflows import selectors as workflow_selectors

STATUSES = [s for s, _ in Run.Status.choices]


@readable
def run_list(request: HttpRequest) -> HttpResponse:
    filters = {k: request.GET.get(k, "") for k in selectors.RUN_FILTERS}
    if filters["status"] and filters["status"] not in STATUSES:
        filters["status"] = ""
    for key in ("workflow", "platform"):
        if filters[key] and not filters[key].isdigit():
            filters[key] = ""
    # Malformed text filters match nothing rather than fail: they come from a typed search box.
    for key in ("commit", "branch", "tag", "search"):
        filters[key] = filters[key][:200]
    runs = selectors.run_list(filters=filters)[:200]
    return render(request, "runs/list.html", {"runs": runs, "filters": filters, "statuses": STATUSES})


@login_required
@page_write_throttle()
def run_launch(request: HttpRequest, workflow_pk: int) -> HttpResponse:
    workflow = workflow_selectors.workflow_get(pk=workflow_pk)
    latest = workflow_selectors.version_latest(workflow=workflow)
    initial = {"version": latest, **RunLaunchForm.initial_for(latest.spec.get("scheduler", "greedy"))}
    form = RunLaunchForm(request.POST or None, workflow=workflow, initial=initial)
    if request.method == "POST" and form.is_valid():
        try:
            runs = dispatch.run_launch(
                version=form.cleaned_data["version"],
                user=request.user,
                scheduler=form.cleaned_data["scheduler"],
                scheduler_params=form.cleaned_data["scheduler_params"],
                platform=form.cleaned_data["platform"],
                repeats=form.cleaned_data["repeats"],
                meta=form.cleaned_data["meta"],
                weights=form.cleaned_data["weights"] or None,
            )
        except ValidationError as exc:
            for field, errors in exc.message_dict.items():
                form.add_error(form.field_for_error(field), errors)
        else:
            messages.success(request, f"queued {len(runs)} run(s)")
            if len(runs) == 1:
                return redirect("runs:detail", pk=runs[0].pk)
            return redirect(f"{reverse('runs:list')}?batch={runs[0].batch}")
    quota = {
        "queued": selectors.run_queued_count(user=request.user),
        "allowed": settings.CB_MAX_QUEUED_RUNS_PER_USER,
    }
    return render(
        request,
        "runs/launch.html",
        {"form": form, "workflow": workflow, "quota": quota},
        status=400 if form.errors else 200,
    )


@readable
def run_detail(request: HttpRequest, pk: int) -> HttpResponse:
    """The run page: live progress while queued or running, the full result once finished."""
    run = selectors.run_get(pk=pk)
    context = {
        "run": run,
        "can_edit": can_edit(request.user, run.owner_id),
        "live_nodes": selectors.run_live_nodes(run=run),
        "wait_reason": selectors.run_wait_reason(run=run),
    }
    if run.is_finished and run.result is not None:
        context.update(
            {
                "slo_rows": selectors.slo_rows(run=run),
                "quality_rows": selectors.quality_rows(run=run),
                "charts": selectors.run_charts(run=run),
                "files": selectors.run_bundle_files(run=run),
                "nodes": selectors.run_nodes(run=run),
                "telemetry_rows": selectors.telemetry_rows(run=run),
                "telemetry_unavailable": selectors.telemetry_unavailable(run=run),
            }
        )
    return render(request, "runs/detail.html", context)


@readable
def run_progress(request: HttpRequest, pk: int) -> JsonResponse:
    run = selectors.run_get(pk=pk)
    return JsonResponse(
        {
            "id": run.pk,
            "status": run.status,
            # The page reloads once finished; the statuses that mean it live in benchmarks.status.
            "finished": run.is_finished,
            "error": run.error,
            "progress": run.progress,
            # The nodes in DAG order, and why a queued run waits (the live page shows both).
            "nodes": selectors.run_live_nodes(run=run),
            "wait_reason": selectors.run_wait_reason(run=run),
            "cancel_requested": run.cancel_requested,
        }
    )


@login_required
@require_POST
@page_write_throttle()
def run_cancel(request: HttpRequest, pk: int) -> HttpResponse:
    try:
        services.run_cancel(run=selectors.run_get(pk=pk), user=request.user)
        messages.info(request, "cancel requested")
    except services.RunStateError as exc:
        messages.error(request, str(exc))
    return redirect("runs:detail", pk=pk)


@login_required
@require_POST
@page_write_throttle()
def run_delete(request: HttpRequest, pk: int) -> HttpResponse:
    try:
        services.run_delete(run=selectors.run_get(pk=pk), user=request.user)
    except services.RunStateError as exc:
        messages.error(request, str(exc))
        return redirect("runs:detail", pk=pk)
    messages.success(request, f"deleted run {pk}")
    return redirect("runs:list")


@readable
def run_result_json(request: HttpRequest, pk: int) -> HttpResponse:
    document = selectors.run_result_document(run=selectors.run_get(pk=pk))
    if document is None:
        raise Http404("this run has no result yet")
    response = HttpResponse(json.dumps(document, indent=1), content_type="application/json")
    response["Content-Disposition"] = f'attachment; filename="run-{pk}-result.json"'
    return response


@readable
def run_workflow_yaml(request: HttpRequest, pk: int) -> HttpResponse:
    run = selectors.run_get(pk=pk)
    response = HttpResponse(run.yaml, content_type="application/x-yaml; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="run-{pk}-workflow.yml"'
    return response


@readable
def run_file(request: HttpRequest, pk: int, path: str) -> FileResponse:
    """One file of the run's bundle (CSV, image); paths outside the bundle are 404."""
    found = selectors.run_bundle_file(run=selectors.run_get(pk=pk), rel=path)
    if found is None:
        raise Http404("no such file in this run's bundle")
    content_type = mimetypes.guess_type(found.name)[0] or "application/octet-stream"
    return FileResponse(
        found.open("rb"), content_type=content_type, as_attachment=not content_type.startswith("image/")
    )


@readable
def run_bundle(request: HttpRequest, pk: int) -> StreamingHttpResponse:
    """The run's whole result bundle as one ZIP, streamed: readable as each of its files and the
    run's result.json are (docs/security.md), since it holds nothing they do not."""
    run = selectors.run_get(pk=pk)
    if not selectors.run_bundle_files(run=run):
        raise Http404("this run has no result bundle")
    response = StreamingHttpResponse(selectors.run_bundle_zip(run=run), content_type="application/zip")
    response["Content-Disposition"] = f'attachment; filename="run-{run.pk}-bundle.zip"'
    return response


@readable
def run_history(request: HttpRequest, workflow_pk: int) -> HttpResponse:
    """A workflow's runs over time or commit: attainment and key latencies, regressions marked."""
    workflow = workflow_selectors.workflow_get(pk=workflow_pk)
    order = request.GET.get("order", "time")
    if order not in selectors.HISTORY_ORDERS:
        order = "time"
    history = selectors.run_history(workflow_id=workflow.pk, order=order)
    return render(request, "runs/history.html", {"workflow": workflow, "history": history, "order": order})


@readable
def run_compare(request: HttpRequest) -> HttpResponse:
    ids = [int(x) for x in request.GET.getlist("runs") if x.isdigit()][:20]
    runs = list(selectors.run_list().filter(pk__in=ids, result__isnull=False))
    runs.sort(key=lambda r: ids.index(r.pk))
    if len(runs) < 2:
        messages.error(request, "pick two or more finished runs to compare")
        return redirect("runs:list")
    return render(request, "runs/compare.html", {"runs": runs, "compare": selectors.run_compare(runs=runs)})
