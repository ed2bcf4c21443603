"""The DAG editor in headless Chromium: fields derived from the spec model, and the live preview
putting the engine's errors next to the fields they concern while one types."""

from __future__ import annotations

from typing import Any

import pytest

from benchmarks.models import cache_dir
from tests.e2e.conftest import ARTIFACTS, LiveApp, log_in

pytestmark = pytest.mark.browser


def errors_of(page: Any, field: str) -> str:
    return str(page.locator(f'ul.errorlist[data-errors-for="{field}"]').inner_text())


def test_the_live_preview_shows_engine_errors_next_to_their_fields(page: Any, live_app: LiveApp) -> None:
    log_in(page, live_app)
    page.goto(f"{live_app.url}/workflows/new/")
    page.fill("#id_name", "editor")
    page.fill("#id_cards-0-node", "clock")
    page.select_option("#id_cards-0-type", "Sleep")
    # An open-loop arrival without its rate: the model's rule, shown on the arrival kind.
    page.select_option("#id_cards-0-arrival_kind", "poisson")
    page.wait_for_function(
        "document.querySelector('ul[data-errors-for=\"cards-0-arrival_kind\"]').textContent.includes('rate')"
    )
    page.fill("#id_cards-0-slo", "e2e<=banana")
    page.wait_for_function(
        "document.querySelector('ul[data-errors-for=\"cards-0-slo\"]').textContent.includes('malformed')"
    )
    # A bound of the model (concurrency <= 64) is the field's own maximum.
    assert page.get_attribute("#id_cards-0-concurrency", "max") == "64"
    page.screenshot(path=str(ARTIFACTS / "editor-errors.png"))

    page.fill("#id_cards-0-arrival_rate", "2")
    page.fill("#id_cards-0-slo", "e2e<=1s")
    page.wait_for_function("document.querySelectorAll('#editor-form ul.errorlist li').length === 0")
    assert errors_of(page, "cards-0-arrival_kind") == errors_of(page, "cards-0-slo") == ""
    page.wait_for_selector('#dag-preview svg g[data-node="clock"]')
    with page.expect_navigation():
        page.locator("#save").click()
    assert page.locator("h1").inner_text().startswith("editor")
    assert "kind: poisson" in page.content() and "rate: 2" in page.content()


def _new_editor(page: Any, app: LiveApp, name: str) -> None:
    page.goto(f"{app.url}/workflows/new/")
    page.fill("#id_name", name)


def _add_card(page: Any, node: str, app_type: str = "Sleep") -> int:
    index = page.locator("[data-card]").count()
    page.locator("#add-card").click()
    page.fill(f"#id_cards-{index}-node", node)
    page.select_option(f"#id_cards-{index}-type", app_type)
    return index


def _options(page: Any, select: str) -> list[str]:
    return list(page.eval_on_selector_all(f"{select} option", "os => os.map(o => o.value)"))


def test_a_fresh_editor_shows_no_errors_before_anything_is_typed(page: Any, live_app: LiveApp) -> None:
    log_in(page, live_app)
    page.goto(f"{live_app.url}/workflows/new/")
    # The page previews once on load; the workflow has no name yet, which is unfinished, not wrong.
    page.wait_for_function("Number(document.getElementById('editor-form').dataset.previewed || 0) >= 1")
    assert page.locator("#editor-form ul.errorlist li").count() == 0
    assert page.locator("#preview-errors li").count() == 0
    # The DAG of the first card is drawn although the workflow has no name yet.
    page.wait_for_selector('#dag-preview svg g[data-node="app1"]')
    page.screenshot(path=str(ARTIFACTS / "editor-fresh.png"))
    # Once the name has been typed and cleared, "required" is shown where it belongs.
    page.fill("#id_name", "x")
    page.fill("#id_name", "")
    page.wait_for_function(
        "document.querySelector('ul[data-errors-for=\"name\"]').textContent.includes('required')"
    )


