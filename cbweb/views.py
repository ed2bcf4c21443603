"""Project-wide pages that belong to no app."""

from __future__ import annotations

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from cbweb.permissions import readable


@readable
def docs_metrics(request: HttpRequest) -> HttpResponse:
    """Show docs/metrics.md, the definitions behind every number the pages show."""
    path = settings.BASE_DIR / "docs" / "metrics.md"
    text = path.read_text(encoding="utf-8") if path.is_file() else ""
    return render(request, "docs/metrics.html", {"text": text})
