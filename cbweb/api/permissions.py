"""API access: reading is open or login-only (CB_READ_REQUIRES_LOGIN); writing needs a user.

Ownership (users change only their own workflows and runs, staff all) is enforced by the services,
so pages and the API share one rule.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from rest_framework.permissions import SAFE_METHODS, BasePermission


class ReadOpenWriteAuthenticated(BasePermission):
    message = "authentication required: send 'Authorization: Token <key>' (manage.py create_api_token)"

    def has_permission(self, request: Any, view: Any) -> bool:
        if request.method in SAFE_METHODS and not settings.CB_READ_REQUIRES_LOGIN:
            return True
        return bool(request.user and request.user.is_authenticated)
