"""Apple ``powermetrics`` (macOS, Apple silicon): CPU, GPU and ANE power and GPU busy share.

``powermetrics --samplers cpu_power,gpu_power -f plist -i <ms>`` prints one plist document per
interval. Entity: ``soc``. Power in watts (powermetrics reports mW), GPU busy = 1 - idle_ratio.
powermetrics needs root; on other systems the source reports itself unavailable.
"""

from __future__ import annotations

import os
import plistlib
import shutil
import sys
from typing import Any

from benchmarks.monitor.base import AppProcesses, Row, SourceUnavailable
from benchmarks.monitor.sources.procutil import ToolSource

# powermetrics' own minimum is 1 ms, but below 100 ms its energy estimates are mostly noise.
MIN_INTERVAL_MS = 100
COLUMNS = ("cpu_power_w", "gpu_power_w", "ane_power_w", "combined_power_w", "gpu_busy_pct", "gpu_freq_mhz")


def parse_plist(document: bytes) -> dict[str, float | None]:
    """Return our columns from one powermetrics plist document (missing keys are None)."""
    data: dict[str, Any] = plistlib.loads(document.strip(b"\0\n "))
    proc = data.get("processor", {})
    gpu = data.get("gpu", {})

    def watts(d: dict[str, Any], key: str) -> float | None:
        return float(d[key]) / 1000 if key in d else None

    idle = gpu.get("idle_ratio")
    freq = gpu.get("freq_hz")
    return {
        "cpu_power_w": watts(proc, "cpu_power"),
        "gpu_power_w": watts(proc, "gpu_power") if "gpu_power" in proc else watts(gpu, "gpu_power"),
        "ane_power_w": watts(proc, "ane_power"),
        "combined_power_w": watts(proc, "combined_power"),
        "gpu_busy_pct": None if idle is None else (1 - float(idle)) * 100,
        # Despite its name, freq_hz holds MHz.
        "gpu_freq_mhz": None if freq is None else float(freq),
    }


class PowermetricsSource(ToolSource):
    name = "powermetrics"
    description = "Apple powermetrics: CPU/GPU/ANE power, GPU busy share (macOS, needs root)"
    columns = COLUMNS
    label = "powermetrics"
    startup_check_s = 1.0

    def __init__(self) -> None:
        super().__init__()
        self._buffer: list[str] = []
        self._latest: dict[str, float | None] | None = None

    def open(self, hz: float) -> None:
        if sys.platform != "darwin":
            raise SourceUnavailable(f"powermetrics exists on macOS only (this is {sys.platform})")
        exe = shutil.which("powermetrics")
        if exe is None:
            raise SourceUnavailable("powermetrics is not on the PATH")
        if os.geteuid() != 0:
            raise SourceUnavailable("powermetrics needs root (run the monitor with sudo)")
        interval_ms = max(MIN_INTERVAL_MS, round(1000 / hz))
        self.start([exe, "--samplers", "cpu_power,gpu_power", "-f", "plist", "-i", str(interval_ms)])

    def on_line(self, line: str) -> None:
        self._buffer.append(line)
        if "</plist>" not in line:
            return
        document, self._buffer = "".join(self._buffer), []
        try:
            values = parse_plist(document.encode())
        except Exception:
            return  # a truncated document at start-up or shutdown
        with self.lock:
            self._latest = values

    def sample(self, t: float, apps: AppProcesses) -> list[Row]:
        with self.lock:
            fresh, self._latest = self._latest, None
        if fresh is None:
            self.check_running()
            return []
        return [(t, "soc", *(fresh[c] for c in COLUMNS))]
