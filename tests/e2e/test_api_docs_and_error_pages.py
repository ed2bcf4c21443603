"""The API's reading pages (Swagger UI, Redoc) and the error pages in headless Chromium: the API pages
load nothing from outside this server, the error pages wear the site's layout. Screenshots go to
test-artifacts/e2e/."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import pytest

from tests.e2e.conftest import ARTIFACTS, ROOT, LiveApp, log_in

pytestmark = pytest.mark.browser
BOB, BOB_PASSWORD = "bob-e2e", "bob-password-1"


def _shell(app: LiveApp, code: str) -> str:
    """Run ``code`` in the live app's Django (its database and settings); return what it printed."""
    done = subprocess.run(
        [sys.executable, "manage.py", "shell", "--no-imports", "-c", code],
        cwd=ROOT,
        env=app.env,
        check=True,
        capture_output=True,
        text=True,
        timeout=120,
    )
    return done.stdout


def _loaded(page: Any) -> list[str]:
    """Collect the URLs of the responses ``page`` receives from now on (a blocked request has none)."""
    seen: list[str] = []
    page.on("response", lambda response: seen.append(response.url))
    return seen


@pytest.mark.parametrize(
    ("path", "ready", "shot"),
    [
        ("/api/v1/docs/", ".swagger-ui .opblock", "api-swagger.png"),
        ("/api/v1/redoc/", "redoc h1", "api-redoc.png"),
    ],
)
def test_the_api_reference_renders_the_schema_from_this_server_only(
    page: Any, live_app: LiveApp, path: str, ready: str, shot: str
) -> None:
    seen = _loaded(page)
    page.goto(f"{live_app.url}/runs/")
    with page.expect_navigation():
        page.get_by_role("link", name="API", exact=True).click()
    page.goto(f"{live_app.url}{path}")
    page.wait_for_selector(ready, timeout=30_000)
    assert "ConsumerBench API" in page.locator("body").inner_text()
    if "swagger" in shot:
        # Every operation of the schema is listed.
        assert page.locator(".opblock").count() >= 10
    page.screenshot(path=str(ARTIFACTS / shot))
    outside = [url for url in seen if not url.startswith((live_app.url, "data:", "blob:"))]
    assert outside == []


def test_a_missing_page_is_a_styled_404(page: Any, live_app: LiveApp) -> None:
    response = page.goto(f"{live_app.url}/runs/999999/")
    assert response.status == 404
    assert page.locator("#error-page h1").inner_text().startswith("Not found")
    # The site's stylesheet applies: the header bar and the navigation are there and styled.
    assert page.locator("header.top nav").is_visible()
    assert page.evaluate("getComputedStyle(document.querySelector('header.top')).display") == "flex"
    page.screenshot(path=str(ARTIFACTS / "error-404.png"))


def test_a_refused_page_is_a_styled_403_saying_why(page: Any, live_app: LiveApp) -> None:
    pk = _shell(
        live_app,
        "from django.contrib.auth import get_user_model\n"
        "from cbweb.workflows.services import workflow_create\n"
        f"User = get_user_model(); User.objects.filter(username='{BOB}').exists() or "
        f"User.objects.create_user('{BOB}', password='{BOB_PASSWORD}')\n"
        "owner = User.objects.get(username='e2e')\n"
        "print(workflow_create(owner=owner, name='not-bobs', yaml_text='nap: {type: Sleep}\\n').pk)",
    ).strip()
    page.goto(f"{live_app.url}/accounts/login/")
    page.fill("#id_username", BOB)
    page.fill("#id_password", BOB_PASSWORD)
    page.get_by_role("button", name="Log in").click()
    page.wait_for_url("**/workflows/")
    response = page.goto(f"{live_app.url}/workflows/{pk}/edit/")
    assert response.status == 403
    assert page.locator("#error-reason").inner_text() == (
        "Only the owner of workflow 'not-bobs' (or staff) may change it"
    )
    assert BOB in page.locator("header.top .user").inner_text()
    page.screenshot(path=str(ARTIFACTS / "error-403.png"))
    # Back to the e2e user for the other tests of this module's tab.
    page.get_by_role("button", name="Log out").click()
    log_in(page, live_app)


def test_a_server_error_is_a_styled_500(page: Any, live_app: LiveApp) -> None:
    # The live app's own 500 page (Django's server_error, as a crashing view gets it), served at a URL
    # of the live app so that its stylesheet loads from the server as it would.
    html = _shell(
        live_app,
        "from django.test import RequestFactory; from django.views.defaults import server_error\n"
        "print(server_error(RequestFactory().get('/runs/')).content.decode())",
    )
    url = f"{live_app.url}/runs/crashed/"
    page.route(url, lambda route: route.fulfill(status=500, body=html, content_type="text/html"))
    response = page.goto(url)
    assert response.status == 500
    assert page.locator("#error-page h1").inner_text().startswith("Server error")
    assert page.evaluate("getComputedStyle(document.querySelector('header.top')).display") == "flex"
    page.screenshot(path=str(ARTIFACTS / "error-500.png"))
    page.unroute(url)
