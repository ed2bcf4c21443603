"""The form-based DAG editor, driven as a browser without JavaScript would (plain form posts)."""

from __future__ import annotations

import html
import re
from typing import Any

import pytest
from django.test import Client

from benchmarks.apps import APP_TYPES
from benchmarks.apps.base import AppType
from benchmarks.spec.load import load_yaml
from benchmarks.spec.model import AppOptions, SpecError
from cbweb.workflows.editor import attach_errors, workflow_to_editor
from cbweb.workflows.forms import build_editor
from cbweb.workflows.models import Workflow
from cbweb.workflows.selectors import version_latest, version_workflow

MIXED = """\
name: mixed
scheduler: greedy
seed: 7
warm:
  type: Sleep
  sleep_time: 0.25
  num_requests: 2
  priority: high
  slo: ["e2e<=1s"]
  arrival: {kind: poisson, rate: 2.5, seed: 3, max_in_flight: 4}
load:
  type: Synthetic
  steps: 3
  step_ms: 2.5
  load: cpu
  concurrency: 2
workflows:
  warm_node:
    uses: warm
  load_node:
    uses: load
    depend_on: [warm_node]
    background: true
  again:
    uses: warm
    depend_on: [warm_node]
"""


def post_data(meta: Any, formset: Any, action: str = "save") -> dict[str, Any]:
    """Return what a browser submits for the editor's forms as rendered (initial values unchanged)."""
    data: dict[str, Any] = {"action": action}
    for form in (meta, *formset.forms):
        for bf in form:
            value = bf.value()
            if bf.widget_type == "checkbox":
                if value:
                    data[bf.html_name] = "on"
            elif value is None:
                data[bf.html_name] = ""
            elif isinstance(value, list):
                data[bf.html_name] = value
            else:
                data[bf.html_name] = (
                    bf.field.prepare_value(value) if hasattr(bf.field, "prepare_value") else value
                )
    for field in formset.management_form:
        data[field.html_name] = field.value()
    return data


def editor_for(yaml_text: str) -> tuple[Any, Any]:
    meta_initial, cards = workflow_to_editor(load_yaml(yaml_text))
    return build_editor(meta_initial=meta_initial, cards_initial=cards)


@pytest.fixture
def browser(alice: Any) -> Client:
    client = Client()
    client.force_login(alice)
    return client


@pytest.mark.parametrize(
    "yaml_text",
    [
        MIXED,
        MIXED.replace("seed: 7\n", "seed: 7\nstart_together: true\n"),
        MIXED.replace("scheduler: greedy\n", "scheduler: {name: credit, pressure_threshold: 0.4}\n").replace(
            "  priority: high\n", "  priority: high\n  memory_limit: 2GiB\n"
        ),
    ],
)
def test_a_workflow_imported_from_yaml_round_trips_through_the_editor(
    browser: Client, yaml_text: str
) -> None:
    response = browser.post("/workflows/new/", {"action": "import", "yaml_text": yaml_text})
    assert response.status_code == 200
    meta, formset = response.context["meta"], response.context["formset"]
    assert len(formset.forms) == 3
    saved = browser.post("/workflows/new/", post_data(meta, formset))
    assert saved.status_code == 302, saved.context and saved.context["general_errors"]
    stored = version_workflow(version=version_latest(workflow=Workflow.objects.get()))
    assert stored == load_yaml(yaml_text)


def test_every_registered_type_gets_its_options_fieldset(browser: Client) -> None:
    html = browser.get("/workflows/new/").content.decode()
    for name, app in APP_TYPES.items():
        assert f'data-app-type="{name}"' in html
        for key in app.options.model_fields:
            assert f'name="cards-0-opt_{name}_{key}"' in html


def test_a_newly_registered_type_appears_without_web_changes(browser: Client, monkeypatch: Any) -> None:
    class KettleOptions(AppOptions):
        litres: float = 1.5

    kettle = AppType(
        name="Kettle",
        aliases=(),
        options=KettleOptions,
        slo_metrics=("e2e",),
        default_slo=(),
        default_priority="low",
        default_num_requests=1,
        driver="x:y",
    )
    monkeypatch.setitem(APP_TYPES, "Kettle", kettle)
    html = browser.get("/workflows/new/").content.decode()
    assert 'data-app-type="Kettle"' in html
    assert re.search(r'name="cards-0-opt_Kettle_litres"[^>]*value="1.5"', html)


def test_engine_errors_are_shown_next_to_the_field_they_concern(browser: Client) -> None:
    meta, formset = editor_for(MIXED)
    data = post_data(meta, formset)
    data["cards-0-slo"] = data["cards-2-slo"] = "e2e<=banana"
    response = browser.post("/workflows/new/", data)
    assert response.status_code == 400
    cards = response.context["formset"].forms
    assert "malformed SLO expression" in cards[0].errors["slo"][0]
    # Cards sharing a unit show its errors on each of them.
    assert "malformed SLO expression" in cards[2].errors["slo"][0]
    assert not Workflow.objects.exists()


