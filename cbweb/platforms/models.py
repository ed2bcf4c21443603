"""Platforms: the machines runs execute on, identified by the engine's hardware fingerprint."""

from __future__ import annotations

from django.db import models


class Platform(models.Model):
    """One machine (CPU, GPU, RAM) as fingerprinted by ``benchmarks.platform.fingerprint``."""

    fingerprint_id = models.CharField(max_length=32, unique=True, help_text="hash of the hardware fields")
    name = models.CharField(max_length=200)
    info = models.JSONField(default=dict, help_text="the engine's full fingerprint")
    created_at = models.DateTimeField(auto_now_add=True)
    # Refreshed by workers (issue 6: heartbeat); the launch form uses it to tell live workers apart.
    last_seen_at = models.DateTimeField(null=True, blank=True)
    queue = models.CharField(max_length=200, blank=True, help_text="Celery queue of this platform's worker")

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name
