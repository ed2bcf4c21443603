"""Retried writes: a CI job whose answer to "create a run" was lost sends the request again, and that
must not queue a second run. Run creation and workflow submit take an ``Idempotency-Key`` header;
``consumerbench submit`` sends one per write and retries a lost answer with it."""

from __future__ import annotations

import http.client
import http.server
import threading
from collections.abc import Iterator
from datetime import timedelta
from typing import Any
from urllib.parse import urlparse

import pytest
from rest_framework.test import APIClient

from benchmarks.client import Client
from cbweb.api.models import IdempotencyKey
from cbweb.runs.models import Run

NAP = "nap:\n  type: Sleep\n  sleep_time: 0.01\n  num_requests: 2\n"


@pytest.fixture
def as_user(make_token: Any) -> Any:
    def client(user: Any) -> APIClient:
        api = APIClient()
        api.credentials(HTTP_AUTHORIZATION=f"Token {make_token(user)}")
        return api

    return client


@pytest.mark.django_db
def test_a_run_created_twice_with_one_key_is_created_once_and_answered_alike(
    alice: Any, as_user: Any, make_workflow: Any
) -> None:
    api = as_user(alice)
    workflow = make_workflow(alice, yaml_text=NAP)
    body = {"workflow": workflow.pk, "repeats": 2, "tags": ["ci"]}
    first = api.post("/api/v1/runs/", body, format="json", HTTP_IDEMPOTENCY_KEY="ci-job-17")
    again = api.post("/api/v1/runs/", body, format="json", HTTP_IDEMPOTENCY_KEY="ci-job-17")
    assert first.status_code == again.status_code == 201
    assert first.json() == again.json()
    assert again["Idempotent-Replayed"] == "true" and "Idempotent-Replayed" not in first
    assert Run.objects.count() == 2  # the two repeats of the first request, nothing more
    # Without a key, or with another key, the same body is a new request.
    assert api.post("/api/v1/runs/", body, format="json").status_code == 201
    assert api.post("/api/v1/runs/", body, format="json", HTTP_IDEMPOTENCY_KEY="ci-job-18").status_code == 201
    assert Run.objects.count() == 6


@pytest.mark.django_db
def test_the_same_key_with_another_body_or_operation_is_422(
    alice: Any, as_user: Any, make_workflow: Any
) -> None:
    api = as_user(alice)
    workflow = make_workflow(alice, yaml_text=NAP)
    key = {"HTTP_IDEMPOTENCY_KEY": "k1"}
    assert api.post("/api/v1/runs/", {"workflow": workflow.pk}, format="json", **key).status_code == 201
    other = api.post("/api/v1/runs/", {"workflow": workflow.pk, "repeats": 3}, format="json", **key)
    assert other.status_code == 422
    assert "different request" in other.json()["message"]
    assert other.json()["errors"][0]["field"] == "Idempotency-Key"
    submit = api.post("/api/v1/workflows/submit/", {"yaml": NAP, "name": "x"}, format="json", **key)
    assert submit.status_code == 422
    assert Run.objects.count() == 1


@pytest.mark.django_db
def test_keys_are_per_user_and_expire_after_the_retention_window(
    alice: Any, bob: Any, as_user: Any, make_workflow: Any, settings: Any
) -> None:
    workflow = make_workflow(alice, yaml_text=NAP)
    body = {"workflow": workflow.pk}
    for user in (alice, bob):
        assert (
            as_user(user).post("/api/v1/runs/", body, format="json", HTTP_IDEMPOTENCY_KEY="same").status_code
            == 201
        )
    assert Run.objects.count() == 2
    settings.CB_IDEMPOTENCY_HOURS = 24
    IdempotencyKey.objects.filter(user=alice).update(
        created_at=IdempotencyKey.objects.get(user=alice).created_at - timedelta(hours=25)
    )
    again = as_user(alice).post("/api/v1/runs/", body, format="json", HTTP_IDEMPOTENCY_KEY="same")
    assert again.status_code == 201 and "Idempotent-Replayed" not in again
    assert Run.objects.count() == 3


@pytest.mark.django_db
def test_a_submit_retried_with_its_key_answers_the_first_response(alice: Any, as_user: Any) -> None:
    api = as_user(alice)
    body = {"yaml": NAP, "name": "nightly"}
    first = api.post("/api/v1/workflows/submit/", body, format="json", HTTP_IDEMPOTENCY_KEY="s1")
    again = api.post("/api/v1/workflows/submit/", body, format="json", HTTP_IDEMPOTENCY_KEY="s1")
    assert (first.status_code, again.status_code) == (201, 201)  # the first said "created": so does the retry
    assert first.json() == again.json()


