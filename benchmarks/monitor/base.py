"""The shape every monitor source has (``Source``) and the table of watched application processes.

A source module declares one ``Source`` subclass and is registered in
``benchmarks.monitor.sources.SOURCES``. ``open()`` either succeeds or raises ``SourceUnavailable``
with a reason a person can act on; ``sample()`` returns rows ``(t, entity, *values)`` in the order
of ``columns``. Source modules must stay cheap to import (pynvml and friends are imported in
``open()``), because the runner imports the registry even on machines without them.
"""

from __future__ import annotations

import os
import re
import sys
from abc import ABC, abstractmethod
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, ClassVar

import psutil

# One sample: (t seconds since the run's t0, entity, *values in the source's column order).
Row = tuple[Any, ...]

# Descendants of an application process (a server it forked, a tokenizer pool) are looked up every
# CHILDREN_REFRESH_S during an application's first CHILDREN_EARLY_S (when servers and pools start),
# every CHILDREN_LATE_S after, in one scan of every process's /proc entry that serves all the
# applications (psutil's ``children`` scans them all per call). An application's own process is
# watched from its start.
CHILDREN_REFRESH_S = 1.0
CHILDREN_EARLY_S = 10.0
CHILDREN_LATE_S = 5.0


class SourceUnavailable(Exception):
    """A source cannot sample on this machine; the message is the reason shown to the user."""


@dataclass
class SourceStatus:
    """Whether a source can sample here, and if not, why."""

    name: str
    available: bool
    reason: str | None = None
    columns: tuple[str, ...] = ()
    description: str = ""

    def describe(self) -> str:
        """Return ``available`` or ``unavailable: <reason>``."""
        return "available" if self.available else f"unavailable: {self.reason}"

    def to_dict(self) -> dict[str, Any]:
        """Return the status as a JSON-ready dict."""
        return {
            "name": self.name,
            "status": "available" if self.available else "unavailable",
            "reason": self.reason,
            "columns": list(self.columns),
            "description": self.description,
        }


class Source(ABC):
    """One telemetry source: opened once, sampled at the monitor's rate, closed at the end."""

    name: ClassVar[str]
    description: ClassVar[str]
    columns: tuple[str, ...] = ()

    @abstractmethod
    def open(self, hz: float) -> None:
        """Prepare to sample at ``hz``; raise ``SourceUnavailable(reason)`` when this machine lacks it."""

    @abstractmethod
    def sample(self, t: float, apps: AppProcesses) -> list[Row]:
        """Return this tick's rows; raise ``SourceUnavailable`` if the source stopped working for good."""

    def read_all_next(self) -> None:  # noqa: B027 - most sources read everything every tick
        """Make the next ``sample()`` take every reading, the slow ones too (a run's last tick)."""

    def close(self) -> None:  # noqa: B027 - most sources hold nothing to release
        """Release what ``open()`` took (subprocesses, library handles)."""


@dataclass
class _App:
    node: str
    root: psutil.Process
    procs: dict[int, psutil.Process] = field(default_factory=dict)
    refreshed_at: float = float("-inf")
    first_seen: float | None = None

    def refresh_due(self, now: float) -> bool:
        if self.first_seen is None:
            self.first_seen = now
        early = now - self.first_seen < CHILDREN_EARLY_S
        return now - self.refreshed_at >= (CHILDREN_REFRESH_S if early else CHILDREN_LATE_S)


class AppProcesses:
    """The application processes the monitor attributes samples to: node name -> its process tree."""

    def __init__(self) -> None:
        self._apps: dict[str, _App] = {}
        self._node_of: dict[int, str] = {}

    def watch(self, node: str, pid: int) -> None:
        """Attribute ``pid`` and, from the next refresh on, its descendants to ``node``."""
        try:
            root = psutil.Process(pid)
        except psutil.Error:
            return
        self._apps[node] = _App(node, root, {pid: root})
        self._node_of[pid] = node

    def refresh(self, now: float) -> None:
        """Drop exited processes and pick up new descendants (every 1 s at first, then every 5 s)."""
        due = [app for app in self._apps.values() if app.refresh_due(now)]
        if not due:
            return
        children: dict[int, list[int]] = defaultdict(list)
        for pid, ppid in parent_pids().items():
            children[ppid].append(pid)
        for app in due:
            app.refreshed_at = now
            alive: dict[int, psutil.Process] = {}
            if app.root.is_running():
                stack = [app.root.pid]
                while stack:
                    pid = stack.pop()
                    stack += children.get(pid, [])
                    known = app.procs.get(pid)
                    try:
                        alive[pid] = known if known is not None else psutil.Process(pid)
                    except psutil.Error:
                        continue
            for pid in set(app.procs) - set(alive):
                self._node_of.pop(pid, None)
            for pid in alive:
                self._node_of[pid] = app.node
            app.procs = alive

    def node_of(self, pid: int) -> str | None:
        """Return the node a process belongs to, or None for a process of no watched application."""
        return self._node_of.get(pid)

    def processes(self) -> Iterator[tuple[str, list[psutil.Process]]]:
        """Yield (node, its live processes) for every watched application."""
        for app in self._apps.values():
            yield app.node, list(app.procs.values())

    def __bool__(self) -> bool:
        return bool(self._apps)


def parent_pids() -> dict[int, int]:
    """Return {pid: parent pid} of every process on the machine, in one pass.

    On Linux from /proc/<pid>/stat (psutil would build the same map once per call of ``children``).
    """
    if not sys.platform.startswith("linux"):
        return {p.pid: p.info["ppid"] for p in psutil.process_iter(["ppid"])}
    out = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            stat = read_proc(f"/proc/{name}/stat")
        except OSError:
            continue  # exited since the listing
        # "pid (comm) state ppid ...": comm may hold spaces and parentheses, so parse from the last ")".
        out[int(name)] = int(stat[stat.rindex(b")") + 2 :].split(maxsplit=2)[1])
    return out


def read_proc(path: str) -> bytes:
    """Return the content of a small /proc file (up to 64 KiB) in one read, without Python's file layers."""
    fd = os.open(path, os.O_RDONLY)
    try:
        return os.read(fd, 1 << 16)
    finally:
        os.close(fd)


def app_entity(node: str) -> str:
    """Return the entity name under which a source reports an application's own samples."""
    return f"app:{node}"


_CORE_ENTITY = re.compile(r"cpu\d+")


def core_entity(index: int) -> str:
    """Return the entity name under which a source reports one logical CPU (``cpu<N>``)."""
    return f"cpu{index}"


def is_core_entity(entity: str) -> bool:
    """Return whether ``entity`` names one logical CPU (``cpu<N>``), not the machine or an application."""
    return _CORE_ENTITY.fullmatch(entity) is not None
