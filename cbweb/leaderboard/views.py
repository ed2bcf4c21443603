from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from cbweb.leaderboard.selectors import leaderboard_rows
from cbweb.permissions import readable


@readable
def leaderboard(request: HttpRequest) -> HttpResponse:
    return render(request, "leaderboard/index.html", {"rows": leaderboard_rows()})
