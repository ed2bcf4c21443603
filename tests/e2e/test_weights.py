"""The launch form's weights field in headless Chromium: a workflow naming a real model runs on its
random twin, and the run page says so. Screenshots go to test-artifacts/e2e/."""

from __future__ import annotations

from typing import Any

import pytest

from tests.e2e.conftest import ARTIFACTS, LiveApp, _manage, log_in, wait_for_result

pytestmark = pytest.mark.browser
RUN_TIMEOUT_MS = 120_000
CAPTIONS = "captions: {type: LiveCaptions, model: whisper-tiny.en, device: cpu, num_requests: 1}"


def test_the_launch_form_runs_random_twins_and_the_run_page_names_them(page: Any, live_app: LiveApp) -> None:
    create = (
        "from django.contrib.auth import get_user_model\n"
        "from cbweb.workflows.services import workflow_create\n"
        "owner = get_user_model().objects.get(username='e2e')\n"
        f"workflow_create(owner=owner, name='twins', yaml_text={CAPTIONS!r})\n"
    )
    _manage(live_app.env, "shell", "-c", create)
    log_in(page, live_app)
    page.goto(f"{live_app.url}/workflows/")
    page.get_by_role("link", name="twins").first.click()
    page.get_by_role("link", name="Launch a run").click()
    page.select_option("#id_weights", "random")
    page.screenshot(path=str(ARTIFACTS / "weights-launch.png"), full_page=True)
    with page.expect_navigation():
        page.locator("#launch").click()
    wait_for_result(page, RUN_TIMEOUT_MS)
    assert page.inner_text("#random-weights") == "random weights: whisper-tiny.en -> whisper-tiny@random"
    assert page.inner_text("#accelerators") == (
        "captions: cpu (transformers; auto: the model is a transformers Whisper)"
    )
    page.screenshot(path=str(ARTIFACTS / "weights-run.png"), full_page=True)
