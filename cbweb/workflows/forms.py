"""The form-based DAG editor: a workflow form plus one card per node, built from the engine's registries.

Type-specific fields come from each ``AppType.options`` pydantic model, so a new application type
appears in the editor without web changes. The forms only collect values: ``editor_to_dict`` turns
them into the mapping ``benchmarks.spec.load.from_dict`` validates, and ``attach_errors`` puts each engine
error next to the field its path names.
"""

from __future__ import annotations

import json
import re
import types
from collections.abc import Mapping
from typing import Any, Literal, Union, get_args, get_origin

import yaml
from annotated_types import Ge, Gt, Le, Lt
from django import forms
from pydantic_core import PydanticUndefined

from benchmarks.apps import APP_TYPES, app_type
from benchmarks.apps.base import AppType
from benchmarks.schedulers import SCHEDULERS
from benchmarks.spec import load as spec_load
from benchmarks.spec import model as spec_model

NO_SLO = "none"
ARRIVAL_KINDS = ("closed", "fixed", "poisson", "trace")
# Card fields that map one-to-one to common unit keys of the spec.
UNIT_FIELDS = (
    "model",
    "client_model",
    "num_requests",
    "device",
    "mps",
    "priority",
    "warmup_requests",
    "seed",
    "dataset",
    "concurrency",
)


def option_field_name(type_name: str, key: str) -> str:
    return f"opt_{type_name}_{key}"


def _unwrap_optional(annotation: Any) -> Any:
    if get_origin(annotation) in (Union, types.UnionType):
        args = [a for a in get_args(annotation) if a is not type(None)]
        if len(args) == 1:
            return args[0]
    return annotation