def test_the_model_server_fields_show_only_on_the_cards_of_types_that_can_be_its_clients(
    page: Any, live_app: LiveApp
) -> None:
    log_in(page, live_app)
    page.goto(f"{live_app.url}/workflows/new/")
    server = page.locator('.field[data-field="cards-0-server"]')
    client_model = page.locator('.field[data-field="cards-0-client_model"]')
    for kind, shown in (("ImageGen", False), ("Chatbot", True), ("LLMServer", False), ("DeepResearch", True)):
        page.select_option("#id_cards-0-type", kind)
        assert (server.is_visible(), client_model.is_visible()) == (shown, shown), kind
    page.locator("[data-card]").first.screenshot(path=str(ARTIFACTS / "editor-client-card.png"))


def test_renaming_a_node_keeps_the_edges_that_depend_on_it(page: Any, live_app: LiveApp) -> None:
    log_in(page, live_app)
    _new_editor(page, live_app, "rename-keeps-edges")
    page.fill("#id_cards-0-node", "first")
    page.select_option("#id_cards-0-type", "Sleep")
    second = _add_card(page, "second")
    page.select_option(f"#id_cards-{second}-depend_on", ["first"])
    # A card never offers its own name as a dependency.
    assert "first" not in _options(page, "#id_cards-0-depend_on")
    assert "second" not in _options(page, f"#id_cards-{second}-depend_on")

    page.fill("#id_cards-0-node", "start")
    assert _options(page, f"#id_cards-{second}-depend_on") == ["start"]
    chosen = page.eval_on_selector(
        f"#id_cards-{second}-depend_on", "s => [...s.selectedOptions].map(o => o.value)"
    )
    assert chosen == ["start"]
    page.wait_for_selector('#dag-preview svg g[data-node="start"]')
    page.wait_for_function("document.querySelectorAll('#dag-preview svg path.edge').length === 1")
    page.screenshot(path=str(ARTIFACTS / "editor-renamed.png"))
    with page.expect_navigation():
        page.locator("#save").click()
    yaml_text = page.locator("pre.yaml").inner_text()
    assert "second:" in yaml_text and "depend_on:\n    - start" in yaml_text, yaml_text
    assert "first" not in yaml_text


def test_a_cycle_is_drawn_with_both_edges_and_every_box_inside_the_preview(
    page: Any, live_app: LiveApp
) -> None:
    log_in(page, live_app)
    _new_editor(page, live_app, "cycle")
    page.fill("#id_cards-0-node", "a")
    page.select_option("#id_cards-0-type", "Sleep")
    b = _add_card(page, "b")
    page.select_option(f"#id_cards-{b}-depend_on", ["a"])
    page.select_option("#id_cards-0-depend_on", ["b"])
    page.wait_for_function("document.getElementById('editor-form').textContent.includes('cycle')")
    page.wait_for_function("document.querySelectorAll('#dag-preview svg path.edge').length === 2")
    page.locator(".editor").screenshot(path=str(ARTIFACTS / "editor-cycle.png"))
    # The edge that closes the cycle is marked and does not run through the boxes.
    assert page.locator("#dag-preview svg path.edge.back").count() == 1
    svg = page.locator("#dag-preview svg").bounding_box()
    box = page.locator("#dag-preview").bounding_box()
    for rect in page.locator("#dag-preview svg rect").all():
        r = rect.bounding_box()
        assert svg["x"] <= r["x"] and r["x"] + r["width"] <= svg["x"] + svg["width"] + 0.5
        assert box["x"] <= r["x"] and r["x"] + r["width"] <= box["x"] + box["width"] + 0.5
        assert svg["y"] <= r["y"] and r["y"] + r["height"] <= svg["y"] + svg["height"] + 0.5


