from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from cbweb.permissions import readable
from cbweb.platforms import selectors


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
