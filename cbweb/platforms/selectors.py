"""Reads for platforms."""

from __future__ import annotations

from datetime import timedelta

from django.conf import settings
from django.db.models import Count, Q, QuerySet
from django.shortcuts import get_object_or_404
from django.utils import timezone

from cbweb.platforms.models import Platform
from cbweb.workflows.models import Workflow


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


def platform_workflows(*, platform: Platform) -> QuerySet[Workflow]:
    """Return the workflows that ran on ``platform``, with their run and succeeded-run counts there."""
    on_platform = Q(versions__runs__platform=platform)
    return (
        Workflow.objects.filter(on_platform)
        .annotate(
            runs_here=Count("versions__runs", filter=on_platform),
            succeeded_here=Count(
                "versions__runs", filter=on_platform & Q(versions__runs__status="succeeded")
            ),
        )
        .order_by("name", "id")
    )
