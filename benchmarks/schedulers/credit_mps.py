"""credit-mps: the credit scheduler's admission inside a static MPS partition (as partition's).

Composes the two plug-ins: each application process is an MPS client with its SM share (partition)
and every GPU step passes the credit gate (credit).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from benchmarks.schedulers.base import GateSpec, NodePlan
from benchmarks.schedulers.credit import CreditGateSpec, CreditScheduler
from benchmarks.schedulers.ledger import CreditParams
from benchmarks.schedulers.mps import MpsMemoryParams
from benchmarks.schedulers.partition import PartitionParams, PartitionScheduler

if TYPE_CHECKING:
    from benchmarks.spec.model import Workflow


class CreditMpsParams(CreditParams, MpsMemoryParams):
    """credit's parameters plus the MPS device-memory cap of every GPU process."""


class CreditMpsScheduler(CreditScheduler):
    """credit admission inside a static MPS partition: each process's SMs are also capped by MPS."""

    name = "credit-mps"
    description = "Credit admission of every step, inside per-process MPS SM shares (as partition)."
    needs_nvidia_gpu = True

    Params = CreditMpsParams
    params: CreditMpsParams

    def __init__(self, params: CreditMpsParams | None = None) -> None:
        super().__init__(params)
        self.partition = PartitionScheduler(PartitionParams(memory_limit=self.params.memory_limit))

    def start(self, workflow: Workflow, nodes: Mapping[str, NodePlan]) -> None:
        self.partition.start(workflow, nodes)
        super().start(workflow, nodes)

    def env_for(self, node: NodePlan) -> dict[str, str]:
        return self.partition.env_for(node)

    def gate_for(self, node: NodePlan) -> GateSpec:
        spec = super().gate_for(node)
        assert isinstance(spec, CreditGateSpec)
        spec.also = self.partition.gate_for(node)
        return spec

    def poll(self) -> None:
        super().poll()
        self.partition.poll()

    def describe(self) -> dict[str, Any]:
        return {**super().describe(), "mps": self.partition.describe()}

    def stop(self) -> None:
        try:
            super().stop()
        finally:
            self.partition.stop()
