"""Running a measuring tool (dcgmi, pcm-memory, powermetrics) beside the sampler and reading its output.

``ToolSource`` is the shape of such a source: the tool runs as a subprocess whose output lines a
reader thread hands to ``on_line`` (so the sampler never blocks on the tool); the source keeps the
latest reading under ``lock`` and hands it out in ``sample``; the tool's last lines explain an exit.
"""

from __future__ import annotations

import subprocess
import threading
from abc import abstractmethod
from collections.abc import Callable, Sequence
from typing import ClassVar

from benchmarks.monitor.base import Source, SourceUnavailable

# Output lines kept to explain why a tool stopped (three of them are quoted).
TAIL_LINES = 5


def _start_reader(
    argv: Sequence[str], on_line: Callable[[str], None]
) -> tuple[subprocess.Popen[str], threading.Thread]:
    """Start ``argv`` with stdout and stderr merged; return the process and its reader thread.

    The (daemon) reader thread hands each output line to ``on_line`` as it arrives, so the sampler
    never blocks on the tool; join it to be sure a tool that exited has had all its output read.
    """
    proc = subprocess.Popen(
        list(argv),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        text=True,
        bufsize=1,
    )

    def pump() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            on_line(line)

    reader = threading.Thread(target=pump, name=f"monitor-{argv[0]}", daemon=True)
    reader.start()
    return proc, reader


class ToolSource(Source):
    """A source that reads a measuring tool's output: subclasses build the command line in ``open``,
    call ``start`` with it, and parse each output line in ``on_line``."""

    # How messages name the tool ("dcgmi dmon").
    label: ClassVar[str]
    # A tool that fails (no permission, no driver) exits at once; ``start`` waits this long to catch it.
    startup_check_s: ClassVar[float]

    def __init__(self) -> None:
        self.proc: subprocess.Popen[str] | None = None
        self.lock = threading.Lock()
        self._tail: list[str] = []

    @abstractmethod
    def on_line(self, line: str) -> None:
        """Parse one output line of the tool (in the reader thread); store a reading under ``lock``."""

    def start(self, argv: Sequence[str]) -> None:
        """Start the tool; return once it has run ``startup_check_s``.

        Raises SourceUnavailable quoting the tool's last output lines when it exits before that.
        """
        self.proc, reader = _start_reader(argv, self._read)
        try:
            code = self.proc.wait(self.startup_check_s)
        except subprocess.TimeoutExpired:
            return
        reader.join(1)  # the tool's last words, to explain why it stopped
        raise SourceUnavailable(f"{self.label} exited with code {code}: {self._last_words() or 'no output'}")

    def check_running(self) -> None:
        """Raise SourceUnavailable when the tool has exited (for a tick that brought no new reading)."""
        if self.proc is not None and self.proc.poll() is not None:
            words = self._last_words()
            raise SourceUnavailable(
                f"{self.label} stopped (exit code {self.proc.returncode})" + (f": {words}" if words else "")
            )

    def close(self) -> None:
        """Terminate the tool (kill it if it ignores that for 2 s)."""
        proc, self.proc = self.proc, None
        if proc is None or proc.poll() is not None:
            return
        proc.terminate()
        try:
            proc.wait(2)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()

    def _read(self, line: str) -> None:
        self._tail = [*self._tail[-(TAIL_LINES - 1) :], line.strip()]
        self.on_line(line)

    def _last_words(self) -> str:
        return " ".join(self._tail[-3:])
