"""Web tests: Django settings, and the factories every web test uses (one place).

The web tests run on SQLite by default and on PostgreSQL when DATABASE_URL points there (CI does that).
"""

from __future__ import annotations

import contextlib
import os
import tempfile

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "cbweb.settings")
# Bundles of runs executed by tests go to a throw-away folder, not results/ of the checkout.
os.environ.setdefault("CB_RESULTS_DIR", tempfile.mkdtemp(prefix="cb-web-test-results-"))

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import django
import pytest

# Test modules import models at collection time, before pytest-django's own set-up.
django.setup()

SLEEP_YAML = """\
# two sleeping applications in sequence
sleep1:
  type: Sleep
  sleep_time: 0.05
  num_requests: 3
sleep2:
  type: Sleep
  sleep_time: 0.05
  num_requests: 2
workflows:
  first:
    uses: sleep1
  second:
    uses: sleep2
    depend_on: [first]
"""


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    # On PostgreSQL every database test needs the server: mark them so that a missing server skips
    # locally and fails in CI (tests/conftest.py) instead of erroring on connect.
    if os.environ.get("DATABASE_URL", "").startswith(("postgres://", "postgresql://")):
        for item in items:
            if "django_db" in item.keywords or "db" in getattr(item, "fixturenames", ()):
                item.add_marker(pytest.mark.postgres)


@pytest.fixture(autouse=True)
def _local_executor_stopped() -> Iterator[None]:
    # A test that queues runs for real starts the local executor and its sweeper: stop them after it,
    # or the sweeper would hand the next tests' queued runs to this process.
    yield
    from cbweb.runs.dispatch import LocalExecutor

    LocalExecutor.shutdown()


@contextlib.contextmanager
def celery_broker(url: str) -> Iterator[None]:
    """Send Celery tasks from this process to the broker at ``url`` (not eagerly); restore afterwards."""
    from workers.celery import app

    def forget_connections() -> None:
        # close() drops the connection pool but not the producer pool, which stays bound to the
        # broker it was made for.
        app.close()
        app.amqp._producer_pool = None

    saved = {key: app.conf[key] for key in ("broker_url", "task_always_eager")}
    app.conf.update(broker_url=url, task_always_eager=False)
    forget_connections()
    try:
        yield
    finally:
        app.conf.update(saved)
        forget_connections()


@pytest.fixture(autouse=True)
def _fast_password_hashing(settings: Any) -> None:
    # PBKDF2's deliberate slowness costs a second per user on this shared machine.
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture(autouse=True)
def _private_cache(settings: Any) -> None:
    # Each test gets an empty cache of its own, so throttle counts never leak from one test to the next
    # (and a Redis cache from the environment is never flushed by a test).
    settings.CACHES = {
        "default": {
            "BACKEND": "django.core.cache.backends.locmem.LocMemCache",
            "LOCATION": os.urandom(8).hex(),
        }
    }


@pytest.fixture
def make_token(db: Any) -> Any:
    """Create an API token for a user; return its key (shown once, as manage.py create_api_token does)."""
    from cbweb.api.services import token_create

    def make(user: Any) -> str:
        return token_create(user=user)[1]

    return make


@pytest.fixture
def make_user(db: Any) -> Any:
    from django.contrib.auth import get_user_model

    def make(username: str = "alice", staff: bool = False) -> Any:
        return get_user_model().objects.create_user(
            username=username, password="pw-" + username, is_staff=staff
        )

    return make


@pytest.fixture
def alice(make_user: Any) -> Any:
    return make_user("alice")


@pytest.fixture
def bob(make_user: Any) -> Any:
    return make_user("bob")


@pytest.fixture
def make_workflow(db: Any) -> Any:
    from cbweb.workflows.services import workflow_create

    made: list[str] = []

    def make(owner: Any, name: str | None = None, yaml_text: str = SLEEP_YAML) -> Any:
        # An owner's active workflows have distinct names: later unnamed ones are "sleepy 2", ...
        if name is None:
            made.append("sleepy")
            name = "sleepy" if len(made) == 1 else f"sleepy {len(made)}"
        return workflow_create(owner=owner, name=name, yaml_text=yaml_text)

    return make


@pytest.fixture
def make_run(db: Any) -> Any:
    """Launch a run as a page does (not executed: on_commit callbacks do not fire inside a test
    transaction; a ``transaction=True`` test hands it to the executor)."""
    from cbweb.runs.dispatch import run_launch
    from cbweb.workflows.selectors import version_latest

    def make(workflow: Any, user: Any, scheduler: str = "greedy", repeats: int = 1) -> Any:
        runs = run_launch(
            version=version_latest(workflow=workflow), user=user, scheduler=scheduler, repeats=repeats
        )
        return runs[0] if repeats == 1 else runs

    return make


@pytest.fixture
def finish_run(db: Any, settings: Any) -> Any:
    """Finish a queued run with a recorded result (tests/cbweb/recorded.py), stored as a worker stores
    what the engine returned (the DatabaseSink, then run_finish); return the finished run. No engine
    runs: tests about execution itself call ``run_execute``."""
    from cbweb.runs.models import Run
    from tests.cbweb.recorded import finish_run as store

    def finish(run: Any, recording: str = "slo") -> Any:
        store(run.pk, recording, Path(settings.CB_RESULTS_DIR))
        return Run.objects.get(pk=run.pk)

    return finish


@pytest.fixture
def api(alice: Any, make_token: Any) -> Any:
    """A DRF client authenticated with alice's token (as CI scripts are)."""
    from rest_framework.test import APIClient

    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {make_token(alice)}")
    return client
