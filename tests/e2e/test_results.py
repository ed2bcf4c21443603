"""The finished run's result page and the compare page in headless Chromium: units on charts and
tables, no charts that carry no information, why GPU figures are missing, the bundle download,
and what compare says about runs of different workflows."""

from __future__ import annotations

import re
import zipfile
from collections.abc import Iterator
from typing import Any

import pytest

from tests.e2e.conftest import ARTIFACTS, LiveApp, log_in, wait_for_result

pytestmark = pytest.mark.browser
RUN_TIMEOUT_MS = 90_000

# A Sleep application with an SLO, then a CPU-spinning Synthetic one (SLO on its steps, so its
# requests record two latency metrics: step and e2e), and a Sleep without SLOs.
MIXED = """\
name: results
tick:
  type: Sleep
  sleep_time: 0.1
  num_requests: 3
  slo: ["e2e<=1s"]
spin:
  type: Synthetic
  steps: 3
  step_ms: 20
  num_requests: 4
  slo: ["step<=1s"]
idle:
  type: Sleep
  sleep_time: 0.05
  num_requests: 2
  slo: []
workflows:
  tick: {uses: tick}
  spin: {uses: spin, depend_on: [tick]}
  idle: {uses: idle}
"""
OTHER = """\
name: other
tick:
  type: Sleep
  sleep_time: 0.1
  num_requests: 3
  slo: ["e2e<=1s"]
workflows:
  tick: {uses: tick}
"""

# A Sleep of 0.1 s under an SLO of 0.11 s: met on an idle machine, never at 0.8x or 0.9x the threshold
# (0.088 s, 0.099 s), so its attainment curve shows the knife edge.
EDGE = """\
name: edge
tick:
  type: Sleep
  sleep_time: 0.1
  num_requests: 4
  slo: ["e2e<=0.11s"]
workflows:
  tick: {uses: tick}
"""


def _save(page: Any, app: LiveApp, yaml_text: str) -> str:
    page.goto(f"{app.url}/workflows/new/")
    page.fill('textarea[name="yaml_text"]', yaml_text)
    with page.expect_navigation():
        page.get_by_role("button", name="Import into the editor").click()
    with page.expect_navigation():
        page.locator("#save").click()
    assert re.search(r"/workflows/\d+/$", page.url), page.url
    return str(page.url)


def _run(page: Any, workflow_url: str) -> str:
    page.goto(workflow_url)
    page.get_by_role("link", name="Launch a run").click()
    with page.expect_navigation():
        page.locator("#launch").click()
    run_url = page.url
    wait_for_result(page, RUN_TIMEOUT_MS)
    return str(run_url)


@pytest.fixture(scope="module")
def runs(page: Any, live_app: LiveApp) -> Iterator[dict[str, str]]:
    log_in(page, live_app)
    mixed = _save(page, live_app, MIXED)
    other = _save(page, live_app, OTHER)
    yield {"first": _run(page, mixed), "second": _run(page, mixed), "other": _run(page, other)}


def _id(url: str) -> str:
    return url.rstrip("/").rsplit("/", 1)[-1]


# The y axis of the chart in the panel titled ``title``: its title and how it labels ``value``.
AXIS = """([title, value]) => {
  const box = [...document.querySelectorAll("#telemetry-charts .chart")]
    .find((b) => b.querySelector("h3").textContent === title);
  if (!box) return null;
  const y = Chart.getChart(box.querySelector("canvas")).options.scales.y;
  return { title: y.title.text, tick: y.ticks.callback(value) };
}"""
# Every drawn telemetry chart: its title and whether all its values are one number.
FLAT = """() => [...document.querySelectorAll("#telemetry-charts canvas")].map((c) => {
  const values = Chart.getChart(c).data.datasets.flatMap((d) => d.data.map((p) => p.y));
  return [c.getAttribute("aria-label"), Math.min(...values) === Math.max(...values)];
})"""


def test_the_result_page_gives_units_and_draws_only_charts_that_carry_information(
    page: Any, live_app: LiveApp, runs: dict[str, str]
) -> None:
    page.goto(runs["first"])
    page.wait_for_selector("#telemetry-charts canvas")
    page.screenshot(path=str(ARTIFACTS / "result-page.png"), full_page=True)
    memory = page.evaluate(AXIS, ["psutil · mem_used_bytes", 3 * 2**30])
    assert memory == {"title": "memory", "tick": "3.000 GiB"}
    assert page.evaluate(AXIS, ["psutil · rss_bytes", 50 * 2**20])["tick"] == "50.00 MiB"
    per_core = page.evaluate(AXIS, ["psutil · cpu_percent of each application", 130])
    assert per_core == {"title": "CPU % (100 % = one core)", "tick": "130 %"}
    # The machine's CPU % is charted on its own axis, or listed as constant when a loaded machine sat
    # at 100 % throughout the run.
    machine = page.evaluate(AXIS, ["psutil · cpu_percent", 50])
    constant = page.locator("#telemetry-constant").inner_text()
    assert (machine or {}).get("title") == "CPU % of all cores" or "psutil · cpu_percent:" in constant
    # A chart of one constant says nothing: it is a line of text instead.
    assert [title for title, flat in page.evaluate(FLAT) if flat] == []
    constant = page.locator("#telemetry-constant").inner_text()
    assert "psutil · processes: 1 throughout the run" in constant
    if page.evaluate(AXIS, ["psutil · swap_used_bytes", 0]) is None:
        assert "psutil · swap_used_bytes: 0 B throughout the run: no swap used" in constant
    table = page.locator("#telemetry-table").inner_text()
    assert "MiB" in table and "MB" not in table.replace("MiB", "")
    assert "CPU % (mean; 100 % = one core)" in table


