"""What the runner knows of one DAG node while it runs (its process, pipe, times and status)."""

from __future__ import annotations

from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess
from pathlib import Path
from typing import IO, Any

from benchmarks.spec.model import Application
from benchmarks.status import NodeStatus


@dataclass
class NodeState:
    """One node's live state; times are on the shared monotonic clock (not yet relative to t0)."""

    name: str
    unit: Application
    background: bool
    device: str
    status: NodeStatus = NodeStatus.PENDING
    reason: str | None = None
    process: BaseProcess | None = None
    conn: Connection | None = None
    stop_flag: Any = None  # a shared c_bool the application process reads (RawValue)
    started_at: float | None = None
    finished_at: float | None = None
    load_started: float | None = None
    load_finished: float | None = None
    loaded: dict[str, Any] = field(default_factory=dict)
    # Request records go to a file as they arrive, never to a list: a long run's memory stays flat.
    records: IO[str] | None = None
    records_path: Path | None = None
    request_count: int = 0
    # Records the application will report if it runs to the end (warm-up left out), told at load_end.
    planned: int | None = None
    # Measured requests it began and was not stopped in (warm-up and interrupted records left out),
    # and whether the runner stopped it by design (a background node once the foreground finished).
    began: int = 0
    stopped_by_design: bool = False
    done_status: NodeStatus | None = None
    # Seconds the node's process was held back at the scheduler's gate, told when it ends (None: it
    # died before it could say).
    gate_wait_s: float | None = None
    # Why the runner fails this node whatever it reports (its model server failed), once it ends.
    failure: str | None = None
    stop_sent_at: float | None = None
    pipe_open: bool = True
    # start_together: the nodes spawned with this one, and the semaphore whose release lets its
    # requests begin. Not an Event: Event.set() waits for its sleepers to wake, forever when one was
    # killed while waiting (a run cut by its time limit during the loads).
    group: tuple[str, ...] = ()
    go: Any = None
    released_at: float | None = None
    trace_file: Path | None = None  # its kernel trace (``kernel_trace``), once the process writes it
    trace_name: str | None = None  # the same file, relative to the bundle (the result's name for it)
