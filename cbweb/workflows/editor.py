"""The DAG editor's service: one pipeline behind the editor page and its live preview.

Forms -> spec: ``editor_to_dict`` turns the cards into the native mapping the engine validates.
Spec -> forms: ``workflow_to_editor`` gives the cards of a stored or imported workflow.
Errors -> fields: ``attach_errors`` puts each engine error on the field its ``SpecError.loc`` names.
The actions (open, import, add a card, check, save) each return an ``EditorState`` that the page
renders and the preview answers as JSON.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from django.core.exceptions import ValidationError
from django.core.files.uploadedfile import UploadedFile

from benchmarks.apps import APP_TYPES, app_type
from benchmarks.schedulers import SCHEDULERS
from benchmarks.spec import export as spec_export
from benchmarks.spec import load as spec_load
from benchmarks.spec import model as spec_model
from cbweb.workflows import selectors, services
from cbweb.workflows.dag import dag_svg, nodes_of_spec
from cbweb.workflows.forms import (
    ApplicationCardForm,
    WorkflowMetaForm,
    arrival_field_name,
    build_editor,
    cards_from_bound,
    chosen_scheduler_params,
    default_card,
    live_cards,
    node_names_in,
    option_field_name,
    param_field_name,
    scheduler_param_fields,
)
from cbweb.workflows.limits import spec_limits
from cbweb.workflows.models import Workflow

NO_SLO = "none"
T = TypeVar("T")
# The fields of a node (besides its name) that a card shows under the same names.
NODE_FIELDS = ("uses", "depend_on", "background")
# The workflow form's fields of the schedulers' parameters (gathered into ``scheduler:``).
PARAM_FIELDS = frozenset(scheduler_param_fields())


# --------------------------------------------------------------------------------------------------
# Forms <-> spec
# --------------------------------------------------------------------------------------------------


def _slo_list(text: str) -> list[str] | None:
    text = (text or "").strip()
    if not text:
        return None
    if text.lower() == NO_SLO:
        return []
    return [part.strip() for part in text.split(",") if part.strip()]


def _given(value: Any) -> bool:
    return value not in (None, "")


def card_unit(form: ApplicationCardForm) -> dict[str, Any]:
    """Return the spec mapping of a valid card's application unit (blank fields take the defaults)."""
    card = form.cleaned_data
    type_name = card["type"]
    unit: dict[str, Any] = {"type": type_name}
    arrival_fields = {arrival_field_name(k): k for k in spec_model.Arrival.model_fields}
    arrival: dict[str, Any] = {}
    for name in form.unit_field_names:
        value = card.get(name)
        if name in arrival_fields:
            if _given(value):
                arrival[arrival_fields[name]] = value
        elif name == "slo":
            slo = _slo_list(value or "")
            if slo is not None:
                unit["slo"] = slo
        elif _given(value):
            unit[name] = value
    if arrival:
        unit["arrival"] = arrival
    for key in APP_TYPES[type_name].options.model_fields:
        value = card.get(option_field_name(type_name, key))
        if _given(value):
            unit[key] = value
    return unit


def editor_to_dict(
    meta: Mapping[str, Any], cards: list[ApplicationCardForm]
) -> tuple[dict[str, Any], list[str]]:
    """Return the native spec mapping of the editor's valid forms, and the problems found in joining
    cards (two cards giving one unit different settings). The engine validates the rest.
    """
    data: dict[str, Any] = {k: v for k, v in meta.items() if _given(v) and k not in PARAM_FIELDS}
    problems: list[str] = []
    scheduler = str(data.get("scheduler", "greedy"))
    # Only what differs from the scheduler's defaults is written (the fields start at the defaults).
    defaults = SCHEDULERS[scheduler].Params().model_dump(mode="json") if scheduler in SCHEDULERS else {}
    params = {k: v for k, v in chosen_scheduler_params(meta, scheduler).items() if defaults.get(k) != v}
    if params:
        # The spec's one spelling of a scheduler with parameters: {name, ...params}.
        data["scheduler"] = {**params, "name": data.get("scheduler", "greedy")}
    nodes: dict[str, Any] = {}
    for form in cards:
        card = form.cleaned_data
        unit_name = _unit_name(card)
        unit = card_unit(form)
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


