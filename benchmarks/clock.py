"""The one clock of a run.

Every timestamp (runner, application processes, monitor) comes from ``now()``: CLOCK_MONOTONIC is
system-wide on Linux and macOS, so values taken in different processes of one machine are comparable.
"""

from __future__ import annotations

import time


def now() -> float:
    """Return seconds on the shared monotonic clock."""
    return time.monotonic()


def wall() -> float:
    """Return wall-clock seconds since the epoch (only for labelling a run, never for intervals)."""
    return time.time()
