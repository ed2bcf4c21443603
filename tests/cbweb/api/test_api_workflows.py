from __future__ import annotations

from typing import Any

from rest_framework.test import APIClient

from benchmarks.spec.load import load_yaml
from tests.cbweb.conftest import SLEEP_YAML


def test_post_yaml_creates_a_workflow_and_answers_its_id(api: Any) -> None:
    response = api.post("/api/v1/workflows/", {"name": "sleepy", "yaml": SLEEP_YAML}, format="json")
    assert response.status_code == 201, response.json()
    body = response.json()
    assert isinstance(body["id"], int) and body["version"] == 1
    detail = api.get(f"/api/v1/workflows/{body['id']}/").json()
    assert load_yaml(detail["yaml"]) == load_yaml(SLEEP_YAML, name="sleepy")


def test_posting_a_name_in_use_is_a_409_naming_the_workflow(api: Any) -> None:
    first = api.post("/api/v1/workflows/", {"name": "sleepy", "yaml": SLEEP_YAML}, format="json").json()
    again = api.post("/api/v1/workflows/", {"name": "sleepy", "yaml": SLEEP_YAML}, format="json")
    assert again.status_code == 409
    body = again.json()
    assert f"(#{first['id']})" in body["message"] and body["errors"][0]["field"] == "name"
    assert api.get("/api/v1/workflows/", {"search": "sleepy"}).json()["count"] == 1
    other = api.post("/api/v1/workflows/", {"name": "other", "yaml": SLEEP_YAML}, format="json").json()
    renamed = api.put(
        f"/api/v1/workflows/{other['id']}/", {"name": "sleepy", "yaml": SLEEP_YAML}, format="json"
    )
    assert (
        renamed.status_code == 409 and api.get(f"/api/v1/workflows/{other['id']}/").json()["name"] == "other"
    )
    archived = api.post(f"/api/v1/workflows/{first['id']}/archive/", {}, format="json")
    assert archived.status_code == 200
    assert (
        api.put(
            f"/api/v1/workflows/{other['id']}/", {"name": "sleepy", "yaml": SLEEP_YAML}, format="json"
        ).status_code
        == 200
    )
    restored = api.post(f"/api/v1/workflows/{first['id']}/archive/", {"archived": False}, format="json")
    assert restored.status_code == 409 and f"(#{other['id']})" in restored.json()["message"]


def test_post_spec_mapping_creates_a_workflow(api: Any) -> None:
    spec = {
        "a": {"type": "Sleep", "sleep_time": 0.01},
        "b": {"type": "Sleep"},
        "workflows": {"a": {}, "b": {"uses": "b", "depend_on": ["a"]}},
    }
    response = api.post("/api/v1/workflows/", {"name": "from json", "spec": spec}, format="json")
    assert response.status_code == 201, response.json()
    assert api.get(f"/api/v1/workflows/{response.json()['id']}/").json()["spec"]["workflows"]["b"][
        "depend_on"
    ] == ["a"]


def test_invalid_yaml_is_a_400_with_line_numbers(api: Any) -> None:
    text = "chat:\n  type: Sleep\n  sleep_tme: 1\nworkflows:\n  n:\n    uses: chat\n    depend_on: [ghost]\n"
    response = api.post("/api/v1/workflows/", {"name": "bad", "yaml": text}, format="json")
    assert response.status_code == 400
    body = response.json()
    assert body["message"] == "the workflow has 2 problems"
    assert [(e["line"], e["field"]) for e in body["errors"]] == [
        (3, "chat.sleep_tme"),
        (7, "workflows.n.depend_on[0]"),
    ]
    assert "did you mean 'sleep_time'" in body["errors"][0]["message"]


def test_broken_yaml_syntax_reports_its_line(api: Any) -> None:
    response = api.post("/api/v1/workflows/validate/", {"yaml": "a:\n  type: Sleep\n b: 1\n"}, format="json")
    assert response.status_code == 400
    [error] = response.json()["errors"]
    assert error["line"] == 3 and error["message"].startswith("not valid YAML")


def test_validate_returns_the_canonical_form_without_saving(api: Any) -> None:
    response = api.post("/api/v1/workflows/validate/", {"yaml": SLEEP_YAML, "name": "x"}, format="json")
    assert response.status_code == 200
    assert response.json()["valid"] is True
    assert load_yaml(response.json()["yaml"]) == load_yaml(SLEEP_YAML, name="x")
    assert api.get("/api/v1/workflows/").json()["count"] == 0


def test_both_or_neither_of_yaml_and_spec_is_a_400_naming_the_field(api: Any) -> None:
    response = api.post("/api/v1/workflows/", {"name": "x"}, format="json")
    assert response.status_code == 400
    assert response.json()["errors"][0]["field"] == "yaml"


def test_writing_needs_authentication_but_reading_is_open(db: Any) -> None:
    client = APIClient()
    response = client.post("/api/v1/workflows/", {"name": "x", "yaml": SLEEP_YAML}, format="json")
    assert response.status_code == 401
    assert "Token" in response.json()["message"]
    assert client.get("/api/v1/workflows/").status_code == 200


def test_reading_can_require_login(db: Any, settings: Any) -> None:
    settings.CB_READ_REQUIRES_LOGIN = True
    assert APIClient().get("/api/v1/workflows/").status_code == 401


def test_put_adds_a_version_and_only_the_owner_may(api: Any, bob: Any, make_token: Any) -> None:
    wid = api.post("/api/v1/workflows/", {"name": "s", "yaml": SLEEP_YAML}, format="json").json()["id"]
    response = api.put(f"/api/v1/workflows/{wid}/", {"yaml": "only: {type: Sleep}\n"}, format="json")
    assert response.status_code == 200 and response.json()["version"] == 2
    other = APIClient()
    other.credentials(HTTP_AUTHORIZATION=f"Token {make_token(bob)}")
    assert (
        other.put(f"/api/v1/workflows/{wid}/", {"yaml": "x: {type: Sleep}\n"}, format="json").status_code
        == 403
    )
    assert other.delete(f"/api/v1/workflows/{wid}/").status_code == 403
    assert api.delete(f"/api/v1/workflows/{wid}/").status_code == 204


def test_unknown_workflow_is_a_json_404(api: Any) -> None:
    response = api.get("/api/v1/workflows/999999/")
    assert response.status_code == 404
    assert "message" in response.json()
