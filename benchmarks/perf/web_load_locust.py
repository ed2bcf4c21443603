"""The users of ``python -m benchmarks.perf.web_load``, loaded by ``locust -f`` (never imported by it).

Readers (anonymous, a think time between pages) read the run list page, a finished run's result
page and the run list of the API in turn. Attackers (no think time) send the requests that cost a
server most: a 150 KB JSON body of escaped quotes to the workflow validation API (with a valid token),
a run search of 100 one-letter words, and the diff page of two ~1 MB workflow versions.
Every request's outcome is written, as JSON lines, to the file CB_LOAD_OUT names.
"""

from __future__ import annotations

import json
import os
import random
import string
import time
from typing import Any

from locust import HttpUser, events, task

RUN_ID = os.environ.get("CB_LOAD_RUN_ID", "1")
WORKFLOW_ID = os.environ.get("CB_LOAD_WORKFLOW_ID", "1")
TOKEN = os.environ.get("CB_LOAD_TOKEN", "")
CA_FILE = os.environ.get("CB_LOAD_CA_FILE") or True
THINK_S = float(os.environ.get("CB_LOAD_THINK_S", "1.0"))
# Escaped quotes, never closed: a string-skipping regular expression backtracks on every one of them.
QUOTES_BODY = ('{"yaml": "' + '\\"' * 75_000).encode()
SEARCH = "/runs/?search=" + "+".join(string.ascii_lowercase[i % 26] for i in range(100))

_records: list[dict[str, Any]] = []


@events.request.add_listener
def _record(
    request_type: str, name: str, response_time: float, response: Any, exception: Any, **_: Any
) -> None:
    status = getattr(response, "status_code", 0) or 0
    _records.append(
        {"name": name, "ms": response_time, "status": status, "end": time.time(), "error": bool(exception)}
    )


@events.quitting.add_listener
def _write(**_: Any) -> None:
    with open(os.environ["CB_LOAD_OUT"], "w", encoding="utf-8") as out:
        for record in _records:
            out.write(json.dumps(record) + "\n")


class Reader(HttpUser):
    """One person reading the lab's results."""

    def wait_time(self) -> float:
        return random.uniform(0.5 * THINK_S, 1.5 * THINK_S)

    def on_start(self) -> None:
        self.client.verify = CA_FILE

    def _get(self, path: str, name: str) -> None:
        with self.client.get(path, name=name, catch_response=True) as response:
            if response.status_code != 200:
                response.failure(f"status {response.status_code}")

    @task
    def run_list(self) -> None:
        self._get("/runs/", "read: run list page")

    @task
    def result_page(self) -> None:
        self._get(f"/runs/{RUN_ID}/", "read: result page")

    @task
    def api(self) -> None:
        self._get("/api/v1/runs/", "read: API run list")


class Attacker(HttpUser):
    """A signed-in user who sends the costliest requests back to back."""

    fixed_count = int(os.environ.get("CB_LOAD_ATTACKERS", "0"))

    def wait_time(self) -> float:
        return 0.0

    def on_start(self) -> None:
        self.client.verify = CA_FILE

    def _send(self, method: str, path: str, name: str, **kwargs: Any) -> None:
        # Refusals (400, 413, 429) are the defence working: only the readers' outcome is judged.
        with self.client.request(method, path, name=name, catch_response=True, **kwargs) as response:
            response.success()

    @task
    def escaped_quotes(self) -> None:
        self._send(
            "POST",
            "/api/v1/workflows/validate/",
            "attack: 150 KB of escaped quotes",
            data=QUOTES_BODY,
            headers={"Authorization": f"Token {TOKEN}", "Content-Type": "application/json"},
        )

    @task
    def search(self) -> None:
        self._send("GET", SEARCH, "attack: search of 100 words")

    @task
    def diff(self) -> None:
        self._send("GET", f"/workflows/{WORKFLOW_ID}/diff/", "attack: diff of two 1 MB versions")
