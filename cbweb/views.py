"""Project-wide pages that belong to no app."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.contrib import messages
from django.contrib.auth import views as auth_views
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from django.views import defaults

from cbweb.api import selectors as token_selectors
from cbweb.api import services as token_services
from cbweb.api.throttles import page_write_throttle
from cbweb.forms import ThrottledAuthenticationForm, TokenCreateForm
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


@login_required
@page_write_throttle()
def api_tokens(request: HttpRequest) -> HttpResponse:
    """The user's API tokens: create one (its key is shown in this response only), revoke one."""
    form = TokenCreateForm(request.POST if request.POST.get("action") == "create" else None)
    context: dict[str, Any] = {}
    if request.method == "POST" and request.POST.get("action") == "revoke":
        token_id = request.POST.get("token", "")
        if token_id.isascii() and token_id.isdigit():
            token = token_selectors.token_get(user=request.user, pk=int(token_id))
            token_services.token_revoke(token=token, user=request.user)
            messages.success(request, f"revoked token {token.prefix}…")
    elif form.is_bound and form.is_valid():
        _, key = token_services.token_create(user=request.user, name=form.cleaned_data["name"])
        context = {"new_key": key, "new_name": form.cleaned_data["name"]}
        form = TokenCreateForm()
    context.update({"form": form, "tokens": token_selectors.token_list(user=request.user)})
    response = render(request, "api/tokens.html", context, status=400 if form.errors else 200)
    # The key is in this page: no cache may keep it.
    response["Cache-Control"] = "no-store"
    return response
