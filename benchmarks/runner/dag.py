"""The runner's main loop: starts each node's process when its dependencies allow, handles the events
of their pipes, stops and cancels them, and builds the run's ``ResultDocument`` (semantics: the
package docstring, ``benchmarks.runner``)."""

from __future__ import annotations

import ctypes
import multiprocessing as mp
import os
import re
import secrets
import shutil
import tempfile
from collections.abc import Callable, Collection, Mapping, Sequence
from multiprocessing.connection import wait
from pathlib import Path
from typing import Any, Protocol

import psutil

from benchmarks import clock
from benchmarks.apps.textgen import SERVER_KEY_ENV
from benchmarks.files import UNRESTRICTED, FilePolicy, bundle_path
from benchmarks.monitor import DEFAULT_HZ
from benchmarks.monitor.kernels import TRACE_FILE, KernelTraceSpec
from benchmarks.monitor.run import RunMonitor
from benchmarks.results import ResultDocument
from benchmarks.runner.checks import PreflightError, preflight, resolve_device
from benchmarks.runner.process import app_process_main, exit_reason
from benchmarks.runner.records import RECORDS_DIR, records_path, relative, write_record
from benchmarks.runner.result import build_result, requested
from benchmarks.runner.state import NodeState
from benchmarks.schedulers import scheduler_for
from benchmarks.schedulers.base import NodePlan, Scheduler
from benchmarks.spec.model import Workflow, server_edges
from benchmarks.status import NodeStatus, RequestStatus, RunStatus

POLL_S = 0.05
# Events handled per node per pass of the main loop: an application that floods its pipe (thousands of
# tiny requests a second) cannot keep the runner from checking cancellation and time limits.
DRAIN_BATCH = 500
TIME_LIMIT_REASON = "time limit of {:g} s exceeded"  # a run's reason when its time limit stopped it
FOREGROUND_FINISHED_REASON = "stopped: foreground finished"  # a background node's, stopped by design
_ACTIVE = (NodeStatus.RUNNING, NodeStatus.STOPPING)  # a node with a live process


class RunSink(Protocol):
    """Where the runner reports as it goes (CLI progress, the web worker's database writer)."""

    def on_event(self, event: Mapping[str, Any]) -> None:
        """Called for every event: node status changes and application events (see docs)."""


class NullSink:
    """The sink of a run nobody watches: every event is dropped."""

    def on_event(self, event: Mapping[str, Any]) -> None:
        return None


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
    scheduler_params: Mapping[str, Any] | None = None,
    kernel_trace: Collection[str] = (),
) -> ResultDocument:
    """Run a workflow on this machine and return its result document (docs/result-format.md).

    Every file the workflow names is checked and read through ``files`` (benchmarks.files): before
    the run (preflight) and again by the application drivers.

    The system monitor samples ``monitor_sources`` (all by default) at ``monitor_hz`` (None: off)
    beside the run; its batches go to the sink as ``telemetry`` events (docs/monitor.md).

    ``scheduler`` is a registered name (the workflow's own by default) or a configured instance;
    with a name, the scheduler's parameters are the workflow's own (``scheduler: {name: credit, ...}``,
    when it names the same scheduler) overridden by ``scheduler_params``, each checked against the
    scheduler's ``Params`` (SchedulerParamError, a ValueError, names a bad one).
    ``kernel_trace`` names the nodes whose GPU kernels are recorded while they serve
    (benchmarks.monitor.kernels: ``artifacts/<node>/kernels.csv.gz`` in the bundle, which ``out_dir``
    must then be); a name that is no node of the workflow is a ValueError.

    Raises PreflightError (nothing started) when a GPU, model or file is missing, and SchedulerError
    when the scheduler cannot serve the run here.
    """
    refusal = kernel_trace_refusal(workflow, kernel_trace)
    if refusal:
        raise ValueError(f"kernel_trace: {refusal}")
    if kernel_trace and out_dir is None:
        raise ValueError("kernel_trace needs a bundle directory (out_dir) to write the traces into")
    problems = preflight(workflow, files)
    if problems:
        raise PreflightError(problems)
    run = _Run(
        workflow,
        scheduler
        if isinstance(scheduler, Scheduler)
        else scheduler_for(workflow, scheduler, scheduler_params),
        sink or NullSink(),
        cancel or (lambda: False),
        out_dir,
        time_limit_s,
        stop_grace_s,
        monitor_hz=monitor_hz,
        monitor_sources=monitor_sources,
        files=files,
        kernel_trace=frozenset(kernel_trace),
    )
    return run.execute(repeat_index)


