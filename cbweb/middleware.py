"""Request guards: limits that run before any other middleware reads the request body, and the answer
to a request whose database statement ran past its limit."""

from __future__ import annotations

import logging
from collections.abc import Callable

from django.conf import settings
from django.db import OperationalError
from django.http import HttpRequest, HttpResponse, JsonResponse

log = logging.getLogger(__name__)


def _refusal(request: HttpRequest, status: int, message: str) -> HttpResponse:
    if request.path.startswith("/api/"):
        return JsonResponse({"message": message, "errors": []}, status=status)
    return HttpResponse(message, status=status, content_type="text/plain; charset=utf-8")


class RequestSizeLimitMiddleware:
    """Refuse a request whose body is over CB_MAX_REQUEST_BYTES before anything reads it, and one whose
    path is over CB_MAX_PATH_CHARS before any URL pattern is tried on it.

    The first middleware of the stack: the CSRF check reads a POST body before a view can ask who is
    signed in, so an anonymous client could otherwise make the server spool a large upload to disk.
    Some URL patterns (the admin's ``r/<path>/<path>/``) cost time quadratic in the path's length;
    the cap bounds them. A body without a Content-Length (chunked) is refused too: Django would read
    it as empty, and a proxy in front (docker-compose's nginx) sets the length of every body it passes.
    """

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if len(request.path_info) > int(settings.CB_MAX_PATH_CHARS):
            return _refusal(
                request, 414, f"the path is over the limit of {settings.CB_MAX_PATH_CHARS} characters"
            )
        limit = int(settings.CB_MAX_REQUEST_BYTES)
        raw = request.META.get("CONTENT_LENGTH") or ""
        if request.META.get("HTTP_TRANSFER_ENCODING") and not raw:
            return _refusal(
                request, 411, "a request body needs a Content-Length (chunked bodies are refused)"
            )
        if raw:
            if not raw.isascii() or not raw.isdigit():
                return _refusal(request, 400, "the Content-Length header is not a number")
            if int(raw) > limit:
                return _refusal(
                    request, 413, f"the request body is {int(raw)} bytes, over the limit of {limit} bytes"
                )
        return self.get_response(request)


# PostgreSQL's SQLSTATE for a statement cancelled by statement_timeout (or by an operator).
QUERY_CANCELED = "57014"


class StatementTimeoutMiddleware:
    """Answer 503 with Retry-After, not a server error, when PostgreSQL cancelled one of the request's
    statements for running past CB_DB_STATEMENT_TIMEOUT_MS: the request asked for more than the server
    spends on one answer, and the server itself is fine."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        return self.get_response(request)

    def process_exception(self, request: HttpRequest, exception: Exception) -> HttpResponse | None:
        if not isinstance(exception, OperationalError):
            return None
        if getattr(exception.__cause__, "sqlstate", None) != QUERY_CANCELED:
            return None
        log.warning("statement timeout on %s %s", request.method, request.path)
        response = _refusal(
            request,
            503,
            f"this request took longer than the server's limit of {settings.CB_DB_STATEMENT_TIMEOUT_MS} ms "
            "per database statement; narrow it (fewer search words, smaller pages) or try again later",
        )
        response["Retry-After"] = "30"
        return response
