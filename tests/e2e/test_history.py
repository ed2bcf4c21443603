"""The history page in headless Chromium: a workflow's runs submitted as CI submits them, a slower
version marked as a regression, repeated runs with CIs, the time/commit toggle."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from benchmarks.client import Client
from tests.e2e.conftest import ARTIFACTS, LiveApp, log_in
from tests.e2e.test_submit import _submit, _token

WF = "name: history-nap\nnap:\n  type: Sleep\n  sleep_time: {t}\n  num_requests: 8\n  slo: ['e2e<=1s']\n"


def _wait(api: Client, run_ids: list[int]) -> None:
    deadline = time.monotonic() + 120
    while any(api.run(i)["status"] in ("queued", "running") for i in run_ids):
        assert time.monotonic() < deadline, "the runs did not finish"
        time.sleep(0.3)


def test_history_marks_a_regression_and_toggles_to_commits(
    page: Any, live_app: LiveApp, tmp_path: Path
) -> None:
    wf = tmp_path / "history.yml"
    wf.write_text(WF.format(t=0.05))
    first = _submit(live_app, wf, "--wait", "--meta", "commit=aaaa1111")
    assert first.returncode == 0, first.stdout + first.stderr
    api = Client(live_app.url, _token(live_app))
    workflow = api.submit_workflow(wf.read_text(), None, "x")["id"]
    # Two repetitions of the same commit: one point with a mean and a CI.
    queued = api.create_run(workflow, None, None, meta={"commit": "aaaa1111"})
    again = api.request("POST", "/runs/", {"workflow": workflow, "repeats": 2, "commit": "aaaa1111"})
    _wait(api, [queued["id"], *again["ids"]])
    wf.write_text(WF.format(t=0.15))  # three times slower: a regression against the run before
    slow = _submit(live_app, wf, "--wait", "--meta", "commit=bbbb2222")
    assert slow.returncode == 0, slow.stdout + slow.stderr
    slow_run = int(next(x for x in slow.stdout.splitlines() if x.startswith("run ")).split()[1])

    log_in(page, live_app)
    page.goto(f"{live_app.url}/workflows/{workflow}/")
    page.click("#history-link")
    page.wait_for_selector("#history-table")
    rows = page.locator("#history-table tbody tr")
    assert rows.count() == 4  # time order: one point per launch (the two repetitions are one)
    last = rows.nth(3)
    assert "regressed" in (last.get_attribute("class") or "")
    assert "▲ nap e2e 2.9" in last.inner_text() or "▲ nap e2e 3.0" in last.inner_text()
    assert f"#{slow_run} vs #{again['ids'][-1]}" in last.inner_text()
    assert rows.nth(2).locator("small", has_text="n=2").count() >= 1  # a CI over the two repetitions
    assert "▲" not in rows.nth(1).inner_text()
    # Charts: attainment and key latencies drawn (pixels, not only canvases).
    page.wait_for_function(
        "() => [...document.querySelectorAll('#history-charts canvas')].every((c) => c.width > 0)"
    )
    assert page.locator("#history-charts canvas").count() == 2
    assert page.evaluate("Chart.getChart('history-latency-0').data.datasets.some((d) => "
                         "Array.isArray(d.pointStyle) && d.pointStyle.at(-1) === 'triangle')")  # fmt: skip
    page.screenshot(path=str(ARTIFACTS / "history-time.png"), full_page=True)

    page.click("#history-order >> text=commit")
    page.wait_for_url("**order=commit")
    rows = page.locator("#history-table tbody tr")
    assert rows.count() == 2
    assert rows.nth(0).inner_text().startswith("aaaa1111") and "(n=4)" in rows.nth(0).inner_text()
    assert "▲ nap e2e" in rows.nth(1).inner_text()
    page.screenshot(path=str(ARTIFACTS / "history-commit.png"), full_page=True)


def test_run_metadata_from_the_launch_form_on_the_run_page_and_in_the_runs_list(
    page: Any, live_app: LiveApp, tmp_path: Path
) -> None:
    api = Client(live_app.url, _token(live_app))
    workflow = api.submit_workflow(WF.format(t=0.01), "meta-nap", "x")["id"]
    log_in(page, live_app)
    page.goto(f"{live_app.url}/runs/launch/{workflow}/")
    page.fill("#id_commit", "C0FFEE12")
    page.fill("#id_branch", "feature/gate")
    page.fill("#id_ci_url", "https://ci.example.org/jobs/42")
    page.fill("#id_tags", "nightly, driver-550")
    page.fill("#id_notes", "after the <driver> update")
    page.screenshot(path=str(ARTIFACTS / "launch-metadata.png"), full_page=True)
    page.click("#launch")
    page.wait_for_selector("#run-commit")
    assert page.inner_text("#run-commit").startswith("c0ffee12")
    assert page.inner_text("#run-branch") == "feature/gate"
    assert page.get_attribute("#run-ci-url a", "href") == "https://ci.example.org/jobs/42"
    assert page.inner_text("#run-tags").split() == ["nightly", "driver-550"]
    assert page.inner_text("#run-notes") == "after the <driver> update"
    page.screenshot(path=str(ARTIFACTS / "run-metadata.png"))
    page.click("#run-tags >> text=driver-550")  # a tag links to the runs that carry it
    page.wait_for_url("**/runs/?tag=driver-550")
    assert page.locator("table.runs tbody tr").count() == 1
    page.fill("input[name=search]", "DRIVER")
    page.click("form.toolbar button[type=submit] >> nth=0")
    page.wait_for_url("**search=DRIVER**")
    assert "c0ffee12" in page.inner_text("table.runs")
    page.screenshot(path=str(ARTIFACTS / "runs-search.png"))
