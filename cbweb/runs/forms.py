"""The launch form: workflow version, platform, scheduler and its parameters, repeats, weights, metadata."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, cast

from django import forms
from django.conf import settings

from benchmarks.runmeta import MAX_BRANCH, MAX_CI_URL, MAX_COMMIT, MAX_NOTES, TAG_RULE
from benchmarks.schedulers import SCHEDULERS, param_problems
from cbweb.platforms.models import Platform
from cbweb.platforms.selectors import platform_live
from cbweb.runs.services import MAX_REPEATS, runnable_schedulers
from cbweb.workflows.forms import chosen_scheduler_params, param_field_name, scheduler_param_fields
from cbweb.workflows.models import Workflow, WorkflowVersion


class VersionChoiceField(forms.ModelChoiceField):
    """A version of the workflow being launched, labelled with its number and creation time."""

    def label_from_instance(self, obj: WorkflowVersion) -> str:
        return f"v{obj.number} ({obj.created_at:%Y-%m-%d %H:%M})"


class RunLaunchForm(forms.Form):
    version = VersionChoiceField(
        queryset=WorkflowVersion.objects.none(), empty_label=None, label="Workflow version"
    )
    platform = forms.ModelChoiceField(queryset=Platform.objects.none(), required=False)
    scheduler = forms.ChoiceField(choices=[])
    repeats = forms.IntegerField(
        min_value=1, max_value=MAX_REPEATS, initial=1, help_text="repeated runs give a mean and 95 % CI"
    )
    weights = forms.ChoiceField(
        choices=[
            ("", "as the workflow says"),
            ("real", "real"),
            ("random", "random (the models' random twins)"),
        ],
        required=False,
        help_text="random: each model whose architecture its name tells runs with random weights of the "
        "same shapes, for timing without the weights (docs/models.md)",
    )
    # Run metadata (optional): the rules are benchmarks.runmeta's, applied by the service, whose
    # errors land on these fields.
    commit = forms.CharField(required=False, max_length=MAX_COMMIT, help_text="the code's git commit (hex)")
    branch = forms.CharField(required=False, max_length=MAX_BRANCH)
    ci_url = forms.CharField(
        required=False, max_length=MAX_CI_URL, label="CI job URL", help_text="an http:// or https:// link"
    )
    tags = forms.CharField(
        required=False, help_text=f"separated by spaces or commas; each {TAG_RULE}", max_length=2000
    )
    notes = forms.CharField(
        required=False, max_length=MAX_NOTES, widget=forms.Textarea(attrs={"rows": 3}), strip=False
    )

    def __init__(self, *args: Any, workflow: Workflow, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        cast(VersionChoiceField, self.fields["version"]).queryset = workflow.versions.order_by("-number")
        self._offer_live_platforms()
        self.scheduler_support = self._scheduler_support()
        # Every scheduler is a choice; the page's script hides those the chosen platform cannot run
        # and run_create refuses them with the reason.
        cast(forms.ChoiceField, self.fields["scheduler"]).choices = [
            (name, f"{name}: {cls.description}") for name, cls in SCHEDULERS.items()
        ]
        self.fields.update(scheduler_param_fields())

    @staticmethod
    def initial_for(scheduler: str | Mapping[str, Any]) -> dict[str, Any]:
        """Return the initial scheduler and parameters for a stored spec's ``scheduler`` (a name or
        ``{name, ...params}``), so that launching unchanged runs the workflow as written."""
        if isinstance(scheduler, Mapping):
            name = str(scheduler.get("name", "greedy"))
            params = {k: v for k, v in scheduler.items() if k != "name"}
        else:
            name, params = scheduler, {}
        initial: dict[str, Any] = {"scheduler": name}
        initial.update({param_field_name(name, k): v for k, v in params.items()})
        return initial

    def field_for_error(self, key: str) -> str | None:
        """Return the form field of a service error's key (``scheduler.pressure_threshold`` names the
        chosen scheduler's parameter field), or None for an error of the whole form."""
        if key.startswith("scheduler."):
            key = param_field_name(self.cleaned_data.get("scheduler", ""), key.removeprefix("scheduler."))
        return key if key in self.fields else None

    def clean(self) -> dict[str, Any]:
        """Gather the chosen scheduler's parameters as ``scheduler_params`` and check them."""
        data = super().clean() or {}
        name = data.get("scheduler")
        if name not in SCHEDULERS:
            return data
        params = chosen_scheduler_params(data, name)
        for param, message in param_problems(name, params):
            self.add_error(param_field_name(name, param), message)
        data["scheduler_params"] = params
        data["meta"] = {
            "commit": data.get("commit", ""),
            "branch": data.get("branch", ""),
            "ci_url": data.get("ci_url", ""),
            "tags": data.get("tags", "").replace(",", " ").split(),
            "notes": data.get("notes", ""),
        }
        return data

    def _scheduler_support(self) -> dict[str, list[str]]:
        """Return the schedulers each offered platform can run, by platform id ("" for the empty
        choice: this machine under the local executor, any worker otherwise); the page's script
        offers only those of the chosen platform, and run_create refuses the others."""
        platforms = cast(forms.ModelChoiceField, self.fields["platform"]).queryset
        assert platforms is not None  # the field is declared with one
        support = {str(p.pk): runnable_schedulers(platform=p)[0] for p in platforms}
        support[""] = runnable_schedulers(platform=None)[0]
        return support

    def _offer_live_platforms(self) -> None:
        """Offer only platforms with a live worker; say so when there is none (or no broker at all)."""
        field = cast(forms.ModelChoiceField, self.fields["platform"])
        if settings.CB_RUN_EXECUTOR == "local":
            field.empty_label = "this machine (no broker configured: the web server executes runs)"
            field.help_text = (
                "Set CELERY_BROKER_URL and start `consumerbench worker` to run on other machines."
            )
            return
        live = platform_live()
        field.queryset = live
        field.empty_label = "any live worker"
        if not live.exists():
            field.empty_label = "any worker (none is live now)"
            field.help_text = (
                "No worker is live: the run waits in the queue until one starts "
                "(`consumerbench worker --gpu N`, or `consumerbench worker` for the CPU)."
            )
