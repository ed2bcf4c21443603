"""schemathesis against the live OpenAPI schema: generated requests to every operation, no 5xx."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.conftest import ARTIFACTS, ROOT, LiveApp, serve

SCHEMATHESIS = Path(sys.executable).with_name("schemathesis")


@pytest.fixture(scope="module")
def schema_app(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveApp]:
    # Its own server and database: generated requests may queue runs, which must not slow the journey.
    with serve(tmp_path_factory.mktemp("schema")) as app:
        yield app


def test_no_operation_answers_a_server_error(schema_app: LiveApp, tmp_path: Path) -> None:
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
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    result = subprocess.run(
        [
            str(SCHEMATHESIS),
            "run",
            f"{schema_app.url}/api/v1/schema/",
            "--checks",
            "not_a_server_error",
            "--header",
            f"Authorization: Token {token}",
            "--max-examples",
            "30",
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
        timeout=500,
    )
    server_log = schema_app.log.read_text()[-3000:]
    assert result.returncode == 0, result.stdout[-6000:] + result.stderr[-2000:] + server_log
