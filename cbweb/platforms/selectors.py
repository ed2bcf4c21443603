"""Reads for platforms."""

from __future__ import annotations

from datetime import timedelta

from django.conf import settings
from django.db.models import Count, QuerySet
from django.shortcuts import get_object_or_404
from django.utils import timezone

from cbweb.platforms.models import Platform


def platform_list() -> QuerySet[Platform]:
    """Return every known platform with its run count."""
    return Platform.objects.annotate(run_count=Count("runs"))


def platform_live() -> QuerySet[Platform]:
    """Return the platforms with a live worker: one that sent a heartbeat within CB_WORKER_LOST_AFTER_S."""
    cutoff = timezone.now() - timedelta(seconds=settings.CB_WORKER_LOST_AFTER_S)
    return Platform.objects.filter(last_seen_at__gte=cutoff)


def platform_get(*, pk: int) -> Platform:
    """Return one platform or raise Http404."""
    return get_object_or_404(Platform, pk=pk)
