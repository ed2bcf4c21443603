"""The monitor as its own OS process, so that sampling never competes with the runner's event loop
and a hung driver call cannot stall the run.

Messages from the sampler process (dicts, ``kind`` first):
``sources`` (each source's status, once opened), ``batch`` (``source``, ``columns``, ``rows``),
``stopped`` (final statuses and the sampler's stats). Commands to it: ``("watch", node, pid)``, ``("stop",)``.
"""

from __future__ import annotations

import multiprocessing as mp
import signal
from collections.abc import Sequence
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess
from typing import Any

from benchmarks import clock
from benchmarks.monitor.sampler import BATCH_S, DEFAULT_HZ, Sampler, check_hz
from benchmarks.monitor.sources import resolve_sources

# How long stop() waits for the sampler's last batch before killing it.
STOP_TIMEOUT_S = 5.0


def sampler_main(conn: Connection, hz: float, sources: list[str] | None, t0: float, batch_s: float) -> None:
    """Entry point of the monitor process: open the sources, sample until told to stop, report."""
    # Ctrl-C reaches the whole process group; the runner decides when the monitor stops.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    sampler = Sampler(hz, sources, t0)
    stopping = False

    def handle(command: tuple[Any, ...]) -> None:
        nonlocal stopping
        if command[0] == "watch":
            sampler.apps.watch(str(command[1]), int(command[2]))
        elif command[0] == "stop":
            stopping = True

    def wait(timeout: float) -> None:
        nonlocal stopping
        deadline = clock.now() + timeout
        while not stopping:
            left = deadline - clock.now()
            if left <= 0:
                return
            try:
                if conn.poll(left):
                    handle(conn.recv())
            except (EOFError, OSError):
                stopping = True  # the runner is gone: nobody to report to

    def send(message: dict[str, Any]) -> None:
        nonlocal stopping
        try:
            conn.send(message)
        except (BrokenPipeError, OSError):
            stopping = True

    stats = sampler.stats
    try:
        statuses = sampler.open()
        send({"kind": "sources", "sources": [s.to_dict() for s in statuses.values()]})
        wait(0)
        stats = sampler.run(
            lambda: stopping, lambda batch: send({"kind": "batch", **batch}), wait=wait, batch_s=batch_s
        )
    finally:
        sampler.close()
    send(
        {
            "kind": "stopped",
            "stats": stats.to_dict(),
            "sources": [s.to_dict() for s in sampler.statuses.values()],
        }
    )
    conn.close()


class MonitorProcess:
    """The runner's handle on a sampler process: start, tell it application PIDs, collect, stop."""

    def __init__(
        self, hz: float = DEFAULT_HZ, sources: Sequence[str] | None = None, batch_s: float = BATCH_S
    ) -> None:
        self.hz = check_hz(hz)
        self.sources = resolve_sources(list(sources)) if sources is not None else None
        self.batch_s = batch_s
        self.process: BaseProcess | None = None
        self.conn: Connection | None = None
        self.stopped = False

    def start(self, t0: float) -> None:
        """Start the sampler process; its timestamps count from ``t0`` on the shared clock."""
        ctx = mp.get_context("spawn")
        self.conn, child = ctx.Pipe(duplex=True)
        self.process = ctx.Process(
            target=sampler_main,
            name="cb-monitor",
            args=(child, self.hz, self.sources, t0, self.batch_s),
            daemon=True,
        )
        self.process.start()
        child.close()

    def watch(self, node: str, pid: int) -> None:
        """Attribute process ``pid`` (and its descendants) to application ``node``."""
        self._send(("watch", node, pid))

    def poll(self) -> list[dict[str, Any]]:
        """Return the messages that have arrived, without waiting."""
        messages: list[dict[str, Any]] = []
        if self.conn is None:
            return messages
        try:
            while self.conn.poll():
                messages.append(self.conn.recv())
        except (EOFError, OSError):
            self._close_conn()
        return messages

    def stop(self, timeout: float = STOP_TIMEOUT_S) -> list[dict[str, Any]]:
        """Ask the sampler to stop; return the messages up to and including ``stopped`` (or until timeout)."""
        messages: list[dict[str, Any]] = []
        if self.process is None or self.stopped:
            return messages
        self.stopped = True
        self._send(("stop",))
        deadline = clock.now() + timeout
        while self.conn is not None:
            left = deadline - clock.now()
            try:
                if left <= 0 or not self.conn.poll(left):
                    break
                message = self.conn.recv()
            except (EOFError, OSError):
                break
            messages.append(message)
            if message.get("kind") == "stopped":
                break
        self._close_conn()
        self.process.join(timeout=1)
        if self.process.is_alive():
            self.process.kill()
            self.process.join(timeout=2)
        return messages

    @property
    def exitcode(self) -> int | None:
        return None if self.process is None else self.process.exitcode

    def _send(self, command: tuple[Any, ...]) -> None:
        if self.conn is None:
            return
        try:
            self.conn.send(command)
        except (BrokenPipeError, OSError):
            self._close_conn()

    def _close_conn(self) -> None:
        if self.conn is not None:
            self.conn.close()
            self.conn = None
