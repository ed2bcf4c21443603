"""Project-wide pages that belong to no app."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.contrib.auth import views as auth_views
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from cbweb.forms import ThrottledAuthenticationForm
from cbweb.permissions import readable


@readable
def docs_metrics(request: HttpRequest) -> HttpResponse:
    """Show docs/metrics.md, the definitions behind every number the pages show."""
    path = settings.BASE_DIR / "docs" / "metrics.md"
    text = path.read_text(encoding="utf-8") if path.is_file() else ""
    return render(request, "docs/metrics.html", {"text": text})


class LoginView(auth_views.LoginView):
    """Django's login page with failed logins throttled (429 with Retry-After once over the rate)."""

    authentication_form = ThrottledAuthenticationForm

    def form_invalid(self, form: Any) -> HttpResponse:
        response = super().form_invalid(form)
        if form.retry_after_s is not None:
            response.status_code = 429
            response["Retry-After"] = str(form.retry_after_s)
        return response
