"""RAPL through /sys/class/powercap: CPU package, core, uncore and DRAM energy (Intel, and AMD Zen).

Entities: one per zone, named by its ``name`` file and parent (``package-0``, ``package-0/dram``).
``energy_j`` is the energy since the monitor started, with the counter's wrap-around
(``max_energy_range_uj``) undone; ``power_w`` is the mean power since the previous sample.
Since 2020 kernels make ``energy_uj`` readable by root only; the source then says so.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from benchmarks.monitor.base import AppProcesses, Row, Source, SourceUnavailable

POWERCAP = Path("/sys/class/powercap")


@dataclass
class Zone:
    entity: str
    path: Path
    max_uj: int
    last_uj: int
    last_t: float | None = None
    total_uj: int = 0

    def read(self) -> int:
        return int((self.path / "energy_uj").read_text())


class RaplSource(Source):
    name = "rapl"
    description = "RAPL (/sys/class/powercap): CPU package and DRAM energy counters"
    columns = ("energy_j", "power_w")

    def __init__(self, root: Path = POWERCAP) -> None:
        self.root = root
        self.zones: list[Zone] = []

    def open(self, hz: float) -> None:
        if not self.root.is_dir():
            raise SourceUnavailable(f"{self.root} does not exist (no RAPL on this CPU or kernel)")
        # intel-rapl:0 is a package, intel-rapl:0:1 a sub-zone of it; the mmio mirror repeats them.
        dirs = sorted(d for d in self.root.iterdir() if d.name.startswith("intel-rapl:"))
        if not dirs:
            raise SourceUnavailable(f"no intel-rapl zone under {self.root}")
        names = {d.name: (d / "name").read_text().strip() for d in dirs}
        for d in dirs:
            parent = d.name.rsplit(":", 1)[0]
            entity = f"{names[parent]}/{names[d.name]}" if parent in names else names[d.name]
            try:
                energy = int((d / "energy_uj").read_text())
                max_uj = int((d / "max_energy_range_uj").read_text())
            except PermissionError as exc:
                raise SourceUnavailable(
                    f"{d / 'energy_uj'} is readable by root only (run as root or chmod o+r it)"
                ) from exc
            except (OSError, ValueError) as exc:
                raise SourceUnavailable(f"cannot read {d}: {exc}") from exc
            self.zones.append(Zone(entity, d, max_uj, energy))

    def sample(self, t: float, apps: AppProcesses) -> list[Row]:
        rows: list[Row] = []
        for zone in self.zones:
            try:
                now_uj = zone.read()
            except (OSError, ValueError):
                continue
            delta = now_uj - zone.last_uj
            if delta < 0:
                delta += zone.max_uj + 1
            power = None
            if zone.last_t is not None and t > zone.last_t:
                power = delta / 1e6 / (t - zone.last_t)
            zone.total_uj += delta
            zone.last_uj, zone.last_t = now_uj, t
            rows.append((t, zone.entity, zone.total_uj / 1e6, power))
        return rows
