"""The monitor as one run sees it: the sampler process, its telemetry forwarded to the run's sink,
and the ``telemetry`` section of the result. The runner makes one per run.

Sink events (docs/monitor.md): ``telemetry_sources`` (``sources``: each source's status) once the
sources are open, and ``telemetry`` (``source``, ``columns``, ``rows``) for every batch.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from benchmarks.monitor.process import MonitorProcess
from benchmarks.monitor.sampler import BATCH_S, DEFAULT_HZ
from benchmarks.monitor.telemetry import TelemetryRecorder


class RunMonitor:
    """Starts the sampler for a run, forwards its batches, and summarises them at the end.

    ``hz=None`` turns the monitor off: every method then does nothing and ``result()`` returns None.
    """

    def __init__(
        self,
        emit: Callable[..., None],
        hz: float | None = DEFAULT_HZ,
        sources: Sequence[str] | None = None,
        out_dir: Path | None = None,
        batch_s: float = BATCH_S,
    ) -> None:
        self.emit = emit
        self.process = MonitorProcess(hz, sources, batch_s) if hz is not None else None
        self.recorder = TelemetryRecorder(hz, out_dir) if hz is not None else None

    def start(self, t0: float) -> None:
        """Start sampling; sample times count from ``t0``."""
        if self.process is not None:
            self.process.start(t0)

    def watch(self, node: str, pid: int) -> None:
        """Attribute an application's process to its node."""
        if self.process is not None:
            self.process.watch(node, pid)

    def poll(self) -> None:
        """Forward what the sampler sent since the last call (call it from the runner's loop)."""
        if self.process is not None:
            self._forward(self.process.poll())

    def stop(self) -> None:
        """Stop the sampler and forward its last batches."""
        if self.process is None or self.recorder is None:
            return
        messages = self.process.stop()
        self._forward(messages)
        if not any(m.get("kind") == "stopped" for m in messages):
            code = self.process.exitcode
            self.recorder.error = "the monitor process did not report its end" + (
                f" (exit code {code})" if code is not None else " and was killed"
            )
        self.recorder.close()

    def _forward(self, messages: Sequence[Mapping[str, Any]]) -> None:
        assert self.recorder is not None
        for message in messages:
            self.recorder.on_message(message)
            kind = message.get("kind")
            if kind == "sources":
                self.emit("telemetry_sources", sources=message["sources"])
            elif kind == "batch":
                self.emit(
                    "telemetry", source=message["source"], columns=message["columns"], rows=message["rows"]
                )

    def result(
        self, applications: Sequence[Mapping[str, Any]], run_end: float | None
    ) -> dict[str, Any] | None:
        """Return the result's ``telemetry`` section, or None when the monitor was off."""
        if self.recorder is None:
            return None
        return self.recorder.result(applications, run_end)
