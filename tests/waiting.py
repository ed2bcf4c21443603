"""Polling for tests that watch real processes (workers, servers, runs) reach a state."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest


def wait_until(condition: Callable[[], Any], message: str, timeout: float = 60, every: float = 0.1) -> Any:
    """Return the first truthy value of ``condition()``; fail the test with ``message`` after ``timeout``."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(every)
    pytest.fail(message)
