"""Running a measuring tool (dcgmi, pcm-memory, powermetrics) beside the sampler and reading its output."""

from __future__ import annotations

import subprocess
import threading
from collections.abc import Callable, Sequence

from benchmarks.monitor.base import SourceUnavailable


def start_reader(
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


def start_checked(
    argv: Sequence[str],
    on_line: Callable[[str], None],
    label: str,
    startup_check_s: float,
    last_lines: Callable[[], list[str]],
) -> subprocess.Popen[str]:
    """Start a sampling tool with ``start_reader``; return it once it has run ``startup_check_s``.

    Raises SourceUnavailable quoting the tool's last output lines (``last_lines``) when it exits first.
    """
    proc, reader = start_reader(argv, on_line)
    try:
        code = proc.wait(startup_check_s)
    except subprocess.TimeoutExpired:
        return proc
    reader.join(1)  # the tool's last words, to explain why it stopped
    raise SourceUnavailable(f"{label} exited with code {code}: {' '.join(last_lines()[-3:]) or 'no output'}")


def stop(proc: subprocess.Popen[str] | None) -> None:
    """Terminate a tool started by ``start_reader`` (kill it if it ignores that for 2 s)."""
    if proc is None or proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(2)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
