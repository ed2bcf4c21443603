"""A partial run in headless Chromium: its page says what it served of what was asked, and labels each
SLO attainment "of requested" with a link to the definition. Screenshot in test-artifacts/e2e/."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import pytest

from tests.e2e.conftest import ARTIFACTS, ROOT, LiveApp, log_in

pytestmark = pytest.mark.browser

PARTIAL = (
    "chat: {type: Sleep, sleep_time: 0.01, num_requests: 2, slo: ['e2e<=1s']}\n"
    "crash: {type: Synthetic, steps: 1, step_ms: 1, num_requests: 4, fail_at_request: 1, "
    "slo: ['step<=1s']}\n"
)


def test_a_partial_runs_page_labels_its_attainment_of_requested(page: Any, live_app: LiveApp) -> None:
    pk = subprocess.run(
        [sys.executable, "manage.py", "shell", "--no-imports", "-c",
         "from django.contrib.auth import get_user_model\n"
         "from cbweb.workflows.services import workflow_create\n"
         "owner = get_user_model().objects.get(username='e2e')\n"
         f"print(workflow_create(owner=owner, name='partial', yaml_text={PARTIAL!r}).pk)"],
        cwd=ROOT, env=live_app.env, check=True, capture_output=True, text=True, timeout=120,
    ).stdout.strip()  # fmt: skip
    log_in(page, live_app)
    page.goto(f"{live_app.url}/runs/launch/{pk}/")
    with page.expect_navigation():
        page.locator("#launch").click()
    page.wait_for_selector("#run-status.failed", timeout=90_000)
    page.wait_for_selector("#slo-table")
    assert page.locator("#run-partial").inner_text() == "partial: served 3 of 6 requests"
    assert page.locator("#mean-attainment").inner_text() == "62 % of requested"
    cells = page.locator("#slo-table td.attainment").all_inner_texts()
    # Each with its interval over the requests asked for (a never-served one is a miss).
    assert [c.split(" [")[0] for c in cells] == ["100 %", "25 %"]
    assert all(c.endswith(" %] of requested") for c in cells)
    label = page.locator("#mean-attainment a.of-requested")
    assert label.get_attribute("href") == "/docs/metrics/" and "partial" in (
        label.get_attribute("title") or ""
    )
    page.screenshot(path=str(ARTIFACTS / "partial-run.png"))
    run = page.url.rstrip("/").rsplit("/", 1)[-1]
    page.goto(f"{live_app.url}/runs/")
    row = page.locator(f'tr[data-run="{run}"]').inner_text()
    assert "partial: served 3 of 6 · 62 % of requested" in row
