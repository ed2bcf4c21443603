"""NVIDIA MPS for the partition scheduler: the share policy, client environment, a private daemon.

Each run gets its own MPS control daemon with private pipe and log directories, so two runs (or a
system-wide MPS daemon) never share a server, and stopping it cannot affect anything else.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterable, Mapping
from pathlib import Path

from pydantic import Field, field_validator

from benchmarks.schedulers.base import NodePlan, SchedulerError, SchedulerParams
from benchmarks.spec.graph import concurrent_sets_max
from benchmarks.spec.model import Workflow, server_edges

CONTROL_BINARY = "nvidia-cuda-mps-control"
# MPS accepts a device ordinal and a size with a K/M/G suffix, e.g. "0=8G" or "0=512M,1=1G"
# ("8GiB" is read as "8G": MPS's suffixes are binary).
_MEMORY_ONE = re.compile(r"^\d+[KMG]B?$", re.IGNORECASE)
_MEMORY_LIST = re.compile(r"^\d+=\d+[KMG]B?(,\d+=\d+[KMG]B?)*$", re.IGNORECASE)
_BINARY_SUFFIX = re.compile(r"([KMG])iB", re.IGNORECASE)


class MpsMemoryParams(SchedulerParams):
    """The parameter of the MPS-based schedulers (partition, credit-mps): a device-memory cap."""

    memory_limit: str | None = Field(
        None,
        description="device-memory cap of every GPU process through MPS, e.g. '8G' (device 0) or "
        "'0=8G,1=4G'; a unit's own gpu_memory_limit_mb takes precedence",
        max_length=200,
    )

    @field_validator("memory_limit")
    @classmethod
    def _check_memory_limit(cls, value: str | None) -> str | None:
        if value is not None:
            try:
                memory_limit_value(value)
            except SchedulerError as exc:
                raise ValueError(str(exc).removeprefix("partition: ")) from None
        return value


class ShareError(ValueError):
    """MPS shares that a static partition cannot honour (the message names the nodes)."""


def partition_share_plan(workflow: Workflow, gpu_nodes: Iterable[str]) -> dict[str, int]:
    """Return the SM share (percent) of every GPU node under a static partition (the one share policy:
    validation, the launch check and the partition scheduler all use it).

    A node's ``mps:`` share is used as given; nodes without one get the largest equal share that keeps
    every set of nodes that may run at the same time within 100 %. A model server's node (the one GPU
    process of its clients) without an ``mps:`` of its own gets the share of its clients: each client
    takes part in the split as if it ran on the GPU, and the server gets the most its clients hold at
    one time; the clients get none. Raises ShareError naming the nodes when the shares cannot be
    honoured.
    """
    gpu = list(gpu_nodes)
    clients = {
        client: servers[0]
        for client, servers in server_edges(workflow.applications, workflow.nodes).items()
        if servers[0] in gpu and workflow.unit_of(servers[0]).mps is None
    }
    servers = set(clients.values())
    plan = _shares(workflow, [n for n in gpu if n not in servers and n not in clients] + list(clients))
    for server in servers:
        weight = {n: plan[n] for n, s in clients.items() if s == server}
        plan[server] = min(100, concurrent_sets_max(workflow, weight)[0])
    return {n: share for n, share in plan.items() if n not in clients}


def _shares(workflow: Workflow, gpu: list[str]) -> dict[str, int]:
    """Return the shares of ``gpu`` nodes: their ``mps:``, else the largest equal share that fits."""
    zero = sorted(n for n in gpu if workflow.unit_of(n).mps == 0)
    if zero:
        raise ShareError(
            f"node(s) {', '.join(zero)} have mps: 0, which gives a GPU process no SMs; "
            "give a share between 1 and 100 or leave mps out for an equal split"
        )
    explicit = {n: share for n in gpu if (share := workflow.unit_of(n).mps) is not None}
    absent = [n for n in gpu if n not in explicit]

    def peak(equal: int) -> tuple[int, list[str]]:
        weight = {n: explicit.get(n, equal if n in absent else 0) for n in workflow.nodes}
        return concurrent_sets_max(workflow, weight)

    total, chosen = peak(0)
    if total > 100:
        raise ShareError(
            f"the mps shares of nodes that run at the same time sum to {total} % (> 100 %): "
            f"{', '.join(sorted(chosen))}"
        )
    if not absent:
        return explicit
    if peak(1)[0] > 100:
        raise ShareError(
            f"no share is left for {', '.join(sorted(absent))} (no mps key): the nodes with an "
            "mps share that run at the same time already take 100 %; lower their shares"
        )
    # The peak grows with the equal share, so a binary search finds the largest share that fits.
    lo, hi = 1, 100
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if peak(mid)[0] <= 100:
            lo = mid
        else:
            hi = mid - 1
    return {**explicit, **dict.fromkeys(absent, lo)}


def partition_share_problems(workflow: Workflow) -> list[str]:
    """Return sentences for MPS shares that a static partition cannot honour (``partition_share_plan``
    over every node not pinned to the CPU, a model server's clients left out); empty when they fit."""
    try:
        on_gpu = [
            n
            for n, u in ((n, workflow.unit_of(n)) for n in workflow.nodes)
            if u.device != "cpu" and not u.server
        ]
        partition_share_plan(workflow, on_gpu)
    except ShareError as exc:
        return [f"under the partition scheduler {exc}"]
    return []


def partition_shares(workflow: Workflow, nodes: Mapping[str, NodePlan]) -> dict[str, int]:
    """Return the SM share (percent) of every GPU node under a static partition.

    The policy is ``partition_share_plan`` over the nodes placed on the GPU; raises
    SchedulerError naming the nodes when the shares cannot be honoured. CPU nodes get no share.
    """
    try:
        return partition_share_plan(workflow, [n for n, plan in nodes.items() if plan.device == "gpu"])
    except ShareError as exc:
        raise SchedulerError(f"partition: {exc}") from None


def memory_limit_value(limit: str) -> str:
    """Return the ``CUDA_MPS_PINNED_DEVICE_MEM_LIMIT`` value for ``"8G"`` (device 0) or ``"0=8G,1=4G"``.

    Raises SchedulerError for anything MPS would not accept.
    """
    text = _BINARY_SUFFIX.sub(r"\1", limit.strip().replace(" ", ""))
    if _MEMORY_ONE.match(text):
        return f"0={text.upper()}"
    if _MEMORY_LIST.match(text):
        return text.upper()
    raise SchedulerError(
        f"partition: device memory limit {limit!r} is not understood; write a size such as '8G' or "
        "'512M' (device 0), or per device '0=8G,1=4G'"
    )


def client_env(daemon_env: Mapping[str, str], share: int, memory_limit: str | None) -> dict[str, str]:
    """Return the environment that makes a process an MPS client of the run's daemon with its share
    and, when ``memory_limit`` is given (``"8G"``, ``"0=8G,1=4G"``), its device-memory cap."""
    env = dict(daemon_env)
    env["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"] = str(share)
    if memory_limit is not None:
        env["CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"] = memory_limit_value(memory_limit)
    return env


def find_control_binary() -> str:
    """Return the path of ``nvidia-cuda-mps-control``; raise SchedulerError saying how to get it."""
    path = shutil.which(CONTROL_BINARY)
    if path is None:
        raise SchedulerError(
            f"partition: NVIDIA MPS is not available here: '{CONTROL_BINARY}' is not on PATH "
            "(it ships with the NVIDIA driver/CUDA on Linux); use --scheduler greedy or credit, or run "
            "on a GPU worker with MPS"
        )
    return path


class MpsDaemon:
    """A private MPS control daemon: started with ``start()``, queried, and stopped with ``stop()``."""

    def __init__(self, binary: str, command_timeout_s: float = 10.0) -> None:
        self.binary = binary
        self.command_timeout_s = command_timeout_s
        self.root: Path | None = None

    @property
    def env(self) -> dict[str, str]:
        """Return the variables that point a process (daemon or client) at this daemon's pipes."""
        if self.root is None:
            raise SchedulerError("partition: the MPS daemon was not started")
        return {
            "CUDA_MPS_PIPE_DIRECTORY": str(self.root / "pipe"),
            "CUDA_MPS_LOG_DIRECTORY": str(self.root / "log"),
        }

    def start(self, ready_timeout_s: float = 10.0) -> None:
        """Start the daemon (``-d``) and wait for its control pipe; raise SchedulerError on failure.

        A failed start leaves nothing behind: what was started is stopped and the directories removed.
        """
        try:
            self._start(ready_timeout_s)
        except BaseException:
            self.stop(timeout_s=2.0)
            raise

    def _start(self, ready_timeout_s: float) -> None:
        # A short path: the pipe directory holds UNIX sockets, whose paths are limited to ~100 bytes.
        self.root = Path(tempfile.mkdtemp(prefix="cb-mps-"))
        for sub in ("pipe", "log"):
            (self.root / sub).mkdir()
        # Output goes to a file, not a pipe: the daemon may keep the descriptors it inherited open,
        # and reading a pipe to its end would then wait for the daemon to exit.
        out_path = self.root / "log" / "start.out"
        try:
            with out_path.open("w") as out:
                done = subprocess.run(
                    [self.binary, "-d"],
                    env={**os.environ, **self.env},
                    stdin=subprocess.DEVNULL,
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    timeout=self.command_timeout_s,
                    check=False,
                )
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise SchedulerError(f"partition: could not start the MPS control daemon: {exc}") from exc
        if done.returncode != 0:
            said = out_path.read_text(errors="replace").strip()
            raise SchedulerError(
                f"partition: the MPS control daemon failed to start (exit {done.returncode}): "
                f"{said or self.log_tail() or '(no message)'}"
            )
        deadline = time.monotonic() + ready_timeout_s
        while not (self.root / "pipe" / "control").exists():
            if time.monotonic() > deadline:
                raise SchedulerError(
                    f"partition: the MPS control daemon did not open its control pipe within "
                    f"{ready_timeout_s:g} s; its log says: {self.log_tail() or '(empty)'}"
                )
            time.sleep(0.02)

    def command(self, text: str) -> str:
        """Send one command to the control daemon and return its answer."""
        try:
            done = subprocess.run(
                [self.binary],
                input=text + "\n",
                env={**os.environ, **self.env},
                capture_output=True,
                text=True,
                timeout=self.command_timeout_s,
                check=False,
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise SchedulerError(f"partition: MPS command {text!r} failed: {exc}") from exc
        if done.returncode != 0:
            raise SchedulerError(
                f"partition: MPS command {text!r} failed (exit {done.returncode}): {done.stderr.strip()}"
            )
        return done.stdout

    def server_pids(self) -> list[int]:
        """Return the pids of the MPS servers this daemon runs (none until a client connects)."""
        return [int(tok) for tok in self.command("get_server_list").split() if tok.isdigit()]

    def client_pids(self) -> set[int]:
        """Return the pids of every client process of this daemon's servers."""
        clients: set[int] = set()
        for server in self.server_pids():
            clients |= {
                int(tok) for tok in self.command(f"get_client_list {server}").split() if tok.isdigit()
            }
        return clients

    def log_tail(self, lines: int = 5) -> str:
        """Return the last lines of the control daemon's log (where MPS explains its failures)."""
        if self.root is None:
            return ""
        log = self.root / "log" / "control.log"
        try:
            return " | ".join(log.read_text(errors="replace").strip().splitlines()[-lines:])
        except OSError:
            return ""

    def stop(self, timeout_s: float = 10.0) -> None:
        """Ask the daemon to quit, kill what is left of it after ``timeout_s``, remove its directories."""
        if self.root is None:
            return
        try:
            if (self.root / "pipe" / "control").exists():
                # A daemon that cannot hear us is killed below.
                with contextlib.suppress(SchedulerError):
                    self.command("quit")
                deadline = time.monotonic() + timeout_s
                while self._own_processes() and time.monotonic() < deadline:
                    time.sleep(0.05)
            for pid in self._own_processes():
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)
        finally:
            shutil.rmtree(self.root, ignore_errors=True)
            self.root = None

    def _own_processes(self) -> list[int]:
        """Return pids of the MPS control daemon and servers started for this run.

        They are the ``nvidia-cuda-mps-*`` processes whose start-up environment names this run's
        private pipe directory, so no other MPS daemon on the machine can match.
        """
        if self.root is None:
            return []
        marker = f"CUDA_MPS_PIPE_DIRECTORY={self.root / 'pipe'}".encode()
        pids = []
        for entry in Path("/proc").glob("[0-9]*"):
            try:
                if b"nvidia-cuda-mps" not in (entry / "cmdline").read_bytes():
                    continue
                if marker in (entry / "environ").read_bytes().split(b"\0"):
                    pids.append(int(entry.name))
            except (OSError, ValueError):
                continue
        return pids
