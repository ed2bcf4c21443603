"""psutil: CPU per core, RAM, swap, and the CPU% and RSS of each application's process tree.

Entities: ``system`` (whole-machine CPU%, memory, swap), ``cpu<N>`` (one per logical CPU) and
``app:<node>`` (the application's processes summed: CPU% of one core per 100, RSS).
The ``system`` row comes every tick. Per-core rows and ``app:`` rows come at most every
DETAIL_INTERVAL_S: /proc/stat counts in 10 ms ticks, so at 20 Hz one core would read in steps of 20 %
(at 5 Hz, 5 %), and reading each application's processes every tick was most of the source's cost on
a 16-core GPU machine (docs/results/monitor-h200.md).
"""

from __future__ import annotations

import sys

import psutil

from benchmarks.monitor.base import AppProcesses, Row, Source, app_entity, core_entity, read_proc

_MEMINFO_KEYS = (b"MemTotal:", b"\nMemAvailable:", b"\nSwapTotal:", b"\nSwapFree:")
# Per-core and per-application rows: at most this often (the system row comes every tick).
DETAIL_INTERVAL_S = 0.2


class PsutilSource(Source):
    name = "psutil"
    description = "CPU per core, RAM and swap of the machine; CPU% and RSS of each application"
    columns = (
        "cpu_percent",
        "mem_used_bytes",
        "mem_available_bytes",
        "swap_used_bytes",
        "rss_bytes",
        "processes",
    )

    def __init__(self, detail_interval_s: float = DETAIL_INTERVAL_S) -> None:
        self.detail_interval_s = detail_interval_s
        self._total: tuple[int, int] | None = None
        self._cores: list[tuple[int, int]] = []
        self._detail_at = float("-inf")

    def open(self, hz: float) -> None:
        # The first reading only sets the reference point of every later percentage.
        self._total, self._cores = cpu_times(per_core=True)

    def read_all_next(self) -> None:
        self._detail_at = float("-inf")

    def sample(self, t: float, apps: AppProcesses) -> list[Row]:
        detail = t - self._detail_at >= self.detail_interval_s
        total, cores = cpu_times(per_core=detail)
        busy = busy_percent(self._total, total) if self._total is not None else None
        self._total = total
        used, available, swap_used = memory()
        rows: list[Row] = [(t, "system", busy, used, available, swap_used, None, None)]
        if not detail:
            return rows
        self._detail_at = t
        last, self._cores = self._cores, cores
        if len(last) == len(cores):
            rows += [
                (t, core_entity(i), busy_percent(a, b), None, None, None, None, None)
                for i, (a, b) in enumerate(zip(last, cores, strict=True))
            ]
        for node, procs in apps.processes():
            cpu, rss, alive = 0.0, 0, 0
            for proc in procs:
                try:
                    with proc.oneshot():
                        # psutil keeps the last reading per Process object: this is the share since then.
                        cpu += proc.cpu_percent(None)
                        rss += proc.memory_info().rss
                    alive += 1
                except psutil.Error:
                    continue
            if alive:
                rows.append((t, app_entity(node), cpu, None, None, None, rss, alive))
        return rows


def busy_percent(before: tuple[int, int], after: tuple[int, int]) -> float:
    """Return the busy share, in percent, between two (busy, total) CPU-time readings."""
    busy, total = after[0] - before[0], after[1] - before[1]
    return 100.0 * busy / total if total > 0 else 0.0


def cpu_times(per_core: bool) -> tuple[tuple[int, int], list[tuple[int, int]]]:
    """Return (busy, total) CPU time of the whole machine and, when ``per_core``, of each logical CPU.

    On Linux in jiffies from /proc/stat, read directly: psutil.cpu_percent cost several times as much
    (at 100 Hz it was most of the sampler's CPU time). Busy excludes idle and iowait, as in psutil.
    Elsewhere from psutil, in hundredths of a second. Without ``per_core`` the list is empty.
    """
    if sys.platform != "linux":
        cores = [(round((sum(c) - c.idle) * 100), round(sum(c) * 100)) for c in psutil.cpu_times(percpu=True)]
        return (sum(b for b, _ in cores), sum(t for _, t in cores)), (cores if per_core else [])
    data = read_proc("/proc/stat")
    if not per_core:
        return _jiffies(data[: data.index(b"\n")]), []
    lines = data.split(b"\n")
    cores = []
    for line in lines[1:]:
        if not line.startswith(b"cpu"):
            break
        cores.append(_jiffies(line))
    return _jiffies(lines[0]), cores


def _jiffies(line: bytes) -> tuple[int, int]:
    values = [int(v) for v in line.split()[1:9]]
    total = sum(values)
    return total - values[3] - values[4], total


def memory() -> tuple[int, int, int]:
    """Return (RAM used, RAM available, swap used) in bytes; used = total - available, as ``free`` shows."""
    if sys.platform != "linux":
        mem, swap = psutil.virtual_memory(), psutil.swap_memory()
        return mem.total - mem.available, mem.available, swap.used
    # One read of /proc/meminfo instead of psutil's two (swap_memory also parses /proc/vmstat).
    data = read_proc("/proc/meminfo")
    total, available, swap_total, swap_free = (_meminfo_kb(data, key) * 1024 for key in _MEMINFO_KEYS)
    return total - available, available, swap_total - swap_free


def _meminfo_kb(data: bytes, key: bytes) -> int:
    at = data.index(key) + len(key)
    return int(data[at : data.index(b"\n", at)].split()[0])
