"""The form-based DAG editor's forms: a workflow form plus one card per node, derived from the spec model.

Every field comes from the engine: the workflow form from ``Workflow``'s fields, a card from
``Node``'s, ``Application``'s and ``Arrival``'s, and the type-specific fields from each
``AppType.options`` model (so a new application type, option or arrival kind appears in the editor
without web changes). Literal types become choices, ``ge``/``le`` bounds become min/max (``gt``/``lt``:
strict ones, said as such), descriptions become help text. The forms only collect values:
``cbweb.workflows.editor`` maps them to the spec and the engine's errors back to them.
"""

from __future__ import annotations

import dataclasses
import re
import types
from collections.abc import Mapping
from typing import Any, Literal, Union, cast, get_args, get_origin

import yaml
from annotated_types import Ge, Gt, Le, Lt, MaxLen
from django import forms
from django.core.validators import BaseValidator
from django.forms.utils import pretty_name
from django.utils.deconstruct import deconstructible
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

from benchmarks.apps import APP_TYPES
from benchmarks.apps.base import AppType
from benchmarks.schedulers import SCHEDULERS, param_range
from benchmarks.spec import model as spec_model
from cbweb.workflows.models import Workflow

PREFIX = "cards"
# Application fields a card shows its own way: the unit's name is the card's "uses", its type a choice
# from the registry, its SLOs one line of text, its arrival and options fields of their own models.
CARD_SPECIAL = ("name", "type", "slo", "arrival", "options")
# Common fields that only a model server's client types read (``AppType.server_client``).
SERVER_CLIENT_FIELDS = ("server", "client_model")
# Fields whose blank value means the application type's default (AppType.default_model, ...).
TYPE_DEFAULTS = tuple(
    f.name.removeprefix("default_") for f in dataclasses.fields(AppType) if f.name.startswith("default_")
)
# Labels and help the model's field names and descriptions do not say well enough on a page.
LABELS = {
    "mps": "MPS share (%)",
    "arrival_kind": "Arrival",
    "arrival_rate": "Rate (req/s)",
    "arrival_think_time_s": "Think time (s)",
    "arrival_seed": "Arrival seed",
    "arrival_trace": "Trace file",
    "arrival_max_in_flight": "Most in flight (open loop)",
    # Keys shared by several types' options, and the workflow's own: labels by key.
    "num_requests": "Requests",
    "warmup_requests": "Warm-up requests",
    "gpu_memory_limit_mb": "GPU memory limit (MiB)",
    "client_model": "Client model (name the client asks for)",
    "repeat": "Repetitions",
    "n_ctx": "Context window (tokens)",
    "n_threads": "CPU threads",
    "n_gpu_layers": "GPU layers",
    "nonfinite": "NaN or inf outputs",
}
HELP = {
    "scheduler": "the default; a run may choose another",
    "start_together": "applications that start at the same point of the DAG begin their requests "
    "together, once all of them have loaded",
    "background": "runs alongside its dependents; stopped when the foreground finishes",
}


# Unit suffixes of the models' field names, written as a unit in the label ("step_ms" -> "Step (ms)").
UNIT_SUFFIXES = {"_s": "s", "_ms": "ms", "_mb": "MiB", "_pct": "%", "_hz": "Hz"}


def human_label(key: str) -> str:
    """Return the label of a field named ``key``: words, with a unit suffix as a unit."""
    for suffix, unit in UNIT_SUFFIXES.items():
        if key.endswith(suffix) and len(key) > len(suffix):
            return f"{pretty_name(key.removesuffix(suffix))} ({unit})"
    return pretty_name(key)


def option_field_name(type_name: str, key: str) -> str:
    """Return the card field name of option ``key`` of application type ``type_name``."""
    return f"opt_{type_name}_{key}"


def arrival_field_name(key: str) -> str:
    """Return the card field name of ``Arrival`` field ``key``."""
    return f"arrival_{key}"


def _unwrap_optional(annotation: Any) -> Any:
    if get_origin(annotation) in (Union, types.UnionType):
        args = [a for a in get_args(annotation) if a is not type(None)]
        if len(args) == 1:
            return args[0]
    return annotation


def _limits(metadata: list[Any]) -> dict[str, Any]:
    """Return a pydantic field's bounds: ``min_value``/``max_value`` (ge/le, inclusive), ``gt``/``lt``
    (strict) and ``max_length``."""
    out: dict[str, Any] = {}
    for m in metadata:
        if isinstance(m, Ge):
            out["min_value"] = m.ge
        elif isinstance(m, Gt):
            out["gt"] = m.gt
        elif isinstance(m, Le):
            out["max_value"] = m.le
        elif isinstance(m, Lt):
            out["lt"] = m.lt
        elif isinstance(m, MaxLen):
            out["max_length"] = m.max_length
    return out


