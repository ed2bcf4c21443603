"""Intel PCM through ``pcm-memory <interval> -csv``: memory bandwidth per socket and for the system.

pcm-memory's compact CSV has two header rows: the first names the group of each column (``SKT0``,
``System``), the second the column (``Memory (MB/s)``, ``Read``, ``Write``, ``Memory``); then one
row per interval. Entities: ``system`` and ``skt<N>``; values in MB/s as pcm prints them.
pcm-memory needs root (MSR and uncore PMU access); otherwise it exits and the source says why.
"""

from __future__ import annotations

import shutil

from benchmarks.monitor.base import AppProcesses, Row, SourceUnavailable
from benchmarks.monitor.sources.procutil import ToolSource

# pcm-memory refuses intervals below 15 ms; below 100 ms its uncore readings get noisy.
MIN_INTERVAL_S = 0.1


class PcmCsvParser:
    """Reads pcm-memory's CSV lines; ``feed`` returns {entity: {column: MB/s}} for a data row."""

    def __init__(self) -> None:
        self.groups: list[str] = []
        self.columns: dict[int, tuple[str, str]] = {}

    def feed(self, line: str) -> dict[str, dict[str, float]] | None:
        """Return the bandwidths a data line holds, or None for header or unrelated lines."""
        cells = [c.strip() for c in line.rstrip("\n").split(",")]
        if "System" in cells and not self.columns:
            self.groups = cells
            return None
        if self.groups and not self.columns:
            self.columns = self._map(cells)
            return None
        if not self.columns or len(cells) < len(self.groups):
            return None
        out: dict[str, dict[str, float]] = {}
        for i, (entity, column) in self.columns.items():
            try:
                out.setdefault(entity, {})[column] = float(cells[i])
            except ValueError:
                continue
        return out or None

    def _map(self, names: list[str]) -> dict[int, tuple[str, str]]:
        mapping: dict[int, tuple[str, str]] = {}
        for i, (group, name) in enumerate(zip(self.groups, names, strict=False)):
            if group == "System" and name in ("Read", "Write", "Memory"):
                mapping[i] = ("system", f"{name.lower()}_mbps")
            elif group.startswith("SKT") and name.startswith("Mem Read"):
                mapping[i] = (group.lower(), "read_mbps")
            elif group.startswith("SKT") and name.startswith("Mem Write"):
                mapping[i] = (group.lower(), "write_mbps")
            elif group.startswith("SKT") and name.startswith("Memory"):
                mapping[i] = (group.lower(), "memory_mbps")
        return mapping


class PcmSource(ToolSource):
    name = "pcm"
    description = "Intel PCM (pcm-memory): memory bandwidth per socket and system, MB/s"
    columns = ("read_mbps", "write_mbps", "memory_mbps")
    label = "pcm-memory"
    # Without root, pcm-memory exits after its banner.
    startup_check_s = 1.0

    def __init__(self, commands: tuple[str, ...] = ("pcm-memory", "pcm-memory.x")) -> None:
        super().__init__()
        self.commands = commands
        self._parser = PcmCsvParser()
        self._latest: dict[str, dict[str, float]] = {}

    def open(self, hz: float) -> None:
        exe = next((p for c in self.commands if (p := shutil.which(c))), None)
        if exe is None:
            raise SourceUnavailable("pcm-memory is not installed (Intel PCM, optional)")
        interval = max(MIN_INTERVAL_S, 1 / hz)
        self.start([exe, f"{interval:g}", "-csv", "-silent"])

    def on_line(self, line: str) -> None:
        values = self._parser.feed(line)
        if values:
            with self.lock:
                self._latest = values

    def sample(self, t: float, apps: AppProcesses) -> list[Row]:
        with self.lock:
            fresh, self._latest = self._latest, {}
        if not fresh:
            self.check_running()
        return [(t, entity, *(v.get(c) for c in self.columns)) for entity, v in sorted(fresh.items())]
