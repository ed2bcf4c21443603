"""The main user journey in headless Chromium: log in, build a two-application workflow in the editor,
launch a run, watch it finish, read the result page with its charts, compare two runs.
Screenshots of the main pages go to test-artifacts/e2e/."""

from __future__ import annotations

import re
from typing import Any

import pytest

from tests.e2e.conftest import ARTIFACTS, LiveApp, log_in, wait_for_result

pytestmark = pytest.mark.browser
RUN_TIMEOUT_MS = 90_000

# Counts the pixels a chart drew (alpha > 0); an empty canvas has none.
PAINTED = """(id) => {
  const c = document.getElementById(id);
  if (!c) return -1;
  const d = c.getContext("2d").getImageData(0, 0, c.width, c.height).data;
  let n = 0;
  for (let i = 3; i < d.length; i += 4) if (d[i] > 0) n++;
  return n;
}"""


def _launch_and_wait(page: Any, live_app: LiveApp, workflow_url: str) -> str:
    page.goto(workflow_url)
    page.get_by_role("link", name="Launch a run").click()
    with page.expect_navigation():
        page.locator("#launch").click()
    run_url = page.url
    # The run page polls and reloads itself when the run finishes.
    wait_for_result(page, RUN_TIMEOUT_MS)
    return run_url


def test_build_launch_watch_read_and_compare(page: Any, live_app: LiveApp) -> None:
    log_in(page, live_app)

    # Build a two-application workflow in the editor.
    page.goto(f"{live_app.url}/workflows/new/")
    page.fill("#id_name", "journey")
    page.fill("#id_cards-0-node", "warmup")
    page.select_option("#id_cards-0-type", "Sleep")
    page.fill("#id_cards-0-num_requests", "3")
    page.fill("#id_cards-0-slo", "e2e<=1s")
    page.fill("#id_cards-0-opt_Sleep_sleep_time", "0.2")
    page.locator("#add-card").click()
    page.fill("#id_cards-1-node", "spin")
    page.locator("#id_cards-1-node").dispatch_event("change")
    page.select_option("#id_cards-1-type", "Synthetic")
    assert page.locator('#cards [data-card]:nth-child(2) fieldset[data-app-type="Synthetic"]').is_visible()
    assert not page.locator('#cards [data-card]:nth-child(2) fieldset[data-app-type="Sleep"]').is_visible()
    page.fill("#id_cards-1-num_requests", "4")
    page.fill("#id_cards-1-slo", "step<=1s")
    page.fill("#id_cards-1-opt_Synthetic_steps", "3")
    page.select_option("#id_cards-1-depend_on", ["warmup"])
    # The live preview draws both nodes and the dependency edge.
    page.wait_for_selector('#dag-preview svg g[data-node="spin"]')
    page.wait_for_function("document.querySelectorAll('#dag-preview svg path.edge').length === 1")
    # Not full_page: in headless Chromium a full-page capture leaves the next click without effect.
    page.screenshot(path=str(ARTIFACTS / "1-editor.png"))
    with page.expect_navigation():
        page.locator("#save").click()
    if not re.search(r"/workflows/\d+/$", page.url):
        shown = page.locator("ul.errorlist li").all_inner_texts()
        pytest.fail(f"saving the workflow failed: {shown}")
    assert page.locator("h1").inner_text().startswith("journey")
    workflow_url = page.url
    page.screenshot(path=str(ARTIFACTS / "2-workflow.png"))

    # Launch a run, see it finish, read the result page with its charts drawn.
    first = _launch_and_wait(page, live_app, workflow_url)
    page.wait_for_selector("#slo-table")
    attained = page.locator("#slo-table td.attainment").all_inner_texts()
    assert [a.split(" [")[0] for a in attained] == ["100 %", "100 %"]
    page.wait_for_selector("#telemetry-charts canvas")
    for canvas in ("gantt-chart", "latency-0", "latency-1", "telemetry-0"):
        assert page.evaluate(PAINTED, canvas) > 500, f"chart {canvas} is empty"
    page.screenshot(path=str(ARTIFACTS / "3-result.png"), full_page=True)

    # A second run, then compare the two.
    second = _launch_and_wait(page, live_app, workflow_url)
    page.goto(f"{live_app.url}/runs/")
    for url in (first, second):
        run_id = url.rstrip("/").rsplit("/", 1)[-1]
        page.check(f'input[name="runs"][value="{run_id}"]')
    with page.expect_navigation():
        page.locator("#compare").click()
    page.wait_for_selector("#cdf-charts canvas")
    assert page.locator("#compare-table thead th").count() == 3
    assert page.evaluate(PAINTED, "cdf-0") > 500
    assert page.evaluate(PAINTED, "telemetry-0") > 500
    page.screenshot(path=str(ARTIFACTS / "4-compare.png"), full_page=True)
