"""schemathesis against a live server and its OpenAPI schema: every check, 0 failures.

CI runs a bounded number of examples per operation; CB_SCHEMATHESIS_EXAMPLES=1000 runs the long local
mode (docs/api.md). tests/e2e/schemathesis.toml holds the one non-default setting and says why.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.conftest import ARTIFACTS, ROOT, LiveApp, serve

SCHEMATHESIS = Path(sys.executable).with_name("schemathesis")
CONFIG = Path(__file__).with_name("schemathesis.toml")
EXAMPLES = int(os.environ.get("CB_SCHEMATHESIS_EXAMPLES", "25"))
SEED_WORKFLOW = "nap:\n  type: Sleep\n  sleep_time: 0.01\n  num_requests: 2\n"


@pytest.fixture(scope="module")
def schema_app(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveApp]:
    # Its own server and database: generated requests may queue runs, which must not slow the journey.
    # Throttles are raised so that generated requests reach the operations (tests/security tests them).
    throttles = {
        "CB_THROTTLE_WRITES": "1000000/h",
        "CB_THROTTLE_AUTH_FAILURES": "1000000/h",
        "CB_THROTTLE_ANON_READS": "",
    }
    with serve(tmp_path_factory.mktemp("schema"), throttles) as app:
        yield app


def _call(app: LiveApp, token: str, path: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
    request = urllib.request.Request(
        app.url + path,
        data=None if body is None else json.dumps(body).encode(),
        headers={"Authorization": f"Token {token}", "Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return dict(json.load(response))
    except urllib.error.HTTPError as exc:
        raise AssertionError(f"{path}: {exc.code} {exc.read()[:2000]!r}") from None


# The long local mode outlasts the suite's default per-test timeout.
@pytest.mark.timeout(max(600, EXAMPLES * 25))
def test_every_operation_conforms_to_the_schema_under_every_check(
    schema_app: LiveApp, tmp_path: Path
) -> None:
    token = (
        subprocess.run(
            [sys.executable, "manage.py", "create_api_token", "fuzzer"],
            cwd=ROOT,
            env=schema_app.env,
            check=True,
            capture_output=True,
            text=True,
        )
        .stdout.strip()
        .splitlines()[-1]
    )
    # Workflow 1 and a finished run 1, which schemathesis.toml hands out as ids half of the time.
    assert _call(schema_app, token, "/api/v1/workflows/", {"name": "seed", "yaml": SEED_WORKFLOW})["id"] == 1
    assert _call(schema_app, token, "/api/v1/runs/", {"workflow": 1})["id"] == 1
    deadline = time.monotonic() + 60
    while _call(schema_app, token, "/api/v1/runs/1/")["status"] != "succeeded":
        assert time.monotonic() < deadline, "the seed run did not finish"
        time.sleep(0.5)
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    result = subprocess.run(
        [
            str(SCHEMATHESIS),
            "--config-file",
            str(CONFIG),
            "run",
            f"{schema_app.url}/api/v1/schema/",
            "--checks",
            "all",
            "--header",
            f"Authorization: Token {token}",
            "--max-examples",
            str(EXAMPLES),
            "--seed",
            "1",
            "--workers",
            "2",
            "--report",
            "junit",
            "--report-junit-path",
            str(ARTIFACTS / "schemathesis.xml"),
        ],
        # Its example database goes to a temporary folder, not the checkout.
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=max(500, EXAMPLES * 20),
    )
    server_log = schema_app.log.read_text()[-3000:]
    assert result.returncode == 0, result.stdout[-8000:] + result.stderr[-2000:] + server_log
