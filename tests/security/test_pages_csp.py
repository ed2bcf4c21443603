"""The Content-Security-Policy of the HTML pages: every page sends one that allows this server's
scripts, styles and images only and no inline script or handler, and the pages still work under it
in a real browser (charts draw, the editor previews, a delete still asks first)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.test import Client

from cbweb.runs.execution import run_execute
from tests.conftest import CHROMIUM

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "test-artifacts" / "security"

NAP = """\
tick:
  type: Sleep
  sleep_time: 0.05
  num_requests: 3
  slo: ["e2e<=1s"]
spin:
  type: Synthetic
  steps: 3
  step_ms: 10
  num_requests: 3
  slo: ["step<=1s"]
workflows:
  tick: {uses: tick}
  spin: {uses: spin, depend_on: [tick]}
"""


def _directives(header: str) -> dict[str, list[str]]:
    return {d.split()[0]: d.split()[1:] for d in (p.strip() for p in header.split(";")) if d}


@pytest.mark.django_db
def test_every_html_page_sends_a_policy_without_inline_script(
    alice: Any, make_workflow: Any, make_run: Any
) -> None:
    workflow = make_workflow(alice, name="nap", yaml_text=NAP)
    runs = make_run(workflow, alice, repeats=2)
    for run in runs:
        assert run_execute(run_id=run.pk, worker="test") == "succeeded"
    a, b = runs[0].pk, runs[1].pk
    client = Client(raise_request_exception=False)
    client.force_login(alice)
    pages = [
        "/workflows/",
        f"/workflows/{workflow.pk}/",
        f"/workflows/{workflow.pk}/edit/",
        "/workflows/new/",
        "/runs/",
        f"/runs/{a}/",
        f"/runs/compare/?runs={a}&runs={b}",
        f"/runs/history/{workflow.pk}/",
        "/platforms/",
        "/leaderboard/",
        "/accounts/tokens/",
        "/docs/metrics/",
        "/runs/?batch=x",  # the 400 page
        "/runs/999999/",  # the 404 page
    ]
    for path in pages:
        response = client.get(path)
        assert response["Content-Type"].startswith("text/html"), path
        policy = _directives(response["Content-Security-Policy"])
        assert policy["default-src"] == ["'self'"], path
        assert policy["frame-ancestors"] == ["'none'"], path
        assert not any("unsafe" in v for values in policy.values() for v in values), path
    logged_out = Client().get("/accounts/login/")
    assert "default-src 'self'" in logged_out["Content-Security-Policy"]


def test_the_api_docs_pages_keep_their_own_policy(db: Any) -> None:
    from cbweb.api.docs import LOCAL_ONLY

    for path in ("/api/v1/docs/", "/api/v1/redoc/"):
        assert Client().get(path)["Content-Security-Policy"] == LOCAL_ONLY


def test_no_template_has_an_inline_handler_or_script() -> None:
    handler = re.compile(r"<[^>]*\son[a-z]+\s*=", re.I)
    inline_script = re.compile(r"<script(?![^>]*\bsrc=)(?![^>]*application/json)[^>]*>", re.I)
    found = []
    for template in sorted((ROOT / "templates").rglob("*.html")):
        if template.parent.name == "api" and template.name == "redoc.html":
            continue  # the API docs page: its own policy allows its start-up script
        text = template.read_text(encoding="utf-8")
        found += [f"{template.relative_to(ROOT)}: {m.group(0)[:60]}" for m in handler.finditer(text)]
        found += [f"{template.relative_to(ROOT)}: {m.group(0)[:60]}" for m in inline_script.finditer(text)]
    assert found == []


# What the browser reports: console errors (a refused script or style is one), uncaught errors,
# and the securitypolicyviolation events of the document.
WATCH_VIOLATIONS = """
window.__cspViolations = [];
document.addEventListener("securitypolicyviolation", (e) => {
  window.__cspViolations.push(`${e.violatedDirective} ${e.blockedURI} ${e.sourceFile}:${e.lineNumber}`);
});
"""
# Every chart canvas of the page: drawn by Chart.js, with at least one point.
CHARTS = """() => [...document.querySelectorAll("canvas")].map((c) => {
  const chart = Chart.getChart(c);
  return chart ? chart.data.datasets.reduce((n, d) => n + d.data.length, 0) : -1;
})"""


@pytest.fixture(scope="module")
def browser_page(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Any, Any, dict[str, list[str]]]]:
    from playwright.sync_api import sync_playwright

    from tests.e2e.conftest import serve

    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    seen: dict[str, list[str]] = {"console": [], "errors": [], "failed": []}
    with serve(tmp_path_factory.mktemp("csp")) as app, sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"])
        context = browser.new_context(viewport={"width": 1400, "height": 2000})
        context.add_init_script(WATCH_VIOLATIONS)
        tab = context.new_page()
        tab.on("console", lambda m: seen["console"].append(m.text) if m.type == "error" else None)
        # Chromium asks for /favicon.ico, which the site does not have: every other 4xx/5xx counts.
        tab.on(
            "response",
            lambda r: (
                seen["failed"].append(f"{r.status} {r.url}")
                if r.status >= 400 and not r.url.endswith("/favicon.ico")
                else None
            ),
        )
        tab.on("pageerror", lambda exc: seen["errors"].append(str(exc)))
        yield tab, app, seen
        browser.close()


def _violations(page: Any) -> list[str]:
    return list(page.evaluate("() => window.__cspViolations"))


@pytest.mark.browser
def test_the_result_editor_and_compare_pages_work_under_the_policy(
    browser_page: tuple[Any, Any, dict[str, list[str]]],
) -> None:
    from tests.e2e.conftest import log_in, wait_for_result

    page, app, seen = browser_page
    log_in(page, app)
    page.goto(f"{app.url}/workflows/new/")
    page.fill('textarea[name="yaml_text"]', "name: csp\n" + NAP)
    with page.expect_navigation():
        page.get_by_role("button", name="Import into the editor").click()
    with page.expect_navigation():
        page.locator("#save").click()
    workflow_url = page.url
    run_urls = []
    for _ in range(2):
        page.goto(workflow_url)
        page.get_by_role("link", name="Launch a run").click()
        with page.expect_navigation():
            page.locator("#launch").click()
        run_urls.append(page.url)
        wait_for_result(page, 90_000)

    response = page.goto(run_urls[0])
    assert "default-src 'self'" in response.headers["content-security-policy"]
    page.wait_for_selector("#telemetry-charts canvas")
    points = page.evaluate(CHARTS)
    assert points and min(points) > 0, points  # every canvas is a chart with data
    page.screenshot(path=str(ARTIFACTS / "csp-result-page.png"), full_page=True)
    assert _violations(page) == []

    # The delete button asks first (data-confirm, not an inline handler): dismissed, nothing happens.
    questions: list[str] = []
    page.once("dialog", lambda d: (questions.append(d.message), d.dismiss()))
    page.get_by_role("button", name="Delete run").click()
    page.wait_for_timeout(300)
    assert questions == ["Delete this run?"] and page.url == run_urls[0]
    assert page.goto(run_urls[0]).status == 200

    page.goto(f"{workflow_url}edit/")
    page.wait_for_selector("#dag-preview svg")
    page.wait_for_timeout(500)
    page.screenshot(path=str(ARTIFACTS / "csp-workflow-editor.png"), full_page=True)
    assert _violations(page) == []

    ids = [u.rstrip("/").rsplit("/", 1)[-1] for u in run_urls]
    page.goto(f"{app.url}/runs/compare/?runs={ids[0]}&runs={ids[1]}")
    page.wait_for_selector("canvas")
    points = page.evaluate(CHARTS)
    assert points and min(points) > 0, points
    page.screenshot(path=str(ARTIFACTS / "csp-compare-page.png"), full_page=True)
    assert _violations(page) == []

    # A refused script, style or image is a console error; the favicon's 404 is one too.
    console = [
        m for m in seen["console"] if not (m.startswith("Failed to load resource") and not seen["failed"])
    ]
    assert console == [] and seen["errors"] == [] and seen["failed"] == [], seen
