"""Reads for platforms."""

from __future__ import annotations

from datetime import timedelta

from django.db.models import Count, QuerySet
from django.shortcuts import get_object_or_404
from django.utils import timezone

from cbweb.platforms.models import Platform

# A worker that has not been seen for this long is not offered for new runs (issue 6 heartbeats).
LIVE_WITHIN = timedelta(minutes=2)


def platform_list() -> QuerySet[Platform]:
    """Return every known platform with its run count."""
    return Platform.objects.annotate(run_count=Count("runs"))


def platform_live() -> QuerySet[Platform]:
    """Return the platforms whose worker reported within ``LIVE_WITHIN``."""
    return Platform.objects.filter(last_seen_at__gte=timezone.now() - LIVE_WITHIN)


def platform_get(*, pk: int) -> Platform:
    """Return one platform or raise Http404."""
    return get_object_or_404(Platform, pk=pk)