def test_saving_a_new_workflow_under_a_name_in_use_says_so_on_the_name_field(browser: Client) -> None:
    meta, formset = editor_for(MIXED)
    assert browser.post("/workflows/new/", post_data(meta, formset)).status_code == 302
    again = browser.post("/workflows/new/", post_data(meta, formset))
    assert again.status_code == 400
    [message] = again.context["meta"].errors["name"]
    existing = Workflow.objects.get()
    assert message.startswith(f"you already have a workflow named '{existing.name}' (#{existing.pk})")
    assert Workflow.objects.count() == 1


def test_cards_sharing_a_unit_must_agree_on_its_settings(browser: Client) -> None:
    meta, formset = editor_for(MIXED)
    data = post_data(meta, formset)
    data["cards-2-num_requests"] = "9"
    response = browser.post("/workflows/new/", data)
    assert response.status_code == 400
    assert response.context["general_errors"] == [
        "cards using unit 'warm' give it different settings; make them equal or rename one"
    ]


def test_option_bounds_from_the_types_model_are_checked_on_the_field(browser: Client) -> None:
    meta, formset = editor_for(MIXED)
    data = post_data(meta, formset)
    data["cards-1-opt_Synthetic_steps"] = "0"
    response = browser.post("/workflows/new/", data)
    assert response.status_code == 400
    assert (
        "greater than or equal to 1" in response.context["formset"].forms[1].errors["opt_Synthetic_steps"][0]
    )
    assert 'data-errors-for="cards-1-opt_Synthetic_steps"><li>' in response.content.decode()


def test_a_dependency_cycle_is_reported_on_the_card(browser: Client) -> None:
    meta, formset = editor_for(MIXED)
    data = post_data(meta, formset)
    data["cards-0-depend_on"] = ["again"]
    response = browser.post("/workflows/new/", data)
    assert response.status_code == 400
    errors = " ".join(e for f in response.context["formset"].forms for e in f.errors.get("depend_on", []))
    assert "dependency cycle" in errors


def test_add_application_without_javascript_keeps_the_cards_and_adds_one(browser: Client) -> None:
    meta, formset = editor_for(MIXED)
    response = browser.post("/workflows/new/", post_data(meta, formset, action="add"))
    forms = response.context["formset"].forms
    assert len(forms) == 4
    assert forms[0]["node"].value() == "warm_node" and forms[3]["node"].value() == "app4"
    assert not any(f.errors for f in forms if f.is_bound)


def test_import_errors_list_their_lines(browser: Client) -> None:
    response = browser.post("/workflows/new/", {"action": "import", "yaml_text": "a:\n  type: Kettle\n"})
    assert response.status_code == 400
    assert response.context["import_errors"][0]["line"] == 2
    assert "line 2" in response.content.decode()


def test_preview_answers_the_dag_and_field_errors(browser: Client) -> None:
    meta, formset = editor_for(MIXED)
    data = post_data(meta, formset, action="check")
    data["cards-2-num_requests"] = "0"
    body = browser.post("/workflows/preview/", data).json()
    assert body["nodes"] == ["warm_node", "load_node", "again"]
    assert {
        "field": "cards-2-num_requests",
        "message": "Ensure this value is greater than or equal to 1.",
        "code": "min_value",
    } in body["errors"]
    data["cards-2-num_requests"] = "2"
    body = browser.post("/workflows/preview/", data).json()
    assert body["errors"] == []
    assert body["svg"].count('class="edge"') == 2 and 'data-node="load_node"' in body["svg"]


def test_editing_someone_elses_workflow_is_forbidden(bob: Any, alice: Any, make_workflow: Any) -> None:
    workflow = make_workflow(alice)
    client = Client()
    client.force_login(bob)
    assert client.get(f"/workflows/{workflow.pk}/edit/").status_code == 403
    assert Client().get(f"/workflows/{workflow.pk}/edit/").status_code == 302


def test_engine_errors_go_to_the_field_their_loc_names() -> None:
    meta, formset = build_editor(data=post_data(*editor_for(MIXED)))
    assert meta.is_valid() and formset.is_valid()
    general = attach_errors(
        meta,
        formset,
        [
            SpecError(("workflows", "again", "depend_on", 0), None, "on the dependencies"),
            SpecError(("warm", "arrival", "rate"), None, "on the rate"),
            SpecError(("load", "steps"), None, "on the option"),
            SpecError(("repeat",), None, "on the workflow"),
            SpecError(("warm",), 4, "on the whole card"),
            SpecError(("workflows", "nobody"), 3, "on no card"),
            SpecError((), None, "on the whole input"),
        ],
    )
    warm, load, again = formset.forms
    assert again.errors["depend_on"] == ["on the dependencies"]
    # Both cards of unit 'warm' show the unit's errors.
    assert warm.errors["arrival_rate"] == again.errors["arrival_rate"] == ["on the rate"]
    assert load.errors["opt_Synthetic_steps"] == ["on the option"]
    assert meta.errors["repeat"] == ["on the workflow"]
    assert warm.non_field_errors() == ["on the whole card"]
    assert general == ["line 3: workflows.nobody: on no card", "<top>: on the whole input"]


