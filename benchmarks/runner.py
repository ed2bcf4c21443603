"""The DAG runner: one OS process per node, events over pipes, DAG semantics, cancellation.

Semantics (docs/workflow-format.md):
- a node starts when each of its dependencies has succeeded; a dependency on a background node is
  met once that node has loaded its model (it runs on, so it cannot be waited for);
- a node that fails (exception, crash, non-zero exit) marks every node downstream ``skipped``;
- background nodes are stopped (``stopped``) once every foreground node has finished;
- cancellation (a callable the caller polls, e.g. Ctrl-C or the web's cancel flag) stops every
  process within ``stop_grace_s`` plus one second and still returns what was measured.
"""

from __future__ import annotations

import ctypes
import json
import multiprocessing as mp
import os
import signal
import sys
import tempfile
import threading
import traceback
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from multiprocessing.connection import Connection, wait
from multiprocessing.process import BaseProcess
from pathlib import Path
from typing import IO, Any, Protocol

from benchmarks import clock, metrics
from benchmarks.apps import app_type, driver_class
from benchmarks.apps.base import AppContext, AppStopped, Driver, arrival_offsets
from benchmarks.files import UNRESTRICTED, FilePolicy, bundle_path
from benchmarks.monitor import DEFAULT_HZ
from benchmarks.monitor.run import RunMonitor
from benchmarks.platform import fingerprint, gpus
from benchmarks.schedulers import get_scheduler
from benchmarks.schedulers.base import GateSpec, NodePlan, Scheduler, SchedulerError
from benchmarks.spec.export import to_dict
from benchmarks.spec.model import Application, Workflow

POLL_S = 0.05
# Events handled per node per pass of the main loop: an application that floods its pipe (thousands of
# tiny requests a second) cannot keep the runner from checking cancellation and time limits.
DRAIN_BATCH = 500
RECORDS_DIR = "records"  # one JSON Lines file of request records per node, written as they arrive
SCHEMA_VERSION = 1
TERMINAL = ("succeeded", "failed", "stopped", "skipped")
TIME_LIMIT_REASON = "time limit of {:g} s exceeded"  # a run's reason when its time limit stopped it


class RunSink(Protocol):
    """Where the runner reports as it goes (CLI progress, the web worker's database writer)."""

    def on_event(self, event: Mapping[str, Any]) -> None:
        """Called for every event: node status changes and application events (see docs)."""


class NullSink:
    def on_event(self, event: Mapping[str, Any]) -> None:
        return None


class PreflightError(RuntimeError):
    """The run cannot start on this machine (missing GPU, model or file); nothing was started."""

    def __init__(self, problems: list[str]) -> None:
        self.problems = problems
        super().__init__("the run cannot start:\n" + "\n".join(f"  {p}" for p in problems))


@dataclass
class NodeState:
    name: str
    unit: Application
    background: bool
    device: str
    status: str = "pending"
    reason: str | None = None
    process: BaseProcess | None = None
    conn: Connection | None = None
    stop_event: Any = None
    started_at: float | None = None
    finished_at: float | None = None
    load_started: float | None = None
    load_finished: float | None = None
    loaded: dict[str, Any] = field(default_factory=dict)
    # Request records go to a file as they arrive, never to a list: a long run's memory stays flat.
    records: IO[str] | None = None
    records_path: Path | None = None
    request_count: int = 0
    done_status: str | None = None
    stop_sent_at: float | None = None
    pipe_open: bool = True
    # start_together: the nodes spawned with this one, and the event that lets its requests begin.
    group: tuple[str, ...] = ()
    go_event: Any = None
    released_at: float | None = None


def resolve_device(unit: Application) -> str:
    """Return ``gpu`` or ``cpu`` for a unit (``auto`` takes the GPU when one is visible)."""
    if unit.device == "auto":
        return "gpu" if gpus() else "cpu"
    return unit.device