def _unit_name(card: Mapping[str, Any]) -> str:
    return str(card.get("uses") or "").strip() or str(card["node"])


def workflow_to_editor(workflow: spec_model.Workflow) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Return the editor's initial values (workflow form, cards) for an engine workflow."""
    meta = workflow.model_dump(exclude={"applications", "nodes", "scheduler_params"})
    meta.update({param_field_name(workflow.scheduler, k): v for k, v in workflow.scheduler_params.items()})
    cards = []
    for node in workflow.nodes.values():
        unit = workflow.applications[node.uses]
        values = unit.model_dump(mode="json", exclude={"name", "slo", "arrival", "options"})
        card: dict[str, Any] = {k: "" if v is None else v for k, v in values.items()}
        for key, value in unit.arrival.model_dump(mode="json").items():
            card[arrival_field_name(key)] = "" if value is None else value
        slo_text = ", ".join(str(s) for s in unit.slo)
        card["slo"] = slo_text or (NO_SLO if app_type(unit).default_slo else "")
        for key, value in unit.options.model_dump(mode="json").items():
            card[option_field_name(unit.type, key)] = value
        card.update(
            node=node.name,
            uses="" if node.uses == node.name else node.uses,
            depend_on=list(node.depend_on),
            background=node.background,
        )
        cards.append(card)
    return meta, cards


# --------------------------------------------------------------------------------------------------
# Engine errors -> fields
# --------------------------------------------------------------------------------------------------


def _card_field(form: ApplicationCardForm, loc: tuple[str | int, ...]) -> str | None:
    """Return the card field that shows an error at ``loc`` inside the unit (None: the whole card)."""
    key = loc[0] if loc else None
    if not isinstance(key, str):
        return None
    if key == "arrival":
        sub = loc[1] if len(loc) > 1 else "kind"
        name = arrival_field_name(str(sub))
        return name if name in form.fields else arrival_field_name("kind")
    if key in form.unit_field_names:
        return key
    option = option_field_name(form.cleaned_data["type"], key)
    return option if option in form.fields else None


def attach_errors(meta: WorkflowMetaForm, formset: Any, errors: list[spec_model.SpecError]) -> list[str]:
    """Add each engine error to the field its ``loc`` names; return those that concern no single field."""
    cards = live_cards(formset)
    by_node = {f.cleaned_data["node"]: f for f in cards}
    by_unit: dict[str, list[ApplicationCardForm]] = {}
    for f in cards:
        by_unit.setdefault(_unit_name(f.cleaned_data), []).append(f)
    general = []
    for error in errors:
        head, rest = (error.loc[0], error.loc[1:]) if error.loc else (None, ())
        if head in meta.fields and not rest:
            meta.add_error(str(head), error.message)
        elif head == "scheduler" and rest and rest != ("name",):
            scheduler = meta.cleaned_data.get("scheduler") or "greedy"
            param = param_field_name(scheduler, str(rest[0]))
            if param in meta.fields and len(rest) == 1:
                meta.add_error(param, error.message)
            else:
                meta.add_error("scheduler", f"{spec_model.format_path(rest)}: {error.message}")
        elif head == "workflows" and rest and rest[0] in by_node:
            key = rest[1] if len(rest) > 1 else None
            on = key if isinstance(key, str) and key in NODE_FIELDS else None
            by_node[str(rest[0])].add_error(on, error.message)
        elif isinstance(head, str) and head in by_unit:
            for form in by_unit[head]:
                form.add_error(_card_field(form, rest), error.message)
        else:
            general.append(str(error))
    return general


