"""greedy: no control; every process takes what the driver gives it (default CUDA time slicing)."""

from __future__ import annotations

from benchmarks.schedulers.base import Gate, GateSpec, NodePlan, Scheduler


class OpenGate:
    """A gate that never waits."""

    def acquire(self, app: str, kind: str) -> None:
        return None

    def release(self, app: str, kind: str) -> None:
        return None


class OpenGateSpec(GateSpec):
    def open(self) -> Gate:
        return OpenGate()


class GreedyScheduler(Scheduler):
    name = "greedy"
    description = "No control: the driver's default time slicing decides."

    def gate_for(self, node: NodePlan) -> GateSpec:
        return OpenGateSpec()
