"""psutil: CPU per core, RAM, swap, and the CPU% and RSS of each application's process tree.

Entities: ``system`` (whole-machine CPU%, memory, swap), ``cpu<N>`` (one per logical CPU) and
``app:<node>`` (the application's processes summed: CPU% of one core per 100, RSS).
Per-core percentages come from /proc/stat, whose tick is 10 ms: at 20 Hz one core reads in steps of
20 %, so read them as averages over several samples.
"""

from __future__ import annotations

import psutil

from benchmarks.monitor.base import AppProcesses, Row, Source, app_entity


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

    def open(self, hz: float) -> None:
        # The first call only sets the reference point of every later percentage.
        psutil.cpu_percent(percpu=True)

    def sample(self, t: float, apps: AppProcesses) -> list[Row]:
        per_core = psutil.cpu_percent(percpu=True)
        mem = psutil.virtual_memory()
        swap = psutil.swap_memory()
        total = sum(per_core) / len(per_core) if per_core else None
        rows: list[Row] = [
            (t, "system", total, mem.total - mem.available, mem.available, swap.used, None, None)
        ]
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
