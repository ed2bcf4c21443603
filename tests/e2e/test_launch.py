"""The launch form in headless Chromium: a scheduler parameter's error is shown under that parameter
(not under the field before it) and states the parameter's bound as the scheduler's model does."""

from __future__ import annotations

import re
from typing import Any

import pytest

from tests.e2e.conftest import ARTIFACTS, LiveApp, log_in

pytestmark = pytest.mark.browser


def _workflow(page: Any, live_app: LiveApp) -> str:
    page.goto(f"{live_app.url}/workflows/new/")
    page.fill("#id_name", "launch-form")
    page.fill("#id_cards-0-node", "nap")
    page.select_option("#id_cards-0-type", "Sleep")
    with page.expect_navigation():
        page.locator("#save").click()
    assert re.search(r"/workflows/\d+/$", page.url), page.locator("ul.errorlist li").all_inner_texts()
    return str(page.url)


def _box(page: Any, selector: str) -> dict[str, float]:
    box = page.locator(selector).bounding_box()
    assert box is not None, f"{selector} is not shown"
    return dict(box)


def test_a_parameter_error_is_shown_under_its_own_field_with_its_bound(page: Any, live_app: LiveApp) -> None:
    log_in(page, live_app)
    page.goto(_workflow(page, live_app))
    page.get_by_role("link", name="Launch a run").click()
    page.select_option("#id_scheduler", "credit")
    # 0 passes the browser's check (min=0) but not the model's: max_wait_s must be > 0.
    page.fill("#id_credit__max_wait_s", "0")
    with page.expect_navigation():
        page.locator("#launch").click()
    errors = 'ul.errorlist[data-errors-for="credit__max_wait_s"]'
    assert page.locator(errors).inner_text() == "must be > 0 (got 0.0; allowed: > 0 and <= 3600)"
    # Under the parameter's own input, above the next parameter; nothing under Repeats.
    field, below = _box(page, "#id_credit__max_wait_s"), _box(page, "#id_credit__initial_pressure")
    shown = _box(page, errors)
    assert field["y"] + field["height"] <= shown["y"] < below["y"]
    assert page.locator('ul.errorlist[data-errors-for="repeats"]').inner_text() == ""
    assert page.locator('.field.error[data-field="credit__max_wait_s"]').is_visible()
    assert page.locator("#id_scheduler").input_value() == "credit"
    page.locator('[data-field="credit__max_wait_s"]').scroll_into_view_if_needed()
    page.screenshot(path=str(ARTIFACTS / "launch-parameter-error.png"))

    # A value the browser would refuse, sent anyway (a hostile or script-less client): the server
    # states the strict bound as strict, > 0, never >= 0.
    page.fill("#id_credit__max_wait_s", "")
    page.fill("#id_credit__pressure_threshold", "-1")
    page.evaluate("document.getElementById('launch-form').noValidate = true")
    with page.expect_navigation():
        page.locator("#launch").click()
    threshold = page.locator('ul.errorlist[data-errors-for="credit__pressure_threshold"]').inner_text()
    assert threshold == "must be > 0 (got -1.0; allowed: > 0 and < 1)"
    assert page.locator('ul.errorlist[data-errors-for="credit__max_wait_s"]').inner_text() == ""
    # The other schedulers' parameters stay hidden, their (empty) error lists with them.
    assert not page.locator('[data-field="partition__memory_limit"]').is_visible()
