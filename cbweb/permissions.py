"""Who may change what: owners edit and delete their own workflows and runs; staff may do all."""

from __future__ import annotations

from typing import Any

from django.core.exceptions import PermissionDenied


def can_edit(user: Any, owner_id: int | None) -> bool:
    """Return whether ``user`` may change an object owned by ``owner_id``."""
    if user is None or not user.is_authenticated:
        return False
    return bool(user.is_staff or user.pk == owner_id)


def check_can_edit(user: Any, obj: Any, what: str) -> None:
    """Raise PermissionDenied (HTTP 403) naming the object unless ``user`` may change it."""
    if not can_edit(user, obj.owner_id):
        raise PermissionDenied(f"only the owner of {what} (or staff) may change it")


def readable(view: Any) -> Any:
    """Decorate a page view: open to all, or login-only when CB_READ_REQUIRES_LOGIN is set."""
    from functools import wraps

    from django.conf import settings
    from django.contrib.auth.views import redirect_to_login

    @wraps(view)
    def wrapper(request: Any, *args: Any, **kwargs: Any) -> Any:
        if settings.CB_READ_REQUIRES_LOGIN and not request.user.is_authenticated:
            return redirect_to_login(request.get_full_path())
        return view(request, *args, **kwargs)

    return wrapper
