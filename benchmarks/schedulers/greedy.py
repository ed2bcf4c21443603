"""greedy: no control; every process takes what the driver gives it (default CUDA time slicing)."""

from __future__ import annotations

from benchmarks.schedulers.base import GateSpec, NodePlan, OpenGateSpec, Scheduler


class GreedyScheduler(Scheduler):
    name = "greedy"
    description = "No control: the driver's default time slicing decides."

    def gate_for(self, node: NodePlan) -> GateSpec:
        return OpenGateSpec()
