"""A live ConsumerBench web app for browser journeys: `manage.py runserver` in a subprocess on a fresh
SQLite database, with the local run executor, exactly as `make demo` would serve it."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import CHROMIUM

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "test-artifacts" / "e2e"
USER, PASSWORD = "e2e", "e2e-password-1"


@dataclass
class LiveApp:
    url: str
    env: dict[str, str]
    log: Path


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _manage(env: dict[str, str], *args: str) -> None:
    subprocess.run(
        [sys.executable, "manage.py", *args], cwd=ROOT, env=env, check=True, capture_output=True, timeout=120
    )


@contextlib.contextmanager
def serve(tmp: Path, extra_env: dict[str, str] | None = None) -> Iterator[LiveApp]:
    """Migrate a fresh database in ``tmp``, create the e2e user, serve the app until the block ends."""
    if not (ROOT / "node_modules" / "chart.js" / "dist" / "chart.umd.min.js").is_file():
        pytest.fail("Chart.js is not installed: run `npm ci` in the checkout (make install does)")
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "cbweb.settings",
        "DATABASE_URL": f"sqlite:///{tmp / 'e2e.sqlite3'}",
        "CB_RESULTS_DIR": str(tmp / "results"),
        "CB_RUN_EXECUTOR": "local",
        "CELERY_BROKER_URL": "",
        "DJANGO_SUPERUSER_PASSWORD": PASSWORD,
        **(extra_env or {}),
    }
    _manage(env, "migrate", "--noinput")
    _manage(env, "createsuperuser", "--noinput", "--username", USER, "--email", "e2e@example.com")
    port = _free_port()
    log = tmp / "server.log"
    with log.open("w") as out:
        # --insecure: serve static files (Chart.js from node_modules) without DEBUG, as the demo does.
        server = subprocess.Popen(
            [sys.executable, "manage.py", "runserver", f"127.0.0.1:{port}", "--noreload", "--insecure"],
            cwd=ROOT,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if server.poll() is not None or time.monotonic() > deadline:
                    pytest.fail(f"the web server did not start:\n{log.read_text()}")
                time.sleep(0.2)
        yield LiveApp(f"http://127.0.0.1:{port}", env, log)
    finally:
        # SIGINT lets the server exit normally, so the run executor's application processes end too.
        server.send_signal(signal.SIGINT)
        try:
            server.wait(timeout=15)
        except subprocess.TimeoutExpired:
            server.kill()


@pytest.fixture(scope="module")
def page() -> Iterator[Any]:
    """A headless Chromium tab (one per test module); JavaScript errors on its pages fail the module."""
    from playwright.sync_api import sync_playwright

    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as p:
        browser = p.chromium.launch(
            executable_path=CHROMIUM,
            args=[
                "--no-sandbox",
                "--disable-gpu",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
            ],
        )
        # Playwright evaluates wait_for_function's string predicates with eval, which the pages'
        # Content-Security-Policy forbids: these tests bypass it. The policy itself is tested without
        # bypassing, pages and charts included, in tests/security/test_pages_csp.py.
        context = browser.new_context(viewport={"width": 1400, "height": 2200}, bypass_csp=True)
        tab = context.new_page()
        errors: list[str] = []
        tab.on("pageerror", lambda exc: errors.append(str(exc)))
        yield tab
        browser.close()
        assert errors == [], f"JavaScript errors on the pages: {errors}"


def log_in(page: Any, app: LiveApp) -> None:
    """Log the e2e user in on ``page``."""
    page.goto(f"{app.url}/accounts/login/")
    page.fill("#id_username", USER)
    page.fill("#id_password", PASSWORD)
    page.get_by_role("button", name="Log in").click()
    page.wait_for_url("**/workflows/")


def wait_for_result(page: Any, timeout_ms: float) -> None:
    """Wait until ``page``, a run's page, shows the run succeeded as the server renders a finished run.

    The live page marks the status succeeded and then reloads itself; waiting for the status alone
    returns before that reload, which then interrupts or changes what the test does next.
    """
    page.wait_for_selector('#progress-section[data-finished="1"]', timeout=timeout_ms)
    page.wait_for_selector("#run-status.succeeded", timeout=5_000)


@pytest.fixture(scope="session")
def live_app(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveApp]:
    with serve(tmp_path_factory.mktemp("e2e")) as app:
        yield app
