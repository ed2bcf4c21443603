from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from cbweb.leaderboard import selectors
from cbweb.leaderboard.forms import LeaderboardForm
from cbweb.pages import readable


@readable
def leaderboard(request: HttpRequest) -> HttpResponse:
    """One workflow's leaderboard; without a workflow asked for, the one with the most succeeded runs."""
    workflows = selectors.leaderboard_workflows()
    data = request.GET.copy()
    if "workflow" not in data and (busiest := workflows.order_by("-succeeded", "id").first()):
        data["workflow"] = str(busiest.pk)
    form = LeaderboardForm(data)
    board = None
    if form.is_valid():
        v = form.cleaned_data
        board = selectors.leaderboard(
            workflow=v["workflow"],
            version=v["version"],
            platform=v["platform"].pk if v["platform"] else None,
            scheduler=v["scheduler"] or None,
            since=v["since"],
            until=v["until"],
            sort=v["sort"],
        )
    bad = bool(form.errors) and workflows.exists()
    query = data.copy()
    query.pop("sort", None)
    return render(
        request,
        "leaderboard/index.html",
        {
            "form": form,
            "board": board,
            "workflows": workflows,
            "query": query.urlencode(),
            "sort": form.cleaned_data.get("sort", "rank") if form.is_valid() else "rank",
        },
        status=400 if bad else 200,
    )