def preflight(workflow: Workflow, files: FilePolicy = UNRESTRICTED) -> list[str]:
    """Return the problems that stop this workflow from running here (devices, models, files).

    Files are read through ``files``; when it refuses a path, those refusals are all that is
    returned and nothing is read.
    """
    refused = [message for _, message in files.workflow_problems(workflow)]
    if refused:
        return refused
    problems: list[str] = []
    for name, unit in workflow.applications.items():
        if unit.device == "gpu" and not gpus():
            problems.append(
                f"unit '{name}' asks for device: gpu, but no NVIDIA GPU is visible here "
                "(NVML found none); use device: cpu or auto, or run it on a GPU worker"
            )
        check = app_type(unit).check
        if check is not None:
            # File problems already name the field and the unit.
            problems.extend(
                p if f"of unit '{name}'" in p else f"unit '{name}': {p}" for p in check(unit, files)
            )
        if unit.arrival.kind == "trace":
            try:
                arrival_offsets(unit, unit.warmup_requests + unit.num_requests, 0, files)
            except ValueError as exc:
                problems.append(str(exc))
    return problems


def run_workflow(
    workflow: Workflow,
    scheduler: str | Scheduler | None = None,
    sink: RunSink | None = None,
    cancel: Callable[[], bool] | None = None,
    out_dir: Path | None = None,
    time_limit_s: float | None = None,
    stop_grace_s: float = 3.0,
    repeat_index: int = 1,
    monitor_hz: float | None = DEFAULT_HZ,
    monitor_sources: Sequence[str] | None = None,
    files: FilePolicy = UNRESTRICTED,
) -> dict[str, Any]:
    """Run a workflow on this machine and return its result document (docs/result-format.md).

    Every file the workflow names is checked and read through ``files`` (benchmarks.files): before
    the run (preflight) and again by the application drivers.

    The system monitor samples ``monitor_sources`` (all by default) at ``monitor_hz`` (None: off)
    beside the run; its batches go to the sink as ``telemetry`` events (docs/monitor.md).

    ``scheduler`` is a registered name (the workflow's own by default) or a configured instance.
    Raises PreflightError (nothing started) when a GPU, model or file is missing, and SchedulerError
    when the scheduler cannot serve the run here.
    """
    problems = preflight(workflow, files)
    if problems:
        raise PreflightError(problems)
    run = _Run(
        workflow,
        scheduler if isinstance(scheduler, Scheduler) else get_scheduler(scheduler or workflow.scheduler),
        sink or NullSink(),
        cancel or (lambda: False),
        out_dir,
        time_limit_s,
        stop_grace_s,
        monitor_hz=monitor_hz,
        monitor_sources=monitor_sources,
        files=files,
    )
    return run.execute(repeat_index)


