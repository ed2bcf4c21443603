"""credit: dynamic, SLO-aware credit scheduling (the project's own policy; docs/schedulers.md).

Two sides share one table in shared memory (layout and rules: ``ledger.py``):
- the arbiter, ``CreditScheduler`` in the runner process, turns every finished request into SLO
  pressure and publishes each application's priority class and pressure;
- the gate, ``CreditGate`` in each application process, decides at every step boundary, from the
  whole table, whether its next step may start, refills and charges its own credit, and otherwise
  spins briefly then sleeps in short slices until the rule lets it through.
No lock crosses processes (every field has one writer), so a killed process cannot wedge the others.
"""

from __future__ import annotations

import atexit
import os
import threading
import time
from collections.abc import Mapping
from multiprocessing import shared_memory
from typing import TYPE_CHECKING, Any

from benchmarks.clock import now
from benchmarks.schedulers import ledger
from benchmarks.schedulers.base import Gate, GateSpec, NodePlan, Scheduler
from benchmarks.schedulers.ledger import CreditParams, CreditTable, Priority
from benchmarks.spec.model import server_clients
from benchmarks.status import RequestStatus

if TYPE_CHECKING:
    from benchmarks.spec.model import SLO, Workflow

# The spin-then-sleep wait starts its sleeps this short and doubles them up to max_sleep_s.
FIRST_SLEEP_S = 20e-6
# How often the arbiter looks for application processes that died.
CHECK_EVERY_S = 0.25


class CreditGate:
    """The gate of one application process: admission by the credit rule, read from shared memory."""

    def __init__(self, shm_name: str, slot: int, slots: int, params: CreditParams) -> None:
        self._shm: shared_memory.SharedMemory | None = shared_memory.SharedMemory(name=shm_name)
        self.table = CreditTable(self._shm.buf, slots)
        self.slot = slot
        self.params = params
        self.table.set(slot, ledger.PID, os.getpid())
        # Several sessions of one application may share the process; the table's own-slot fields are
        # updated read-modify-write, so the process's threads take turns (uncontended: ~0.1 us).
        self._lock = threading.Lock()
        self._local = threading.local()
        atexit.register(self.close)

    def acquire(self, app: str, kind: str) -> float:
        table, slot, params = self.table, self.slot, self.params
        t0 = now()
        with self._lock:
            ledger.begin_wait(table, slot)
            grant = ledger.decide(table, slot, t0, 0.0, params)
            if grant:
                ledger.admit(table, slot, grant, 0.0)
                self._local.start = t0
                return 0.0
        spin_until, sleep = t0 + params.spin_s, FIRST_SLEEP_S
        try:
            while True:
                if now() >= spin_until:
                    time.sleep(sleep)
                    sleep = min(2 * sleep, params.max_sleep_s)
                t = now()
                with self._lock:
                    grant = ledger.decide(table, slot, t, t - t0, params)
                    if grant:
                        ledger.admit(table, slot, grant, t - t0)
                        self._local.start = t
                        return t - t0
        except BaseException:
            # Interrupted while waiting: this step no longer waits, or it would look active forever.
            with self._lock:
                table.add(slot, ledger.WAITING, -1)
            raise

    def release(self, app: str, kind: str) -> None:
        t = now()
        with self._lock:
            ledger.finish(self.table, self.slot, t, t - self._local.start, self.params)

    def close(self) -> None:
        """Detach from the shared table (at process exit; the arbiter removes it)."""
        if self._shm is None:
            return
        self.table.cells.release()
        self._shm.close()
        self._shm = None


class CreditGateSpec(GateSpec):
    def __init__(
        self, shm_name: str, slot: int, slots: int, params: CreditParams, also: GateSpec | None = None
    ) -> None:
        self.shm_name = shm_name
        self.slot = slot
        self.slots = slots
        self.params = params
        # Another scheduler's gate opened for its side effects only (credit-mps: the MPS client check).
        self.also = also

    def open(self) -> Gate:
        if self.also is not None:
            self.also.open()
        return CreditGate(self.shm_name, self.slot, self.slots, self.params)


