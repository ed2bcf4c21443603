"""cbweb.middleware: a statement PostgreSQL cancels for running past its limit is answered with 503."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import OperationalError, connection
from django.http import HttpRequest, HttpResponse
from django.test import RequestFactory
from django.urls import path

from cbweb.middleware import StatementTimeoutMiddleware


def _slow(request: HttpRequest) -> HttpResponse:
    # The connection's limit, as CB_DB_STATEMENT_TIMEOUT_MS sets it, made short for the test.
    with connection.cursor() as cursor:
        cursor.execute("SET statement_timeout = 100")
        try:
            cursor.execute("SELECT pg_sleep(5)")
        finally:
            cursor.execute("SET statement_timeout = 0")
    return HttpResponse("finished")


urlpatterns = [path("slow/", _slow), path("api/v1/slow/", _slow)]


@pytest.mark.django_db(transaction=True)
def test_a_statement_cancelled_by_the_timeout_answers_503_with_retry_after(
    client: Any, settings: Any
) -> None:
    if connection.vendor != "postgresql":
        pytest.skip("statement timeouts are PostgreSQL's (set DATABASE_URL to PostgreSQL)")
    settings.ROOT_URLCONF = __name__
    page = client.get("/slow/")
    assert page.status_code == 503 and page["Retry-After"] == "30"
    assert "limit" in page.content.decode()
    api = client.get("/api/v1/slow/")
    assert api.status_code == 503 and "limit" in api.json()["message"]


def test_other_database_errors_are_left_to_the_error_handler() -> None:
    middleware = StatementTimeoutMiddleware(lambda request: HttpResponse())
    request = RequestFactory().get("/runs/")
    try:
        raise OperationalError("connection refused") from ConnectionRefusedError()
    except OperationalError as exc:
        assert middleware.process_exception(request, exc) is None
    assert middleware.process_exception(request, ValueError("x")) is None