@deconstructible
class GreaterThanValidator(BaseValidator):
    """A strict lower bound (pydantic ``gt``), which Django's MinValueValidator (>=) cannot say."""

    message = "Ensure this value is greater than %(limit_value)s."
    code = "min_value"

    def compare(self, a: Any, b: Any) -> bool:
        return bool(a <= b)


@deconstructible
class LessThanValidator(BaseValidator):
    """A strict upper bound (pydantic ``lt``), which Django's MaxValueValidator (<=) cannot say."""

    message = "Ensure this value is less than %(limit_value)s."
    code = "max_value"

    def compare(self, a: Any, b: Any) -> bool:
        return bool(a >= b)


class YamlValueField(forms.CharField):
    """A list or mapping value, typed as YAML (``[a, b]``, ``{k: v}``)."""

    widget = forms.Textarea(attrs={"rows": 2})

    def to_python(self, value: Any) -> Any:
        text = super().to_python(value)
        if text in ("", None):
            return None
        try:
            return yaml.safe_load(text)
        except yaml.YAMLError as exc:
            raise forms.ValidationError(f"not valid YAML: {exc}") from None

    def prepare_value(self, value: Any) -> Any:
        if isinstance(value, list | dict):
            return yaml.safe_dump(value, default_flow_style=True, width=200).strip()
        return value


def model_form_field(
    key: str,
    info: FieldInfo,
    *,
    name: str | None = None,
    label: str | None = None,
    help_text: str | None = None,
    blank_label: str = "(default)",
) -> forms.Field:
    """Return the form field for pydantic field ``key`` (``name``: the form's name for it, which
    LABELS and HELP are keyed by; ``label``: default the key's pretty name).

    Literal -> a choice (with a blank choice only when the default is not one of the values), bool ->
    a checkbox, int/float -> a number with the field's bounds, str -> text with its maximum length,
    anything else (lists, mappings) -> YAML. The description is the help text, the default the
    initial value; a blank field means the default.
    """
    name = name or key
    annotation = _unwrap_optional(info.annotation)
    default = None if info.default is PydanticUndefined else info.default
    limits = _limits(info.metadata)
    common: dict[str, Any] = {
        "label": LABELS.get(name) or label or LABELS.get(key) or human_label(key),
        "help_text": help_text or info.description or HELP.get(name, ""),
        "required": False,
        "initial": default,
    }
    if get_origin(annotation) is Literal:
        values = get_args(annotation)
        lookup = {str(v): v for v in values}
        blank = [] if default in values else [("", blank_label)]
        return forms.TypedChoiceField(
            choices=blank + [(str(v), str(v)) for v in values],
            coerce=lambda s: lookup[s],
            empty_value=None,
            **common,
        )
    if annotation is bool:
        return forms.BooleanField(**common)
    if annotation is int:
        return _bounded(forms.IntegerField(**common, **_number(limits)), limits)
    if annotation is float:
        return _bounded(forms.FloatField(**common, **_number(limits)), limits)
    if annotation is str:
        return forms.CharField(**common, max_length=limits.get("max_length"))
    return YamlValueField(**common)


def _number(limits: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in limits.items() if k in ("min_value", "max_value")}


def param_field_name(scheduler: str, param: str) -> str:
    """Return the form field of a scheduler's parameter, e.g. ``credit__pressure_threshold``."""
    return f"{scheduler}__{param}"


def _param_field(scheduler: str, param: str, info: FieldInfo) -> forms.Field:
    """Return the form field of one parameter, derived from the scheduler's ``Params`` model as the
    editor's other fields are derived from the spec model (``model_form_field``)."""
    default = "none" if info.default is None else info.default
    field = model_form_field(
        param,
        info,
        name=param_field_name(scheduler, param),
        label=f"{scheduler}: {human_label(param).lower()}",
        help_text=f"{info.description} (default {default}; allowed: "
        f"{param_range(SCHEDULERS[scheduler].Params, param)})",
    )
    # The range is checked by the scheduler's Params model (clean: param_problems), in the words the
    # CLI and the API use ("must be > 0 (got 0.0; allowed: > 0 and <= 3600)"); the input keeps its
    # min/max for the browser.
    field.validators = []
    # The page's script shows only the chosen scheduler's parameters.
    field.widget.attrs["data-scheduler"] = scheduler
    return field