class CreditScheduler(Scheduler):
    name = "credit"
    description = (
        "SLO-aware credits: latency-sensitive work first, background work yields at step boundaries, "
        "idle credit is lent so the device stays busy."
    )

    Params = CreditParams
    params: CreditParams

    def __init__(self, params: CreditParams | None = None) -> None:
        super().__init__(params)
        self._shm: shared_memory.SharedMemory | None = None
        self.table: CreditTable | None = None
        self._slots: dict[str, int] = {}
        self._priority: dict[str, str] = {}
        self._slos: dict[str, tuple[SLO, ...]] = {}
        self._history: dict[str, list[float]] = {}
        self._trace: list[tuple[float, str, float]] = []
        self._final: dict[str, dict[str, Any]] = {}
        self.shm_name: str | None = None
        self._next_check = 0.0
        # A model server's node and the client nodes whose requests its batches serve.
        self._clients: dict[str, tuple[str, ...]] = {}

    def start(self, workflow: Workflow, nodes: Mapping[str, NodePlan]) -> None:
        self._slots = {name: i for i, name in enumerate(nodes)}
        slots = max(1, len(nodes))
        self._shm = shared_memory.SharedMemory(create=True, size=CreditTable.nbytes(slots))
        self.shm_name = self._shm.name
        self.table = CreditTable(self._shm.buf, slots)
        self._clients = {
            s: tuple(c for c in clients if c in nodes)
            for s, clients in server_clients(workflow.applications, workflow.nodes).items()
            if s in nodes
        }
        t = now()
        initial: dict[str, float] = {}
        for name in nodes:
            self._slos[name] = workflow.unit_of(name).slo
            self._history[name] = []
            # With no measurement yet, an application with an SLO is assumed at risk.
            initial[name] = self.params.initial_pressure if self._slos[name] else 0.0
        for name, plan in nodes.items():
            priority, pressure = plan.priority, initial[name]
            clients = self._clients.get(name)
            if clients:
                # A model server's batches serve its clients: they run in its clients' most urgent class,
                # under its clients' greatest pressure (docs/schedulers.md, "Model servers").
                priority = min((nodes[c].priority for c in clients), key=lambda p: Priority.of(p))
                pressure = max(initial[c] for c in clients)
            self._priority[name] = priority
            self.table.enable(self._slots[name], Priority.of(priority), pressure, t, self.params, plan.device)

    def gate_for(self, node: NodePlan) -> GateSpec:
        if self.shm_name is None or self.table is None:
            raise RuntimeError("CreditScheduler.gate_for called before start()")
        return CreditGateSpec(self.shm_name, self._slots[node.name], self.table.slots, self.params)

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

    def poll(self) -> None:
        """Retire the slots of application processes that died, possibly in the middle of a step.

        A process killed while its step was running leaves ``running`` at 1, which would keep it
        looking active and so hold back every less urgent application until the run ends.
        """
        if self.table is None or now() < self._next_check:
            return
        self._next_check = now() + CHECK_EVERY_S
        for slot in self._slots.values():
            pid = int(self.table.get(slot, ledger.PID))
            if pid > 0 and self.table.get(slot, ledger.ENABLED) and not _alive(pid):
                self.table.set(slot, ledger.ENABLED, 0.0)

    def snapshot(self) -> dict[str, dict[str, Any]]:
        """Return each application's class, pressure, current refill rate and step counters."""
        if self.table is None:
            return dict(self._final)
        return {
            name: {
                "priority": self._priority[name],
                "pressure": self.table.get(slot, ledger.PRESSURE),
                "refill_rate": self.table.get(slot, ledger.THROTTLE),
                **self.table.stats(slot),
            }
            for name, slot in self._slots.items()
        }

    def describe(self) -> dict[str, Any]:
        return {
            **super().describe(),
            "apps": self.snapshot(),
            "pressure_trace": [{"t": t, "node": n, "pressure": p} for t, n, p in self._trace],
        }

    def stop(self) -> None:
        if self._shm is None:
            return
        self._final = self.snapshot()
        assert self.table is not None
        self.table.cells.release()
        self.table = None
        self._shm.close()
        self._shm.unlink()
        self._shm = None
        self.shm_name = None


def _alive(pid: int) -> bool:
    """Return whether a process exists (a zombie not yet reaped by the runner still counts)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
