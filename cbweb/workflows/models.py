"""Workflows and their immutable versions (a run also keeps its own copy of the spec it ran)."""

from __future__ import annotations

from django.conf import settings
from django.db import models


class Workflow(models.Model):
    name = models.CharField(max_length=200)
    description = models.TextField(blank=True)
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="workflows")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)
    # Archived: hidden from the lists and not launchable; its page, versions and runs remain.
    archived = models.BooleanField(default=False)

    class Meta:
        ordering = ["-updated_at", "-id"]
        # An owner's active workflows have distinct names (services.WorkflowNameTaken says so first).
        constraints = [
            models.UniqueConstraint(
                fields=["owner", "name"],
                condition=models.Q(archived=False),
                name="workflow_active_name_unique",
            )
        ]

    def __str__(self) -> str:
        return self.name


class WorkflowVersion(models.Model):
    """One saved state of a workflow: the canonical spec (engine ``to_dict``) and its YAML."""

    workflow = models.ForeignKey(Workflow, on_delete=models.CASCADE, related_name="versions")
    number = models.PositiveIntegerField()
    spec = models.JSONField(help_text="canonical mapping from benchmarks.spec.to_dict")
    yaml = models.TextField(help_text="canonical YAML from benchmarks.spec.dump_yaml")
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["workflow", "-number"]
        constraints = [models.UniqueConstraint(fields=["workflow", "number"], name="workflow_version_unique")]

    def __str__(self) -> str:
        return f"{self.workflow.name} v{self.number}"