def kernel_trace_refusal(workflow: Workflow, nodes: Collection[str]) -> str | None:
    """Return why ``nodes`` cannot be traced in ``workflow`` (names that are none of its nodes), or None."""
    unknown = sorted(set(nodes) - set(workflow.nodes))
    return f"no node named {', '.join(map(repr, unknown))} in the workflow" if unknown else None


# Seconds a node with a kernel trace gets beyond the stop grace to write its trace once stopped: a
# minute of SD 3.5 at 1024x1024 alone on an H100 (~16 images) took more than 30 s to write
# (captions-crowd's K = 1, its trace lost); the process exits as soon as it is written.
TRACE_WRITE_GRACE_S = 120.0
# Said of a traced node killed by a signal: a traced process imports torch and checks CUDA before its
# application loads, and a traced llama.cpp process was killed by SIGSEGV while loading (H100, torch 2.11,
# llama-cpp-python 0.3.36; docs/monitor.md).
TRACED_CRASH_NOTE = (
    "its kernels were being traced (kernel_trace), under which a llama.cpp process has been killed by "
    "SIGSEGV: run it untraced to tell (docs/monitor.md, Kernel traces)"
)


# A run's temporary folders name the runner's process, so that those of a killed runner can be found.
_TEMP_FOLDER = re.compile(r"consumerbench-(?:private-)?(\d+)-[A-Za-z0-9_]+")


def temp_prefix(kind: str = "") -> str:
    """Return the prefix of a temporary folder of this runner's run (``kind``: ``private`` or none)."""
    return f"consumerbench-{kind + '-' if kind else ''}{os.getpid()}-"


def sweep_dead_temp_folders(root: Path | None = None) -> list[Path]:
    """Remove the temporary folders (nodes' private folders, scratch bundles) that runners no longer
    alive left in ``root`` (the system's temporary folder); return those removed.

    A runner killed with SIGKILL cannot remove its own: the next run on the machine does. Only this
    user's folders are touched, and a folder whose process is alive, or whose PID now names a process
    started after the folder was made, is judged by that process's start time.
    """
    removed = []
    for path in (root or Path(tempfile.gettempdir())).iterdir():
        match = _TEMP_FOLDER.fullmatch(path.name)
        if match is None or path.is_symlink() or not path.is_dir():
            continue
        made = path.stat()
        if made.st_uid != os.getuid():
            continue
        try:
            alive = psutil.Process(int(match.group(1))).create_time() <= made.st_ctime + 1
        except (psutil.Error, ValueError, OverflowError):
            alive = False
        if not alive:
            shutil.rmtree(path, ignore_errors=True)
            removed.append(path)
    return removed


