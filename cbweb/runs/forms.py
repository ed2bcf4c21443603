"""The launch form: workflow version, platform, scheduler, repeats."""

from __future__ import annotations

from typing import Any

from django import forms
from django.conf import settings

from benchmarks.schedulers import SCHEDULERS
from cbweb.platforms.models import Platform
from cbweb.platforms.selectors import platform_live
from cbweb.runs.services import MAX_REPEATS
from cbweb.workflows.models import Workflow, WorkflowVersion


class RunLaunchForm(forms.Form):
    version = forms.ModelChoiceField(
        queryset=WorkflowVersion.objects.none(), empty_label=None, label="Workflow version"
    )
    platform = forms.ModelChoiceField(queryset=Platform.objects.none(), required=False)
    scheduler = forms.ChoiceField(choices=[])
    repeats = forms.IntegerField(
        min_value=1, max_value=MAX_REPEATS, initial=1, help_text="repeated runs give a mean and 95 % CI"
    )

    def __init__(self, *args: Any, workflow: Workflow, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["version"].queryset = workflow.versions.order_by("-number")
        self.fields["version"].label_from_instance = lambda v: f"v{v.number} ({v.created_at:%Y-%m-%d %H:%M})"
        self._offer_live_platforms()
        self.fields["scheduler"].choices = [
            (name, f"{name}: {cls.description}") for name, cls in SCHEDULERS.items()
        ]

    def _offer_live_platforms(self) -> None:
        """Offer only platforms with a live worker; say so when there is none (or no broker at all)."""
        field = self.fields["platform"]
        if settings.CB_RUN_EXECUTOR == "local":
            field.empty_label = "this machine (no broker configured: the web server executes runs)"
            field.help_text = (
                "Set CELERY_BROKER_URL and start `consumerbench worker` to run on other machines."
            )
            return
        field.queryset = platform_live()
        field.empty_label = "any live worker"
        if not field.queryset.exists():
            field.empty_label = "any worker (none is live now)"
            field.help_text = (
                "No worker is live: the run waits in the queue until one starts "
                "(`consumerbench worker --gpu N`, or `consumerbench worker` for the CPU)."
            )
