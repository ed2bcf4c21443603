"""priority: static priority at step boundaries, no feedback (the baseline that shows what credit's
feedback adds; docs/schedulers.md).

At every step boundary a step of a HIGH application starts at once; a step of any other class starts
when no application of a more urgent class on its device is active (waiting at its gate, running a
step, or within ``linger_s`` of its last one), and after ``max_wait_s`` anyway (the starvation guard
credit has too). Applications of one class share the device as the driver slices it. Nothing is
measured: no SLO, latency, pressure or credit enters the rule. The gates share credit's table in
shared memory (``table.TableGate``) and decide with ``ledger.decide_by_priority``.
"""

from __future__ import annotations

from benchmarks.schedulers import ledger
from benchmarks.schedulers.ledger import GateTiming, Grant
from benchmarks.schedulers.table import TableGate, TableGateSpec, TableScheduler


class PriorityParams(GateTiming):
    """The priority scheduler's parameters: credit's timing ones, with the same meaning and defaults."""


class PriorityGate(TableGate):
    """The static priority rule's gate (``ledger.decide_by_priority``); a step is booked, not charged."""

    def decide(self, t: float, waited_s: float) -> Grant:
        return ledger.decide_by_priority(self.table, self.slot, t, waited_s, self.params)


class PriorityGateSpec(TableGateSpec):
    gate = PriorityGate


class PriorityScheduler(TableScheduler):
    name = "priority"
    description = (
        "Static priority at step boundaries: a step waits while a more urgent application is active; "
        "no SLO feedback."
    )

    Params = PriorityParams
    params: PriorityParams
    gate_spec = PriorityGateSpec
