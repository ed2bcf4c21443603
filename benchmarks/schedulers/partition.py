"""partition: a static split of the GPU's SMs with NVIDIA MPS, one share per application process.

The run starts a private MPS control daemon; every GPU node's process gets
``CUDA_MPS_ACTIVE_THREAD_PERCENTAGE`` (its ``mps:`` share, or an equal split) and optionally
``CUDA_MPS_PINNED_DEVICE_MEM_LIMIT``. Before any application starts, a process at each share checks that
matrix products come out right there (``mps_check``: on Hopper some shares leave outputs unwritten);
a share that fails refuses the run. While the run goes on, ``poll`` checks that each process that
uses the GPU is a client of the run's MPS server: CUDA silently falls back to a private context when
it cannot reach the daemon, and a run measured that way would be greedy under another name.
"""

from __future__ import annotations

import multiprocessing as mp
import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from pydantic import Field

from benchmarks.clock import now
from benchmarks.platform import gpus
from benchmarks.schedulers.base import Gate, GateSpec, NodePlan, OpenGate, Scheduler, SchedulerError
from benchmarks.schedulers.mps import (
    MpsDaemon,
    MpsMemoryParams,
    client_env,
    find_control_binary,
    partition_share_problems,
    partition_shares,
)
from benchmarks.schedulers.mps_check import ShareCheck, check_share, refusal

if TYPE_CHECKING:
    from benchmarks.spec.model import Workflow

VERIFY_EVERY_S = 0.25
# The shares whose products passed the check in this process, by (share, visible GPUs): a sweep runs many
# partitioned runs, each of which would pay the check's ~8 s a share again.
_PASSED: dict[tuple[int, str], ShareCheck] = {}
# A process seen on the GPU but not among the MPS clients twice this far apart has bypassed MPS
# (one sighting alone can be a client caught between NVML's answer and the daemon's).
BYPASS_CONFIRM_S = 0.5


class PartitionGateSpec(GateSpec):
    """Opens an open gate and records the application process's pid for the MPS client check."""

    def __init__(self, pids: Any, slot: int) -> None:
        self.pids = pids
        self.slot = slot

    def open(self) -> Gate:
        self.pids[self.slot] = os.getpid()
        return OpenGate()


class PartitionParams(MpsMemoryParams):
    """partition's parameters. The SM shares are per unit (each unit's ``mps:`` key, an equal split
    where absent), as are per-unit memory caps (``gpu_memory_limit_mb``)."""

    stop_timeout_s: float = Field(
        10.0, gt=0, le=600, description="seconds the MPS daemon gets to quit before it is killed"
    )