class _Run:
    def __init__(
        self,
        workflow: Workflow,
        scheduler: Scheduler,
        sink: RunSink,
        cancel: Callable[[], bool],
        out_dir: Path | None,
        time_limit_s: float | None,
        stop_grace_s: float,
        monitor_hz: float | None = None,
        monitor_sources: Sequence[str] | None = None,
        files: FilePolicy = UNRESTRICTED,
    ) -> None:
        self.workflow = workflow
        self.files = files
        self.scheduler = scheduler
        self.sink = sink
        self.cancel = cancel
        self.out_dir = out_dir
        self.artifacts = Path()
        self.time_limit_s = time_limit_s
        self.stop_grace_s = stop_grace_s
        self.ctx = mp.get_context("spawn")
        self.nodes = {
            name: NodeState(
                name, workflow.unit_of(name), node.background, resolve_device(workflow.unit_of(name))
            )
            for name, node in workflow.nodes.items()
        }
        self.t0 = clock.now()
        self.status = "completed"
        self.stop_reason: str | None = None
        self.monitor = RunMonitor(self._emit, monitor_hz, monitor_sources, out_dir)

    # -- events ------------------------------------------------------------------------------------

    def _emit(self, kind: str, node: str | None = None, t: float | None = None, **fields: Any) -> None:
        """Report an event to the sink; ``t`` is seconds since the run started (now by default)."""
        event = {"t": clock.now() - self.t0 if t is None else t, "kind": kind, "node": node, **fields}
        self.sink.on_event(event)

    def _set_status(self, state: NodeState, status: str, reason: str | None = None) -> None:
        state.status = status
        if reason is not None:
            state.reason = reason
        if status in TERMINAL and state.finished_at is None:
            state.finished_at = clock.now()
        self._emit("node_status", state.name, status=status, reason=state.reason)

    # -- main loop ---------------------------------------------------------------------------------

    def execute(self, repeat_index: int) -> dict[str, Any]:
        plans = {
            name: NodePlan(name, s.unit.name, s.device, s.unit.priority, s.unit.mps, s.background)
            for name, s in self.nodes.items()
        }
        self.t0 = clock.now()
        started_wall = clock.wall()
        self._emit("run_status", status="running")
        self.monitor.start(self.t0)
        # Without a bundle directory, what applications produce (images) lives only as long as the run.
        scratch = None
        if self.out_dir is None:
            scratch = tempfile.TemporaryDirectory(prefix="consumerbench-")
            self.artifacts = Path(scratch.name)
            records_dir = Path(scratch.name) / RECORDS_DIR
        else:
            self.artifacts = self.out_dir / "artifacts"
            records_dir = self.out_dir / RECORDS_DIR
        try:
            self._open_records(records_dir)
            try:
                self.scheduler.start(self.workflow, plans)
                try:
                    self._loop(plans)
                finally:
                    self._shutdown_all()
            except SchedulerError:
                self._shutdown_all()
                raise
            finally:
                self.scheduler.stop()
                self.monitor.stop()
                self._close_records()
            result = self._result(started_wall, repeat_index)
        finally:
            if scratch is not None:
                scratch.cleanup()
        self._emit("run_status", status=self.status, reason=self.stop_reason)
        return result

    def _open_records(self, records_dir: Path) -> None:
        records_dir.mkdir(parents=True, exist_ok=True)
        for i, state in enumerate(self.nodes.values()):
            # Numbered, not named after the node: a node name never becomes a path here.
            state.records_path = records_dir / f"node-{i}.jsonl"
            state.records = state.records_path.open("w", encoding="utf-8")

    def _close_records(self) -> None:
        for state in self.nodes.values():
            if state.records is not None:
                state.records.close()
                state.records = None

    def _loop(self, plans: Mapping[str, NodePlan]) -> None:
        while True:
            if self.status == "completed":
                if self.cancel():
                    self._abort("cancelled", "run cancelled")
                elif self.time_limit_s is not None and clock.now() - self.t0 > self.time_limit_s:
                    self._abort("failed", TIME_LIMIT_REASON.format(self.time_limit_s))
            if self.status == "completed":
                self._start_ready(plans)
                self._stop_background_if_done()
            self._escalate_stops()
            active = [s for s in self.nodes.values() if s.status in ("running", "stopping")]
            if not active and not any(s.status == "pending" for s in self.nodes.values()):
                return
            waitables: list[Any] = []
            for s in active:
                assert s.process is not None and s.conn is not None
                waitables += [s.conn, s.process.sentinel] if s.pipe_open else [s.process.sentinel]
            for ready in wait(waitables, timeout=POLL_S):
                for s in active:
                    if ready is s.conn:
                        self._drain(s, DRAIN_BATCH)
                    elif s.process is not None and ready == s.process.sentinel:
                        self._reap(s)
            self._release_groups()
            self.scheduler.poll()
            self.monitor.poll()

    def _deps_met(self, name: str) -> bool | str:
        """True when the node may start, False to wait, or a reason string to skip it."""
        for dep in self.workflow.nodes[name].depend_on:
            d = self.nodes[dep]
            if d.status in ("failed", "skipped"):
                return f"dependency '{dep}' {d.status}"
            if d.background and d.load_finished is not None:
                continue
            if d.background and d.status in ("stopped", "succeeded"):
                continue
            if d.status != "succeeded":
                return False
        return True

    def _start_ready(self, plans: Mapping[str, NodePlan]) -> None:
        spawned = []
        for name, state in self.nodes.items():
            if state.status != "pending":
                continue
            met = self._deps_met(name)
            if isinstance(met, str):
                self._set_status(state, "skipped", met)
            elif met:
                self._spawn(state, plans[name])
                spawned.append(name)
        for name in spawned:
            self.nodes[name].group = tuple(spawned)

    def _release_groups(self) -> None:
        """start_together: let a group's requests begin once every member has loaded or has ended."""
        for state in self.nodes.values():
            if state.go_event is None or state.released_at is not None:
                continue
            members = [self.nodes[n] for n in state.group]
            if all(m.load_finished is not None or m.status not in ("running", "stopping") for m in members):
                now = clock.now()
                for m in members:
                    if m.go_event is not None and m.released_at is None:
                        m.go_event.set()
                        m.released_at = now

    def _spawn(self, state: NodeState, plan: NodePlan) -> None:
        recv, send = self.ctx.Pipe(duplex=False)
        state.stop_event = self.ctx.Event()
        state.go_event = self.ctx.Event() if self.workflow.start_together else None
        env = self.scheduler.env_for(plan)
        gate = self.scheduler.gate_for(plan)
        out_dir = str(bundle_path(self.artifacts, state.name))
        seed = self.workflow.seed if state.unit.seed is None else state.unit.seed
        state.process = self.ctx.Process(
            target=app_process_main,
            name=f"cb-{state.name}",
            args=(
                state.name,
                state.unit,
                state.device,
                gate,
                env,
                send,
                state.stop_event,
                out_dir,
                seed,
                state.go_event,
                self.files,
            ),
            daemon=True,
        )
        state.started_at = clock.now()
        state.process.start()
        send.close()
        state.conn = recv
        self._set_status(state, "running")
        self._emit("process", state.name, pid=state.process.pid)
        if state.process.pid is not None:
            self.monitor.watch(state.name, state.process.pid)

    def _drain(self, state: NodeState, limit: int | None = None) -> None:
        """Handle the events waiting on a node's pipe: at most ``limit`` (None: all of them)."""
        assert state.conn is not None
        handled = 0
        try:
            while (limit is None or handled < limit) and state.conn.poll():
                self._handle(state, state.conn.recv())
                handled += 1
        except (EOFError, OSError):
            # The process closed its end: only its exit is left to wait for.
            state.pipe_open = False

    def _handle(self, state: NodeState, event: dict[str, Any]) -> None:
        kind = event.get("kind")
        t = float(event.pop("t")) - self.t0
        if kind == "load_start":
            state.load_started = t + self.t0
        elif kind == "load_end":
            state.load_finished = t + self.t0
            state.loaded = event.get("loaded") or {}
        elif kind == "request_end":
            record = _relative(event["record"], self.t0)
            if state.records is not None:
                state.records.write(json.dumps(record) + "\n")
            state.request_count += 1
            self.scheduler.on_request_end(state.name, record)
            event["record"] = record
        elif kind == "done":
            state.done_status = event.get("status")
            if event.get("error"):
                state.reason = event["error"]
        self._emit(
            str(kind), state.name, t=t, **{k: v for k, v in event.items() if k not in ("kind", "node")}
        )

    def _reap(self, state: NodeState) -> None:
        assert state.process is not None
        self._drain(state)
        state.process.join(timeout=1)
        code = state.process.exitcode
        if state.done_status == "succeeded" and code == 0:
            self._set_status(state, "succeeded")
        elif state.done_status == "stopped" or (state.status == "stopping" and state.done_status is None):
            reason = state.reason or ("stopped: foreground finished" if state.background else "stopped")
            self._set_status(state, "stopped", reason)
        else:
            reason = state.reason or _exit_reason(code)
            self._set_status(state, "failed", reason)
        if state.conn is not None:
            state.conn.close()

    # -- stopping ----------------------------------------------------------------------------------

    def _stop_background_if_done(self) -> None:
        foreground = [s for s in self.nodes.values() if not s.background]
        if not foreground or any(s.status not in TERMINAL for s in foreground):
            return
        for s in self.nodes.values():
            if s.background and s.status == "pending":
                self._set_status(s, "skipped", "foreground finished before it could start")
            elif s.background and s.status == "running":
                self._request_stop(s, "stopped: foreground finished")

    def _request_stop(self, state: NodeState, reason: str) -> None:
        state.reason = reason
        state.status = "stopping"
        state.stop_sent_at = clock.now()
        state.stop_event.set()
        self._emit("node_status", state.name, status="stopping", reason=reason)

    def _abort(self, status: str, reason: str) -> None:
        self.status = status
        self.stop_reason = reason
        for s in self.nodes.values():
            if s.status == "pending":
                self._set_status(s, "skipped", reason)
            elif s.status == "running":
                self._request_stop(s, reason)

    def _escalate_stops(self) -> None:
        """Terminate processes that ignored a stop request for ``stop_grace_s``, then kill them."""
        for s in self.nodes.values():
            if s.status != "stopping" or s.stop_sent_at is None or s.process is None:
                continue
            late = clock.now() - s.stop_sent_at - self.stop_grace_s
            if late > 0 and s.process.is_alive():
                if late < 0.5:
                    s.process.terminate()
                else:
                    s.process.kill()

    def _shutdown_all(self) -> None:
        for s in self.nodes.values():
            if s.process is not None and s.process.is_alive():
                s.process.kill()
                s.process.join(timeout=2)
                if s.status not in TERMINAL:
                    self._set_status(s, "stopped", s.reason or "stopped by the runner")

    # -- result --------------------------------------------------------------------------------------

    def _result(self, started_wall: float, repeat_index: int) -> dict[str, Any]:
        rel = self._rel
        nodes, applications = [], []
        for name, s in self.nodes.items():
            load_time = (
                s.load_finished - s.load_started
                if s.load_finished is not None and s.load_started is not None
                else None
            )
            nodes.append(
                {
                    "name": name,
                    "uses": s.unit.name,
                    "background": s.background,
                    "device": s.device,
                    "status": s.status,
                    "started_at": rel(s.started_at),
                    "finished_at": rel(s.finished_at),
                    "load_time_s": load_time,
                    "start_wait_s": (
                        max(0.0, s.released_at - s.load_finished)
                        if s.released_at is not None and s.load_finished is not None
                        else None
                    ),
                    "reason": s.reason if s.status != "succeeded" else None,
                }
            )
            slos = s.unit.slo
            # Read back once, at the end: bounded by the workflow's requests per run (spec.Limits).
            requests = list(_read_records(s.records_path))
            for r in requests:
                r["slo_met"] = metrics.request_slo_met(r, slos) if r["status"] == "ok" else None
            app = {
                "name": name,
                "unit": s.unit.name,
                "type": s.unit.type,
                "device": s.device,
                "priority": s.unit.priority,
                "model": s.unit.model,
                "loaded": s.loaded,
                "slo": [str(x) for x in slos],
                "load_time_s": load_time,
                "requests_total": len(requests),
                **metrics.application_metrics(requests, slos),
                "requests": requests,
            }
            applications.append(app)
        foreground_ends = [s.finished_at for s in self.nodes.values() if not s.background and s.finished_at]
        ends = foreground_ends or [s.finished_at for s in self.nodes.values() if s.finished_at]
        makespan = max(ends) - self.t0 if ends else None
        all_ends = [s.finished_at for s in self.nodes.values() if s.finished_at]
        summary = metrics.run_summary(applications, makespan)
        return {
            "schema_version": SCHEMA_VERSION,
            "status": self.status,
            "reason": self.stop_reason,
            "workflow": to_dict(self.workflow),
            "scheduler": self.scheduler.describe(),
            "platform": fingerprint(),
            "repeat_index": repeat_index,
            "started_at_unix": started_wall,
            "clock": {"t0_monotonic": self.t0, "unit": "seconds since t0"},
            "makespan_s": makespan,
            "critical_path": self._critical_path(),
            "mean_attainment": summary["mean_attainment"],
            "fairness": summary["fairness"],
            "nodes": nodes,
            "applications": applications,
            "telemetry": self.monitor.result(applications, max(all_ends) - self.t0 if all_ends else None),
        }

    def _rel(self, t: float | None) -> float | None:
        return None if t is None else t - self.t0

    def _critical_path(self) -> list[str]:
        """Walk back from the last foreground node to finish through its latest-finishing dependency."""
        done = {n: s for n, s in self.nodes.items() if s.finished_at is not None and not s.background}
        if not done:
            return []
        current: str | None = max(done, key=lambda n: done[n].finished_at or 0.0)
        path: list[str] = []
        while current is not None:
            path.append(current)
            deps = [
                d for d in self.workflow.nodes[current].depend_on if self.nodes[d].finished_at is not None
            ]
            current = max(deps, key=lambda d: self.nodes[d].finished_at or 0.0) if deps else None
        return path[::-1]


