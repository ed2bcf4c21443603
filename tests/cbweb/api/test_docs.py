"""The API's reading pages (cbweb/api/docs.py): Swagger UI and Redoc from this server's static files."""

from __future__ import annotations

import re
from typing import Any

from django.contrib.staticfiles import finders
from django.test import Client

from cbweb.api.docs import LOCAL_ONLY


def test_swagger_ui_and_redoc_read_the_schema_from_this_servers_static_files(db: Any) -> None:
    for path, asset in (
        ("/api/v1/docs/", "drf_spectacular_sidecar/swagger-ui-dist/swagger-ui-bundle.js"),
        ("/api/v1/redoc/", "drf_spectacular_sidecar/redoc/bundles/redoc.standalone.js"),
    ):
        response = Client().get(path)
        assert response.status_code == 200, path
        html = response.content.decode()
        assert f"/static/{asset}" in html and "/api/v1/schema/" in html
        # No CDN, no web fonts: every file the page loads is this server's, and it is there to serve.
        assert re.findall(r'(?:src|href)="(?!/)', html) == [], path
        assert finders.find(asset), asset
        # And the browser may load nothing else (Redoc's sidebar would fetch a logo from a CDN).
        assert response["Content-Security-Policy"] == LOCAL_ONLY


def test_every_page_links_the_api_reference(db: Any) -> None:
    assert '<a href="/api/v1/docs/">API</a>' in Client().get("/runs/").content.decode()
