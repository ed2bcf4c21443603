"""psutil: CPU per core, RAM, swap, and the CPU% and RSS of each application's process tree.

Entities: ``system`` (whole-machine CPU%, memory, swap), ``cpu<N>`` (one per logical CPU) and
``app:<node>`` (the application's processes summed: CPU% of one core per 100, RSS).
Per-core percentages come from /proc/stat, whose tick is 10 ms: at 20 Hz one core reads in steps of
20 %, so read them as averages over several samples.
"""

from __future__ import annotations

import sys

import psutil

from benchmarks.monitor.base import AppProcesses, Row, Source, app_entity

_MEMINFO_KEYS = frozenset((b"MemTotal", b"MemAvailable", b"SwapTotal", b"SwapFree"))


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

    def __init__(self) -> None:
        self._last: list[tuple[int, int]] = []

    def open(self, hz: float) -> None:
        # The first reading only sets the reference point of every later percentage.
        self._per_core()

    def _per_core(self) -> list[float]:
        if sys.platform != "linux":
            return list(psutil.cpu_percent(percpu=True))
        now = proc_stat()
        last, self._last = self._last, now
        if len(last) != len(now):
            return [0.0] * len(now)
        return [
            100.0 * (b1 - b0) / (t1 - t0) if t1 > t0 else 0.0
            for (b0, t0), (b1, t1) in zip(last, now, strict=True)
        ]

    def sample(self, t: float, apps: AppProcesses) -> list[Row]:
        per_core = self._per_core()
        total = sum(per_core) / len(per_core) if per_core else None
        used, available, swap_used = memory()
        rows: list[Row] = [(t, "system", total, used, available, swap_used, None, None)]
        rows += [(t, f"cpu{i}", pct, None, None, None, None, None) for i, pct in enumerate(per_core)]
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