def scheduler_param_fields() -> dict[str, forms.Field]:
    """Return a field for every parameter of every scheduler (``<scheduler>__<param>``), from each
    scheduler's ``Params`` model: the one mapping behind the launch form and the editor."""
    return {
        param_field_name(name, param): _param_field(name, param, info)
        for name, cls in SCHEDULERS.items()
        for param, info in cls.Params.model_fields.items()
    }


def chosen_scheduler_params(cleaned: Mapping[str, Any], name: str) -> dict[str, Any]:
    """Return the parameters of scheduler ``name`` that a form with ``scheduler_param_fields`` was
    given (blank ones left out: they take the scheduler's defaults)."""
    if name not in SCHEDULERS:
        return {}
    return {
        param: cleaned[param_field_name(name, param)]
        for param in SCHEDULERS[name].Params.model_fields
        if cleaned.get(param_field_name(name, param)) not in (None, "")
    }


def _bounded(field: forms.Field, limits: Mapping[str, Any]) -> forms.Field:
    """Add a number field's strict bounds: validators that say "greater than" (not "or equal"), and
    the input's min/max, which the browser can only check inclusively (the server checks the rest)."""
    if "gt" in limits:
        field.validators.append(GreaterThanValidator(limits["gt"]))
        field.widget.attrs["min"] = limits["gt"]
    if "lt" in limits:
        field.validators.append(LessThanValidator(limits["lt"]))
        field.widget.attrs["max"] = limits["lt"]
    return field


def unit_fields() -> dict[str, forms.Field]:
    """Return a card's fields for the unit's common keys and its arrival, in the model's order."""
    out: dict[str, forms.Field] = {}
    for key, info in spec_model.Application.model_fields.items():
        if key == "slo":
            out["slo"] = forms.CharField(
                label="SLO",
                required=False,
                help_text="comma-separated, e.g. 'ttft<1s, tpot<=250ms'; blank = the type's default; "
                "'none' = no SLO",
            )
        elif key == "arrival":
            for sub, sub_info in spec_model.Arrival.model_fields.items():
                out[arrival_field_name(sub)] = model_form_field(sub, sub_info, name=arrival_field_name(sub))
        elif key not in CARD_SPECIAL:
            defaulted = key in TYPE_DEFAULTS
            out[key] = model_form_field(
                key,
                info,
                help_text="blank = the type's default" if defaulted and not info.description else None,
                blank_label="(type default)" if defaulted else "(default)",
            )
    return out


def option_fields(app: AppType) -> dict[str, forms.Field]:
    """Return the card fields of one application type's options (``opt_<type>_<key>``)."""
    return {
        option_field_name(app.name, k): model_form_field(k, info, name=option_field_name(app.name, k))
        for k, info in app.options.model_fields.items()
    }


