"""A small client of a ConsumerBench server's REST API (docs/api.md), for CI jobs.

Standard library only (and ``benchmarks.status``, which is too), so that a CI machine needs nothing
but this package:
``consumerbench submit workflow.yml --server URL --token T --wait --fail-under 0.9``.
"""

from __future__ import annotations

import http.client
import json
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
from collections.abc import Callable, Mapping
from typing import Any

from benchmarks.status import FINISHED

# The most per-request rows the client reads of one run (the server's pages hold 1000 each): a run of
# the project's own workflows has at most a few thousand; a bound keeps a CI job's memory in check.
MAX_REQUEST_ROWS = 200_000
PAGE = 1000
# Waits before each retry of a write whose answer was lost (no connection, a timeout, a 5xx): the
# retry carries the first try's Idempotency-Key, so the server answers it without writing twice.
WRITE_RETRY_DELAYS_S = (1.0, 3.0, 10.0)


class ApiError(RuntimeError):
    """The server refused a request or could not be reached; the message says which and why."""

    def __init__(self, message: str, status: int | None = None, errors: list[dict[str, Any]] | None = None):
        self.status = status
        self.errors = errors or []
        details = "".join(f"\n  {_where(e)}{e.get('message')}" for e in self.errors)
        super().__init__(message + details)


class Client:
    """Talks to ``<server>/api/v1/`` with a token."""

    def __init__(
        self,
        server: str,
        token: str | None,
        timeout_s: float = 30.0,
        retry_delays_s: tuple[float, ...] = WRITE_RETRY_DELAYS_S,
    ) -> None:
        self.base = server.rstrip("/") + "/api/v1"
        self.token = token
        self.timeout_s = timeout_s
        self.retry_delays_s = retry_delays_s

    def request(
        self, method: str, path: str, body: dict[str, Any] | None = None, idempotency_key: str | None = None
    ) -> Any:
        """Send one request; return the decoded JSON answer or raise ApiError."""
        url = path if path.startswith("http") else f"{self.base}{path}"
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(url, data=data, method=method)
        req.add_header("Accept", "application/json")
        if data is not None:
            req.add_header("Content-Type", "application/json")
        if self.token:
            req.add_header("Authorization", f"Token {self.token}")
        if idempotency_key:
            req.add_header("Idempotency-Key", idempotency_key)
        try:
            with urllib.request.urlopen(req, timeout=self.timeout_s) as resp:
                raw = resp.read()
        except urllib.error.HTTPError as exc:
            raise _api_error(method, url, exc) from None
        except (urllib.error.URLError, OSError, http.client.HTTPException) as exc:
            reason = getattr(exc, "reason", exc)
            raise ApiError(f"{method} {url}: cannot reach the server ({reason})") from None
        return json.loads(raw) if raw else None

    def write(self, path: str, body: dict[str, Any]) -> Any:
        """POST ``body`` with a fresh Idempotency-Key; when the answer is lost (the server cannot be
        reached, the connection drops, a 5xx), send it again with the same key after each of
        ``retry_delays_s``: the server answers a retry it has already served with its first answer,
        so a run or version is never created twice. Return the decoded answer or raise ApiError."""
        key = str(uuid.uuid4())
        delays = list(self.retry_delays_s)
        while True:
            try:
                return self.request("POST", path, body, idempotency_key=key)
            except ApiError as exc:
                lost = exc.status is None or exc.status >= 500
                if not lost or not delays:
                    raise
            time.sleep(delays.pop(0))

    def submit_workflow(self, yaml_text: str, name: str | None, default_name: str) -> dict[str, Any]:
        """Store a workflow by name (the server reuses the caller's workflow of that name and adds a
        version only when the spec changed); return ``{id, name, version, workflow_created,
        version_created, ...}``."""
        body: dict[str, Any] = {"yaml": yaml_text, "default_name": default_name}
        if name:
            body["name"] = name
        answer: dict[str, Any] = self.write("/workflows/submit/", body)
        return answer

    def run(self, run_id: int) -> dict[str, Any]:
        """Return one run."""
        answer: dict[str, Any] = self.request("GET", f"/runs/{int(run_id)}/")
        return answer

    def latest_run(self, **filters: Any) -> dict[str, Any] | None:
        """Return the newest run matching the runs list's filters (docs/api.md), or None."""
        query = urllib.parse.urlencode({**filters, "limit": 1})
        page: dict[str, Any] = self.request("GET", f"/runs/?{query}")
        return page["results"][0] if page["results"] else None

    def run_requests(self, run_id: int, page_size: int = PAGE) -> list[dict[str, Any]]:
        """Return every per-request row of a run (``{application, type, status, warmup, metrics,
        ...}``), page by page; raise ApiError past ``MAX_REQUEST_ROWS``."""
        rows: list[dict[str, Any]] = []
        # Pages by offset rather than by the answer's "next" link, so that the token only ever goes
        # to the server given (a proxy may rewrite hosts in links).
        while True:
            page: dict[str, Any] = self.request(
                "GET", f"/runs/{int(run_id)}/requests/?limit={page_size}&offset={len(rows)}"
            )
            if page["count"] > MAX_REQUEST_ROWS:
                raise ApiError(f"run {run_id} has more than {MAX_REQUEST_ROWS} request rows")
            rows += page["results"]
            if not page["results"] or len(rows) >= page["count"]:
                return rows

    def create_run(
        self,
        workflow: int,
        scheduler: str | None,
        platform: int | None,
        scheduler_params: Mapping[str, Any] | None = None,
        meta: Mapping[str, Any] | None = None,
        weights: str | None = None,
    ) -> dict[str, Any]:
        """Queue a run; return ``{id, url, status, ...}``. With ``scheduler_params`` the scheduler is
        sent as ``{name, ...params}`` (no name: the workflow's scheduler), which the server checks.
        ``meta``: the run's commit, branch, ci_url, tags, notes (``benchmarks.runmeta``); ``weights``
        overrides the workflow's ``weights:``."""
        body: dict[str, Any] = {"workflow": workflow, **(meta or {})}
        if weights is not None:
            body["weights"] = weights
        if scheduler_params:
            body["scheduler"] = {**({"name": scheduler} if scheduler else {}), **scheduler_params}
        elif scheduler:
            body["scheduler"] = scheduler
        if platform is not None:
            body["platform"] = platform
        answer: dict[str, Any] = self.write("/runs/", body)
        return answer

    def wait(
        self,
        url: str,
        timeout_s: float,
        poll_s: float = 5.0,
        on_poll: Callable[[dict[str, Any]], None] | None = None,
    ) -> dict[str, Any]:
        """Poll a run until it has finished; return it. Raises ApiError after ``timeout_s``."""
        deadline = time.monotonic() + timeout_s
        while True:
            run: dict[str, Any] = self.request("GET", url)
            if on_poll is not None:
                on_poll(run)
            if run["status"] in FINISHED:
                return run
            if time.monotonic() > deadline:
                raise ApiError(f"run {run['id']} still {run['status']} after {timeout_s:g} s")
            time.sleep(poll_s)


def _where(error: dict[str, Any]) -> str:
    line = f"line {error['line']}: " if error.get("line") else ""
    field = f"{error['field']}: " if error.get("field") else ""
    return line + field


def _api_error(method: str, url: str, exc: urllib.error.HTTPError) -> ApiError:
    try:
        payload = json.loads(exc.read() or b"{}")
    except ValueError:
        payload = {}
    message = payload.get("message") or payload.get("detail") or exc.reason
    return ApiError(f"{method} {url}: HTTP {exc.code}: {message}", exc.code, payload.get("errors"))
