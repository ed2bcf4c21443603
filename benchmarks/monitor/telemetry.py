"""One run's telemetry on the runner side: ``telemetry/<source>.csv`` written as batches arrive, the
few series the summaries need kept in memory, and the summaries themselves (docs/monitor.md).

Summaries per application use its active window, from the start of its first counted request to
the end of its last. SM activity and energy are device-wide: with several applications running at
once, each one's window sees the others' work too (the per-application figures are what the device
did while that application was active, not an exclusive attribution). GPU memory, CPU% and RSS
are the application's own processes.
"""

from __future__ import annotations

import csv
import math
import re
from array import array
from bisect import bisect_left, bisect_right
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import IO, Any

from benchmarks.metrics import counted
from benchmarks.monitor.base import is_core_entity

# The series the summaries read, per source; the rest only goes to the CSV files (and the sink).
KEPT: dict[str, tuple[str, ...]] = {
    "gpm": ("sm_activity_pct", "sm_occupancy_pct", "tensor_activity_pct", "dram_bw_util_pct"),
    "dcgm": ("sm_activity_pct", "sm_occupancy_pct"),
    "nvml": (
        "util_gpu_pct",
        "energy_j",
        "power_w",
        "mem_used_bytes",
        "gpu_mem_bytes",
        "sm_util_pct",
        "processes",
    ),
    "rapl": ("energy_j",),
    "psutil": ("cpu_percent", "rss_bytes"),
}
# Where SM activity comes from, best first: GPM and DCGM measure the share of SMs busy; NVML's
# utilisation only says whether any kernel ran during its sampling period.
SM_ACTIVITY = (("gpm", "sm_activity_pct"), ("dcgm", "sm_activity_pct"), ("nvml", "util_gpu_pct"))
SM_OCCUPANCY = (("gpm", "sm_occupancy_pct"), ("dcgm", "sm_occupancy_pct"))
_GPU = re.compile(r"gpu\d+$")


class Series:
    """One metric of one entity over time: parallel arrays of t (s) and value."""

    def __init__(self) -> None:
        self.t = array("d")
        self.v = array("d")

    def add(self, t: float, v: float) -> None:
        self.t.append(t)
        self.v.append(v)

    def _slice(self, a: float | None, b: float | None) -> Sequence[float]:
        lo = 0 if a is None else bisect_left(self.t, a)
        hi = len(self.t) if b is None else bisect_right(self.t, b)
        return self.v[lo:hi]

    def mean(self, a: float | None = None, b: float | None = None) -> float | None:
        """Return the mean of the samples taken in [a, b] (all when unbounded), None when there are none."""
        values = self._slice(a, b)
        return sum(values) / len(values) if values else None

    def interval_mean(self, a: float, b: float) -> float | None:
        """Return the time-weighted mean over [a, b] of a series whose samples each cover (t_prev, t].

        For readings that are averages since the previous sample (CPU%): each counts by how much of
        its interval falls inside [a, b], so a sample whose interval began before ``a`` counts only
        for its part inside. None when no interval overlaps [a, b].
        """
        total = weight = 0.0
        for i in range(max(1, bisect_left(self.t, a)), len(self.t)):
            lo, hi = max(self.t[i - 1], a), min(self.t[i], b)
            if hi > lo:
                total += self.v[i] * (hi - lo)
                weight += hi - lo
            if self.t[i - 1] >= b:
                break
        return total / weight if weight > 0 else None

    def max(self, a: float | None = None, b: float | None = None) -> float | None:
        """Return the largest sample in [a, b], None when there are none."""
        values = self._slice(a, b)
        return max(values) if values else None

    def value_at(self, t: float) -> float:
        """Return the value at ``t``, interpolated linearly between samples (clamped to the ends)."""
        i = bisect_left(self.t, t)
        if i == 0:
            return self.v[0]
        if i == len(self.t):
            return self.v[-1]
        t0, t1 = self.t[i - 1], self.t[i]
        return self.v[i - 1] + (self.v[i] - self.v[i - 1]) * (t - t0) / (t1 - t0)

    def delta(self, a: float | None = None, b: float | None = None) -> float | None:
        """Return how much a counter grew over [a, b] (interpolated at the ends, clipped to the samples).

        None with fewer than two samples or when the window lies outside them.
        """
        if len(self.t) < 2:
            return None
        a = self.t[0] if a is None else max(a, self.t[0])
        b = self.t[-1] if b is None else min(b, self.t[-1])
        if b <= a:
            return None
        return self.value_at(b) - self.value_at(a)


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return repr(round(value, 6)) if math.isfinite(value) else ""
    return str(value)


