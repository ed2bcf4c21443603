"""The editor's forms are derived from the engine's spec model, not from lists of their own."""

from __future__ import annotations

from typing import Annotated, Any, Literal, get_args

import pytest
from django import forms
from pydantic import BaseModel, Field

from benchmarks.schedulers import SCHEDULERS
from benchmarks.spec import model as spec_model
from cbweb.workflows.forms import (
    ApplicationCardForm,
    WorkflowMetaForm,
    YamlValueField,
    arrival_field_name,
    model_form_field,
)

SPECIAL = ("name", "type", "slo", "arrival", "options")


def choices(field: forms.Field) -> list[str]:
    return [value for value, _ in field.choices]  # type: ignore[attr-defined]


def test_a_card_has_a_field_for_every_unit_key_and_arrival_key_of_the_model() -> None:
    card = ApplicationCardForm()
    for key in spec_model.Application.model_fields:
        if key not in SPECIAL:
            assert key in card.fields, key
    for key in spec_model.Arrival.model_fields:
        assert arrival_field_name(key) in card.fields, key


def test_literal_fields_offer_the_models_values() -> None:
    card = ApplicationCardForm()
    model = spec_model.Application.model_fields
    arrival = spec_model.Arrival.model_fields
    assert choices(card.fields["device"]) == list(get_args(model["device"].annotation))
    assert card.fields["device"].initial == "auto"
    # Priority has no default of its own (the type gives it): blank means the type's default.
    assert choices(card.fields["priority"]) == ["", *get_args(model["priority"].annotation)]
    assert choices(card.fields["arrival_kind"]) == list(get_args(arrival["kind"].annotation))


def test_bounds_become_min_and_max_and_descriptions_help_text() -> None:
    card = ApplicationCardForm()
    mps, concurrency = card.fields["mps"], card.fields["concurrency"]
    assert (mps.min_value, mps.max_value) == (0, 100)  # type: ignore[attr-defined]
    assert (concurrency.min_value, concurrency.max_value) == (1, 64)  # type: ignore[attr-defined]
    assert card.fields["num_requests"].min_value == 1  # type: ignore[attr-defined]
    assert (
        card.fields["concurrency"].help_text == spec_model.Application.model_fields["concurrency"].description
    )
    assert card.fields["arrival_rate"].help_text == spec_model.Arrival.model_fields["rate"].description
    assert card.fields["node"].max_length == spec_model.NAME_MAX_CHARS  # type: ignore[attr-defined]
    assert card.fields["num_requests"].help_text == "blank = the type's default"


def test_the_workflow_form_has_the_workflows_own_fields() -> None:
    meta = WorkflowMetaForm()
    own = [
        k for k in spec_model.Workflow.model_fields if k not in ("applications", "nodes", "scheduler_params")
    ]
    assert [bf.name for bf in meta.own_fields()] == own
    # The schedulers' parameters: one field each, from each scheduler's Params model.
    assert [bf.name for bf in meta.param_fields()] == [
        f"{name}__{param}" for name, cls in SCHEDULERS.items() for param in cls.Params.model_fields
    ]
    assert choices(meta.fields["scheduler"]) == list(SCHEDULERS)
    repeat = meta.fields["repeat"]
    assert (repeat.min_value, repeat.max_value, repeat.initial) == (1, 1000, 1)  # type: ignore[attr-defined]
    assert isinstance(meta.fields["start_together"], forms.BooleanField)
    assert [name for name, field in meta.fields.items() if field.required] == ["name"]


class Gadget(BaseModel):
    mode: Literal["fast", "slow"] = Field("fast", description="how it runs")
    level: Literal[1, 2, 3] | None = None
    size: int = Field(4, ge=2, le=9)
    ratio: float = Field(0.5, gt=0, lt=1)
    label: Annotated[str | None, "meta"] = Field(None, max_length=12)
    on: bool = False
    tags: list[str] = []


@pytest.mark.parametrize(
    ("key", "posted", "cleaned"),
    [
        ("mode", "slow", "slow"),
        ("level", "2", 2),
        ("level", "", None),
        ("size", "9", 9),
        ("ratio", "0.25", 0.25),
        ("label", "twelve chars", "twelve chars"),
        ("on", "on", True),
        ("tags", "[a, b]", ["a", "b"]),
        ("tags", "", None),
    ],
)
def test_any_pydantic_field_becomes_a_form_field_that_cleans_to_the_models_type(
    key: str, posted: str, cleaned: Any
) -> None:
    field = model_form_field(key, Gadget.model_fields[key])
    assert field.clean(posted) == cleaned


@pytest.mark.parametrize(
    ("key", "posted"),
    [
        ("mode", "medium"),
        ("level", "4"),
        ("size", "1"),
        ("size", "10"),
        ("label", "thirteen char"),
        ("tags", "["),
    ],
)
def test_values_the_model_refuses_by_type_or_bound_are_refused_on_the_field(key: str, posted: str) -> None:
    with pytest.raises(forms.ValidationError):
        model_form_field(key, Gadget.model_fields[key]).clean(posted)


def test_a_strict_bound_refuses_the_bound_itself_and_says_so() -> None:
    ratio = model_form_field("ratio", Gadget.model_fields["ratio"])  # gt=0, lt=1
    for posted, message in (("0", "greater than 0."), ("1", "less than 1."), ("-1", "greater than 0.")):
        with pytest.raises(forms.ValidationError) as info:
            ratio.clean(posted)
        assert info.value.messages == [f"Ensure this value is {message}"], posted
    assert ratio.clean("0.001") == 0.001
    # The browser checks min/max inclusively; the server refuses the bounds themselves.
    assert (ratio.widget.attrs["min"], ratio.widget.attrs["max"]) == (0, 1)
    size = model_form_field("size", Gadget.model_fields["size"])  # ge=2, le=9
    assert size.clean("2") == 2
    with pytest.raises(forms.ValidationError) as info:
        size.clean("1")
    assert info.value.messages == ["Ensure this value is greater than or equal to 2."]


def test_a_choice_offers_blank_only_when_the_default_is_not_a_value() -> None:
    mode = model_form_field("mode", Gadget.model_fields["mode"])
    level = model_form_field("level", Gadget.model_fields["level"])
    assert choices(mode) == ["fast", "slow"] and mode.initial == "fast" and mode.help_text == "how it runs"
    assert choices(level) == ["", "1", "2", "3"]
    assert isinstance(model_form_field("tags", Gadget.model_fields["tags"]), YamlValueField)
