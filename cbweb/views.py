"""Project-wide pages that belong to no app."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.contrib.auth import views as auth_views
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from django.views import defaults

from cbweb.forms import ThrottledAuthenticationForm
from cbweb.permissions import readable


@readable
def docs_metrics(request: HttpRequest) -> HttpResponse:
    """Show docs/metrics.md, the definitions behind every number the pages show."""
    path = settings.BASE_DIR / "docs" / "metrics.md"
    text = path.read_text(encoding="utf-8") if path.is_file() else ""
    return render(request, "docs/metrics.html", {"text": text})


def not_found(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    """404 for a URL no view matches (a non-numeric id, a typo): the API's JSON error under /api/,
    Django's page elsewhere."""
    if request.path.startswith("/api/"):
        return JsonResponse({"message": f"no API endpoint at {request.path}", "errors": []}, status=404)
    return defaults.page_not_found(request, exception)


class LoginView(auth_views.LoginView):
    """Django's login page with failed logins throttled (429 with Retry-After once over the rate)."""

    authentication_form = ThrottledAuthenticationForm

    def form_invalid(self, form: Any) -> HttpResponse:
        response = super().form_invalid(form)
        if form.retry_after_s is not None:
            response.status_code = 429
            response["Retry-After"] = str(form.retry_after_s)
        return response