def _read_records(path: Path | None) -> Iterator[dict[str, Any]]:
    """Yield the request records a node's JSON Lines file holds, in arrival order."""
    if path is None or not path.exists():
        return
    with path.open(encoding="utf-8") as fh:
        for line in fh:
            yield json.loads(line)


def _relative(record: dict[str, Any], t0: float) -> dict[str, Any]:
    out = dict(record)
    for key in ("arrival", "start", "end"):
        out[key] = float(out[key]) - t0
    return out


def _exit_reason(code: int | None) -> str:
    if code is None:
        return "the application process did not exit"
    if code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        return f"the application process was killed by {name} (exit code {code})"
    return f"the application process exited with code {code} before reporting completion"


# --------------------------------------------------------------------------------------------------
# Inside the application process
# --------------------------------------------------------------------------------------------------


# prctl(2) option: the signal this process gets when the thread that started it ends.
_PR_SET_PDEATHSIG = 1


def die_with_parent() -> bool:
    """Have the kernel SIGKILL this process when the one that started it dies; return True if armed.

    An application process must not outlive its runner: a worker killed with SIGKILL (OOM killer,
    ``kill -9``) runs no clean-up, and a model load or a long request would go on holding the GPU and
    memory with nobody to report to. Linux only (prctl PR_SET_PDEATHSIG; elsewhere the process stops at
    its next event, when the pipe to the runner breaks). The signal follows the *thread* that started
    the process: the runner starts every application from the thread that called ``run_workflow``,
    which waits for them all before it returns. Exits at once if the parent is already gone.
    """
    if not sys.platform.startswith("linux"):
        return False
    parent = mp.parent_process()
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) != 0:
        return False
    # The parent may have died between our start and the prctl call: then we were already adopted.
    if parent is not None and parent.pid != os.getppid():
        os._exit(1)
    return True


