"""Reads for the API's own objects: tokens."""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet
from django.shortcuts import get_object_or_404

from cbweb.api.models import ApiToken


def token_list(*, user: Any) -> QuerySet[ApiToken]:
    """Return a user's tokens, newest first (prefixes and labels only: keys are not stored)."""
    return ApiToken.objects.filter(user=user).order_by("-created_at", "-id")


def token_get(*, user: Any, pk: int) -> ApiToken:
    """Return one of the user's tokens or raise Http404 (another user's token is not found either)."""
    return get_object_or_404(ApiToken, user=user, pk=pk)
