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