def test_scheduler_parameters_are_fields_of_the_chosen_scheduler(page: Any, live_app: LiveApp) -> None:
    log_in(page, live_app)
    _new_editor(page, live_app, "credit-params")
    page.fill("#id_cards-0-node", "clock")
    page.select_option("#id_cards-0-type", "Sleep")
    assert page.locator("#no-scheduler-params").is_visible()  # greedy takes none
    page.select_option("#id_scheduler", "credit")
    assert page.locator("#id_credit__pressure_threshold").is_visible()
    assert not page.locator("#no-scheduler-params").is_visible()
    # Only the chosen scheduler's parameters are shown.
    others = page.locator('#scheduler-params [data-scheduler]:not([data-scheduler="credit"])')
    assert others.count() > 0 and not any(f.is_visible() for f in others.all())
    # A value out of the parameter's range is refused at its field (its bound from the Params model).
    page.fill("#id_credit__pressure_threshold", "1.5")
    page.wait_for_function(
        "document.querySelector('ul[data-errors-for=\"credit__pressure_threshold\"]')"
        ".textContent.includes('must be < 1')"
    )
    page.locator("#editor-form fieldset.meta").screenshot(path=str(ARTIFACTS / "editor-scheduler-params.png"))
    page.fill("#id_credit__pressure_threshold", "0.4")
    page.wait_for_function("document.querySelectorAll('#editor-form ul.errorlist li').length === 0")
    with page.expect_navigation():
        page.locator("#save").click()
    yaml_text = page.locator("pre.yaml").inner_text()
    assert "name: credit" in yaml_text and "pressure_threshold: 0.4" in yaml_text, yaml_text


def test_check_reports_a_model_that_does_not_resolve_here(page: Any, live_app: LiveApp) -> None:
    log_in(page, live_app)
    _new_editor(page, live_app, "missing-model")
    page.fill("#id_cards-0-node", "chat")
    page.select_option("#id_cards-0-type", "Chatbot")
    # A file in an allowed model folder (the model cache) that is not there: the file policy lets it
    # through, the model resolver does not.
    missing = f"{cache_dir()}/no-such-model.gguf"
    page.fill("#id_cards-0-model", missing)
    with page.expect_navigation():
        page.get_by_role("button", name="Check").click()
    shown = errors_of(page, "cards-0")
    # The CLI's words (`consumerbench validate --check-files`, `run`), from the engine's resolver.
    assert f"model '{missing}' is not a catalogue name" in shown, shown
    assert f"looked for {missing}" in shown, shown
    page.locator("[data-card]").first.screenshot(path=str(ARTIFACTS / "editor-missing-model.png"))


def test_the_version_list_links_a_diff_of_each_version_with_the_one_before(
    page: Any, live_app: LiveApp
) -> None:
    log_in(page, live_app)
    _new_editor(page, live_app, "diffed")
    page.fill("#id_cards-0-node", "first")
    page.select_option("#id_cards-0-type", "Sleep")
    second = _add_card(page, "second")
    page.select_option(f"#id_cards-{second}-depend_on", ["first"])
    with page.expect_navigation():
        page.locator("#save").click()
    with page.expect_navigation():
        page.get_by_role("link", name="Edit").click()
    page.fill("#id_cards-0-node", "start")
    page.fill("#id_cards-1-opt_Sleep_sleep_time", "0.5")
    with page.expect_navigation():
        page.locator("#save").click()
    with page.expect_navigation():
        page.get_by_role("link", name="changes from v1").click()
    rows = page.locator("#diff-changes tbody tr").all_inner_texts()
    assert any("node 'second'" in r and "depend_on" in r and "[first]" in r and "[start]" in r for r in rows)
    assert any("unit 'second'" in r and "sleep_time" in r and "0.5" in r for r in rows), rows
    assert page.locator("#diff-unified .add").count() > 0 and page.locator("#diff-unified .del").count() > 0
    page.screenshot(path=str(ARTIFACTS / "workflow-diff.png"), full_page=True)
