"""Throttles (docs/security.md): failed API tokens and logins per client, writes per user.

One write budget per user covers the API and the pages: ``WriteThrottle`` is DRF's default throttle
class, and ``page_write_throttle`` applies the same class (the same cache key, so the same count) to
the pages that write; the editor's live preview has a budget of its own (``PreviewThrottle``).

DRF's SimpleRateThrottle keeps a sliding window of timestamps in the shared cache. Its ``allow_request``
counts every request; a failure throttle must count failures only, and be checked *before* the
password or token is tried, so ``FailureThrottle`` splits the two steps.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import logging
import math
from collections.abc import Callable
from typing import Any

from django.conf import settings
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from rest_framework.permissions import SAFE_METHODS
from rest_framework.throttling import SimpleRateThrottle, UserRateThrottle

log = logging.getLogger(__name__)


class CacheDown(Exception):
    pass


def _cache(call: Any, *args: Any) -> Any:
    """Call the cache; when it is unreachable (the broker's Redis restarting), log and raise CacheDown.

    Throttles then let requests through: a Redis outage must not turn every signed-in request into
    a server error, and the broker being down is already a fault the run queue survives.
    """
    try:
        return call(*args)
    except Exception as exc:  # any backend's connection error (redis, memcached, a database)
        log.warning("throttle cache unavailable, not throttling: %s", exc)
        raise CacheDown from exc


class FailureThrottle(SimpleRateThrottle):
    """Count failures (wrong tokens, wrong passwords) of one client; refuse while over the rate."""

    setting = ""
    # Set by SimpleRateThrottle.__init__ from get_rate(), which always gives a rate here.
    num_requests: int
    duration: int

    def __init__(self, *, scope: str, setting: str, request: Any, extra: str = "") -> None:
        self.scope = scope
        self.setting = setting
        super().__init__()
        # Hashed: a user name may hold characters a cache key should not.
        ident = hashlib.sha256(f"{self.get_ident(request)}|{extra}".encode()).hexdigest()[:32]
        self.key = self.cache_format % {"scope": scope, "ident": ident}
        try:
            self.history = _cache(self.cache.get, self.key, [])
            self.available = True
        except CacheDown:
            self.history, self.available = [], False
        self.now = self.timer()
        while self.history and self.history[-1] <= self.now - self.duration:
            self.history.pop()

    def get_rate(self) -> str:
        # Read at each request (not at import as DRF's THROTTLE_RATES are), so settings changes apply.
        return str(getattr(settings, self.setting))

    def blocked(self) -> bool:
        """Return whether the client has used up its failures of the current window."""
        return len(self.history) >= self.num_requests

    def record_failure(self) -> None:
        if self.available:
            self.history.insert(0, self.now)
            with contextlib.suppress(CacheDown):
                _cache(self.cache.set, self.key, self.history, self.duration)

    def reset(self) -> None:
        """Forget the failures (after a successful login)."""
        if self.available and self.history:
            with contextlib.suppress(CacheDown):
                _cache(self.cache.delete, self.key)


class WriteThrottle(UserRateThrottle):
    """API writes (POST, PUT, PATCH, DELETE) per user, at CB_THROTTLE_WRITES; reads are not throttled."""

    scope = "write"

    def get_rate(self) -> str:
        return str(settings.CB_THROTTLE_WRITES)

    def allow_request(self, request: Any, view: Any) -> bool:
        if request.method in SAFE_METHODS:
            return True
        try:
            return bool(_cache(super().allow_request, request, view))
        except CacheDown:
            return True


class PreviewThrottle(WriteThrottle):
    """The editor's live preview per user, at CB_THROTTLE_PREVIEWS: it checks a whole workflow (its
    models and files included) on every pause in typing, more often than a user saves."""

    scope = "preview"

    def get_rate(self) -> str:
        return str(settings.CB_THROTTLE_PREVIEWS)


View = Callable[..., HttpResponse]


def page_write_throttle(throttle: type[WriteThrottle] = WriteThrottle) -> Callable[[View], View]:
    """Decorate a page view so that its writes (POST) count against the user's budget of ``throttle``;
    over it the page answers 429 (JSON when the client asks for JSON) saying when to try again."""

    def decorate(view: View) -> View:
        @functools.wraps(view)
        def wrapped(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
            check = throttle()
            if not check.allow_request(request, None):
                wait = math.ceil(check.wait() or 1)
                message = f"too many writes: your budget is {check.get_rate()}; try again in {wait} s"
                if "application/json" in request.headers.get("Accept", ""):
                    response: HttpResponse = JsonResponse(
                        {"errors": [{"field": None, "message": message}]}, status=429
                    )
                else:
                    response = render(request, "429.html", {"message": message}, status=429)
                response["Retry-After"] = str(wait)
                return response
            return view(request, *args, **kwargs)

        return wrapped

    return decorate
