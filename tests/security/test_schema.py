"""The OpenAPI schema (issue 17, item 7) says what the API really answers: paginated objects for
lists, and every error status with the one error body. (tests/e2e/test_api_schema.py then checks the
live server against it with schemathesis.)"""

from __future__ import annotations

from typing import Any

import pytest
from rest_framework.test import APIClient

ERROR = {"$ref": "#/components/schemas/Error"}


@pytest.fixture
def schema(db: Any) -> dict[str, Any]:
    response = APIClient().get("/api/v1/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json")
    assert response.status_code == 200
    return dict(response.json())


def _operations(schema: dict[str, Any]) -> list[tuple[str, str, dict[str, Any]]]:
    return [
        (path, method.upper(), op)
        for path, item in schema["paths"].items()
        for method, op in item.items()
        if method in ("get", "post", "put", "patch", "delete")
    ]


def _body(op: dict[str, Any], code: int) -> Any:
    return op["responses"][str(code)]["content"]["application/json"]["schema"]


def test_the_error_component_is_the_shape_of_cbweb_api_errors(schema: dict[str, Any]) -> None:
    error = schema["components"]["schemas"]["Error"]
    assert set(error["required"]) == {"message", "errors"}
    item = schema["components"]["schemas"]["ErrorItem"]
    assert set(item["properties"]) == {"field", "line", "message"}


@pytest.mark.parametrize("path", ["/api/v1/workflows/", "/api/v1/runs/", "/api/v1/platforms/"])
def test_list_operations_are_described_as_pages(schema: dict[str, Any], path: str) -> None:
    op = schema["paths"][path]["get"]
    page = schema["components"]["schemas"][_body(op, 200)["$ref"].rsplit("/", 1)[1]]
    assert set(page["properties"]) == {"count", "next", "previous", "results"}
    assert page["properties"]["results"]["type"] == "array"
    params = {p["name"]: p["schema"] for p in op["parameters"]}
    assert params["limit"]["minimum"] == 1 and params["offset"]["minimum"] == 0
    assert _body(op, 400) == ERROR


def test_every_operation_lists_its_errors_with_the_error_body(schema: dict[str, Any]) -> None:
    for path, method, op in _operations(schema):
        if path == "/api/v1/schema/":
            continue
        expected = {401, 429}
        if method != "GET":
            expected |= {403} | ({400} if method != "DELETE" else set())
        if "{id}" in path:
            expected |= {404}
        codes = {int(c) for c in op["responses"] if c.isdigit() and int(c) >= 400}
        assert expected <= codes, (method, path, codes)
        for code in codes:
            assert _body(op, code) == ERROR, (method, path, code)
        assert "Retry-After" in op["responses"]["429"]["headers"]


@pytest.mark.parametrize(
    ("path", "method", "codes"),
    [
        ("/api/v1/runs/", "post", {400, 404, 503}),
        ("/api/v1/runs/{id}/cancel/", "post", {409}),
        ("/api/v1/runs/{id}/", "delete", {409}),
        ("/api/v1/runs/{id}/telemetry/", "get", {400}),
    ],
)
def test_operations_declare_their_own_errors(
    schema: dict[str, Any], path: str, method: str, codes: set[int]
) -> None:
    assert codes <= {int(c) for c in schema["paths"][path][method]["responses"]}


def test_reads_say_they_need_no_token_and_writes_that_they_do(schema: dict[str, Any]) -> None:
    for path, method, op in _operations(schema):
        anonymous_allowed = {} in op.get("security", [])
        assert anonymous_allowed == (method == "GET"), (method, path)


def test_the_api_answers_what_the_schema_says(alice: Any, make_workflow: Any) -> None:
    make_workflow(alice)
    client = APIClient()
    page = client.get("/api/v1/workflows/?limit=1").json()
    assert set(page) == {"count", "next", "previous", "results"} and page["count"] == 1
    for bad in ("limit=0", "limit=abc", "offset=-1", "limit=1001", "search=", "archived=yes"):
        response = client.get(f"/api/v1/workflows/?{bad}")
        assert response.status_code == 400, bad
        assert set(response.json()) == {"message", "errors"}
    missing = client.get("/api/v1/runs/not-a-number/")
    assert missing.status_code == 404 and missing["Content-Type"] == "application/json"
    assert set(missing.json()) == {"message", "errors"}


@pytest.mark.parametrize("pk", ["2147483648", "99999999999999999999999"])
def test_ids_beyond_the_database_range_are_404_not_500(db: Any, pk: str) -> None:
    for path in (f"/api/v1/runs/{pk}/", f"/api/v1/workflows/{pk}/", f"/api/v1/platforms/{pk}/"):
        response = APIClient().get(path)
        assert response.status_code == 404, (path, response.status_code)
