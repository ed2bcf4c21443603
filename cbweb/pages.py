"""What every page view shares: who may read it, and how often a visitor who is not signed in may.

Apart from cbweb.permissions (who may change what), which the run and workflow services use: a
page's read rules reach for the throttles, which the services and the workers have no use for.
"""

from __future__ import annotations

import math
from functools import wraps
from typing import Any

from django.conf import settings
from django.contrib.auth.views import redirect_to_login
from django.shortcuts import render

from cbweb.api.throttles import AnonymousReadThrottle


def readable(view: Any) -> Any:
    """Decorate a page view: open to all, or login-only when CB_READ_REQUIRES_LOGIN is set; reads by
    clients not signed in are held to CB_THROTTLE_ANON_READS per address (429 with Retry-After)."""

    @wraps(view)
    def wrapper(request: Any, *args: Any, **kwargs: Any) -> Any:
        if settings.CB_READ_REQUIRES_LOGIN and not request.user.is_authenticated:
            return redirect_to_login(request.get_full_path())
        throttle = AnonymousReadThrottle()
        if not throttle.allow_request(request, view):
            wait = math.ceil(throttle.wait() or 1)
            response = render(request, "429.html", {"retry_after_s": wait}, status=429)
            response["Retry-After"] = str(wait)
            return response
        return view(request, *args, **kwargs)

    return wrapper