def app_process_main(
    node: str,
    unit: Application,
    device: str,
    gate_spec: GateSpec,
    env: dict[str, str],
    conn: Connection,
    stop_event: Any,
    out_dir: str,
    seed: int,
    go_event: Any = None,
    files: FilePolicy = UNRESTRICTED,
) -> None:
    """Entry point of an application process: load, wait for ``go_event`` when given (the runner sets
    it once the nodes started with this one have loaded: start_together), run the requests, report,
    close."""
    die_with_parent()
    os.environ.update(env)
    # Ctrl-C reaches the whole process group; the runner decides how the application stops.
    signal.signal(signal.SIGINT, signal.SIG_IGN)

    lock = threading.Lock()

    def emit(kind: str, **fields: Any) -> None:
        # Concurrent sessions share the pipe: one message at a time.
        with lock:
            conn.send({"t": clock.now(), "kind": kind, **fields})

    gate = gate_spec.open()
    sessions = unit.concurrency
    contexts = [
        AppContext(
            node=node,
            emit=emit,
            gate=gate,
            stop_requested=stop_event.is_set,
            device=device,
            out_dir=Path(out_dir) if sessions == 1 else Path(out_dir) / f"session-{k}",
            seed=seed + k,
            session=k,
            sessions=sessions,
            files=files,
        )
        for k in range(sessions)
    ]
    drivers: list[Driver] = []

    def ready(loaded: list[dict[str, Any]]) -> None:
        emit("load_end", loaded=loaded[0] if sessions == 1 else {**loaded[0], "sessions": sessions})
        while go_event is not None and not go_event.wait(0.05):
            if stop_event.is_set():
                raise AppStopped

    status, error, code = "succeeded", None, 0
    try:
        cls = driver_class(app_type(unit))
        emit("load_start")
        drivers = [cls(unit, ctx) for ctx in contexts]
        _run_sessions(drivers, ready)
    except AppStopped:
        status = "stopped"
    except BaseException as exc:
        status, code = "failed", 1
        error = f"{type(exc).__name__}: {exc}"
        emit("log", level="error", message=traceback.format_exc())
    finally:
        for driver in drivers:
            try:
                driver.close()
            except Exception as exc:
                if status == "succeeded":
                    status, code, error = "failed", 1, f"close() failed: {type(exc).__name__}: {exc}"
        emit("done", status=status, error=error)
        conn.close()
    if code:
        raise SystemExit(code)


