"""The launch form: workflow version, platform, scheduler, repeats."""

from __future__ import annotations

from typing import Any

from django import forms

from benchmarks.schedulers import SCHEDULERS
from cbweb.platforms.models import Platform
from cbweb.runs.services import MAX_REPEATS
from cbweb.workflows.models import Workflow, WorkflowVersion


class RunLaunchForm(forms.Form):
    version = forms.ModelChoiceField(
        queryset=WorkflowVersion.objects.none(), empty_label=None, label="Workflow version"
    )
    platform = forms.ModelChoiceField(
        queryset=Platform.objects.all(),
        required=False,
        empty_label="any worker (this machine without a broker)",
    )
    scheduler = forms.ChoiceField(choices=[])
    repeats = forms.IntegerField(
        min_value=1, max_value=MAX_REPEATS, initial=1, help_text="repeated runs give a mean and 95 % CI"
    )

    def __init__(self, *args: Any, workflow: Workflow, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["version"].queryset = workflow.versions.order_by("-number")
        self.fields["version"].label_from_instance = lambda v: f"v{v.number} ({v.created_at:%Y-%m-%d %H:%M})"
        self.fields["scheduler"].choices = [
            (name, f"{name}: {cls.description}") for name, cls in SCHEDULERS.items()
        ]
