"""Per-kernel GPU trace of an application process, opt-in (``kernel_trace``, docs/monitor.md).

The monitor's GPU figures are sampled (NVML every driver period, GPM's SM activity at the monitor's
rate): they say how busy the GPU was, not whose kernel ran when. A kernel trace records every kernel
(and copy) the traced process ran on the GPU, with its start and end on the GPU and when the process
launched it, through CUPTI as PyTorch's profiler enables it: process-wide, so kernels launched by any
library in the process (cuDNN, Triton, llama.cpp) are recorded, not only PyTorch's (but every traced
llama.cpp process so far has been killed by SIGSEGV while loading: docs/monitor.md). torch is imported
when the process starts, before the application loads its libraries (a CUDA build of llama.cpp loaded
before torch makes torch's import abort: benchmarks.platform.llama_gpu_offload); the recording starts
once the application has loaded (before its group's go: the model load is not traced) and stops after
its last request.

The trace goes to ``<bundle>/artifacts/<node>/kernels.csv.gz`` (gzip CSV, one row a GPU activity):
``start_s`` seconds since the run started (the clock of the request records, so a kernel can be placed
in the request it served), ``dur_us`` its duration on the GPU in microseconds, ``launch_s`` when the
process made the call that launched it (the CUDA runtime or driver call of the same correlation id;
empty when CUPTI recorded none), ``stream`` the CUDA stream, ``name`` the kernel's (or copy's) name.
Analysis: ``python3 -m benchmarks.perf.kernel_slices``.

CUPTI adds a few microseconds to each launch, and writing the trace delays the node's end: a traced run
is for the account of who ran when, not a measurement of latency to publish beside untraced runs.
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
COLUMNS = ("start_s", "dur_us", "launch_s", "stream", "name")
# What CUPTI records on the GPU's side that is not work there (as PyTorch's profiler names the kinds):
# ranges and synchronisation markers. Everything else on the device's side is a kernel, copy or memset.
NOT_WORK = frozenset({"gpu_user_annotation", "cuda_sync", "cuda_profiler_range"})
# Before torch 2.13 (the GPU machine's 2.11) an event does not tell its kind; there the annotations say
# so themselves and the synchronisation markers are known by Kineto's names for them.
SYNC_NAMES = frozenset({"Event Sync", "Stream Sync", "Stream Wait Event", "Context Sync"})


@dataclass(frozen=True)
class KernelTraceSpec:
    """What an application process needs to trace: the file, and the run's start on the shared clock."""

    path: str
    t0: float


@dataclass(frozen=True)
class Kernel:
    """One GPU activity of a trace: start and end (seconds since the run started), launch (None when
    unknown), stream and name."""

    start: float
    end: float
    launch: float | None
    stream: int
    name: str


class KernelTrace:
    """Record the GPU activities of this process between ``start`` and ``stop``."""

    def __init__(self, spec: KernelTraceSpec) -> None:
        self.spec = spec
        self._profiler: Any = None
        self._problem: str | None = None

    def prepare(self) -> None:
        """Import torch now, before the application loads its libraries (module docstring)."""
        try:
            import torch
        except ImportError:
            self._problem = "torch is not installed: no kernel trace"
            return
        if not torch.cuda.is_available():
            self._problem = "no CUDA device in this process: no kernel trace"

    def start(self) -> str | None:
        """Begin recording; return why no trace can be taken here (no CUDA device), or None."""
        if self._problem is not None:
            return self._problem
        from torch.profiler import ProfilerActivity, profile

        self._profiler = profile(activities=[ProfilerActivity.CUDA])
        self._profiler.start()
        return None

    def stop(self) -> int | None:
        """Stop recording and write the trace file; return the number of activities written (None when
        no trace was started)."""
        if self._profiler is None:
            return None
        self._profiler.stop()
        # Profiler timestamps are Unix nanoseconds; the run's clock is CLOCK_MONOTONIC (benchmarks.clock).
        # Integer nanoseconds until the last step, so that no precision is lost on the way.
        shift_ns = time.time_ns() - time.monotonic_ns() + round(self.spec.t0 * 1e9)
        events = self._profiler.profiler.kineto_results.events()
        self._profiler = None
        # With CUDA activity only, the host's events are the runtime and driver calls; a GPU activity's
        # correlation id names the call that launched it.
        launches = {
            e.correlation_id(): e.start_ns()
            for e in events
            if e.device_type().name == "CPU" and e.correlation_id()
        }
        rows = []
        for e in events:
            if e.device_type().name != "CUDA" or not is_work(e):
                continue
            launch = launches.get(e.correlation_id())
            rows.append(
                (
                    (e.start_ns() - shift_ns) / 1e9,
                    e.duration_ns() / 1e3,
                    None if launch is None else (launch - shift_ns) / 1e9,
                    e.device_resource_id(),
                    e.name(),
                )
            )
        rows.sort(key=lambda r: r[0])
        write_trace(Path(self.spec.path), rows)
        return len(rows)


def is_work(event: Any) -> bool:
    """Whether a GPU-side profiler event is work there (a kernel, copy or memset), not a marker."""
    activity = getattr(event, "activity_type", None)
    if activity is not None:
        return activity() not in NOT_WORK
    return not event.is_user_annotation() and event.name() not in SYNC_NAMES


def write_trace(path: Path, rows: list[tuple[float, float, float | None, int, str]]) -> None:
    """Write trace rows (start_s, dur_us, launch_s or None, stream, name) as ``path`` (gzip CSV),
    atomically."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    with gzip.open(tmp, "wt", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(COLUMNS)
        for start, dur, launch, stream, name in rows:
            w.writerow(
                (f"{start:.9f}", f"{dur:.3f}", "" if launch is None else f"{launch:.9f}", stream, name)
            )
    tmp.replace(path)


def read_trace(path: Path) -> Iterator[Kernel]:
    """Yield the activities of a trace file in file order (start order); ValueError names a malformed row."""
    with gzip.open(path, "rb") as raw, io.TextIOWrapper(raw, encoding="utf-8", newline="") as f:
        reader = csv.reader(f)
        header = next(reader, None)
        if header is None or tuple(header) != COLUMNS:
            raise ValueError(f"{path}: not a kernel trace (header {header!r}, expected {list(COLUMNS)})")
        for line, row in enumerate(reader, start=2):
            try:
                start, dur = float(row[0]), float(row[1])
                launch = float(row[2]) if row[2] else None
                yield Kernel(start, start + dur / 1e6, launch, int(row[3]), row[4])
            except (IndexError, ValueError) as exc:
                raise ValueError(f"{path}:{line}: malformed kernel row ({exc})") from exc
