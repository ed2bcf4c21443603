"""Shared test set-up: resource markers that skip locally and fail in CI (CB_REQUIRE_SERVICES=1)."""

from __future__ import annotations

import glob
import os
import shutil
import socket
from urllib.parse import urlparse

import pytest

REQUIRE_SERVICES = os.environ.get("CB_REQUIRE_SERVICES") == "1"
POSTGRES_URL = os.environ.get("CB_TEST_POSTGRES_URL", "postgres://postgres@127.0.0.1:5432/test")
REDIS_URL = os.environ.get("CB_TEST_REDIS_URL", "redis://127.0.0.1:6379/15")
CHROMIUM = os.environ.get("CB_CHROMIUM", "/usr/bin/chromium")


def _reachable(url: str) -> bool:
    parsed = urlparse(url)
    try:
        with socket.create_connection((parsed.hostname or "127.0.0.1", parsed.port or 0), timeout=1):
            return True
    except OSError:
        return False


def _gpu_present() -> bool:
    try:
        import pynvml

        pynvml.nvmlInit()
        count = pynvml.nvmlDeviceGetCount()
        pynvml.nvmlShutdown()
        return count > 0
    except Exception:
        return False


def _missing(marker: str) -> str | None:
    """Return why the resource a marker names is missing, or None when it is there."""
    if marker == "postgres" and not _reachable(POSTGRES_URL):
        return f"PostgreSQL not reachable at {POSTGRES_URL}"
    if marker == "broker" and not _reachable(REDIS_URL):
        return f"Redis not reachable at {REDIS_URL}"
    if marker == "browser" and not (shutil.which(CHROMIUM) or os.path.exists(CHROMIUM)):
        return f"Chromium not found at {CHROMIUM} (apt-get install chromium)"
    if marker == "gpu" and not _gpu_present():
        return "no NVIDIA GPU visible"
    if marker == "faults":
        return _fault_tools_missing()
    if marker == "stack":
        return _stack_tools_missing()
    if marker == "llama_server":
        from benchmarks.apps.server import ServerError, server_binary

        try:
            server_binary()
        except ServerError as exc:
            return str(exc)
    return None


def _fault_tools_missing() -> str | None:
    # Fault tests start (and stop) their own servers: they need the server programs, not the services.
    if not shutil.which("redis-server"):
        return "redis-server is not installed"
    if not glob.glob("/usr/lib/postgresql/*/bin/initdb"):
        return "PostgreSQL server programs (initdb, pg_ctl) are not installed"
    if os.geteuid() == 0 and not shutil.which("runuser"):
        return "running as root without runuser to start PostgreSQL as the postgres user"
    return None


def _stack_tools_missing() -> str | None:
    # docker-compose.yml's services as programs: the fault tests' servers plus the proxy.
    if not (shutil.which("nginx") or os.path.exists("/usr/sbin/nginx")):
        return "nginx is not installed (apt-get install nginx-light)"
    if not shutil.which("openssl"):
        return "openssl is not installed (the proxy's test certificate)"
    return _fault_tools_missing()


def pytest_runtest_setup(item: pytest.Item) -> None:
    for marker in ("postgres", "broker", "browser", "gpu", "faults", "stack", "llama_server"):
        if item.get_closest_marker(marker) is None:
            continue
        reason = _missing(marker)
        if reason is None:
            continue
        # A GPU is hardware CI does not have: that one always skips.
        if REQUIRE_SERVICES and marker != "gpu":
            pytest.fail(f"required service missing ({marker}): {reason}", pytrace=False)
        pytest.skip(reason)
