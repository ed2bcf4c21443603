"""Request guards that run before any other middleware reads the request body."""

from __future__ import annotations

from collections.abc import Callable

from django.conf import settings
from django.http import HttpRequest, HttpResponse, JsonResponse


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
