"""Registry of schedulers: one module per policy, each a ``Scheduler`` subclass."""

from __future__ import annotations

from benchmarks.schedulers.base import Scheduler, SchedulerError
from benchmarks.schedulers.credit import CreditScheduler
from benchmarks.schedulers.credit_mps import CreditMpsScheduler
from benchmarks.schedulers.greedy import GreedyScheduler
from benchmarks.schedulers.partition import PartitionScheduler

SCHEDULERS: dict[str, type[Scheduler]] = {
    cls.name: cls for cls in (GreedyScheduler, PartitionScheduler, CreditScheduler, CreditMpsScheduler)
}


def get_scheduler(name: str) -> Scheduler:
    """Return a fresh scheduler instance by name; raise SchedulerError naming the known ones."""
    try:
        return SCHEDULERS[name]()
    except KeyError:
        raise SchedulerError(f"unknown scheduler '{name}'; known: {', '.join(SCHEDULERS)}") from None
