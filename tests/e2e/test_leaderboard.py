"""The leaderboard of one workflow and the platform comparison in headless Chromium, on runs executed for
real: three repetitions and one run under another scheduler on this machine (the local executor),
and two runs of the same workflow on a second machine. This checkout has one machine, so the second
one's runs are executed here by the same execution path a worker takes (``run_execute``), under the
fingerprint of another machine, as a worker there would register it. Screenshots go to
test-artifacts/e2e/."""

from __future__ import annotations

import re
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

import pytest

from tests.e2e.conftest import ARTIFACTS, ROOT, LiveApp, log_in, serve

pytestmark = pytest.mark.browser
RUN_TIMEOUT_S = 180

WORKFLOW = """\
nap:
  type: Sleep
  sleep_time: 0.05
  num_requests: 3
  slo: ["e2e<=1s"]
workflows:
  nap:
    uses: nap
"""

# Creates the two workflows and executes two runs of the first on "the other machine".
SECOND_MACHINE = f"""
from unittest import mock
from django.contrib.auth import get_user_model
from benchmarks import platform as engine_platform
from cbweb.runs.execution import run_execute
from cbweb.runs.services import run_create
from cbweb.workflows.selectors import version_latest
from cbweb.workflows.services import workflow_create

lab = get_user_model().objects.create_user(username="lab", password="lab-password-1")
board = workflow_create(owner=lab, name="board", yaml_text={WORKFLOW!r})
workflow_create(owner=lab, name="elsewhere", yaml_text={WORKFLOW!r})
here = engine_platform.fingerprint()
other = {{**here, "host": "m1-mini", "cpu": "Apple M1", "cpu_threads": 8, "ram_bytes": 16 * 2**30}}
other["id"] = "m1mini0000000001"
with mock.patch.object(engine_platform, "fingerprint", return_value=other):
    for run in run_create(version=version_latest(workflow=board), user=lab, repeats=2):
        assert run_execute(run_id=run.pk, worker="m1-mini:1") == "succeeded", run.pk
print(board.pk)
"""


@pytest.fixture(scope="module")
def board_app(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[LiveApp, int]]:
    tmp = tmp_path_factory.mktemp("board")
    with serve(tmp) as app:
        out = subprocess.run(
            [sys.executable, "manage.py", "shell", "-c", SECOND_MACHINE],
            cwd=ROOT,
            env=app.env,
            capture_output=True,
            text=True,
            timeout=240,
        )
        assert out.returncode == 0, out.stderr
        yield app, int(out.stdout.strip().splitlines()[-1])


def _launch(page: Any, app: LiveApp, workflow_id: int, repeats: int = 1, scheduler: str = "greedy") -> None:
    page.goto(f"{app.url}/runs/launch/{workflow_id}/")
    page.select_option("#id_scheduler", scheduler)
    page.fill("#id_repeats", str(repeats))
    with page.expect_navigation():
        page.locator("#launch").click()
    # Off the run's live page at once: it reloads itself when the run ends, which would interrupt a
    # later navigation of this page (CI saw "interrupted by another navigation").
    page.goto("about:blank")


def _wait_all_succeeded(page: Any, app: LiveApp, count: int) -> None:
    deadline = time.monotonic() + RUN_TIMEOUT_S
    while True:
        # Through the browser context's request API (its login cookie), not the page: the launched run's
        # live page reloads itself when the run ends, which would destroy a script evaluating in it.
        runs = page.request.get(f"{app.url}/api/v1/runs/?limit=100").json()["results"]
        if sum(r["status"] == "succeeded" for r in runs) >= count:
            return
        failed = [(r["id"], r["error"]) for r in runs if r["status"] in ("failed", "cancelled")]
        assert not failed and time.monotonic() < deadline, failed or "the runs did not finish in time"
        time.sleep(1)


