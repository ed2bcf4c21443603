"""cbweb.settings read from the environment as docs/security.md says, in a fresh interpreter each."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlparse

import pytest

ROOT = Path(__file__).resolve().parents[2]


def settings_of(**env: str) -> dict[str, list[str]]:
    """Return the file-policy folders a fresh ``cbweb.settings`` reads under ``env``."""
    keys = ("CB_DATA_DIRS", "CB_MODEL_DIRS")
    code = (
        "import json; from django.conf import settings; "
        f"print(json.dumps({{k: [str(p) for p in getattr(settings, k)] for k in {keys!r}}}))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        env={**os.environ, "DJANGO_SETTINGS_MODULE": "cbweb.settings", **env},
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(out.stdout)


def test_model_folders_are_a_search_path_of_commas_or_the_path_separator(tmp_path: Path) -> None:
    a, b, c = (str(tmp_path / n) for n in "abc")
    got = settings_of(CB_MODEL_DIRS=f"{a}{os.pathsep}{b}, {c}", CB_DATA_DIRS=f"{a},{b}")
    assert got["CB_MODEL_DIRS"] == [a, b, c]  # the engine's resolver reads the same value the same way
    assert got["CB_DATA_DIRS"] == [a, b]


def test_an_empty_model_search_path_means_the_default_folders() -> None:
    got = settings_of(CB_MODEL_DIRS=" , ")
    assert got["CB_MODEL_DIRS"] and all(Path(p).is_absolute() for p in got["CB_MODEL_DIRS"])


def _run_settings_code(code: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", "import django; django.setup(); " + code],
        env={**os.environ, "DJANGO_SETTINGS_MODULE": "cbweb.settings", **env},
        cwd=ROOT,
        capture_output=True,
        text=True,
    )


@pytest.mark.postgres
def test_a_statement_over_the_database_statement_timeout_is_cancelled_by_postgresql() -> None:
    from tests.conftest import POSTGRES_URL

    # The maintenance database: the statement reads nothing, and it always exists.
    url = urlparse(os.environ.get("DATABASE_URL", POSTGRES_URL))._replace(path="/postgres").geturl()
    code = (
        "from django.db import connection, OperationalError\n"
        "with connection.cursor() as c:\n"
        "    c.execute('SHOW statement_timeout'); print(c.fetchone()[0])\n"
        "    try:\n"
        "        c.execute('SELECT pg_sleep(2)'); print('finished')\n"
        "    except OperationalError as exc:\n"
        "        print(type(exc.__cause__).__name__)\n"
    )
    done = _run_settings_code(
        "exec(" + repr(code) + ")",
        DATABASE_URL=url,
        CB_DB_STATEMENT_TIMEOUT_MS="200",
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["200ms", "QueryCanceled"]


def test_the_statement_timeout_applies_to_postgresql_only_and_keeps_the_url_options() -> None:
    code = (
        "from django.conf import settings as s; "
        "print(s.DATABASES['default'].get('OPTIONS', {}).get('options'))"
    )
    sqlite = _run_settings_code(code, DATABASE_URL="sqlite:///:memory:", CB_DB_STATEMENT_TIMEOUT_MS="5000")
    assert sqlite.stdout.strip() == "None", sqlite.stderr[-2000:]
    url = "postgres://u@127.0.0.1:9/db?options=-c%20lock_timeout%3D1000"
    pg = _run_settings_code(code, DATABASE_URL=url, CB_DB_STATEMENT_TIMEOUT_MS="5000")
    assert pg.stdout.strip() == "-c lock_timeout=1000 -c statement_timeout=5000", pg.stderr[-2000:]
    off = _run_settings_code(code, DATABASE_URL=url.split("?")[0])
    assert off.stdout.strip() == "None", off.stderr[-2000:]


def test_a_negative_statement_timeout_is_refused() -> None:
    done = _run_settings_code("", CB_DB_STATEMENT_TIMEOUT_MS="-1")
    assert done.returncode != 0 and "CB_DB_STATEMENT_TIMEOUT_MS=-1" in done.stderr
