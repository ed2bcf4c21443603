"""Project-wide pages (cbweb/views.py, cbweb/urls.py, templates/): the error pages."""

from __future__ import annotations

from typing import Any

from django.test import Client, RequestFactory
from django.views import defaults

SITE = '<link rel="stylesheet" href="/static/css/site.css">'


def test_a_missing_page_is_a_404_in_the_sites_layout_naming_the_path(db: Any) -> None:
    response = Client().get("/no-such-page/")
    html = response.content.decode()
    assert response.status_code == 404 and SITE in html and 'data-status="404"' in html
    assert "<code>/no-such-page/</code>" in html
    # Under /api/ a missing endpoint stays a JSON error for clients.
    assert Client().get("/api/v1/nope/").json()["message"] == "no API endpoint at /api/v1/nope/"


def test_a_refused_page_is_a_403_in_the_sites_layout_saying_why(
    alice: Any, bob: Any, make_workflow: Any
) -> None:
    workflow = make_workflow(alice)
    client = Client()
    client.force_login(bob)
    response = client.get(f"/workflows/{workflow.pk}/edit/")
    html = response.content.decode()
    assert response.status_code == 403 and SITE in html and 'data-status="403"' in html
    assert f"Only the owner of workflow &#x27;{workflow.name}&#x27; (or staff) may change it" in html


def test_a_form_without_its_csrf_token_is_refused_in_the_sites_layout(alice: Any) -> None:
    client = Client(enforce_csrf_checks=True)
    client.force_login(alice)
    response = client.post("/accounts/tokens/", {"action": "create", "name": "x"})
    html = response.content.decode()
    assert response.status_code == 403 and SITE in html and "security token (CSRF)" in html


def test_a_server_error_is_a_500_in_the_sites_layout_without_a_request_context() -> None:
    # Django renders 500.html with no context (no user, no database): the layout must still render.
    response = defaults.server_error(RequestFactory().get("/runs/"))
    html = response.content.decode()
    assert response.status_code == 500 and SITE in html and 'data-status="500"' in html
    assert "Server error" in html
