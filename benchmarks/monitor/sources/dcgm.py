"""DCGM through ``dcgmi dmon -e 1002,1003,1005``: SM activity, SM occupancy, DRAM activity.

``dcgmi dmon`` prints a header (``#Entity  SMACT  SMOCC  DRAMA``, then a units line ``ID``), repeated
every 14 rows, and one row per entity per interval (``GPU 0  0.912  0.521  0.204``; ``N/A`` when a
value is blank). The parser reads the columns from the header rather than assuming their order.
Entities: ``gpu<N>`` (``gpu-i<N>``/``gpu-ci<N>`` for MIG instances); values in percent (0-100).
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from dataclasses import dataclass

from benchmarks.monitor.base import AppProcesses, Row, SourceUnavailable
from benchmarks.monitor.sources.procutil import ToolSource

FIELDS = "1002,1003,1005"
# dcgmi short name -> our column; DCGM reports these as ratios 0-1.
COLUMNS = {"SMACT": "sm_activity_pct", "SMOCC": "sm_occupancy_pct", "DRAMA": "dram_active_pct"}
# Profiling fields are not sampled faster than this by DCGM.
MIN_INTERVAL_MS = 100


@dataclass(frozen=True)
class DmonRow:
    entity: str
    values: dict[str, float | None]


class DmonParser:
    """Turns ``dcgmi dmon`` output lines into rows; keeps the most recent header."""

    def __init__(self) -> None:
        self.header: list[str] = []

    def feed(self, line: str) -> DmonRow | None:
        """Return the row a line holds, or None for a header, units, blank or unparsable line."""
        tokens = line.split()
        if not tokens:
            return None
        if tokens[0].startswith("#"):
            names = tokens[1:] if tokens[0] == "#Entity" else tokens[2:]
            self.header = [COLUMNS.get(n, n.lower()) for n in names]
            return None
        if tokens[0] == "ID" or len(tokens) < 2 or not tokens[1].isdigit() or not self.header:
            return None
        values: dict[str, float | None] = {}
        for name, raw in zip(self.header, tokens[2:], strict=False):
            try:
                value = float(raw)
            except ValueError:
                value = None  # N/A, N/W (not watched), N/S (not supported)
            values[name] = None if value is None else value * 100 if name in COLUMNS.values() else value
        return DmonRow(f"{tokens[0].lower()}{tokens[1]}", values)

    def parse(self, text: str) -> Iterator[DmonRow]:
        """Yield every row of a block of dmon output."""
        for line in text.splitlines():
            row = self.feed(line)
            if row is not None:
                yield row


class DcgmSource(ToolSource):
    name = "dcgm"
    description = "DCGM (dcgmi dmon -e 1002,1003,1005): SM activity, SM occupancy, DRAM activity"
    columns = tuple(COLUMNS.values())
    label = "dcgmi dmon"
    # A dmon that fails (no host engine, no permission) exits at once.
    startup_check_s = 0.5

    def __init__(self, command: str = "dcgmi") -> None:
        super().__init__()
        self.command = command
        self._latest: dict[str, DmonRow] = {}
        self._parser = DmonParser()

    def open(self, hz: float) -> None:
        exe = shutil.which(self.command)
        if exe is None:
            raise SourceUnavailable(
                f"{self.command} is not installed (DCGM is optional; NVML GPM gives the same signals)"
            )
        interval_ms = max(MIN_INTERVAL_MS, round(1000 / hz))
        self.start([exe, "dmon", "-e", FIELDS, "-d", str(interval_ms)])

    def on_line(self, line: str) -> None:
        row = self._parser.feed(line)
        if row is not None:
            with self.lock:
                self._latest[row.entity] = row

    def sample(self, t: float, apps: AppProcesses) -> list[Row]:
        with self.lock:
            fresh, self._latest = self._latest, {}
        if not fresh:
            self.check_running()
        # dmon prints at its own interval: a tick reports only what arrived since the last one.
        return [(t, r.entity, *(r.values.get(c) for c in self.columns)) for r in fresh.values()]