def _bounds(metadata: list[Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for m in metadata:
        if isinstance(m, Ge | Gt):
            out["min_value"] = m.ge if isinstance(m, Ge) else m.gt
        elif isinstance(m, Le | Lt):
            out["max_value"] = m.le if isinstance(m, Le) else m.lt
    return out


class YamlValueField(forms.CharField):
    """A list or mapping option, typed as YAML (``[a, b]``, ``{k: v}``)."""

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


def option_form_field(key: str, info: Any) -> forms.Field:
    """Return the form field for one option of an application type (every option may stay blank)."""
    annotation = _unwrap_optional(info.annotation)
    default = None if info.default is PydanticUndefined else info.default
    common: dict[str, Any] = {
        "label": key,
        "help_text": info.description or "",
        "required": False,
        "initial": default,
    }
    if get_origin(annotation) is Literal:
        values = get_args(annotation)
        lookup = {str(v): v for v in values}
        return forms.TypedChoiceField(
            choices=[("", "(default)")] + [(str(v), str(v)) for v in values],
            coerce=lambda s: lookup[s],
            empty_value=None,
            **common,
        )
    if annotation is bool:
        return forms.BooleanField(**common)
    if annotation is int:
        return forms.IntegerField(**common, **_bounds(info.metadata))
    if annotation is float:
        return forms.FloatField(**common, **_bounds(info.metadata))
    if annotation is str:
        return forms.CharField(**common)
    return YamlValueField(**common)


def _option_fields(app: AppType) -> dict[str, forms.Field]:
    return {
        option_field_name(app.name, k): option_form_field(k, info)
        for k, info in app.options.model_fields.items()
    }


class WorkflowMetaForm(forms.Form):
    name = forms.CharField(max_length=200)
    description = forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": 2}))
    scheduler = forms.ChoiceField(choices=[], help_text="the default; a run may choose another")
    repeat = forms.IntegerField(min_value=1, initial=1)
    seed = forms.IntegerField(initial=0)
    start_together = forms.BooleanField(
        required=False,
        help_text="applications that start at the same point of the DAG begin their requests together, "
        "once all of them have loaded",
    )

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["scheduler"].choices = [(n, n) for n in SCHEDULERS]


class ApplicationCardForm(forms.Form):
    node = forms.CharField(label="Name", max_length=100, help_text="the node's name in the DAG")
    uses = forms.CharField(
        label="Unit",
        max_length=100,
        required=False,
        help_text="application unit name; blank = the node's name (cards naming one unit share its settings)",
    )
    type = forms.ChoiceField(choices=[])
    model = forms.CharField(required=False, max_length=500, help_text="blank = the type's default model")
    client_model = forms.CharField(required=False, max_length=500)
    num_requests = forms.IntegerField(min_value=1, required=False, help_text="blank = the type's default")
    device = forms.ChoiceField(choices=[(d, d) for d in spec_model.DEVICES], initial="auto")
    mps = forms.IntegerField(min_value=0, max_value=100, required=False, label="MPS share (%)")
    priority = forms.ChoiceField(
        choices=[("", "(type default)")] + [(p, p) for p in spec_model.PRIORITIES], required=False
    )
    slo = forms.CharField(
        label="SLO",
        required=False,
        max_length=500,
        help_text="comma-separated, e.g. 'ttft<1s, tpot<=250ms'; blank = the type's default; 'none' = no SLO",
    )
    warmup_requests = forms.IntegerField(min_value=0, initial=0, required=False)
    arrival = forms.ChoiceField(choices=[(k, k) for k in ARRIVAL_KINDS], initial="closed")
    arrival_rate = forms.FloatField(required=False, min_value=0, label="rate (req/s)")
    think_time_s = forms.FloatField(required=False, min_value=0, label="think time (s)")
    arrival_seed = forms.IntegerField(required=False)
    arrival_trace = forms.CharField(required=False, max_length=500, label="trace file")
    seed = forms.IntegerField(required=False)
    dataset = forms.CharField(required=False, max_length=500)
    concurrency = forms.IntegerField(
        min_value=1,
        max_value=64,
        initial=1,
        required=False,
        help_text="concurrent sessions (users) of the app",
    )
    depend_on = forms.MultipleChoiceField(
        required=False, choices=[], widget=forms.SelectMultiple(attrs={"size": 3})
    )
    background = forms.BooleanField(
        required=False, help_text="runs alongside its dependents; stopped when the foreground finishes"
    )

    def __init__(self, *args: Any, node_choices: list[str] | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["type"].choices = [(name, name) for name in APP_TYPES]
        self.fields["depend_on"].choices = [(n, n) for n in node_choices or []]
        for app in APP_TYPES.values():
            self.fields.update(_option_fields(app))

    def option_groups(self) -> list[tuple[str, list[forms.BoundField]]]:
        """Return ``(type name, bound option fields)`` for every application type."""
        return [
            (app.name, [self[option_field_name(app.name, k)] for k in app.options.model_fields])
            for app in APP_TYPES.values()
        ]

    def common_fields(self) -> list[forms.BoundField]:
        skip = {"node", "uses", "type", "depend_on", "background", "DELETE"}
        return [bf for bf in self if not bf.name.startswith("opt_") and bf.name not in skip]


CardFormSet = forms.formset_factory(
    ApplicationCardForm, extra=0, can_delete=True, min_num=1, validate_min=True
)
PREFIX = "cards"


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
        WorkflowMetaForm(initial=meta_initial or {"scheduler": "greedy", "repeat": 1, "seed": 0}),
        CardFormSet(initial=cards, prefix=PREFIX, form_kwargs={"node_choices": names}),
    )


def default_card(n: int) -> dict[str, Any]:
    """Return the initial values of a new card (the option fields carry their types' defaults)."""
    return {
        "node": f"app{n}",
        "type": next(iter(APP_TYPES)),
        "device": "auto",
        "arrival": "closed",
        "warmup_requests": 0,
    }


def cards_from_bound(formset: Any) -> list[dict[str, Any]]:
    """Return the raw values of a bound formset as initial data (to re-render it without errors)."""
    out = []
    for form in formset.forms:
        if form["DELETE"].data:
            continue
        out.append({bf.name: bf.data for bf in form if bf.name != "DELETE"})
    return out


# --------------------------------------------------------------------------------------------------
# Forms -> spec mapping
# --------------------------------------------------------------------------------------------------


def _slo_list(text: str) -> list[str] | None:
    text = (text or "").strip()
    if not text:
        return None
    if text.lower() == NO_SLO:
        return []
    return [part.strip() for part in text.split(",") if part.strip()]


def card_unit(card: Mapping[str, Any]) -> dict[str, Any]:
    """Return the spec mapping of one card's application unit (blank fields take the type's defaults)."""
    type_name = card["type"]
    unit: dict[str, Any] = {"type": type_name}
    for key in UNIT_FIELDS:
        value = card.get(key)
        if value not in (None, ""):
            unit[key] = value
    slo = _slo_list(card.get("slo") or "")
    if slo is not None:
        unit["slo"] = slo
    kind = card.get("arrival") or "closed"
    arrival: dict[str, Any] = {"kind": kind}
    for field, key in (
        ("arrival_rate", "rate"),
        ("think_time_s", "think_time_s"),
        ("arrival_seed", "seed"),
        ("arrival_trace", "trace"),
    ):
        if card.get(field) not in (None, ""):
            arrival[key] = card[field]
    if arrival != {"kind": "closed"}:
        unit["arrival"] = arrival
    app = APP_TYPES.get(type_name)
    if app is not None:
        for key in app.options.model_fields:
            value = card.get(option_field_name(type_name, key))
            if value not in (None, ""):
                unit[key] = value
    return unit


def editor_to_dict(
    meta: Mapping[str, Any], cards: list[Mapping[str, Any]]
) -> tuple[dict[str, Any], list[str]]:
    """Return the native spec mapping of the editor's cleaned data, and the problems found in joining
    cards (two cards giving one unit different settings). The engine validates the rest.
    """
    data: dict[str, Any] = {}
    for key in ("name", "description", "scheduler", "repeat", "seed"):
        if meta.get(key) not in (None, ""):
            data[key] = meta[key]
    if meta.get("start_together"):
        data["start_together"] = True
    problems: list[str] = []
    nodes: dict[str, Any] = {}
    for card in cards:
        unit_name = (card.get("uses") or "").strip() or card["node"]
        unit = card_unit(card)
        if unit_name in spec_load.RESERVED_KEYS:
            problems.append(f"'{unit_name}' is a reserved name; name the card differently")
            continue
        if unit_name in data and data[unit_name] != unit:
            problems.append(
                f"cards using unit '{unit_name}' give it different settings; make them equal or rename one"
            )
        data.setdefault(unit_name, unit)
        node: dict[str, Any] = {"uses": unit_name}
        if card.get("depend_on"):
            node["depend_on"] = list(card["depend_on"])
        if card.get("background"):
            node["background"] = True
        nodes[card["node"]] = node
    data["workflows"] = nodes
    return data, problems


def workflow_to_editor(workflow: spec_model.Workflow) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Return the editor's initial values (workflow form, cards) for an engine workflow."""
    meta = {
        "name": workflow.name,
        "description": workflow.description,
        "scheduler": workflow.scheduler,
        "repeat": workflow.repeat,
        "seed": workflow.seed,
        "start_together": workflow.start_together,
    }
    cards = []
    for node in workflow.nodes.values():
        unit = workflow.applications[node.uses]
        app = app_type(unit)
        slo_text = ", ".join(str(s) for s in unit.slo)
        card: dict[str, Any] = {
            "node": node.name,
            "uses": "" if node.uses == node.name else node.uses,
            "type": unit.type,
            "model": unit.model or "",
            "client_model": unit.client_model or "",
            "num_requests": unit.num_requests,
            "device": unit.device,
            "mps": unit.mps,
            "priority": unit.priority,
            "slo": slo_text or (NO_SLO if app.default_slo else ""),
            "warmup_requests": unit.warmup_requests,
            "arrival": unit.arrival.kind,
            "arrival_rate": unit.arrival.rate,
            "think_time_s": unit.arrival.think_time_s or None,
            "arrival_seed": unit.arrival.seed,
            "arrival_trace": unit.arrival.trace or "",
            "seed": unit.seed,
            "dataset": unit.dataset or "",
            "concurrency": unit.concurrency,
            "depend_on": list(node.depend_on),
            "background": node.background,
        }
        for key, value in unit.options.model_dump(mode="json").items():
            card[option_field_name(unit.type, key)] = value
        cards.append(card)
    return meta, cards


# --------------------------------------------------------------------------------------------------
# Engine errors -> fields
# --------------------------------------------------------------------------------------------------

_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"|\[\d+\]|[A-Za-z0-9_\-]+')


def split_path(path: str) -> list[str | int]:
    """Invert ``benchmarks.spec.model.format_path``: ``workflows."my node".depend_on[1]`` -> parts."""
    parts: list[str | int] = []
    for token in _TOKEN.findall(path or ""):
        if token.startswith("["):
            parts.append(int(token[1:-1]))
        elif token.startswith('"'):
            parts.append(json.loads(token))
        else:
            parts.append(token)
    return parts


def _card_field(
    form: ApplicationCardForm, unit_type: str, key: str | int | None, rest: list[Any]
) -> str | None:
    if key is None or not isinstance(key, str):
        return None
    if key == "arrival":
        sub = rest[0] if rest else None
        return {
            "rate": "arrival_rate",
            "think_time_s": "think_time_s",
            "seed": "arrival_seed",
            "trace": "arrival_trace",
        }.get(sub, "arrival")
    if key == "server_model":
        return "model"
    if key in form.fields and not key.startswith("opt_"):
        return key
    option = option_field_name(unit_type, key)
    return option if option in form.fields else None


def attach_errors(meta: WorkflowMetaForm, formset: Any, errors: list[spec_model.SpecError]) -> list[str]:
    """Add each engine error to the field it concerns; return those that concern no single field."""
    cards = [f for f in formset.forms if f.cleaned_data and not f.cleaned_data.get("DELETE")]
    by_node = {f.cleaned_data["node"]: f for f in cards}
    by_unit: dict[str, list[ApplicationCardForm]] = {}
    for f in cards:
        by_unit.setdefault((f.cleaned_data.get("uses") or "").strip() or f.cleaned_data["node"], []).append(f)
    general = []
    for error in errors:
        parts = split_path(error.path)
        text = error.message
        head = parts[0] if parts else None
        if head in ("name", "description", "scheduler", "repeat", "seed") and len(parts) == 1:
            meta.add_error(str(head), text)
        elif head == "workflows" and len(parts) >= 2 and parts[1] in by_node:
            form = by_node[str(parts[1])]
            field = parts[2] if len(parts) > 2 else None
            form.add_error(field if field in ("depend_on", "uses", "background") else None, text)
        elif isinstance(head, str) and head in by_unit:
            for form in by_unit[head]:
                field = _card_field(
                    form, form.cleaned_data["type"], parts[1] if len(parts) > 1 else None, parts[2:]
                )
                form.add_error(field, text)
        else:
            general.append(str(error))
    return general