class TelemetryRecorder:
    """Collects the monitor's messages for one run; ``result()`` returns the ``telemetry`` section."""

    def __init__(self, hz: float, out_dir: Path | None = None) -> None:
        self.hz = hz
        self.dir = out_dir / "telemetry" if out_dir is not None else None
        self.sources: dict[str, dict[str, Any]] = {}
        self.samples: dict[str, int] = {}
        self.series: dict[tuple[str, str, str], Series] = {}
        self.stats: dict[str, Any] = {}
        self.error: str | None = None
        self._files: dict[str, tuple[IO[str], Any]] = {}

    @classmethod
    def load(cls, bundle_dir: Path) -> TelemetryRecorder:
        """Return a recorder holding the series of a result bundle's ``telemetry/*.csv`` (read back)."""
        recorder = cls(hz=0.0)
        for path in sorted((bundle_dir / "telemetry").glob("*.csv")):
            with path.open(newline="") as fh:
                reader = csv.reader(fh)
                columns = next(reader, None)
                if columns is None:
                    continue
                rows = [
                    [float(row[0]), row[1], *(float(v) if v else None for v in row[2:])] for row in reader
                ]
            recorder.add_batch(path.stem, columns, rows)
        return recorder

    # -- input ---------------------------------------------------------------------------------------

    def on_message(self, message: Mapping[str, Any]) -> None:
        """Take one message from the monitor process (``sources``, ``batch`` or ``stopped``)."""
        kind = message.get("kind")
        if kind in ("sources", "stopped"):
            for status in message.get("sources", []):
                self.sources[status["name"]] = dict(status)
            if kind == "stopped":
                self.stats = dict(message.get("stats", {}))
        elif kind == "batch":
            self.add_batch(message["source"], message["columns"], message["rows"])

    def add_batch(self, source: str, columns: Sequence[str], rows: Iterable[Sequence[Any]]) -> None:
        """Append a batch of rows: to the source's CSV file, and to the kept series."""
        rows = list(rows)
        self.samples[source] = self.samples.get(source, 0) + len(rows)
        writer = self._writer(source, columns)
        if writer is not None:
            writer.writerows([_cell(v) for v in row] for row in rows)
            self._files[source][0].flush()
        kept = [(i, c) for i, c in enumerate(columns) if c in KEPT.get(source, ())]
        if not kept:
            return
        for row in rows:
            t, entity = row[0], row[1]
            if source == "psutil" and is_core_entity(entity):
                continue
            for i, column in kept:
                value = row[i]
                if value is not None and math.isfinite(value):
                    key = (source, entity, column)
                    series = self.series.get(key)
                    if series is None:
                        series = self.series[key] = Series()
                    series.add(float(t), float(value))

    def _writer(self, source: str, columns: Sequence[str]) -> Any:
        if self.dir is None:
            return None
        if source not in self._files:
            self.dir.mkdir(parents=True, exist_ok=True)
            fh = (self.dir / f"{source}.csv").open("w", newline="")
            writer = csv.writer(fh)
            writer.writerow(columns)
            self._files[source] = (fh, writer)
        return self._files[source][1]

    def close(self) -> None:
        """Close the CSV files."""
        for fh, _ in self._files.values():
            fh.close()
        self._files = {}

    # -- output --------------------------------------------------------------------------------------

    def _find(self, source: str, column: str, entity: re.Pattern[str] | str) -> list[Series]:
        return [
            s
            for (src, ent, col), s in self.series.items()
            if src == source
            and col == column
            and (ent == entity if isinstance(entity, str) else entity.match(ent))
        ]

    def _device_mean(
        self, choices: Sequence[tuple[str, str]], a: float | None, b: float | None
    ) -> tuple[float | None, str | None]:
        """Return the mean over GPUs of the first source in ``choices`` that has samples, and its name."""
        for source, column in choices:
            means = [m for s in self._find(source, column, _GPU) if (m := s.mean(a, b)) is not None]
            if means:
                return sum(means) / len(means), source
        return None, None

    def sm_activity(self) -> tuple[Series | None, str | None]:
        """Return the first GPU's SM activity series from the best source that has one, and its name."""
        for source, column in SM_ACTIVITY:
            found = self._find(source, column, _GPU)
            if found:
                return found[0], source
        return None, None

    def _energy(self, a: float | None, b: float | None) -> tuple[float | None, float | None]:
        """Return (GPU energy, CPU package energy) in J over [a, b]; None where no counter exists."""
        gpu = [d for s in self._find("nvml", "energy_j", _GPU) if (d := s.delta(a, b)) is not None]
        # Package zones only: core and uncore are parts of the package, DRAM is reported apart.
        cpu = [
            d
            for (src, ent, col), s in self.series.items()
            if src == "rapl" and col == "energy_j" and "/" not in ent and (d := s.delta(a, b)) is not None
        ]
        return (sum(gpu) if gpu else None), (sum(cpu) if cpu else None)

    def result(self, applications: Sequence[Mapping[str, Any]], run_end: float | None) -> dict[str, Any]:
        """Return the ``telemetry`` section of result.json (schema: results.TelemetryResult)."""
        sources = {
            name: {
                "status": status["status"],
                "reason": status.get("reason"),
                "columns": list(status.get("columns", [])),
                "samples": self.samples.get(name, 0),
                "file": f"telemetry/{name}.csv" if self.dir is not None and self.samples.get(name) else None,
            }
            for name, status in self.sources.items()
        }
        total_requests = sum(len(_counted(app)) for app in applications)
        run = self.window(0.0 if run_end is not None else None, run_end, total_requests)
        gpu_peaks = [p for s in self._find("nvml", "mem_used_bytes", _GPU) if (p := s.max()) is not None]
        run["gpu_memory_peak_bytes"] = int(sum(gpu_peaks)) if gpu_peaks else None
        span = active_span(applications)
        serving = None
        if span is not None:
            serving = {**self.window(*span, total_requests), "active_from_s": span[0], "active_to_s": span[1]}
        apps = {}
        for app in applications:
            name = str(app["name"])
            rows = _counted(app)
            own = active_span([app])
            summary = self.window(*own, len(rows)) if own is not None else _empty_window()
            summary["active_from_s"], summary["active_to_s"] = own or (None, None)
            gpu_mem = [
                m for s in self._find("nvml", "gpu_mem_bytes", f"app:{name}") if (m := s.max()) is not None
            ]
            summary["gpu_memory_peak_bytes"] = int(max(gpu_mem)) if gpu_mem else None
            cpu = self._find("psutil", "cpu_percent", f"app:{name}")
            # Each CPU% row is the share since the previous one, hence the interval-weighted mean.
            summary["cpu_percent_mean"] = (
                cpu[0].interval_mean(*own) if cpu and own is not None else (cpu[0].mean() if cpu else None)
            )
            rss = self._find("psutil", "rss_bytes", f"app:{name}")
            peak = rss[0].max() if rss else None
            summary["rss_peak_bytes"] = None if peak is None else int(peak)
            summary["gpu_time_share_pct"] = self.gpu_time_share(name, *own) if own is not None else None
            apps[name] = summary
        return {
            "hz": self.hz,
            "ticks": int(self.stats.get("ticks", 0)),
            "missed_ticks": int(self.stats.get("missed", 0)),
            "monitor_cpu_s": self.stats.get("cpu_s"),
            "error": self.error,
            "sources": sources,
            "run": run,
            "serving": serving,
            "applications": apps,
        }

    def gpu_time_share(self, name: str, a: float, b: float) -> float | None:
        """Return the application's share of the GPU's time over [a, b], in %: the mean of NVML's
        per-process SM utilisation (the part of the driver's sampling period in which a kernel of the
        process ran; its processes summed, and summed over GPUs) over the readings in [a, b] where it
        had a process on a GPU. A reading with processes and no utilisation value counts as 0 (the
        source writes 0 where the driver listed the others and not it). None without such readings,
        or when NVML never attributed a kernel to it (an MPS client: its work is the MPS server's)."""
        present = self._find("nvml", "processes", f"app:{name}")
        util = self._find("nvml", "sm_util_pct", f"app:{name}")
        if not present or not util or not util[0].t:
            return None
        times = [t for t, n in zip(present[0].t, present[0].v, strict=True) if a <= t <= b and n > 0]
        if not times:
            return None
        value = dict(zip(util[0].t, util[0].v, strict=True))
        return sum(value.get(t, 0.0) for t in times) / len(times)

    def window(self, a: float | None, b: float | None, requests: int) -> dict[str, Any]:
        """Return SM activity, occupancy and energy over [a, b] (unbounded: everything), per request."""
        sm, sm_source = self._device_mean(SM_ACTIVITY, a, b)
        occupancy, _ = self._device_mean(SM_OCCUPANCY, a, b)
        gpu_j, cpu_j = self._energy(a, b)
        return {
            "sm_activity_mean_pct": sm,
            "sm_activity_source": sm_source,
            "sm_occupancy_mean_pct": occupancy,
            "gpu_energy_j": gpu_j,
            "gpu_energy_per_request_j": gpu_j / requests if gpu_j is not None and requests else None,
            "cpu_energy_j": cpu_j,
            "cpu_energy_per_request_j": cpu_j / requests if cpu_j is not None and requests else None,
        }


def _empty_window() -> dict[str, Any]:
    return {
        k: None
        for k in (
            "sm_activity_mean_pct",
            "sm_activity_source",
            "sm_occupancy_mean_pct",
            "gpu_energy_j",
            "gpu_energy_per_request_j",
            "cpu_energy_j",
            "cpu_energy_per_request_j",
        )
    }


def active_span(applications: Sequence[Mapping[str, Any]]) -> tuple[float, float] | None:
    """Return when the applications served: the first counted request's start to the last one's end
    (run seconds), or None when none was counted."""
    rows = [r for app in applications for r in _counted(app)]
    if not rows:
        return None
    return min(float(r["start"]) for r in rows), max(float(r["end"]) for r in rows)


def _counted(app: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    return counted(app.get("requests", []))