def test_leaderboard_of_one_workflow_ranks_configurations_with_cis(page: Any, board_app: Any) -> None:
    app, board = board_app
    log_in(page, app)
    _launch(page, app, board, repeats=3)
    _launch(page, app, board, scheduler="credit")
    _launch(page, app, board + 1)  # "elsewhere": must not appear on board's leaderboard
    _wait_all_succeeded(page, app, 2 + 3 + 1 + 1)

    page.goto(f"{app.url}/leaderboard/")
    page.select_option("#id_workflow", str(board))
    with page.expect_navigation():
        page.get_by_role("button", name="Show").click()
    rows = page.locator("#leaderboard tbody tr")
    assert rows.count() == 3, rows.all_inner_texts()
    table = page.locator("#leaderboard").inner_text()
    by_config = {
        (r.get_attribute("data-platform"), r.get_attribute("data-scheduler")): r.inner_text()
        for r in rows.all()
    }
    here = [k for k in by_config if not k[0].startswith("m1-mini")]
    assert {s for _, s in here} == {"greedy", "credit"}
    greedy_here = by_config[next(k for k in here if k[1] == "greedy")]
    # Three Sleep runs far inside their SLO: every run attained 100 %, and the page says why the CI is flat.
    assert "100.0 % [100.0, 100.0]" in greedy_here and "all 3 runs equal" in greedy_here
    assert "n=2, no CI" in by_config[("m1-mini (Apple M1)", "greedy")]
    assert "n=1, no CI" in by_config[next(k for k in here if k[1] == "credit")]
    # Equal means: nothing is ranked apart, every row is a tie at rank 1.
    assert [c.strip() for c in page.locator("#leaderboard td.rank").all_inner_texts()] == ["1 tie"] * 3
    assert "not measured" in table  # no NVIDIA GPU here, so no GPU energy counter
    assert page.locator("#methodology").is_visible()
    page.screenshot(path=str(ARTIFACTS / "leaderboard.png"), full_page=True)

    # The workflow filter: the other workflow's board has its one run only.
    page.select_option("#id_workflow", str(board + 1))
    with page.expect_navigation():
        page.get_by_role("button", name="Show").click()
    assert page.locator("#leaderboard tbody tr").count() == 1

    # Filters and sorting: only the credit configuration; then sorted by makespan.
    page.goto(f"{app.url}/leaderboard/?workflow={board}&scheduler=credit")
    assert page.locator("#leaderboard tbody tr").count() == 1
    page.goto(f"{app.url}/leaderboard/?workflow={board}")
    page.locator('a.sort[data-sort="makespan"]').click()
    page.wait_for_url(re.compile(r"sort=makespan"))
    assert page.locator("a.sort.sorted").inner_text().startswith("Makespan")


def test_platform_comparison_of_one_workflow_on_two_machines(page: Any, board_app: Any) -> None:
    app, _ = board_app
    page.goto(f"{app.url}/platforms/")
    assert page.locator("#platforms tbody tr").count() == 2
    page.screenshot(path=str(ARTIFACTS / "platforms.png"))
    page.get_by_role("link", name=re.compile(r"m1-mini")).click()
    page.wait_for_selector("#hardware")
    assert "Apple M1" in page.locator("#hardware").inner_text()
    assert page.locator("#libraries tbody tr").count() > 3
    page.screenshot(path=str(ARTIFACTS / "platform.png"), full_page=True)
    # From the platform page to the comparison of its workflow with the other machines.
    page.get_by_role("link", name="compare with other platforms").click()
    page.wait_for_selector("#compare-form")
    for box in page.locator('input[name="platforms"]').all():
        box.check()
    page.fill("#id_scheduler", "greedy")
    with page.expect_navigation():
        page.get_by_role("button", name="Compare").click()
    header = page.locator("#platform-compare thead th")
    assert header.count() == 3
    text = page.locator("#platform-compare").inner_text()
    assert "m1-mini (Apple M1)" in text and "nap: e2e p50 / p99 (s)" in text
    assert "n=2, no CI" in text and "all 3 runs equal" in text
    page.screenshot(path=str(ARTIFACTS / "platform-compare.png"), full_page=True)
