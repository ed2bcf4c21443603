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

from benchmarks.monitor.base import AppProcesses, Row, Source, app_entity

_MEMINFO_KEYS = frozenset((b"MemTotal", b"MemAvailable", b"SwapTotal", b"SwapFree"))
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
        self._last: list[tuple[int, int]] = []
        self._last_detail: list[tuple[int, int]] = []
        self._detail_at = float("-inf")

    def open(self, hz: float) -> None:
        # The first reading only sets the reference point of every later percentage.
        self._last = self._last_detail = self._cpu_times()

    @staticmethod
    def _cpu_times() -> list[tuple[int, int]]:
        """Return (busy, total) CPU time of each logical CPU (jiffies on Linux, seconds elsewhere)."""
        if sys.platform == "linux":
            return proc_stat()
        return [(round((sum(c) - c.idle) * 100), round(sum(c) * 100)) for c in psutil.cpu_times(percpu=True)]

    def sample(self, t: float, apps: AppProcesses) -> list[Row]:
        now = self._cpu_times()
        total = busy_percent(_sum(self._last), _sum(now)) if len(now) == len(self._last) else None
        self._last = now
        used, available, swap_used = memory()
        rows: list[Row] = [(t, "system", total, used, available, swap_used, None, None)]
        if t - self._detail_at < self.detail_interval_s:
            return rows
        self._detail_at = t
        last, self._last_detail = self._last_detail, now
        if len(last) == len(now):
            rows += [
                (t, f"cpu{i}", busy_percent(a, b), None, None, None, None, None)
                for i, (a, b) in enumerate(zip(last, now, strict=True))
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


def _sum(times: list[tuple[int, int]]) -> tuple[int, int]:
    return sum(b for b, _ in times), sum(t for _, t in times)


def proc_stat() -> list[tuple[int, int]]:
    """Return (busy, total) jiffies of each logical CPU from /proc/stat (Linux).

    Read directly rather than through psutil.cpu_percent, which costs several times as much: at
    100 Hz that call was most of the sampler's CPU time. Busy excludes idle and iowait, as in psutil.
    """
    out = []
    with open("/proc/stat", "rb") as fh:
        for line in fh:
            if not line.startswith(b"cpu"):
                break
            if line[3:4] == b" ":
                continue  # the all-CPU line
            values = [int(v) for v in line.split()[1:9]]
            total = sum(values)
            out.append((total - values[3] - values[4], total))
    return out


def memory() -> tuple[int, int, int]:
    """Return (RAM used, RAM available, swap used) in bytes; used = total - available, as ``free`` shows."""
    if sys.platform != "linux":
        mem, swap = psutil.virtual_memory(), psutil.swap_memory()
        return mem.total - mem.available, mem.available, swap.used
    # One read of /proc/meminfo instead of psutil's two (swap_memory also parses /proc/vmstat).
    fields = {}
    with open("/proc/meminfo", "rb") as fh:
        for line in fh:
            key, _, rest = line.partition(b":")
            if key in _MEMINFO_KEYS:
                fields[key] = int(rest.split()[0]) * 1024
    total, available = fields[b"MemTotal"], fields[b"MemAvailable"]
    return total - available, available, fields[b"SwapTotal"] - fields[b"SwapFree"]
