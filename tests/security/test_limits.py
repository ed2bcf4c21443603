"""Input limits (issue 17, item 3): the attacks of the issue through the real API and pages.

Each test sends the issue's input through the Django test client against the real database and
checks what the user gets: a 400 in the API's JSON error shape naming what and the limit, a clear
form error, or a page that renders. None of them may take long: a test timeout is a failure.
"""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
from django.test import Client

from cbweb.platforms.models import Platform

pytestmark = [pytest.mark.django_db, pytest.mark.timeout(120)]


def pairs_yaml(pairs: int, share: int) -> str:
    """``pairs`` independent pairs of dependent Sleep nodes, each with ``share`` % MPS, under partition."""
    nodes = "".join(f"  p{i}: {{uses: a}}\n  q{i}: {{uses: a, depend_on: [p{i}]}}\n" for i in range(pairs))
    return f"scheduler: partition\na: {{type: Sleep, num_requests: 1, mps: {share}}}\nworkflows:\n{nodes}"


def chain_spec(n: int) -> dict[str, Any]:
    """A chain of ``n`` Sleep nodes where n{i} depends on n{i+1}: in every key order (as given, sorted,
    PostgreSQL's jsonb order) a walk from the first node listed goes the whole length of the chain."""
    nodes: dict[str, Any] = {f"n{i}": {"uses": "a", "depend_on": [f"n{i + 1}"]} for i in range(n - 1)}
    nodes[f"n{n - 1}"] = {"uses": "a"}
    return {"a": {"type": "Sleep", "num_requests": 1, "sleep_time": 0}, "workflows": nodes}


def assert_error_shape(response: Any, *words: str) -> str:
    """Assert a 400 in the API's error shape whose text names every word; return the text."""
    assert response.status_code == 400, response.content[:500]
    body = response.json()
    assert set(body) == {"message", "errors"}
    text = body["message"] + " " + " ".join(e["message"] for e in body["errors"])
    for word in words:
        assert word in text, (word, text)
    return text


# -- the partition share check ----------------------------------------------------------------------


def test_partition_check_with_24_pairs_of_dependent_nodes_answers_quickly_with_the_right_verdict(
    api: Any,
) -> None:
    start = time.monotonic()
    fits = api.post("/api/v1/workflows/", {"name": "fits", "yaml": pairs_yaml(24, 4)}, format="json")
    too_much = api.post("/api/v1/workflows/validate/", {"yaml": pairs_yaml(24, 5)}, format="json")
    elapsed = time.monotonic() - start
    assert fits.status_code == 201, fits.content[:500]
    # 24 nodes can run at once (one of each pair): 24 x 5 % = 120 %.
    assert_error_shape(too_much, "120 %", "partition")
    # The launch check uses the same policy: the stored workflow launches under partition (on a
    # platform with an NVIDIA GPU: partition is built on MPS).
    gpu = Platform.objects.create(
        fingerprint_id="h200", name="h200", queue="cb.h200", info={"gpus": [{"name": "NVIDIA H200"}]}
    )
    launched = api.post(
        "/api/v1/runs/",
        {"workflow": fits.json()["id"], "scheduler": "partition", "platform": gpu.pk},
        format="json",
    )
    assert launched.status_code == 201, launched.content[:500]
    assert elapsed < 10, f"the partition check took {elapsed:.1f} s"


# -- nodes per workflow and the DAG page ------------------------------------------------------------


def test_100000_nodes_as_a_json_spec_are_refused(api: Any) -> None:
    spec = {"a": {"type": "Sleep"}, "workflows": {f"n{i}": {"uses": "a"} for i in range(100_000)}}
    response = api.post("/api/v1/workflows/", {"name": "huge", "spec": spec}, format="json")
    assert_error_shape(response, "limit")


def test_a_workflow_over_the_node_limit_is_refused_naming_the_limit(api: Any, settings: Any) -> None:
    settings.CB_MAX_NODES = 20
    response = api.post("/api/v1/workflows/", {"name": "long", "spec": chain_spec(21)}, format="json")
    assert_error_shape(response, "21 nodes", "limit of 20")


