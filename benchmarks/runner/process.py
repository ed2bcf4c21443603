"""The application process: one per DAG node, started by the runner (``benchmarks.runner.dag``) with
the ``spawn`` method. It loads the node's driver, waits for its group's go (start_together), runs the
requests and reports every event over a pipe to the runner; it dies with the runner.
"""

from __future__ import annotations

import ctypes
import multiprocessing as mp
import os
import signal
import sys
import threading
import time
import traceback
from collections.abc import Callable
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from benchmarks import clock
from benchmarks.apps import app_type, driver_class
from benchmarks.apps.base import AppContext, AppStopped, Driver
from benchmarks.files import UNRESTRICTED, FilePolicy
from benchmarks.monitor.kernels import KernelTrace, KernelTraceSpec
from benchmarks.schedulers.base import GateSpec
from benchmarks.spec.model import Application
from benchmarks.status import NodeStatus

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
    stop_flag: Any,
    out_dir: str,
    seed: int,
    go: Any = None,
    files: FilePolicy = UNRESTRICTED,
    server_url: str | None = None,
    scratch_dir: str | None = None,
    kernel_trace: KernelTraceSpec | None = None,
) -> None:
    """Entry point of an application process: load, wait for ``go`` when given (a semaphore the runner
    releases once the nodes started with this one have loaded: start_together), run the requests,
    report, close. ``server_url`` is the address of the model server the unit names (``server:``);
    ``scratch_dir`` a private folder of the node's, outside the bundle, that the runner removes after
    the run even when this process is killed; ``kernel_trace``: record the GPU kernels the requests
    run (benchmarks.monitor.kernels), from the go to the end of the last request."""
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

    def stopped() -> bool:
        return bool(stop_flag.value)

    sessions = unit.concurrency
    contexts = [
        AppContext(
            node=node,
            emit=emit,
            gate=gate,
            stop_requested=stopped,
            device=device,
            out_dir=Path(out_dir) if sessions == 1 else Path(out_dir) / f"session-{k}",
            seed=seed + k,
            session=k,
            sessions=sessions,
            files=files,
            server_url=server_url,
            scratch_dir=None if scratch_dir is None else Path(scratch_dir),
        )
        for k in range(sessions)
    ]
    drivers: list[Driver] = []
    trace = None if kernel_trace is None else KernelTrace(kernel_trace)
    if trace is not None:
        trace.prepare()  # torch before the application's libraries (benchmarks.monitor.kernels)

    def ready(loaded: list[dict[str, Any]]) -> None:
        emit(
            "load_end",
            loaded=loaded[0] if sessions == 1 else {**loaded[0], "sessions": sessions},
            planned=sum(d.planned_records() for d in drivers),
        )
        if trace is not None:
            # Before the go: starting CUPTI must not delay this node's first request behind its group's.
            try:
                problem = trace.start()
            except Exception as exc:
                problem = f"kernel trace not started: {type(exc).__name__}: {exc}"
            if problem is not None:
                emit("log", level="warning", message=problem)
        while go is not None and not go.acquire(timeout=0.05):
            if stopped():
                raise AppStopped

    status, error, code = NodeStatus.SUCCEEDED, None, 0
    try:
        cls = driver_class(app_type(unit))
        emit("load_start")
        drivers = [cls(unit, ctx) for ctx in contexts]
        _run_sessions(drivers, ready)
    except AppStopped:
        status = NodeStatus.STOPPED
    except BaseException as exc:
        status, code = NodeStatus.FAILED, 1
        error = f"{type(exc).__name__}: {exc}"
        emit("log", level="error", message=traceback.format_exc())
    finally:
        if trace is not None:
            try:
                began = time.monotonic()
                count = trace.stop()
                if count is not None:
                    took = time.monotonic() - began
                    message = f"kernel trace: {count} GPU activities written in {took:.1f} s"
                    emit("log", level="info", message=message)
            except Exception as exc:
                emit("log", level="warning", message=f"kernel trace not written: {type(exc).__name__}: {exc}")
        for driver in drivers:
            try:
                driver.close()
            except Exception as exc:
                if status is NodeStatus.SUCCEEDED:
                    status, code, error = NodeStatus.FAILED, 1, f"close() failed: {type(exc).__name__}: {exc}"
        # What the scheduler's gate cost this node over the run, all its sessions together.
        emit("done", status=status, error=error, gate_wait_s=sum(d.gate_wait_s() for d in drivers))
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


def exit_reason(code: int | None) -> str:
    """Return why an application process ended without reporting completion, from its exit code."""
    if code is None:
        return "the application process did not exit"
    if code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        return f"the application process was killed by {name} (exit code {code})"
    return f"the application process exited with code {code} before reporting completion"
