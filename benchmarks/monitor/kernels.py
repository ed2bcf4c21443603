"""Per-kernel GPU trace of an application process, opt-in (``kernel_trace``, docs/monitor.md).

The monitor's GPU figures are sampled (NVML every driver period, GPM's SM activity at the monitor's
rate): they say how busy the GPU was, not whose kernel ran when. A kernel trace records every kernel
(and copy) the traced process ran on the GPU, with its start and end on the GPU, through CUPTI as
PyTorch's profiler enables it: process-wide, so kernels launched by any library in the process (llama.cpp,
CTranslate2, cuDNN) are recorded, not only PyTorch's. Only the serving is traced (from the group's go
to the last request's end), never the model load.

The trace goes to ``<bundle>/<node>/kernels.csv.gz`` (gzip CSV, one row a GPU activity):
``start_s`` seconds since the run started (the clock of the request records, so a kernel can be placed
in the request it served), ``dur_us`` its duration on the GPU in microseconds, ``stream`` the CUDA
stream, ``name`` the kernel's (or copy's) name. Analysis: ``python3 -m benchmarks.perf.kernel_slices``.

CUPTI adds a few microseconds to each launch: a traced run is for the account of who ran when, not a
measurement of latency to publish beside untraced runs.
"""

from __future__ import annotations

import csv
import gzip
import io
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

TRACE_FILE = "kernels.csv.gz"
COLUMNS = ("start_s", "dur_us", "stream", "name")


@dataclass(frozen=True)
class KernelTraceSpec:
    """What an application process needs to trace: the file, and the run's start on the shared clock."""

    path: str
    t0: float


@dataclass(frozen=True)
class Kernel:
    """One GPU activity of a trace: start (seconds since the run started), end, stream and name."""

    start: float
    end: float
    stream: int
    name: str


def _profiler_offset_s() -> float:
    """Return what to add to a profiler timestamp (Unix nanoseconds, converted to seconds) to get the
    run's monotonic clock (``benchmarks.clock``): the two clocks read back to back."""
    return time.monotonic() - time.time_ns() / 1e9


class KernelTrace:
    """Record the GPU activities of this process between ``start`` and ``stop``."""

    def __init__(self, spec: KernelTraceSpec) -> None:
        self.spec = spec
        self._profiler: Any = None

    def start(self) -> str | None:
        """Begin recording; return why no trace can be taken here (no CUDA device), or None."""
        import torch
        from torch.profiler import ProfilerActivity, profile

        if not torch.cuda.is_available():
            return "no CUDA device in this process: no kernel trace"
        self._profiler = profile(activities=[ProfilerActivity.CUDA])
        self._profiler.start()
        return None

    def stop(self) -> int | None:
        """Stop recording and write the trace file; return the number of activities written (None when
        no trace was started)."""
        if self._profiler is None:
            return None
        self._profiler.stop()
        offset = _profiler_offset_s() - self.spec.t0
        events = self._profiler.profiler.kineto_results.events()
        self._profiler = None
        rows = sorted(
            (e.start_ns() / 1e9 + offset, e.duration_ns() / 1e3, e.device_resource_id(), e.name())
            for e in events
            # GPU activities only (not the host's runtime calls), and no user annotations (ranges, not work).
            if e.device_type().name == "CUDA" and not e.is_user_annotation()
        )
        write_trace(Path(self.spec.path), rows)
        return len(rows)


def write_trace(path: Path, rows: list[tuple[float, float, int, str]]) -> None:
    """Write trace rows (start_s, dur_us, stream, name) as ``path`` (gzip CSV), atomically."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    with gzip.open(tmp, "wt", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(COLUMNS)
        for start, dur, stream, name in rows:
            w.writerow((f"{start:.9f}", f"{dur:.3f}", stream, name))
    tmp.replace(path)


def read_trace(path: Path) -> Iterator[Kernel]:
    """Yield the activities of a trace file in start order; ValueError names a malformed row."""
    with gzip.open(path, "rb") as raw, io.TextIOWrapper(raw, encoding="utf-8", newline="") as f:
        reader = csv.reader(f)
        header = next(reader, None)
        if header is None or tuple(header) != COLUMNS:
            raise ValueError(f"{path}: not a kernel trace (header {header!r}, expected {list(COLUMNS)})")
        for line, row in enumerate(reader, start=2):
            try:
                start, dur = float(row[0]), float(row[1])
                yield Kernel(start, start + dur / 1e6, int(row[2]), row[3])
            except (IndexError, ValueError) as exc:
                raise ValueError(f"{path}:{line}: malformed kernel row ({exc})") from exc