def node_env(scheduler_env: Mapping[str, str], device: str) -> dict[str, str]:
    """Return the environment a node's process adds: its scheduler's, and for a node on the CPU no
    visible GPU (``CUDA_VISIBLE_DEVICES`` empty), so that nothing it loads uses one behind the
    scheduler's back (llama.cpp's CUDA build runs large prompt batches on the GPU even with no layer
    offloaded)."""
    env = dict(scheduler_env)
    if device == "cpu":
        env["CUDA_VISIBLE_DEVICES"] = ""
    return env


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
        kernel_trace: frozenset[str] = frozenset(),
    ) -> None:
        self.workflow = workflow
        self.files = files
        self.kernel_trace = kernel_trace
        self.scheduler = scheduler
        self.sink = sink
        self.cancel = cancel
        self.out_dir = out_dir
        self.artifacts = Path()
        self.private = Path()
        self.time_limit_s = time_limit_s
        self.stop_grace_s = stop_grace_s
        self.ctx = mp.get_context("spawn")
        self.nodes = {
            name: NodeState(
                name, workflow.unit_of(name), node.background, resolve_device(workflow.unit_of(name))
            )
            for name, node in workflow.nodes.items()
        }
        # Each client node's model-server nodes (a unit's ``server:``): it starts once they answer and
        # fails when one of them fails.
        self.servers = server_edges(workflow.applications, workflow.nodes)
        # Each model server answers only its run's clients: a random key per server node, in the
        # environment of the server's process and of its clients' (never in a result).
        self.server_keys = {s: secrets.token_urlsafe(32) for names in self.servers.values() for s in names}
        self.t0 = clock.now()
        self.status = RunStatus.COMPLETED
        self.stop_reason: str | None = None
        self.monitor = RunMonitor(self._emit, monitor_hz, monitor_sources, out_dir)

    # -- events ------------------------------------------------------------------------------------

    def _emit(self, kind: str, node: str | None = None, t: float | None = None, **fields: Any) -> None:
        """Report an event to the sink; ``t`` is seconds since the run started (now by default)."""
        event = {"t": clock.now() - self.t0 if t is None else t, "kind": kind, "node": node, **fields}
        self.sink.on_event(event)

    def _set_status(self, state: NodeState, status: NodeStatus, reason: str | None = None) -> None:
        state.status = status
        if status is NodeStatus.SUCCEEDED:
            # It served all it was asked before any stop request took effect: no stop reason (a
            # cancel that arrived while it was exiting) and nothing stopped by design.
            state.reason, state.stopped_by_design = None, False
        elif reason is not None:
            state.reason = reason
        if status.terminal and state.finished_at is None:
            state.finished_at = clock.now()
        fields = {}
        if status.terminal and state.stopped_by_design:
            # Stopped by design: only what it began was asked of it (docs/metrics.md).
            fields["requested"] = requested(state)
        self._emit("node_status", state.name, status=status, reason=state.reason, **fields)
        if status is NodeStatus.FAILED:
            self._fail_clients(state)

    def _fail_clients(self, server: NodeState) -> None:
        """Fail the clients of a model server that failed: those not started and those running (stopped
        first, failed once their process ends: ``failure``), with the server's reason and log tail."""
        reason = f"model server node '{server.name}' failed: {server.reason}"
        for name, servers in self.servers.items():
            client = self.nodes[name]
            if server.name not in servers or client.failure is not None:
                continue
            client.failure = reason
            if client.status is NodeStatus.PENDING:
                self._set_status(client, NodeStatus.FAILED, reason)
            elif client.status is NodeStatus.RUNNING:
                self._request_stop(client, reason)
            elif client.status is NodeStatus.FAILED and client.reason != reason:
                # It saw the server go first (a broken stream): the server's reason comes first.
                self._set_status(client, NodeStatus.FAILED, f"{reason} (the client saw: {client.reason})")

    # -- main loop ---------------------------------------------------------------------------------

    def execute(self, repeat_index: int) -> ResultDocument:
        plans = {
            name: NodePlan(
                name,
                s.unit.name,
                s.device,
                s.unit.priority,
                s.unit.mps,
                s.background,
                s.unit.gpu_memory_limit_mb,
            )
            for name, s in self.nodes.items()
        }
        # Before the run's clock and monitor start: what the scheduler prepares (partition's MPS daemon
        # and its check of every share's matrix products, seconds a share) is no part of the run's time,
        # energy or time limit.
        self.scheduler.start(self.workflow, plans)
        try:
            return self._execute(plans, repeat_index)
        finally:
            self.scheduler.stop()

    def _execute(self, plans: Mapping[str, NodePlan], repeat_index: int) -> ResultDocument:
        """Run the started scheduler's nodes to the end; return the result."""
        self.t0 = clock.now()
        started_wall = clock.wall()
        self._emit("run_status", status=RunStatus.RUNNING)
        self.monitor.start(self.t0)
        # Without a bundle directory, what applications produce (images) lives only as long as the run.
        # The nodes' private folders (outside the bundle), removed here even if a node was killed.
        sweep_dead_temp_folders()
        private = tempfile.TemporaryDirectory(prefix=temp_prefix("private"))
        self.private = Path(private.name)
        scratch = None
        if self.out_dir is None:
            scratch = tempfile.TemporaryDirectory(prefix=temp_prefix())
            self.artifacts = Path(scratch.name)
            records_dir = Path(scratch.name) / RECORDS_DIR
        else:
            self.artifacts = self.out_dir / "artifacts"
            records_dir = self.out_dir / RECORDS_DIR
        try:
            self._open_records(records_dir)
            try:
                self._loop(plans)
            finally:
                self._shutdown_all()
                self.monitor.stop()
                self._close_records()
            result = build_result(
                self.workflow,
                self.nodes,
                status=self.status,
                reason=self.stop_reason,
                scheduler=self.scheduler.describe(),
                monitor=self.monitor,
                t0=self.t0,
                started_wall=started_wall,
                repeat_index=repeat_index,
            )
        finally:
            private.cleanup()
            if scratch is not None:
                scratch.cleanup()
        self._emit("run_status", status=self.status, reason=self.stop_reason)
        return result

    def _open_records(self, records_dir: Path) -> None:
        records_dir.mkdir(parents=True, exist_ok=True)
        for i, state in enumerate(self.nodes.values()):
            state.records_path = records_path(records_dir, i)
            state.records = state.records_path.open("w", encoding="utf-8")

    def _close_records(self) -> None:
        for state in self.nodes.values():
            if state.records is not None:
                state.records.close()
                state.records = None

    def _loop(self, plans: Mapping[str, NodePlan]) -> None:
        while True:
            if self.status is RunStatus.COMPLETED:
                if self.cancel():
                    self._abort(RunStatus.CANCELLED, "run cancelled")
                elif self.time_limit_s is not None and clock.now() - self.t0 > self.time_limit_s:
                    self._abort(RunStatus.FAILED, TIME_LIMIT_REASON.format(self.time_limit_s))
            if self.status is RunStatus.COMPLETED:
                self._start_ready(plans)
                self._stop_background_if_done()
            self._escalate_stops()
            active = [s for s in self.nodes.values() if s.status in _ACTIVE]
            if not active and not any(s.status is NodeStatus.PENDING for s in self.nodes.values()):
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
        for dep in self.workflow.dependencies(name):
            d = self.nodes[dep]
            if d.status.failing:
                return f"dependency '{dep}' {d.status}"
            if d.background and d.load_finished is not None:
                continue
            if d.background and d.status in (NodeStatus.STOPPED, NodeStatus.SUCCEEDED):
                continue
            if d.status is not NodeStatus.SUCCEEDED:
                return False
        return True

    def _start_ready(self, plans: Mapping[str, NodePlan]) -> None:
        spawned = []
        for name, state in self.nodes.items():
            if state.status is not NodeStatus.PENDING:
                continue
            met = self._deps_met(name)
            if isinstance(met, str):
                self._set_status(state, NodeStatus.SKIPPED, met)
            elif met:
                self._spawn(state, plans[name])
                spawned.append(name)
        for name in spawned:
            self.nodes[name].group = tuple(spawned)

    def _release_groups(self) -> None:
        """start_together: let a group's requests begin once every member has loaded or has ended."""
        for state in self.nodes.values():
            if state.go is None or state.released_at is not None:
                continue
            members = [self.nodes[n] for n in state.group]
            if all(m.load_finished is not None or m.status not in _ACTIVE for m in members):
                now = clock.now()
                for m in members:
                    if m.go is not None and m.released_at is None:
                        m.go.release()
                        m.released_at = now

    def _spawn(self, state: NodeState, plan: NodePlan) -> None:
        recv, send = self.ctx.Pipe(duplex=False)
        # A flag in shared memory, not an Event: the application reads it before every step and token
        # (an Event's is_set takes a lock across processes), and only the runner writes it.
        state.stop_flag = self.ctx.RawValue(ctypes.c_bool, False)
        state.go = self.ctx.Semaphore(0) if self.workflow.start_together else None
        env = node_env(self.scheduler.env_for(plan), state.device)
        servers = [state.name] if state.name in self.server_keys else self.servers.get(state.name, [])
        if servers:
            env[SERVER_KEY_ENV] = self.server_keys[servers[0]]
        gate = self.scheduler.gate_for(plan)
        out_dir = bundle_path(self.artifacts, state.name)
        trace = None
        if state.name in self.kernel_trace:
            state.trace_file = out_dir / TRACE_FILE
            # A traced run has a bundle, whose artifacts/ folder this is.
            state.trace_name = state.trace_file.relative_to(self.artifacts.parent).as_posix()
            trace = KernelTraceSpec(str(state.trace_file), self.t0)
        seed = self.workflow.seed if state.unit.seed is None else state.unit.seed
        # A client starts once its server node has loaded (its dependency), which reported its URL.
        server_url = next((self.nodes[n].loaded.get("url") for n in self.servers.get(state.name, ())), None)
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
                state.stop_flag,
                str(out_dir),
                seed,
                state.go,
                self.files,
                server_url,
                str(self.private / state.name),
                trace,
            ),
            daemon=True,
        )
        state.started_at = clock.now()
        state.process.start()
        send.close()
        state.conn = recv
        self._set_status(state, NodeStatus.RUNNING)
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
            planned = event.get("planned")
            state.planned = planned if isinstance(planned, int) else None
        elif kind == "request_end":
            record = relative(event["record"], self.t0)
            if state.records is not None:
                write_record(state.records, record)
            state.request_count += 1
            if not record.get("warmup") and record.get("status") != RequestStatus.INTERRUPTED:
                state.began += 1
            self.scheduler.on_request_end(state.name, record)
            event["record"] = record
        elif kind == "done":
            state.done_status = NodeStatus(event["status"]) if event.get("status") else None
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
        stopping = state.status is NodeStatus.STOPPING
        if state.done_status is NodeStatus.SUCCEEDED and code == 0:
            self._set_status(state, NodeStatus.SUCCEEDED)
        elif state.failure is not None:
            saw = state.reason not in (None, state.failure)
            reason = f"{state.failure} (the client saw: {state.reason})" if saw else state.failure
            self._set_status(state, NodeStatus.FAILED, reason)
        elif state.done_status is NodeStatus.STOPPED or (stopping and state.done_status is None):
            reason = state.reason or (FOREGROUND_FINISHED_REASON if state.background else "stopped")
            self._set_status(state, NodeStatus.STOPPED, reason)
        else:
            reason = state.reason or exit_reason(code)
            if code is not None and code < 0 and state.name in self.kernel_trace:
                reason += f"; {TRACED_CRASH_NOTE}"
            self._set_status(state, NodeStatus.FAILED, reason)
        if state.conn is not None:
            state.conn.close()

    # -- stopping ----------------------------------------------------------------------------------

    def _stop_background_if_done(self) -> None:
        """Once every foreground node has ended, stop the background nodes by design: what they had
        not begun was never due (docs/metrics.md, requested requests)."""
        foreground = [s for s in self.nodes.values() if not s.background]
        if not foreground or any(not s.status.terminal for s in foreground):
            return
        for s in self.nodes.values():
            if s.background and s.status is NodeStatus.PENDING:
                # Stopped, not skipped: nothing went wrong, it was simply not needed (not a failed node).
                s.stopped_by_design = True
                self._set_status(s, NodeStatus.STOPPED, "stopped: foreground finished before it could start")
            elif s.background and s.status is NodeStatus.RUNNING:
                s.stopped_by_design = True
                self._request_stop(s, FOREGROUND_FINISHED_REASON)

    def _request_stop(self, state: NodeState, reason: str) -> None:
        if state.done_status is None:  # a node that already reported its end keeps its own reason
            state.reason = reason
        state.status = NodeStatus.STOPPING
        state.stop_sent_at = clock.now()
        state.stop_flag.value = True
        self._emit("node_status", state.name, status=NodeStatus.STOPPING, reason=reason)

    def _abort(self, status: RunStatus, reason: str) -> None:
        # A cancel (or the time limit) that arrives once the foreground has finished stops nothing
        # that was due: the background nodes are stopped by design, as they would have been anyway.
        self._stop_background_if_done()
        self.status = status
        self.stop_reason = reason
        for s in self.nodes.values():
            if s.status is NodeStatus.PENDING:
                self._set_status(s, NodeStatus.SKIPPED, reason)
            elif s.status is NodeStatus.RUNNING:
                self._request_stop(s, reason)

    def _escalate_stops(self) -> None:
        """Terminate processes that ignored a stop request for ``stop_grace_s``, then kill them."""
        for s in self.nodes.values():
            if s.status is not NodeStatus.STOPPING or s.stop_sent_at is None or s.process is None:
                continue
            # A traced node writes its kernel trace after its last request: it gets the time for that.
            grace = self.stop_grace_s + (TRACE_WRITE_GRACE_S if s.trace_file is not None else 0.0)
            late = clock.now() - s.stop_sent_at - grace
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
                if not s.status.terminal:
                    self._set_status(s, NodeStatus.STOPPED, s.reason or "stopped by the runner")

    # -- result --------------------------------------------------------------------------------------
