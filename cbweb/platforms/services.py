"""Writes for platforms: workers register the machine they run on (engine fingerprint)."""

from __future__ import annotations

from typing import Any

from django.db import transaction
from django.utils import timezone

from cbweb.platforms.models import Platform


def platform_name(fingerprint: dict[str, Any]) -> str:
    """Return a short human name: host, then the GPU models or the CPU."""
    gpus = fingerprint.get("gpus") or []
    device = ", ".join(g.get("name", "GPU") for g in gpus) if gpus else fingerprint.get("cpu", "CPU")
    return f"{fingerprint.get('host', 'unknown host')} ({device})"[:200]


@transaction.atomic
def platform_register(*, fingerprint: dict[str, Any], queue: str = "") -> Platform:
    """Create or refresh the Platform for an engine fingerprint and mark it seen now; return it."""
    fid = str(fingerprint.get("id") or "")
    if not fid:
        raise ValueError("the fingerprint has no 'id' (use benchmarks.platform.fingerprint())")
    defaults = {"name": platform_name(fingerprint), "info": fingerprint, "last_seen_at": timezone.now()}
    if queue:
        defaults["queue"] = queue
    platform, _ = Platform.objects.update_or_create(fingerprint_id=fid, defaults=defaults)
    return platform
