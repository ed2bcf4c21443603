"""The leaderboard's and the platform comparison's query forms (GET parameters, checked like any input)."""

from __future__ import annotations

from typing import Any, cast

from django import forms

from benchmarks.schedulers import SCHEDULERS
from cbweb.forms import IdChoiceField, IdMultipleChoiceField, QueryIntegerField
from cbweb.leaderboard.selectors import SORTS, leaderboard_workflows
from cbweb.platforms.models import Platform
from cbweb.workflows.models import Workflow


class WorkflowChoiceField(IdChoiceField):
    """A workflow of ``leaderboard_workflows()``, labelled with its owner and its succeeded runs."""

    def label_from_instance(self, obj: Any) -> str:
        runs = f"{obj.succeeded} run{'s' if obj.succeeded != 1 else ''}"
        return f"{obj.name} (#{obj.pk}, {obj.owner.username}, {runs})"


NO_SUCH_WORKFLOW = {"invalid_choice": "no workflow with a succeeded run has this id"}


class LeaderboardForm(forms.Form):
    workflow = WorkflowChoiceField(
        queryset=Workflow.objects.none(), empty_label=None, error_messages=NO_SUCH_WORKFLOW
    )
    version = QueryIntegerField(
        required=False, min_value=1, max_value=2**31 - 1, help_text="blank: every version"
    )
    platform = IdChoiceField(queryset=Platform.objects.all(), required=False, empty_label="any")
    scheduler = forms.ChoiceField(required=False, choices=[("", "any"), *((n, n) for n in SCHEDULERS)])
    since = forms.DateField(required=False, widget=forms.DateInput(attrs={"type": "date"}), label="from")
    until = forms.DateField(required=False, widget=forms.DateInput(attrs={"type": "date"}), label="to")
    sort = forms.ChoiceField(required=False, choices=[(s, s) for s in SORTS], widget=forms.HiddenInput)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        cast(WorkflowChoiceField, self.fields["workflow"]).queryset = leaderboard_workflows()

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        if data.get("since") and data.get("until") and data["since"] > data["until"]:
            self.add_error("until", "the end date is before the start date")
        data["sort"] = data.get("sort") or "rank"
        return data


class PlatformCompareForm(forms.Form):
    workflow = WorkflowChoiceField(
        queryset=Workflow.objects.none(), empty_label=None, error_messages=NO_SUCH_WORKFLOW
    )
    platforms = IdMultipleChoiceField(
        queryset=Platform.objects.all(), help_text="two or more", widget=forms.CheckboxSelectMultiple
    )
    scheduler = forms.CharField(
        required=False, max_length=300, help_text="a scheduler configuration, e.g. credit; blank: all"
    )

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        cast(WorkflowChoiceField, self.fields["workflow"]).queryset = leaderboard_workflows()

    def clean_platforms(self) -> Any:
        platforms = self.cleaned_data["platforms"]
        if len(platforms) < 2:
            raise forms.ValidationError("pick two or more platforms to compare")
        return platforms