def test_missing_gpu_figures_say_why(page: Any, live_app: LiveApp, runs: dict[str, str]) -> None:
    page.goto(runs["first"])
    sources = page.evaluate(
        "(url) => fetch(url).then((r) => r.json()).then((d) => d.telemetry.sources)",
        f"{runs['first']}result.json",
    )
    if sources["nvml"]["status"] == "available":
        pytest.skip("this machine has a GPU: no GPU figure is missing")
    why = page.locator("#telemetry-unavailable").inner_text()
    assert f"GPU energy: nvml: {sources['nvml']['reason']}" in why
    assert "SM occupancy: gpm: " in why and "dcgm: " in why
    page.locator("#telemetry-table").screenshot(path=str(ARTIFACTS / "result-telemetry-table.png"))


def test_the_owner_downloads_the_bundle_in_one_click(
    page: Any, live_app: LiveApp, runs: dict[str, str]
) -> None:
    page.goto(runs["first"])
    with page.expect_download() as download:
        page.locator("#download-bundle").click()
    path = download.value.path()
    names = zipfile.ZipFile(path).namelist()
    run_id = _id(runs["first"])
    assert download.value.suggested_filename == f"run-{run_id}-bundle.zip"
    assert f"run-{run_id}/result.json" in names and f"run-{run_id}/telemetry/psutil.csv" in names


def test_compare_warns_about_different_workflows_and_draws_every_latency_metric(
    page: Any, live_app: LiveApp, runs: dict[str, str]
) -> None:
    ids = [_id(runs[k]) for k in ("first", "second", "other")]
    page.goto(f"{live_app.url}/runs/compare/?" + "&".join(f"runs={i}" for i in ids))
    page.wait_for_selector("#cdf-charts canvas")
    warning = page.locator("#compare-warning").inner_text()
    assert "different workflows" in warning and "results" in warning and "other" in warning
    titles = page.locator("#cdf-charts h3").all_inner_texts()
    assert {"spin · step CDF", "spin · e2e CDF", "tick · e2e CDF", "idle · e2e CDF"} <= set(titles), titles
    table = page.locator("#compare-table")
    idle = table.locator("tr", has=page.locator("th", has_text="idle")).inner_text()
    assert idle.count("no SLOs") == 2 and "not in this run" in idle
    for label in ("Mean SLO attainment", "Makespan (s)"):
        row = table.locator("tr", has=page.locator("th", has_text=label)).inner_text()
        assert row.count("Δ") == 2, (label, row)
    # "other" has one application with an SLO: no fairness, and it says so.
    fairness = table.locator("tr", has=page.locator("th", has_text="Fairness")).inner_text()
    assert fairness.count("Δ") == 1 and "fewer than two applications with SLOs" in fairness
    makespan = table.locator("tr", has=page.locator("th", has_text="Makespan")).inner_text()
    assert re.search(r"Δ [+-]\d+\.\d\d s \([+-]\d+ %\)", makespan), makespan
    page.screenshot(path=str(ARTIFACTS / "compare-page.png"), full_page=True)


def test_the_result_page_shows_each_attainment_with_its_interval_and_its_threshold_curve(
    page: Any, live_app: LiveApp, runs: dict[str, str]
) -> None:
    page.goto(_run(page, _save(page, live_app, EDGE)))
    table = page.locator("#slo-table")
    attainment = table.locator("td.attainment").inner_text()
    # Met at 0.11 s unless the machine is busy enough to stretch a 0.1 s sleep: any figure, with its interval.
    assert re.fullmatch(r"\d+ % \[\d+-\d+ %\]", attainment), attainment
    bars = table.locator(".curve-point")
    titles = [bars.nth(i).get_attribute("title") for i in range(bars.count())]
    assert len(titles) == 5 and titles[:2] == ["thresholds x0.8: 0 %", "thresholds x0.9: 0 %"], titles
    assert table.locator(".curve-point.at-slo").get_attribute("title").startswith("thresholds x1.0: ")
    table.screenshot(path=str(ARTIFACTS / "result-attainment-curve.png"))
    page.screenshot(path=str(ARTIFACTS / "result-page-edge.png"), full_page=True)