@pytest.mark.django_db
@pytest.mark.parametrize("key", ["", "x" * 256, "ключ", "a\tb"])
def test_a_malformed_key_is_400(alice: Any, as_user: Any, make_workflow: Any, key: str) -> None:
    workflow = make_workflow(alice, yaml_text=NAP)
    answer = as_user(alice).post(
        "/api/v1/runs/", {"workflow": workflow.pk}, format="json", HTTP_IDEMPOTENCY_KEY=key
    )
    assert answer.status_code == 400 and answer.json()["errors"][0]["field"] == "Idempotency-Key"
    assert Run.objects.count() == 0


@pytest.mark.django_db
def test_a_request_that_fails_leaves_no_key_behind(alice: Any, as_user: Any) -> None:
    api = as_user(alice)
    missing = api.post("/api/v1/runs/", {"workflow": 999999}, format="json", HTTP_IDEMPOTENCY_KEY="k")
    assert missing.status_code == 404
    assert not IdempotencyKey.objects.exists()


class _LosingProxy:
    """An HTTP proxy in front of the live server that forwards every request, but closes the
    connection without an answer after forwarding the first ``lose`` POSTs: the server did the work,
    the client never heard of it (a load balancer's timeout, a dropped connection)."""

    def __init__(self, target: str, lose: int) -> None:
        self.lose, self.posts = lose, 0
        upstream = urlparse(target)
        proxy = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def _forward(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else None
                conn = http.client.HTTPConnection(upstream.hostname, upstream.port, timeout=30)
                headers = {k: v for k, v in self.headers.items() if k.lower() not in ("host", "connection")}
                conn.request(self.command, self.path, body=body, headers=headers)
                answer = conn.getresponse()
                data = answer.read()
                conn.close()
                if self.command == "POST":
                    proxy.posts += 1
                    if proxy.posts <= proxy.lose:
                        self.close_connection = True
                        return  # the answer is lost
                self.send_response(answer.status)
                for name, value in answer.getheaders():
                    if name.lower() not in ("connection", "transfer-encoding", "content-length"):
                        self.send_header(name, value)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = _forward

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def losing_proxy(live_server: Any) -> Iterator[_LosingProxy]:
    proxy = _LosingProxy(live_server.url, lose=1)
    yield proxy
    proxy.close()


@pytest.mark.django_db(transaction=True)
def test_consumerbench_submit_retries_a_lost_answer_without_a_second_run(
    losing_proxy: _LosingProxy, alice: Any, make_token: Any, make_workflow: Any
) -> None:
    workflow = make_workflow(alice, yaml_text=NAP)
    client = Client(losing_proxy.url, make_token(alice), retry_delays_s=(0.2, 0.2))
    run = client.create_run(workflow.pk, None, None)
    assert losing_proxy.posts == 2  # the lost try and its retry
    assert list(Run.objects.values_list("pk", flat=True)) == [run["id"]]

    # The workflow submit is retried the same way: one new workflow, answered as created.
    losing_proxy.lose = 3
    stored = client.submit_workflow(NAP, "nightly", "nap")
    assert stored["workflow_created"] is True and stored["version"] == 1
    assert losing_proxy.posts == 4


@pytest.mark.django_db(transaction=True)
def test_the_client_gives_up_after_its_retries(
    losing_proxy: _LosingProxy, alice: Any, make_token: Any, make_workflow: Any
) -> None:
    from benchmarks.client import ApiError

    workflow = make_workflow(alice, yaml_text=NAP)
    losing_proxy.lose = 10
    client = Client(losing_proxy.url, make_token(alice), retry_delays_s=(0.1, 0.1))
    with pytest.raises(ApiError, match="cannot reach the server"):
        client.create_run(workflow.pk, None, None)
    assert losing_proxy.posts == 3
    assert Run.objects.count() == 1  # every try carried the first one's key


@pytest.mark.django_db(transaction=True)
def test_concurrent_twins_with_one_key_create_one_run(
    live_server: Any, alice: Any, make_token: Any, make_workflow: Any
) -> None:
    from concurrent.futures import ThreadPoolExecutor

    from django.db import connection

    if connection.vendor != "postgresql":
        pytest.skip("SQLite serialises every write: the race needs PostgreSQL (DATABASE_URL)")
    workflow = make_workflow(alice, yaml_text=NAP)
    client = Client(live_server.url, make_token(alice), retry_delays_s=())
    body = {"workflow": workflow.pk, "tags": ["twin"]}
    with ThreadPoolExecutor(8) as pool:
        answers = list(
            pool.map(lambda _: client.request("POST", "/runs/", body, idempotency_key="twin"), range(8))
        )
    assert len({a["id"] for a in answers}) == 1
    assert Run.objects.count() == 1
