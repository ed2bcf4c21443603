"""The DAG editor in headless Chromium: fields derived from the spec model, and the live preview
putting the engine's errors next to the fields they concern while one types."""

from __future__ import annotations

from typing import Any

import pytest

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