def test_a_600_node_chain_is_refused_under_the_default_limit(api: Any) -> None:
    response = api.post("/api/v1/workflows/", {"name": "chain", "spec": chain_spec(600)}, format="json")
    assert_error_shape(response, "600 nodes", "limit of 64")


def test_a_chain_at_the_default_node_limit_renders_its_page_and_its_editor(api: Any, alice: Any) -> None:
    created = api.post("/api/v1/workflows/", {"name": "chain", "spec": chain_spec(64)}, format="json")
    assert created.status_code == 201, created.content[:500]
    client = Client()
    client.force_login(alice)
    pk = created.json()["id"]
    page = client.get(f"/workflows/{pk}/")
    assert page.status_code == 200
    assert page.content.count(b'<g class="node') == 64
    assert client.get(f"/workflows/{pk}/edit/").status_code == 200


def test_a_600_node_chain_renders_its_workflow_page_where_the_limit_allows_it(
    api: Any, alice: Any, settings: Any
) -> None:
    settings.CB_MAX_NODES = 600
    created = api.post("/api/v1/workflows/", {"name": "chain", "spec": chain_spec(600)}, format="json")
    assert created.status_code == 201, created.content[:500]
    client = Client()
    client.force_login(alice)
    start = time.process_time()  # CPU time: a loaded machine's waits do not count
    page = client.get(f"/workflows/{created.json()['id']}/")
    assert page.status_code == 200
    assert page.content.count(b'<g class="node') == 600
    # The layout followed the whole chain: the last node sits in column 599.
    x_last = 10 + 599 * (150 + 60)
    assert f'<rect x="{x_last}"'.encode() in page.content
    assert time.process_time() - start < 10


# -- requests per run and per-field bounds ----------------------------------------------------------


def test_a_billion_requests_are_refused_naming_the_field_and_the_limit(api: Any) -> None:
    yaml_text = "a:\n  type: Sleep\n  num_requests: 1000000000\n"
    response = api.post("/api/v1/workflows/", {"name": "flood", "yaml": yaml_text}, format="json")
    text = assert_error_shape(response, "num_requests")
    assert "10000000" in text or "limit" in text


def test_requests_per_run_over_the_limit_are_refused_counting_warmup_and_concurrency(
    api: Any, settings: Any
) -> None:
    settings.CB_MAX_TOTAL_REQUESTS = 1000
    yaml_text = "a:\n  type: Sleep\n  num_requests: 300\n  warmup_requests: 50\n  concurrency: 3\n"
    response = api.post("/api/v1/workflows/", {"name": "busy", "yaml": yaml_text}, format="json")
    text = assert_error_shape(response, "1,050 requests", "limit of 1,000")
    assert response.json()["errors"][0]["field"] == "a.num_requests", text


def test_a_stored_workflow_over_todays_request_limit_cannot_be_launched(api: Any, settings: Any) -> None:
    created = api.post(
        "/api/v1/workflows/", {"name": "w", "yaml": "a: {type: Sleep, num_requests: 500}\n"}, format="json"
    )
    assert created.status_code == 201
    settings.CB_MAX_TOTAL_REQUESTS = 100
    response = api.post("/api/v1/runs/", {"workflow": created.json()["id"]}, format="json")
    assert_error_shape(response, "500 requests", "limit of 100")


@pytest.mark.parametrize(
    ("yaml_text", "field"),
    [
        ("repeat: 1000000\na: {type: Sleep}\n", "repeat"),
        ("a: {type: Sleep, warmup_requests: 100000000}\n", "warmup_requests"),
        ("a: {type: Sleep, arrival: {kind: closed, think_time_s: 1.0e9}}\n", "think_time_s"),
        ("a: {type: Sleep, arrival: {kind: fixed, rate: 1.0e12}}\n", "rate"),
        ("a: {type: Sleep, sleep_time: 1.0e12}\n", "sleep_time"),
        ("a: {type: Synthetic, steps: 1000000000000}\n", "steps"),
        ("a: {type: Chatbot, n_ctx: 1000000000}\n", "n_ctx"),
        ("a: {type: Chatbot, n_threads: 100000}\n", "n_threads"),
    ],
)
def test_fields_without_an_upper_bound_before_are_bounded(api: Any, yaml_text: str, field: str) -> None:
    response = api.post("/api/v1/workflows/validate/", {"yaml": yaml_text}, format="json")
    assert_error_shape(response, field, "less than or equal")