# --------------------------------------------------------------------------------------------------
# The editor's actions
# --------------------------------------------------------------------------------------------------


@dataclass
class EditorState:
    """What the editor shows after an action: its forms, the errors no field holds, the DAG, a notice.

    ``saved`` is the workflow an action stored (the page then leaves the editor); ``status`` is the
    HTTP status of the page (400 when the action was refused).
    """

    meta: WorkflowMetaForm
    formset: Any
    general_errors: list[str] = field(default_factory=list)
    import_errors: list[dict[str, Any]] = field(default_factory=list)
    svg: str | None = None
    nodes: list[str] = field(default_factory=list)
    notice: str = ""
    saved: Workflow | None = None
    status: int = 200

    def has_errors(self) -> bool:
        """Return whether anything in the editor is wrong (a field, a card, the cards together)."""
        return bool(
            self.general_errors
            or self.import_errors
            or self.meta.errors
            or (self.formset.is_bound and self.formset.total_error_count())
        )

    def context(self) -> dict[str, Any]:
        """Return the template context of the editor page (templates/workflows/editor.html)."""
        return {
            "meta": self.meta,
            "formset": self.formset,
            "general_errors": self.general_errors,
            "import_errors": self.import_errors,
            "svg": self.svg,
        }

    def preview(self) -> dict[str, Any]:
        """Return the live preview's answer: the DAG as SVG, the node names, every error by field
        (``field``: the form field's HTML name, None for an error of the whole workflow)."""
        errors = [{"field": None, "message": m, "code": None} for m in self.general_errors]
        for name, found in self.meta.errors.as_data().items():
            errors += [_preview_error(name, e) for e in found]
        for form in self.formset.forms:
            for name, found in form.errors.as_data().items():
                where = form.add_prefix(name) if name != "__all__" else form.prefix
                errors += [_preview_error(where, e) for e in found]
        errors += [{"field": None, "message": m, "code": None} for m in self.formset.non_form_errors()]
        return {"svg": self.svg or "", "nodes": self.nodes, "errors": errors}


def _preview_error(field_name: str | None, error: ValidationError) -> dict[str, Any]:
    """Return one form error as the preview sends it; ``code`` lets the page hold back "required"
    on fields the user has not touched yet (a fresh form is not wrong, only unfinished)."""
    return {"field": field_name, "message": " ".join(error.messages), "code": error.code}


def _engine(state: EditorState, call: Callable[[], T]) -> T | None:
    """Return ``call()``; on the engine's validation errors put them on the fields, return None."""
    try:
        return call()
    except spec_model.WorkflowValidationError as exc:
        state.general_errors.extend(attach_errors(state.meta, state.formset, exc.errors))
        return None


def _submitted(data: Mapping[str, Any]) -> tuple[EditorState, dict[str, Any] | None]:
    """Bind the submitted editor; return its state and the spec mapping (None while a form is invalid)."""
    meta, formset = build_editor(data=data)
    state = EditorState(meta, formset, nodes=node_names_in(data))
    meta_valid, cards_valid = meta.is_valid(), formset.is_valid()
    if not (meta_valid and cards_valid):
        if cards_valid:  # the DAG is drawn while the workflow's own fields are unfinished
            state.svg = dag_svg(nodes_of_spec(editor_to_dict(meta.cleaned_data, live_cards(formset))[0]))
        state.status = 400
        return state, None
    spec, problems = editor_to_dict(meta.cleaned_data, live_cards(formset))
    state.general_errors.extend(problems)
    state.svg = dag_svg(nodes_of_spec(spec))
    return state, spec


