"""The live run page in headless Chromium while a real run executes (the local executor): the latency
and telemetry charts grow with each poll, the nodes stand in DAG order with "served of requested", and
a run queued behind it says why it waits. Screenshots go to test-artifacts/e2e/."""

from __future__ import annotations

import re
import time
from typing import Any

import pytest

from benchmarks.platform import gpus
from tests.e2e.conftest import ARTIFACTS, LiveApp, log_in, wait_for_result

pytestmark = pytest.mark.browser

# "report" is written first but depends on "steady": the page must list steady first. "steady" spins
# on the CPU: a sleeping application's CPU % can read 0 in every sample so far, and a constant series
# is listed, not drawn (CI saw the per-application CPU panel missing for that reason).
SLOW = """\
report:
  type: Sleep
  sleep_time: 0.05
  num_requests: 2
  slo: ["e2e<=1s"]
steady:
  type: Synthetic
  steps: 1
  step_ms: 300
  num_requests: 40
  slo: ["e2e<=1s"]
workflows:
  report:
    uses: report
    depend_on: [steady]
  steady:
    uses: steady
"""


def _points(page: Any, panel: str) -> int:
    return int(page.locator(f'canvas[data-panel="{panel}"]').get_attribute("data-points") or 0)


def test_live_charts_grow_while_the_run_runs_and_a_queued_run_says_why_it_waits(
    page: Any, live_app: LiveApp
) -> None:
    log_in(page, live_app)
    token = page.evaluate("document.cookie.match(/csrftoken=([^;]+)/)[1]")
    created = page.request.post(
        f"{live_app.url}/api/v1/workflows/",
        data={"name": "live", "yaml": SLOW},
        headers={"X-CSRFToken": token, "Referer": live_app.url},
    )
    assert created.status == 201, created.text()
    workflow = created.json()["id"]

    def launch() -> str:
        page.goto(f"{live_app.url}/runs/launch/{workflow}/")
        # The local executor runs on this machine: without an NVIDIA GPU, no MPS scheduler is offered.
        offered = page.locator("#id_scheduler option:not([disabled])").evaluate_all(
            "os => os.map(o => o.value)"
        )
        assert offered == (
            ["greedy", "partition", "credit", "credit-mps"] if gpus() else ["greedy", "credit"]
        )
        with page.expect_navigation():
            page.locator("#launch").click()
        return page.url

    first = launch()
    second = launch()
    # The second run waits behind the first, and its page says so.
    page.goto(second)
    wait = page.locator("#wait-reason")
    wait.wait_for(state="visible")
    assert re.search(
        r"one at a time .*: 0 queued run\(s\) ahead of it \(users take turns\) and 1 running",
        wait.inner_text(),
    )
    page.screenshot(path=str(ARTIFACTS / "live-queued.png"))

    page.goto(first)
    page.wait_for_selector("#run-status.running")
    assert page.locator("#progress tbody tr").evaluate_all("rows => rows.map(r => r.dataset.node)") == [
        "steady",
        "report",
    ]
    page.wait_for_selector('canvas[data-panel="latency · steady"]', timeout=60_000)
    latency = 'canvas[data-panel="latency · steady"]'
    page.wait_for_function(
        f"() => Number(document.querySelector('{latency}').dataset.points) >= 3", timeout=30_000
    )
    before = _points(page, "latency · steady")
    telemetry_before = page.locator("#live-telemetry canvas").count()
    assert telemetry_before >= 1
    cpu_before = _points(page, "psutil · cpu_percent")
    time.sleep(4.5)  # two polls, a dozen requests
    after = _points(page, "latency · steady")
    assert after > before, (before, after)
    assert _points(page, "psutil · cpu_percent") > cpu_before
    # The machine's CPU % (of all cores) and the applications' (100 % = one core) are two panels with
    # two axes, as on the result page.
    machine = page.locator('canvas[data-panel="psutil · cpu_percent"]')
    apps = page.locator('canvas[data-panel="psutil · cpu_percent of each application"]')
    assert apps.count() == 1 and _points(page, "psutil · cpu_percent of each application") > 0
    axis = "c => Chart.getChart(c).options.scales.y.title.text"
    assert (machine.evaluate(axis), apps.evaluate(axis)) == ("CPU % of all cores", "CPU % (100 % = one core)")
    # A series constant so far is listed, not drawn (swap at 0 B, a fixed process count, ...), until
    # it changes: every drawn telemetry panel varies, and no listed one is drawn.
    varies = "c => new Set(Chart.getChart(c).data.datasets.flatMap(d => d.data.map(p => p.y))).size > 1"
    assert all(page.locator("#live-telemetry canvas").evaluate_all(f"cs => cs.map({varies})"))
    listed = page.locator("#live-constant li").evaluate_all("lis => lis.map(li => li.dataset.panel)")
    for key in listed:
        assert page.locator(f'#live-telemetry canvas[data-panel="{key}"]').count() == 0, key
    assert page.locator("#live-constant-box").is_visible() == bool(listed)
    assert all(re.search(r": .+ so far", t) for t in page.locator("#live-constant li").all_inner_texts())
    done = page.locator('#progress tr[data-node="steady"] td.done').inner_text()
    assert re.fullmatch(r"\d+ of 40", done), done
    page.screenshot(path=str(ARTIFACTS / "live-run.png"))
    # Once finished, the page reloads itself into the result.
    wait_for_result(page, 120_000)
    assert page.locator("#live-charts").count() == 0