def test_the_web_import_shows_the_request_limit_as_a_form_error(alice: Any) -> None:
    client = Client()
    client.force_login(alice)
    page = client.post(
        "/workflows/new/",
        {"action": "import", "yaml_text": "a:\n  type: Sleep\n  num_requests: 200000\n"},
    )
    assert page.status_code == 400
    assert b"200,000 requests" in page.content and b"limit of 100,000" in page.content


# -- JSON and YAML depth and size -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("method", "url"),
    [
        ("post", "/api/v1/workflows/"),
        ("post", "/api/v1/workflows/validate/"),
        ("post", "/api/v1/runs/"),
        ("put", "/api/v1/workflows/{pk}/"),
    ],
)
def test_a_json_body_nested_1000_levels_deep_is_refused_on_every_endpoint(
    api: Any, alice: Any, make_workflow: Any, method: str, url: str
) -> None:
    url = url.format(pk=make_workflow(alice).pk)
    body = '{"name": "deep", "spec": ' + "[" * 1000 + "]" * 1000 + "}"
    response = getattr(api, method)(url, body, content_type="application/json")
    assert_error_shape(response, "1001 levels", "limit of 64")


def test_brackets_inside_json_strings_do_not_count_as_nesting(api: Any) -> None:
    body = json.dumps({"name": "x", "yaml": "a: {type: Sleep}\n# " + "[" * 1000 + "\n"})
    response = api.post("/api/v1/workflows/validate/", body, content_type="application/json")
    assert response.status_code == 200, response.content[:500]


def test_a_json_body_over_the_size_limit_is_refused_before_parsing(api: Any, settings: Any) -> None:
    settings.CB_MAX_SPEC_BYTES = 10_000
    body = json.dumps({"name": "big", "yaml": "a: {type: Sleep}\n#" + "x" * 20_000})
    response = api.post("/api/v1/workflows/", body, content_type="application/json")
    assert_error_shape(response, "larger than the limit of 10000 bytes")


def test_yaml_nested_1000_levels_deep_is_refused_naming_the_limit(api: Any, alice: Any) -> None:
    yaml_text = "a: " + "[" * 1000 + "]" * 1000 + "\n"
    response = api.post("/api/v1/workflows/validate/", {"yaml": yaml_text}, format="json")
    assert_error_shape(response, "deeper than 64 levels")
    client = Client()
    client.force_login(alice)
    page = client.post("/workflows/new/", {"action": "import", "yaml_text": yaml_text})
    assert page.status_code == 400 and b"deeper than 64 levels" in page.content


def test_the_web_editor_shows_the_request_limit_next_to_the_field(alice: Any) -> None:
    from tests.cbweb.workflows.test_editor import editor_for, post_data

    client = Client()
    client.force_login(alice)
    data = post_data(*editor_for("a: {type: Sleep, num_requests: 5}\n"))
    data["cards-0-num_requests"] = "200000"
    page = client.post("/workflows/new/", data)
    assert page.status_code == 400
    field_errors = " ".join(page.context["formset"].forms[0].errors.get("num_requests", []))
    assert "200,000 requests" in field_errors and "limit of 100,000" in field_errors, page.context[
        "formset"
    ].errors


def test_the_yaml_field_follows_the_deployments_size_limit(api: Any, settings: Any) -> None:
    padded = "a: {type: Sleep}\n#" + "x" * 1_200_000 + "\n"
    refused = api.post("/api/v1/workflows/validate/", {"yaml": padded}, format="json")
    assert refused.status_code == 400 and "limit" in refused.json()["message"] + str(refused.json()["errors"])
    settings.CB_MAX_SPEC_BYTES = 2 * 1024 * 1024
    accepted = api.post("/api/v1/workflows/validate/", {"yaml": padded}, format="json")
    assert accepted.status_code == 200, accepted.json()
