"""The API's reading pages: the OpenAPI schema in Swagger UI (/api/v1/docs/) and Redoc
(/api/v1/redoc/), both served from this server's static files (drf-spectacular-sidecar), open to
everyone as the schema is."""

from __future__ import annotations

from typing import Any

from drf_spectacular.views import SpectacularRedocView, SpectacularSwaggerView
from rest_framework.permissions import AllowAny
from rest_framework.request import Request
from rest_framework.response import Response

# Nothing from elsewhere: the pages' own inline start-up script and styles, this server's files, and
# Redoc's web worker (a blob). Redoc's sidebar asks a CDN for its maker's logo; this keeps it home.
LOCAL_ONLY = (
    "default-src 'self'; script-src 'self' 'unsafe-inline'; style-src 'self' 'unsafe-inline'; "
    "img-src 'self' data:; worker-src 'self' blob:; connect-src 'self'; frame-ancestors 'none'"
)


class _LocalOnly:
    """Send the page with a Content-Security-Policy that lets it load only this server's files."""

    def finalize_response(self, request: Request, response: Response, *args: Any, **kwargs: Any) -> Any:
        response = super().finalize_response(request, response, *args, **kwargs)  # type: ignore[misc]
        response["Content-Security-Policy"] = LOCAL_ONLY
        return response


class ApiSwaggerPage(_LocalOnly, SpectacularSwaggerView):
    url_name = "api:schema"
    permission_classes = [AllowAny]


class ApiRedocPage(_LocalOnly, SpectacularRedocView):
    url_name = "api:schema"
    permission_classes = [AllowAny]
    # drf-spectacular's page without its Google Fonts.
    template_name = "api/redoc.html"
