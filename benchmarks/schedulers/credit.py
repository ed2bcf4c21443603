"""credit: dynamic, SLO-aware credit scheduling (the project's own policy; docs/schedulers.md).

Two sides share one table in shared memory (layout and rules: ``ledger.py``; its life cycle and the
gates' wait: ``table.py``, which the priority scheduler shares):
- the arbiter, ``CreditScheduler`` in the runner process, turns every finished request into SLO
  pressure and publishes each application's priority class and pressure;
- the gate, ``CreditGate`` in each application process, decides at every step boundary, from the
  whole table, whether its next step may start, refills and charges its own credit, and otherwise
  spins briefly then sleeps in short slices until the rule lets it through.
No lock crosses processes (every field has one writer), so a killed process cannot wedge the others.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from benchmarks.schedulers import ledger
from benchmarks.schedulers.ledger import CreditParams, Grant
from benchmarks.schedulers.table import TableGate, TableGateSpec, TableScheduler
from benchmarks.status import RequestStatus

if TYPE_CHECKING:
    from benchmarks.spec.model import SLO, Workflow


class CreditGate(TableGate):
    """The credit rule's gate: admission by ``ledger.decide``, each step charged to its credit."""

    params: CreditParams

    def decide(self, t: float, waited_s: float) -> Grant:
        return ledger.decide(self.table, self.slot, t, waited_s, self.params)

    def finish(self, t: float, duration_s: float) -> None:
        ledger.finish(self.table, self.slot, t, duration_s, self.params)


class CreditGateSpec(TableGateSpec):
    gate = CreditGate


class CreditScheduler(TableScheduler):
    name = "credit"
    description = (
        "SLO-aware credits: latency-sensitive work first, background work yields at step boundaries, "
        "idle credit is lent so the device stays busy."
    )

    Params = CreditParams
    params: CreditParams
    gate_spec = CreditGateSpec

    def __init__(self, params: CreditParams | None = None) -> None:
        super().__init__(params)
        self._slos: dict[str, tuple[SLO, ...]] = {}
        self._history: dict[str, list[float]] = {}
        self._trace: list[tuple[float, str, float]] = []

    def table_params(self) -> CreditParams:
        return self.params

    def initial_pressure(self, workflow: Workflow, node: str) -> float:
        """With no measurement yet, an application with an SLO is assumed at risk."""
        self._slos[node] = workflow.unit_of(node).slo
        self._history[node] = []
        return self.params.initial_pressure if self._slos[node] else 0.0

    def on_request_end(self, node: str, record: Mapping[str, Any]) -> None:
        if self.table is None or node not in self._slots or record.get("status") != RequestStatus.OK:
            return
        value = ledger.normalised_latency(record.get("metrics", {}), self._slos[node])
        if value is None:
            return
        history = self._history[node]
        history.append(value)
        del history[: -self.params.window]
        p = ledger.pressure(history, self.params)
        self.table.set(self._slots[node], ledger.PRESSURE, p)
        end = float(record.get("end", 0.0))
        self._trace.append((end, node, p))
        for server, clients in self._clients.items():
            if node in clients:
                p = max(self.table.get(self._slots[c], ledger.PRESSURE) for c in clients)
                self.table.set(self._slots[server], ledger.PRESSURE, p)
                self._trace.append((end, server, p))

    def snapshot(self) -> dict[str, dict[str, Any]]:
        """Return each application's class, pressure, current refill rate and step counters."""
        if self.table is None:
            return dict(self._final)
        table = self.table
        return {
            name: {
                "priority": self._priority[name],
                "pressure": table.get(self._slots[name], ledger.PRESSURE),
                "refill_rate": table.get(self._slots[name], ledger.THROTTLE),
                **table.stats(self._slots[name]),
            }
            for name in self._slots
        }

    def describe(self) -> dict[str, Any]:
        return {
            **super().describe(),
            "pressure_trace": [{"t": t, "node": n, "pressure": p} for t, n, p in self._trace],
        }
