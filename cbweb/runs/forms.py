"""The launch form: workflow version, platform, scheduler and its parameters, repeats, weights."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django import forms
from django.conf import settings
from pydantic.fields import FieldInfo

from benchmarks.schedulers import SCHEDULERS, param_problems, param_range
from cbweb.platforms.models import Platform
from cbweb.platforms.selectors import platform_live
from cbweb.runs.services import MAX_REPEATS
from cbweb.workflows.forms import model_form_field
from cbweb.workflows.models import Workflow, WorkflowVersion


def param_field_name(scheduler: str, param: str) -> str:
    """Return the form field of a scheduler's parameter, e.g. ``credit__pressure_threshold``."""
    return f"{scheduler}__{param}"


def _param_field(scheduler: str, param: str, info: FieldInfo) -> forms.Field:
    """Return the form field of one parameter, derived from the scheduler's ``Params`` model as the
    workflow editor derives its fields from the spec model (``model_form_field``)."""
    default = "none" if info.default is None else info.default
    field = model_form_field(
        param,
        info,
        name=param_field_name(scheduler, param),
        label=f"{scheduler}: {param}",
        help_text=f"{info.description} (default {default}; allowed: "
        f"{param_range(SCHEDULERS[scheduler].Params, param)})",
    )
    # The launch page's script shows only the chosen scheduler's parameters.
    field.widget.attrs["data-scheduler"] = scheduler
    return field


class RunLaunchForm(forms.Form):
    version = forms.ModelChoiceField(
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

    def __init__(self, *args: Any, workflow: Workflow, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["version"].queryset = workflow.versions.order_by("-number")
        self.fields["version"].label_from_instance = lambda v: f"v{v.number} ({v.created_at:%Y-%m-%d %H:%M})"
        self._offer_live_platforms()
        self.fields["scheduler"].choices = [
            (name, f"{name}: {cls.description}") for name, cls in SCHEDULERS.items()
        ]
        for name, cls in SCHEDULERS.items():
            for param, info in cls.Params.model_fields.items():
                self.fields[param_field_name(name, param)] = _param_field(name, param, info)

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
        params = {
            param: data[param_field_name(name, param)]
            for param in SCHEDULERS[name].Params.model_fields
            if data.get(param_field_name(name, param)) not in (None, "")
        }
        for param, message in param_problems(name, params):
            self.add_error(param_field_name(name, param), message)
        data["scheduler_params"] = params
        return data

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