def test_a_unit_whose_name_has_spaces_and_dots_gets_its_errors_on_its_card(browser: Client) -> None:
    meta, formset = editor_for(MIXED)
    data = post_data(meta, formset)
    data["cards-0-uses"] = data["cards-2-uses"] = "Warm up (v1.2)"
    data["cards-0-slo"] = data["cards-2-slo"] = "e2e<=banana"
    response = browser.post("/workflows/new/", data)
    assert response.status_code == 400
    cards = response.context["formset"].forms
    assert "malformed SLO expression" in cards[0].errors["slo"][0]
    assert "malformed SLO expression" in cards[2].errors["slo"][0]
    assert response.context["general_errors"] == []


def test_the_check_button_says_a_valid_workflow_is_valid(browser: Client) -> None:
    checked = browser.post("/workflows/new/", post_data(*editor_for(MIXED), action="check"))
    assert checked.status_code == 200
    assert [str(m) for m in checked.context["messages"]] == [
        "the workflow is valid, and its models and files resolve on this server"
    ]
    assert not Workflow.objects.exists()


@pytest.mark.parametrize(
    ("changes", "fields"),
    [
        # Refused by the form field (the model's bound)...
        ({"cards-0-arrival_rate": "-1"}, {"cards-0-arrival_rate"}),
        # ... and by the engine.
        (
            {"cards-0-slo": "e2e<=banana", "cards-2-slo": "e2e<=banana", "cards-0-depend_on": ["again"]},
            {"cards-0-slo", "cards-2-slo", "cards-0-depend_on"},
        ),
    ],
)
def test_the_check_button_and_the_live_preview_answer_the_same_errors(
    browser: Client, changes: dict[str, Any], fields: set[str]
) -> None:
    data = {**post_data(*editor_for(MIXED), action="check"), **changes}
    checked = browser.post("/workflows/new/", data)
    previewed = browser.post("/workflows/preview/", data).json()
    assert checked.status_code == 400
    shown = {
        (form.add_prefix(name), message)
        for form in checked.context["formset"].forms
        for name, messages in form.errors.items()
        for message in messages
    }
    assert shown == {(e["field"], e["message"]) for e in previewed["errors"]}
    assert {field for field, _ in shown} == fields


def test_an_uploaded_yaml_file_is_imported_into_the_editor(browser: Client) -> None:
    from django.core.files.uploadedfile import SimpleUploadedFile

    upload = SimpleUploadedFile("mixed.yml", MIXED.encode(), content_type="application/x-yaml")
    response = browser.post("/workflows/new/", {"action": "import", "yaml_file": upload})
    assert response.status_code == 200
    assert [f["node"].value() for f in response.context["formset"].forms] == [
        "warm_node",
        "load_node",
        "again",
    ]
    assert 'data-node="again"' in response.context["svg"]


def test_a_bad_scheduler_parameter_is_shown_at_the_scheduler_parameters_field(browser: Client) -> None:
    response = browser.post("/workflows/new/", {"action": "import", "yaml_text": MIXED})
    meta, formset = response.context["meta"], response.context["formset"]
    data = post_data(meta, formset)
    data.update({"scheduler": "credit", "credit__pressure_threshold": "1.5"})
    refused = browser.post("/workflows/new/", data)
    assert refused.status_code == 400
    assert refused.context["meta"].errors["credit__pressure_threshold"] == [
        "must be < 1 (got 1.5; allowed: > 0 and < 1)"
    ]


def test_imagegen_attention_params_of_another_choice_are_shown_at_their_field(browser: Client) -> None:
    meta, formset = editor_for(
        "image: {type: ImageGen, model: sd-tiny@random, num_requests: 1, attention: math}\n"
        "workflows: {image: {uses: image}}\n"
    )
    data = post_data(meta, formset)
    assert data["cards-0-opt_ImageGen_attention"] == "math"
    data["cards-0-opt_ImageGen_attention_params"] = "{maxnreg: 128}"
    response = browser.post("/workflows/new/", data)
    assert response.status_code == 400
    errors = response.context["formset"].forms[0].errors["opt_ImageGen_attention_params"]
    assert "only attention: cbkernels takes parameters (this unit has attention: math)" in errors[0]
    assert not Workflow.objects.exists()


def test_restoring_a_workflow_whose_name_is_taken_again_says_why_on_its_page(
    browser: Client, alice: Any, make_workflow: Any
) -> None:
    old = make_workflow(alice, name="nightly")
    assert browser.post(f"/workflows/{old.pk}/archive/", {"archived": "1"}).status_code == 302
    new = make_workflow(alice, name="nightly")
    page = browser.post(f"/workflows/{old.pk}/archive/", {"archived": "0"}, follow=True)
    assert page.status_code == 200
    text = html.unescape(page.content.decode())
    assert f"not restored: you already have a workflow named 'nightly' (#{new.pk})" in text
    assert Workflow.objects.get(pk=old.pk).archived
