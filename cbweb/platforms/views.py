from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from cbweb.leaderboard.forms import PlatformCompareForm
from cbweb.leaderboard.selectors import platform_comparison
from cbweb.pages import readable
from cbweb.platforms import selectors

RECENT_RUNS = 50


@readable
def platform_list(request: HttpRequest) -> HttpResponse:
    return render(
        request,
        "platforms/list.html",
        {
            "platforms": selectors.platform_list(),
            "live": set(selectors.platform_live().values_list("pk", flat=True)),
        },
    )


@readable
def platform_detail(request: HttpRequest, pk: int) -> HttpResponse:
    """One platform: its hardware and software, its worker, the workflows and runs it ran."""
    platform = selectors.platform_get(pk=pk)
    runs = platform.runs.select_related("owner", "workflow_version", "platform").order_by(
        "-created_at", "-id"
    )
    return render(
        request,
        "platforms/detail.html",
        {
            "platform": platform,
            "live": selectors.platform_live().filter(pk=pk).exists(),
            "workflows": selectors.platform_workflows(platform=platform),
            "runs": runs[:RECENT_RUNS],
            "run_count": runs.count(),
        },
    )


@readable
def platform_compare(request: HttpRequest) -> HttpResponse:
    """The same workflow on two or more platforms side by side."""
    form = PlatformCompareForm(request.GET or None)
    comparison = None
    if form.is_valid():
        v = form.cleaned_data
        comparison = platform_comparison(
            workflow=v["workflow"],
            platforms=[p.pk for p in v["platforms"]],
            scheduler_label=v["scheduler"] or None,
        )
    query = request.GET.copy()
    query.pop("scheduler", None)
    return render(
        request,
        "platforms/compare.html",
        {"form": form, "comparison": comparison, "query": query.urlencode()},
        status=400 if form.errors else 200,
    )