def _run_sessions(drivers: list[Driver], ready: Callable[[list[dict[str, Any]]], None]) -> None:
    """Load, then run, each session's driver in one thread of its own (the calling thread when there
    is one session), so that what a GPU library keeps per thread (cuBLAS handles, the kernels a first
    call selects) is set up by the session's load and its priming, not by its first request. Loads
    take turns. ``ready`` gets what each session loaded once all have, in the calling thread and
    before any request (it may raise AppStopped: then no request runs).

    Re-raises the first session's error; AppStopped when a session was stopped and none failed.
    """
    if len(drivers) == 1:
        ready([drivers[0].load()])
        drivers[0].run()
        return
    n = len(drivers)
    loaded: list[dict[str, Any]] = [{} for _ in range(n)]
    errors: list[BaseException | None] = [None] * n
    turn = threading.Lock()
    all_loaded = threading.Barrier(n + 1)
    go, abort = threading.Event(), threading.Event()

    def session(k: int) -> None:
        try:
            with turn:
                if abort.is_set():
                    return
                loaded[k] = drivers[k].load()
            all_loaded.wait()
            go.wait()
            if not abort.is_set():
                drivers[k].run()
        except threading.BrokenBarrierError:
            return
        except BaseException as exc:
            errors[k] = exc
            if not go.is_set():  # a failed load stops the others; a failed run leaves them running
                abort.set()
                all_loaded.abort()

    threads = [threading.Thread(target=session, args=(k,), name=f"session-{k}") for k in range(n)]
    for t in threads:
        t.start()
    try:
        all_loaded.wait()
        ready(loaded)
    except threading.BrokenBarrierError:
        abort.set()  # a session failed to load: its error is raised below
    except BaseException:
        abort.set()
        go.set()
        for t in threads:
            t.join()
        raise
    go.set()
    for t in threads:
        t.join()
    failures = [(k, e) for k, e in enumerate(errors) if e is not None and not isinstance(e, AppStopped)]
    if failures:
        k, exc = failures[0]
        raise RuntimeError(f"session {k}: {type(exc).__name__}: {exc}") from exc
    if any(isinstance(e, AppStopped) for e in errors):
        raise AppStopped