def editor_open(*, workflow: Workflow | None = None) -> EditorState:
    """Return the editor of a new workflow, or of a new version of ``workflow`` (its latest version)."""
    if workflow is None:
        return EditorState(*build_editor())
    version = selectors.version_latest(workflow=workflow)
    try:
        meta_initial, cards = workflow_to_editor(selectors.version_workflow(version=version))
    except spec_model.WorkflowValidationError as exc:
        # A version saved before a rule existed (names, issue 17): show why; the user re-imports it.
        state = EditorState(*build_editor(), import_errors=exc.to_json())
        state.general_errors.append(
            f"version {version.number} no longer validates: fix its YAML and import it"
        )
    else:
        state = EditorState(*build_editor(meta_initial=meta_initial, cards_initial=cards))
    state.svg = dag_svg(nodes_of_spec(version.spec))
    return state


def _import_text(text: str, upload: UploadedFile | None) -> tuple[str, str | None]:
    """Return (YAML text, problem) from the uploaded file, or else the pasted text."""
    if upload is not None:
        max_bytes = spec_limits().max_bytes
        if upload.size and upload.size > max_bytes:
            return "", f"the file is {upload.size} bytes, over the limit of {max_bytes} bytes"
        try:
            return upload.read().decode("utf-8"), None
        except UnicodeDecodeError:
            return "", "the uploaded file is not UTF-8 text"
    return text, None if text.strip() else "paste YAML or choose a file to import"


def editor_import(*, text: str, upload: UploadedFile | None = None, name: str = "imported") -> EditorState:
    """Return the editor filled from YAML in any dialect (the uploaded file, else ``text``), or the
    empty editor with the import's errors (each with its line)."""
    state = EditorState(*build_editor(), status=400)
    yaml_text, problem = _import_text(text, upload)
    if problem:
        state.general_errors.append(problem)
        return state
    try:
        parsed = spec_load.load_yaml(
            yaml_text, name=name, limits=spec_limits(), unit_checks=[services.file_policy().unit_problems]
        )
    except spec_model.WorkflowValidationError as exc:
        state.import_errors = exc.to_json()
        return state
    meta_initial, cards = workflow_to_editor(parsed)
    state = EditorState(*build_editor(meta_initial=meta_initial, cards_initial=cards))
    state.svg = dag_svg(nodes_of_spec(spec_export.to_dict(parsed)))
    state.notice = f"imported {len(cards)} node(s); review and save"
    return state


def editor_add_card(*, data: Mapping[str, Any]) -> EditorState:
    """Return the submitted editor with one more card (the page without JavaScript); nothing is checked."""
    meta, formset = build_editor(data=data)
    cards = cards_from_bound(formset)
    cards.append(default_card(len(cards) + 1))
    return EditorState(
        *build_editor(meta_initial={k: meta[k].data for k in meta.fields}, cards_initial=cards)
    )


def editor_check(*, data: Mapping[str, Any]) -> EditorState:
    """Return the submitted editor validated by the engine, each error on its field (the page's Check
    button and the live preview)."""
    state, spec = _submitted(data)
    if spec is not None:
        name = state.meta.cleaned_data["name"]
        parsed = _engine(state, lambda: services.workflow_parse(name=name, spec=spec, check_here=True))
        if parsed is not None and not state.has_errors():
            state.notice = "the workflow is valid, and its models and files resolve on this server"
    state.status = 400 if state.has_errors() else 200
    return state


def editor_save(*, data: Mapping[str, Any], user: Any, workflow: Workflow | None = None) -> EditorState:
    """Store the submitted editor as a new workflow, or as a new version of ``workflow``; return the
    state with ``saved`` set, or with the errors and nothing written."""
    state, spec = _submitted(data)
    if spec is not None and not state.general_errors:
        name = state.meta.cleaned_data["name"]
        if workflow is None:
            state.saved = _engine(state, lambda: services.workflow_create(owner=user, name=name, spec=spec))
        elif (
            _engine(
                state, lambda: services.workflow_update(workflow=workflow, user=user, name=name, spec=spec)
            )
            is not None
        ):
            state.saved = workflow
    state.status = 400 if state.has_errors() else 200
    return state