class WorkflowMetaForm(forms.Form):
    """The workflow's own fields (``Workflow`` without its units and nodes); only the name is required."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        for key, info in spec_model.Workflow.model_fields.items():
            if key not in ("applications", "nodes", "scheduler_params"):
                self.fields[key] = model_form_field(key, info)
        # The stored record's name column bounds the name (the engine's model does not).
        self.fields["name"] = forms.CharField(max_length=Workflow._meta.get_field("name").max_length)
        self.fields["description"].widget = forms.Textarea(attrs={"rows": 2})
        self.fields["scheduler"] = forms.ChoiceField(
            choices=[(n, n) for n in SCHEDULERS],
            initial=spec_model.Workflow.model_fields["scheduler"].default,
            required=False,
            help_text=HELP["scheduler"],
        )
        # The parameters of each scheduler, from its Params model; the page shows the chosen one's.
        params = scheduler_param_fields()
        self.param_names = list(params)
        self.fields.update(params)

    def param_fields(self) -> list[forms.BoundField]:
        """Return the bound fields of every scheduler's parameters (the page shows the chosen one's)."""
        return [self[name] for name in self.param_names]

    def own_fields(self) -> list[forms.BoundField]:
        """Return the bound fields of the workflow itself (all but the scheduler parameters)."""
        return [self[name] for name in self.fields if name not in self.param_names]


class ApplicationCardForm(forms.Form):
    """One node of the DAG with the unit it runs: node and unit names, the unit's keys, its arrival,
    the options of every type (the page shows those of the chosen type), dependencies, background."""

    def __init__(self, *args: Any, node_choices: list[str] | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        node = spec_model.Node.model_fields
        unit_name = spec_model.Application.model_fields["name"]
        self.fields["node"] = forms.CharField(
            label="Name", help_text="the node's name in the DAG", **_strings(node["name"])
        )
        self.fields["uses"] = forms.CharField(
            label="Unit",
            required=False,
            help_text="application unit name; blank = the node's name "
            "(cards naming one unit share its settings)",
            **_strings(unit_name),
        )
        self.fields["type"] = forms.ChoiceField(choices=[(name, name) for name in APP_TYPES])
        common = unit_fields()
        self.unit_field_names = list(common)
        self.fields.update(common)
        # A node cannot depend on itself: its own name is not among its choices.
        own = self._own_name()
        self.fields["depend_on"] = forms.MultipleChoiceField(
            label="Depends on",
            required=False,
            choices=[(n, n) for n in node_choices or [] if n != own],
            widget=forms.SelectMultiple(attrs={"size": 3}),
            help_text="the nodes that must finish before this one starts",
            error_messages={"invalid_choice": "'%(value)s' is not another node of this workflow"},
        )
        self.fields["background"] = model_form_field("background", node["background"])
        for app in APP_TYPES.values():
            self.fields.update(option_fields(app))

    def _own_name(self) -> str:
        """Return the node name this card holds (submitted, else initial)."""
        if self.is_bound:
            return str(self.data.get(self.add_prefix("node"), "")).strip()
        return str((self.initial or {}).get("node", "")).strip()

    def option_groups(self) -> list[tuple[str, list[forms.BoundField]]]:
        """Return ``(type name, bound option fields)`` for every application type."""
        return [
            (app.name, [self[option_field_name(app.name, k)] for k in app.options.model_fields])
            for app in APP_TYPES.values()
        ]

    def common_fields(self) -> list[forms.BoundField]:
        """Return the bound fields of the unit's common keys and arrival (every type has them); a
        field that only some types read carries them as ``app_types`` (the page hides it for the
        others)."""
        out = []
        for name in self.unit_field_names:
            bound = self[name]
            if name in SERVER_CLIENT_FIELDS:
                bound.app_types = " ".join(a.name for a in APP_TYPES.values() if a.server_client)  # type: ignore[attr-defined]
            out.append(bound)
        return out


def _strings(info: FieldInfo) -> dict[str, Any]:
    return {"max_length": _limits(info.metadata).get("max_length")}


CardFormSet = forms.formset_factory(
    ApplicationCardForm, extra=0, can_delete=True, min_num=1, validate_min=True
)


def node_names_in(data: Mapping[str, Any]) -> list[str]:
    """Return the node names a submitted editor holds (choices for every card's dependencies)."""
    names = []
    pattern = re.compile(rf"^{PREFIX}-(\d+)-node$")
    for key in data:
        match = pattern.match(key)
        if match and str(data.get(key, "")).strip() and not data.get(f"{PREFIX}-{match.group(1)}-DELETE"):
            names.append(str(data[key]).strip())
    return list(dict.fromkeys(names))


def build_editor(
    data: Mapping[str, Any] | None = None,
    meta_initial: Mapping[str, Any] | None = None,
    cards_initial: list[dict[str, Any]] | None = None,
) -> tuple[WorkflowMetaForm, Any]:
    """Return the bound (with ``data``) or unbound editor: the workflow form and the card formset."""
    if data is not None:
        names = node_names_in(data)
        return WorkflowMetaForm(data), CardFormSet(data, prefix=PREFIX, form_kwargs={"node_choices": names})
    cards = cards_initial or [default_card(1)]
    names = [c["node"] for c in cards if c.get("node")]
    return (
        WorkflowMetaForm(initial=meta_initial),
        CardFormSet(initial=cards, prefix=PREFIX, form_kwargs={"node_choices": names}),
    )


def default_card(n: int) -> dict[str, Any]:
    """Return the initial values of a new card (every other field carries its model's default)."""
    return {"node": f"app{n}", "type": next(iter(APP_TYPES))}


def cards_from_bound(formset: Any) -> list[dict[str, Any]]:
    """Return the raw values of a bound formset as initial data (to re-render it without errors)."""
    out = []
    for form in formset.forms:
        if form["DELETE"].data:
            continue
        out.append({bf.name: bf.data for bf in form if bf.name != "DELETE"})
    return out


def live_cards(formset: Any) -> list[ApplicationCardForm]:
    """Return the valid cards of a bound formset that are not marked for deletion."""
    return [f for f in formset.forms if f.cleaned_data and not f.cleaned_data.get("DELETE")]


class VersionDiffForm(forms.Form):
    """The two versions of a workflow to compare (``old``, ``new``: version numbers)."""

    old = forms.TypedChoiceField(coerce=int, label="From")
    new = forms.TypedChoiceField(coerce=int, label="To")

    def __init__(self, *args: Any, numbers: list[int], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        choices = [(n, f"v{n}") for n in numbers]
        cast(forms.TypedChoiceField, self.fields["old"]).choices = choices
        cast(forms.TypedChoiceField, self.fields["new"]).choices = choices
