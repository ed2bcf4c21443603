"""The shared table's two sides, for the schedulers whose gates decide from it (credit, priority).

``TableScheduler``, in the runner process, makes the table in shared memory (layout: ``ledger.py``),
gives each node a slot with its device and priority class, retires the slots of processes that died and
removes the table. ``TableGate``, in each application process, asks its scheduler's rule at every step
boundary whether the step may start and otherwise waits, spinning briefly then sleeping in short slices.
No lock crosses processes (every field has one writer), so a killed process cannot wedge the others.
"""

from __future__ import annotations

import atexit
import os
import threading
import time
from collections.abc import Mapping
from multiprocessing import shared_memory
from typing import TYPE_CHECKING, Any, ClassVar

from benchmarks.clock import now
from benchmarks.schedulers import ledger
from benchmarks.schedulers.base import Gate, GateSpec, NodePlan, Scheduler, SchedulerParams
from benchmarks.schedulers.ledger import CreditParams, CreditTable, GateTiming, Grant, Priority
from benchmarks.spec.model import server_clients

if TYPE_CHECKING:
    from benchmarks.spec.model import Workflow

# The spin-then-sleep wait starts its sleeps this short and doubles them up to max_sleep_s.
FIRST_SLEEP_S = 20e-6
# How often the arbiter looks for application processes that died.
CHECK_EVERY_S = 0.25


class TableGate:
    """The gate of one application process on a shared table (credit's, priority's): at every step
    boundary it asks the scheduler's rule (``decide``) whether the step may start, and otherwise spins
    briefly then sleeps in short slices until the rule lets it through; ``finish`` books the step."""

    params: GateTiming

    def __init__(self, shm_name: str, slot: int, slots: int, params: GateTiming) -> None:
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

    def decide(self, t: float, waited_s: float) -> Grant:
        """Return whether (and why) this slot's step may start at ``t`` after waiting ``waited_s``."""
        raise NotImplementedError

    def finish(self, t: float, duration_s: float) -> None:
        """Book this slot's step that ended at ``t`` after running ``duration_s``."""
        ledger.end_step(self.table, self.slot, t, duration_s)

    def acquire(self, app: str, kind: str) -> float:
        table, slot, params = self.table, self.slot, self.params
        t0 = now()
        with self._lock:
            ledger.begin_wait(table, slot)
            grant = self.decide(t0, 0.0)
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
                    grant = self.decide(t, t - t0)
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
            self.finish(t, t - self._local.start)

    def close(self) -> None:
        """Detach from the shared table (at process exit; the arbiter removes it)."""
        if self._shm is None:
            return
        self.table.cells.release()
        self._shm.close()
        self._shm = None


class TableGateSpec(GateSpec):
    """The recipe of a ``TableGate`` of class ``gate``, for one slot of the table ``shm_name``."""

    gate: ClassVar[type[TableGate]]

    def __init__(
        self, shm_name: str, slot: int, slots: int, params: GateTiming, also: GateSpec | None = None
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
        return self.gate(self.shm_name, self.slot, self.slots, self.params)


class TableScheduler(Scheduler):
    """The arbiter side of the schedulers whose gates share one table (credit, priority): it makes the
    table, gives each node its slot, its device and its priority class (a model server's batches run in
    its clients' most urgent class: docs/schedulers.md, "Model servers"), retires the slots of processes
    that died, reports each slot's counters and removes the table."""

    params: GateTiming
    gate_spec: ClassVar[type[TableGateSpec]]

    def __init__(self, params: SchedulerParams | None = None) -> None:
        super().__init__(params)
        self._shm: shared_memory.SharedMemory | None = None
        self.table: CreditTable | None = None
        self._slots: dict[str, int] = {}
        self._priority: dict[str, str] = {}
        self._final: dict[str, dict[str, Any]] = {}
        self.shm_name: str | None = None
        self._next_check = 0.0
        # A model server's node and the client nodes whose requests its batches serve.
        self._clients: dict[str, tuple[str, ...]] = {}

    def table_params(self) -> CreditParams:
        """Return the parameters the table's slots are set up with (credit's own; others' timing)."""
        return CreditParams(**self.params.model_dump())

    def initial_pressure(self, workflow: Workflow, node: str) -> float:
        """Return a node's pressure when the run starts (0: a scheduler without feedback)."""
        return 0.0

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
        initial = {name: self.initial_pressure(workflow, name) for name in nodes}
        params = self.table_params()
        for name, plan in nodes.items():
            priority, pressure = plan.priority, initial[name]
            clients = self._clients.get(name)
            if clients:
                # A model server's batches serve its clients: they run in its clients' most urgent class,
                # under its clients' greatest pressure (docs/schedulers.md, "Model servers").
                priority = min((nodes[c].priority for c in clients), key=lambda p: Priority.of(p))
                pressure = max(initial[c] for c in clients)
            self._priority[name] = priority
            self.table.enable(self._slots[name], Priority.of(priority), pressure, t, params, plan.device)

    def gate_for(self, node: NodePlan) -> GateSpec:
        if self.shm_name is None or self.table is None:
            raise RuntimeError(f"{type(self).__name__}.gate_for called before start()")
        return self.gate_spec(self.shm_name, self._slots[node.name], self.table.slots, self.params)

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
        """Return each application's class and step counters (steps by grant kind, delays, seconds
        waited and stepped)."""
        if self.table is None:
            return dict(self._final)
        return {
            name: {"priority": self._priority[name], **self.table.stats(slot)}
            for name, slot in self._slots.items()
        }

    def describe(self) -> dict[str, Any]:
        return {**super().describe(), "apps": self.snapshot()}

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
