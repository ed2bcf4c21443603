"""LLMServer: a shared model server with continuous batching (llama.cpp's ``llama-server``).

A unit of this type is no application of its own: its node starts ``llama-server`` on a free loopback
port with ``parallel`` slots (sequences decoded together in one batch, new requests joining the batch
as slots free up), waits until it answers ``/health``, and serves the units that name it
(``server: <unit>``, Chatbot and DeepResearch) through its OpenAI-compatible API until the runner stops
it. Its node is a background node: the clients start once it has loaded (the DAG's dependency on a
background node), and it is stopped when the foreground ends. It records its load time (the node's
``load_time_s``), its port, its process id and its resident memory.

The binary is found as ``CB_LLAMA_SERVER`` (a path), else ``llama-server`` beside the Python that runs
the engine (``make llama-server`` builds it into the virtual environment), else on ``PATH``.

Under a scheduler whose gate may hold a step back (credit), each of the server's batches is one gated
step: ``make llama-server`` builds the server with ``server_gate.patch``, which makes every decode step ask
this node's process for admission over a pipe, and ``StepGateBridge`` carries the question through
the node's gate (docs/schedulers.md, "Model servers"). A server built without the patch is refused
under such a scheduler rather than left ungated.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

import psutil
from pydantic import Field, model_validator

from benchmarks.apps.base import AppStopped, AppType, Driver, check_unit
from benchmarks.apps.runtime import default_threads
from benchmarks.apps.textgen import SERVER_KEY_ENV, LlamaCppOptions, llama_server_args, local_file
from benchmarks.files import UNRESTRICTED, FilePolicy, where
from benchmarks.platform import accelerator
from benchmarks.schedulers.base import OpenGate
from benchmarks.spec.model import MODEL

if TYPE_CHECKING:
    from benchmarks.schedulers.base import Gate
    from benchmarks.spec.model import Application

BINARY_ENV = "CB_LLAMA_SERVER"
BINARY = "llama-server"
# How to get the binary (the error of a run that needs it, and `consumerbench doctor`'s fix).
HOW_TO_GET = (
    f"run `make llama-server` (compiles llama.cpp's server, about 10 min of CPU, once per version: it is "
    f"cached), or set {BINARY_ENV} to its path"
)
# How long a server may take to load its model and answer /health, and how often it is asked.
READY_TIMEOUT_S = 300.0
POLL_S = 0.1
# Attempts at a free port: another process may take the port between our probe and the server's bind.
PORT_ATTEMPTS = 5
BIND_FAILED = "couldn't bind HTTP server socket"  # what llama-server logs when the port is taken
LOG_TAIL_CHARS = 2000
# Tokens of context over all slots (n_ctx x parallel): the largest single n_ctx a Chatbot accepts.
MAX_SERVER_CONTEXT = 131_072
# prctl(2) option: the signal the server gets when the thread that started it ends.
_PR_SET_PDEATHSIG = 1
# The step gate's pipe (server_gate.patch): the variable naming the server's two descriptors (the one it
# reads grants from, the one it writes to), and the bytes it writes (hello at start, ask before a
# step, done after it) and reads (grant). The gated step's kind, as the scheduler sees it.
GATE_ENV = "CB_GATE_FDS"
HELLO, ASK, DONE, GRANT = b"h", b"a", b"r", b"g"
BATCH_STEP = "batch"


class ServerOptions(LlamaCppOptions):
    parallel: int = Field(1, ge=1, le=64, description="slots: concurrent sequences batched together")
    n_ctx: int = Field(2048, ge=64, le=131_072, description="context window of each slot")
    n_threads: int | None = Field(
        None, ge=1, le=1024, description="CPU threads (default: all this process may use)"
    )

    @model_validator(mode="after")
    def _check_context(self) -> ServerOptions:
        # The server allocates every slot's KV cache at start: bound the whole of it, as n_ctx alone is.
        if self.n_ctx * self.parallel > MAX_SERVER_CONTEXT:
            raise ValueError(
                f"n_ctx x parallel is {self.n_ctx * self.parallel:,} tokens, over the server's limit of "
                f"{MAX_SERVER_CONTEXT:,}; lower n_ctx or parallel"
            )
        return self


class ServerError(RuntimeError):
    """The model server could not start or stopped: the reason and the tail of its log."""


def server_binary() -> Path:
    """Return the ``llama-server`` binary to run; raise ServerError saying how to get one."""
    named = os.environ.get(BINARY_ENV)
    if named:
        path = Path(named)
        if not (path.is_file() and os.access(path, os.X_OK)):
            raise ServerError(f"{BINARY_ENV}={named} is not an executable file")
        return path
    beside = Path(sys.executable).parent / BINARY
    if beside.is_file() and os.access(beside, os.X_OK):
        return beside
    found = shutil.which(BINARY)
    if found:
        return Path(found)
    raise ServerError(f"llama.cpp's {BINARY} is not installed: {HOW_TO_GET}")


def check(unit: Application, files: FilePolicy = UNRESTRICTED) -> list[str]:
    """Return the problems that stop this server here: its model, and the server binary."""

    def binary() -> list[str]:
        try:
            server_binary()
        except ServerError as exc:
            return [str(exc)]
        return []

    return check_unit(unit, files, ("gguf",), more=binary)


def free_port() -> int:
    """Return a loopback TCP port that was free a moment ago (the kernel's choice)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _die_with_starter() -> None:
    """In the server's process before exec: SIGKILL it when the thread that started it ends, so that
    a server never outlives its node, even one killed with SIGKILL (as the application processes)."""
    if sys.platform.startswith("linux"):
        ctypes.CDLL(None).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


def log_tail(path: Path, chars: int = LOG_TAIL_CHARS) -> str:
    """Return the last ``chars`` characters of a server log (empty when there is none)."""
    try:
        with path.open("rb") as fh:
            fh.seek(max(0, path.stat().st_size - chars))
            return fh.read().decode("utf-8", errors="replace").strip()
    except OSError:
        return ""


class StepGateBridge:
    """Carries each of llama-server's decode steps through this node's scheduler gate.

    The server (built with server_gate.patch) writes ``ASK`` before a step and waits for ``GRANT``,
    then writes ``DONE`` after it; a thread here turns these into ``gate.acquire`` and
    ``gate.release``, so a batch is admitted, charged and counted like any application's step. Make
    one per server process: ``env`` and ``child_fds`` go to the process, ``started`` closes their
    copies here, ``confirm`` checks the server's hello and starts the thread, ``close`` ends it.
    """

    def __init__(self, gate: Gate, node: str) -> None:
        self.gate = gate
        self.node = node
        self.steps = 0
        # Seconds the batches were held back at the gate (the server's share of the scheduler's cost).
        self.gate_wait_s = 0.0
        server_reads, self._grants = os.pipe()
        self._asks, server_writes = os.pipe()
        self.child_fds = (server_reads, server_writes)
        self.env = {GATE_ENV: f"{server_reads},{server_writes}"}
        self._thread: threading.Thread | None = None
        self._admitted = False
        self._handed = False

    def started(self) -> None:
        """Close this process's copies of the server's descriptors (once the server has them)."""
        self._handed = True
        for fd in self.child_fds:
            os.close(fd)

    def confirm(self) -> bool:
        """Return whether the server said hello (its binary has the gate); if so, start carrying its
        steps. Called once it answers /health: the hello is written before the model loads."""
        ready, _, _ = select.select([self._asks], [], [], 0)
        if not ready or os.read(self._asks, 1) != HELLO:
            return False
        self._thread = threading.Thread(target=self._carry, name=f"{self.node}-step-gate", daemon=True)
        self._thread.start()
        return True

    def _carry(self) -> None:
        try:
            while message := os.read(self._asks, 1):
                if message == ASK:
                    self.gate_wait_s += self.gate.acquire(self.node, BATCH_STEP) or 0.0
                    self._admitted = True
                    os.write(self._grants, GRANT)
                elif message == DONE and self._admitted:
                    self._admitted = False
                    self.gate.release(self.node, BATCH_STEP)
                    self.steps += 1
        except OSError:
            pass  # the server is gone (a grant to a closed pipe)
        finally:
            # A server that died in the middle of a step must not look busy to the scheduler.
            if self._admitted:
                self._admitted = False
                self.gate.release(self.node, BATCH_STEP)

    def close(self) -> None:
        """After the server process ended: wait for the thread (it sees the pipe close) and close the
        pipe's ends here. A thread still held at the gate keeps them (its grant must not reach a
        descriptor number reused meanwhile); they close with the process."""
        if self._thread is not None:
            self._thread.join(timeout=2)
            if self._thread.is_alive():
                return
        for fd in (self._asks, self._grants) + (() if self._handed else self.child_fds):
            with contextlib.suppress(OSError):
                os.close(fd)


class ServerDriver(Driver):
    """Starts ``llama-server``, waits for it to answer, serves until stopped, then stops it."""

    proc: subprocess.Popen[bytes] | None = None
    log: IO[bytes] | None = None
    bridge: StepGateBridge | None = None
    # Seconds the batches of the servers this driver started and stopped were held at the gate.
    held_s = 0.0

    def load(self) -> dict[str, Any]:
        opts = self.options
        # Resolved where the file policy looks (on a server: the model folders, never the working
        # directory), and the file found checked again: what llama-server opens is what was allowed.
        model = self.ctx.files.resolve_model(self.unit, ("gguf",), "LLMServer")
        path = local_file(model)
        if path is None:
            raise ServerError(f"model '{model.requested}' is not a local GGUF file")
        path = self.ctx.files.regular_file(path, MODEL, where(self.unit.name, "model"))
        binary = server_binary()
        # The log stays out of the result bundle: llama-server writes this machine's paths into it.
        # It goes into the node's private folder, which the runner removes even if this process is
        # killed; a driver used without a runner makes and removes its own.
        if self.ctx.scratch_dir is None:
            self.scratch = tempfile.TemporaryDirectory(prefix="cb-llama-server-")
            folder = Path(self.scratch.name)
        else:
            folder = self.ctx.scratch_dir
            folder.mkdir(parents=True, exist_ok=True)
        self.log_path = folder / "server.log"
        key_args = []
        if key := os.environ.get(SERVER_KEY_ENV):
            # A file only this user reads (a command line is visible to every local user).
            key_file = folder / "api-key"
            key_file.touch(mode=0o600)
            key_file.write_text(key, encoding="utf-8")
            key_args = ["--api-key-file", str(key_file)]
        self.model_folder = str(path.parent)
        threads = opts.n_threads or default_threads()
        # llama-server offloads to whatever GPU backend it was built with (CUDA or Metal).
        chosen = accelerator(self.ctx.device)
        for attempt in range(1, PORT_ATTEMPTS + 1):
            port = free_port()
            command = [
                str(binary),
                "--model",
                str(path),
                "--host",
                "127.0.0.1",
                "--port",
                str(port),
                "--parallel",
                str(opts.parallel),
                # llama-server splits its context between the slots: each gets n_ctx.
                "--ctx-size",
                str(opts.n_ctx * opts.parallel),
                "--cont-batching",
                "--threads",
                str(threads),
                "--n-gpu-layers",
                "all" if chosen.gpu_layers else "0",
                "--seed",
                str(self.ctx.seed),
                "--no-webui",
                # /v1/models answers without the key: name the model as the workflow does, not by
                # its path on this machine.
                "--alias",
                self.unit.model or "model",
                *key_args,
                *llama_server_args(opts.llama_settings()),
            ]
            if self._start(command, port):
                break
            if BIND_FAILED not in log_tail(self.log_path) or attempt == PORT_ATTEMPTS:
                raise ServerError(self._died("failed to start"))
        self.url = f"http://127.0.0.1:{port}"
        assert self.proc is not None
        return {
            **model.record(),
            "backend": "llama-server",
            "accelerator": chosen.label,
            "url": self.url,
            "port": port,
            "pid": self.proc.pid,
            "parallel": opts.parallel,
            "n_ctx": opts.n_ctx,
            "threads": threads,
            # The llama.cpp settings the unit sets (the others are llama-server's defaults).
            "llama": opts.llama_settings(),
            "rss_mb": round(psutil.Process(self.proc.pid).memory_info().rss / 2**20, 1),
            # Whether each batch passes the scheduler's gate (only a gate that may wait is bridged).
            "step_gate": self.bridge is not None,
        }

    def _start(self, command: list[str], port: int) -> bool:
        """Start the server and wait until ``/health`` answers 200; False when it exited first."""
        self._stop()
        self.log = self.log_path.open("ab")
        # A gate that never waits (greedy, partition) is not bridged: its batches pay nothing for it.
        bridge = None if isinstance(self.ctx.gate, OpenGate) else StepGateBridge(self.ctx.gate, self.ctx.node)
        self.bridge = bridge
        self.proc = subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=self.log,
            stderr=subprocess.STDOUT,
            preexec_fn=_die_with_starter,
            env={**os.environ, **bridge.env} if bridge else None,
            pass_fds=bridge.child_fds if bridge else (),
        )
        if bridge is not None:
            bridge.started()
        deadline = time.monotonic() + READY_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                return False
            if self.ctx.stop_requested():
                raise AppStopped
            health = f"http://127.0.0.1:{port}/health"
            with contextlib.suppress(OSError), urllib.request.urlopen(health, timeout=1) as reply:
                if reply.status == 200:
                    if bridge is not None and not bridge.confirm():
                        raise ServerError(
                            f"{command[0]} has no step gate (it was built without "
                            "benchmarks/apps/server_gate.patch), so this run's scheduler could not "
                            "gate its batches: rebuild it with `make llama-server`, or run the "
                            "workflow with greedy or partition"
                        )
                    return True
            time.sleep(POLL_S)
        raise ServerError(self._died(f"did not answer /health within {READY_TIMEOUT_S:g} s"))

    def _died(self, what: str) -> str:
        code = self.proc.poll() if self.proc is not None else None
        exited = f" (exit code {code})" if code is not None else ""
        # Its model's folder is this machine's: the reason names it as a placeholder.
        tail = log_tail(self.log_path).replace(self.model_folder, "<model folder>")
        return (
            f"llama-server {what}{exited}; its log ends:\n{tail}" if tail else f"llama-server {what}{exited}"
        )

    def planned_records(self) -> int:
        return 0

    def run(self) -> None:
        """Serve until the runner asks this node to stop; raise ServerError if the server exits."""
        assert self.proc is not None
        while True:
            if self.proc.poll() is not None:
                raise ServerError(self._died("stopped while serving"))
            if self.ctx.stop_requested():
                raise AppStopped
            time.sleep(POLL_S)

    def gate_wait_s(self) -> float:
        """Return the seconds the server's batches were held back at the scheduler's gate."""
        return self.held_s + (self.bridge.gate_wait_s if self.bridge is not None else 0.0)

    def close(self) -> None:
        """Stop the server and remove its log."""
        self._stop()
        scratch = getattr(self, "scratch", None)
        if scratch is not None:
            scratch.cleanup()

    def _stop(self) -> None:
        """Stop the server (SIGTERM, then SIGKILL after 2 s: within the stop grace); close its log."""
        proc, self.proc = self.proc, None
        if proc is not None and proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=2)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        bridge, self.bridge = self.bridge, None
        if bridge is not None:
            bridge.close()
            self.held_s += bridge.gate_wait_s
        if self.log is not None:
            self.log.close()
            self.log = None


APP = AppType(
    name="LLMServer",
    aliases=("llm_server", "llmserver"),
    options=ServerOptions,
    slo_metrics=(),
    default_slo=(),
    default_priority="high",
    default_num_requests=1,
    driver="benchmarks.apps.server:ServerDriver",
    default_model="smollm2-135m",
    needs_model=True,
    description="A shared LLM server (llama.cpp's llama-server, continuous batching over parallel slots).",
    check=check,
    serves=True,
)