class PartitionScheduler(Scheduler):
    name = "partition"
    description = "Static partition with NVIDIA MPS: each process gets a fixed share of the SMs."
    needs_nvidia_gpu = True
    Params = PartitionParams
    params: PartitionParams

    def __init__(self, params: PartitionParams | None = None) -> None:
        super().__init__(params)
        self.memory_limit = self.params.memory_limit
        self.stop_timeout_s = self.params.stop_timeout_s
        self.memory_limits: dict[str, str] = {}
        self.shares: dict[str, int] = {}
        self.daemon: MpsDaemon | None = None
        self._slots: dict[str, int] = {}
        self._pids: Any = None
        self._clients: dict[str, int] = {}
        self._suspect: dict[str, float] = {}
        self._next_check = 0.0
        self._server_pids: list[int] = []
        self.checks: dict[int, ShareCheck] = {}
        self._reused: set[int] = set()  # shares whose check passed earlier in this process, not run again

    @classmethod
    def spec_problems(cls, workflow: Workflow) -> list[str]:
        """Return why the workflow's ``mps`` shares cannot be honoured by a static partition."""
        return partition_share_problems(workflow)

    def start(self, workflow: Workflow, nodes: Mapping[str, NodePlan]) -> None:
        if not any(plan.device == "gpu" for plan in nodes.values()):
            raise SchedulerError(
                "partition: every node of this run is on the CPU (device: cpu, or auto with no GPU "
                "visible), so there is no GPU to partition; use --scheduler greedy"
            )
        self.shares = partition_shares(workflow, nodes)
        # A unit's own cap (gpu_memory_limit_mb) takes precedence over the scheduler's memory_limit.
        self.memory_limits = {}
        for name in self.shares:
            own = nodes[name].memory_limit_mb
            limit = f"{own}M" if own else self.memory_limit
            if limit:
                self.memory_limits[name] = limit
        binary = find_control_binary()
        if not gpus():
            raise SchedulerError("partition: NVIDIA MPS needs an NVIDIA GPU, and NVML sees none here")
        self._slots = {name: i for i, name in enumerate(nodes)}
        self._pids = mp.get_context("spawn").RawArray("q", max(1, len(nodes)))
        self.daemon = MpsDaemon(binary)
        self.daemon.start()
        self._check_shares()

    def _check_shares(self) -> None:
        """Check every share's matrix products in a client process first; a wrong one stops the run."""
        assert self.daemon is not None
        self.checks, self._reused = {}, set()
        for share in sorted(set(self.shares.values())):
            key = (share, os.environ.get("CUDA_VISIBLE_DEVICES", ""))
            if key in _PASSED:
                self._reused.add(share)
            check = _PASSED.get(key) or check_share(client_env(self.daemon.env, share, None), share)
            if check.status == "passed":
                _PASSED[key] = check
            self.checks[share] = check
            if check.status in ("failed", "error"):
                self.stop()
                raise SchedulerError(refusal(check, [n for n, s in self.shares.items() if s == share]))

    def env_for(self, node: NodePlan) -> dict[str, str]:
        if node.name not in self.shares or self.daemon is None:
            return {}
        return client_env(self.daemon.env, self.shares[node.name], self.memory_limits.get(node.name))

    def gate_for(self, node: NodePlan) -> GateSpec:
        return PartitionGateSpec(self._pids, self._slots[node.name])

    def poll(self) -> None:
        if self.daemon is None or now() < self._next_check:
            return
        self._next_check = now() + VERIFY_EVERY_S
        pending = {n: int(self._pids[self._slots[n]]) for n in self.shares if n not in self._clients}
        pending = {n: pid for n, pid in pending.items() if pid > 0}
        if not pending:
            return
        # NVML first, MPS second: a process that became a client in between is not reported.
        on_gpu = _gpu_pids()
        self._server_pids = self.daemon.server_pids()
        clients = self.daemon.client_pids()
        for name, pid in pending.items():
            if pid in clients:
                self._clients[name] = pid
                self._suspect.pop(name, None)
            elif pid in on_gpu:
                first = self._suspect.setdefault(name, now())
                if now() - first >= BYPASS_CONFIRM_S:
                    raise SchedulerError(
                        f"partition: node '{name}' (pid {pid}) uses the GPU but is not a client of the "
                        f"run's MPS server, so its share is not enforced; MPS log: "
                        f"{self.daemon.log_tail() or '(empty)'}"
                    )

    def describe(self) -> dict[str, Any]:
        return {
            **super().describe(),
            "shares_percent": dict(self.shares),
            "memory_limit": self.memory_limit,
            "memory_limits": dict(self.memory_limits),
            "mps_clients": {n: self._clients.get(n) for n in self.shares},
            "mps_servers": list(self._server_pids),
            # Each share's check of matrix products (mps_check), by share in percent; "cached": it passed
            # earlier in this process and was not run again.
            "product_check": {
                str(share): {**check.record(), "cached": share in self._reused}
                for share, check in self.checks.items()
            },
        }

    def stop(self) -> None:
        if self.daemon is not None:
            daemon, self.daemon = self.daemon, None
            daemon.stop(self.stop_timeout_s)


def _gpu_pids() -> set[int]:
    """Return the pids NVML reports with a compute context on any visible GPU (empty without NVML)."""
    try:
        import pynvml
    except ImportError:
        return set()
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError:
        return set()
    try:
        pids: set[int] = set()
        for i in range(pynvml.nvmlDeviceGetCount()):
            handle = pynvml.nvmlDeviceGetHandleByIndex(i)
            pids |= {p.pid for p in pynvml.nvmlDeviceGetComputeRunningProcesses(handle)}
        return pids
    except pynvml.NVMLError:
        return set()
    finally:
        pynvml.nvmlShutdown()
