"""Throttles (docs/security.md): failed API tokens and logins per client, API writes per user.

DRF's SimpleRateThrottle keeps a sliding window of timestamps in the shared cache. Its ``allow_request``
counts every request; a failure throttle must count failures only, and be checked *before* the
password or token is tried, so ``FailureThrottle`` splits the two steps.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
from typing import Any

from django.conf import settings
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


class AnonymousReadThrottle(SimpleRateThrottle):
    """Reads (GET, HEAD, OPTIONS) by clients that are not signed in, per client address, at
    CB_THROTTLE_ANON_READS (empty: not throttled); signed-in readers are not throttled here. The API
    applies it as a DRF throttle, every page through ``cbweb.pages.readable``."""

    scope = "anon_read"

    def get_rate(self) -> str | None:
        return str(settings.CB_THROTTLE_ANON_READS) or None

    def get_cache_key(self, request: Any, view: Any) -> str | None:
        user = getattr(request, "user", None)
        if request.method not in SAFE_METHODS or (user is not None and user.is_authenticated):
            return None
        return self.cache_format % {"scope": self.scope, "ident": self.get_ident(request)}

    def allow_request(self, request: Any, view: Any) -> bool:
        try:
            return bool(_cache(super().allow_request, request, view))
        except CacheDown:
            return True
