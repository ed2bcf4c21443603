"""The credit scheduler's deterministic core: the credit table and the admission rule.

Everything here is a pure function of the table's contents, the time passed in and the parameters,
so it is tested without processes or clocks (tests/benchmarks/schedulers/test_ledger.py). The table
is a flat array of float64 that ``credit.py`` places in shared memory; any writable buffer works.

Every field has ONE writer, which is why no cross-process lock is needed: the arbiter (runner)
writes a slot's device, class, pressure and enabled flag, the slot's own process writes the rest and
only reads the other slots. A stale read costs at most one decision made on microseconds-old state.
The algorithm and its parameters are documented in docs/schedulers.md.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from enum import IntEnum
from typing import Any, NamedTuple

from pydantic import Field

from benchmarks.metrics import percentile
from benchmarks.schedulers.base import SchedulerParams
from benchmarks.spec.model import SLO


class Priority(IntEnum):
    """Priority classes; a lower value is more urgent."""

    HIGH = 0
    MEDIUM = 1
    LOW = 2

    @classmethod
    def of(cls, name: str) -> Priority:
        """Return the class for a spec priority (``high``, ``medium``, ``low``)."""
        return cls[name.upper()]


class Grant(IntEnum):
    """Why a step was admitted (``WAIT``: it was not)."""

    WAIT = 0
    RESERVED = 1  # HIGH: never held back
    CREDIT = 2  # paid from the application's own credit
    LENT = 3  # no pressured application of the same or a higher class was active
    FORCED = 4  # waited max_wait_s: the starvation guard


# Field offsets inside a slot. Arbiter-written: ENABLED, DEVICE, CLASS, PRESSURE. The rest: the
# slot's own process. Applications on different devices (GPU, CPU) never hold each other back.
ENABLED, DEVICE, CLASS, PRESSURE = 0, 1, 2, 3
WAITING, RUNNING, LAST_RELEASE, BUCKET, BUCKET_T, THROTTLE = 4, 5, 6, 7, 8, 9
GRANTS, RESERVED_N, CREDIT_N, LENT_N, FORCED_N, DELAYED_N, WAIT_S, STEP_S = 10, 11, 12, 13, 14, 15, 16, 17
PID = 18  # the application process, so that the arbiter can retire the slot of a dead one
FIELDS = 19
DEVICES = {"gpu": 0.0, "cpu": 1.0}
STAT_FIELDS = {
    "steps": GRANTS,
    "reserved": RESERVED_N,
    "credit": CREDIT_N,
    "lent": LENT_N,
    "forced": FORCED_N,
    "delayed": DELAYED_N,
    "wait_s": WAIT_S,
    "step_s": STEP_S,
}
_GRANT_FIELD = {
    Grant.RESERVED: RESERVED_N,
    Grant.CREDIT: CREDIT_N,
    Grant.LENT: LENT_N,
    Grant.FORCED: FORCED_N,
}


class GateTiming(SchedulerParams):
    """What every scheduler whose gates read this table shares (credit, priority): when an application
    counts as active, the starvation guard, and how a waiting gate looks at the table."""

    linger_s: float = Field(
        0.005, ge=0, le=60, description="an application stays active this long after its last step"
    )
    max_wait_s: float = Field(
        2.0, gt=0, le=3600, description="starvation guard: longest wait before a step is forced through"
    )
    spin_s: float = Field(50e-6, ge=0, le=1, description="busy-wait before the gate starts sleeping")
    max_sleep_s: float = Field(
        1e-3, gt=0, le=1, description="longest sleep between two looks at the table (the wake-up delay)"
    )


class CreditParams(GateTiming):
    """The credit scheduler's parameters (docs/schedulers.md explains each one).

    Set from a workflow as ``scheduler: {name: credit, pressure_threshold: 0.4}``; every range is
    checked when the workflow loads.
    """

    # 0.3: credit met every SLO in every run at the H200 mix's knee at 0.3 and 0.4, and missed at 0.5
    # and 0.6 (docs/results/credit-threshold-h200.md); 0.3 is the farther from that edge.
    pressure_threshold: float = Field(
        0.3, gt=0, lt=1, description="pressure above which an application is protected (θ)"
    )
    medium_floor: float = Field(
        0.2, ge=0, le=1, description="MEDIUM refill rate when the threat is at or above its SLO"
    )
    peer_margin: float = Field(
        0.25, ge=0, le=100, description="how much more pressured a MEDIUM peer must be to slow another"
    )
    burst_s: float = Field(
        0.05, gt=0, le=60, description="credit cap in device seconds (what an idle application can bank)"
    )
    initial_pressure: float = Field(
        1.0, ge=0, le=100, description="pressure of an application with an SLO before its first request"
    )
    window: int = Field(10, ge=1, le=10_000, description="finished requests the pressure looks back on")
    quantile: float = Field(90.0, ge=0, le=100, description="percentile of the window giving the pressure")


class CreditTable:
    """Typed access to the flat float64 table: ``slots`` slots of ``FIELDS`` fields each."""

    def __init__(self, buffer: Any, slots: int) -> None:
        self.slots = slots
        self.cells = memoryview(buffer).cast("B")[: slots * FIELDS * 8].cast("d")

    @staticmethod
    def nbytes(slots: int) -> int:
        """Return the bytes a table of ``slots`` slots needs."""
        return slots * FIELDS * 8

    def get(self, slot: int, field: int) -> float:
        """Return one field of one slot."""
        return self.cells[slot * FIELDS + field]

    def set(self, slot: int, field: int, value: float) -> None:
        """Write one field of one slot (only the field's writer may)."""
        self.cells[slot * FIELDS + field] = value

    def add(self, slot: int, field: int, delta: float) -> None:
        """Add to one field of one slot (only the field's writer may)."""
        self.cells[slot * FIELDS + field] += delta

    def enable(
        self,
        slot: int,
        priority: Priority,
        pressure: float,
        t: float,
        params: CreditParams,
        device: str = "gpu",
    ) -> None:
        """Initialise a slot for an application (arbiter, before the application process starts)."""
        for field in range(FIELDS):
            self.set(slot, field, 0.0)
        self.set(slot, DEVICE, DEVICES[device])
        self.set(slot, CLASS, float(priority))
        self.set(slot, PRESSURE, pressure)
        self.set(slot, BUCKET, params.burst_s)
        self.set(slot, BUCKET_T, t)
        self.set(slot, THROTTLE, 1.0)
        self.set(slot, LAST_RELEASE, -math.inf)
        self.set(slot, ENABLED, 1.0)

    def stats(self, slot: int) -> dict[str, float]:
        """Return the slot's counters (steps by grant kind, delays, seconds waited and stepped)."""
        return {name: self.get(slot, field) for name, field in STAT_FIELDS.items()}


def is_active(table: CreditTable, slot: int, t: float, params: GateTiming) -> bool:
    """Return whether an application is using the GPU: waiting, running, or between two close steps."""
    return (
        table.get(slot, WAITING) > 0
        or table.get(slot, RUNNING) > 0
        or t - table.get(slot, LAST_RELEASE) < params.linger_s
    )


class Outlook(NamedTuple):
    """What the other applications on the slot's device mean for it at one instant."""

    threat: float  # highest pressure holding the slot back (see ``threat``)
    pressured_peer_or_higher: bool  # an active app of the same or a more urgent class is pressured
    pressured_any: bool  # any other active app is pressured
    urgent_waiting: bool  # a pressured app of a more urgent class is waiting at its gate


def outlook(table: CreditTable, slot: int, t: float, params: CreditParams) -> Outlook:
    """Return the slot's ``Outlook``: one pass over the table, since this runs at every step."""
    cells, theta = table.cells, params.pressure_threshold
    base = slot * FIELDS
    device, cls, own = cells[base + DEVICE], cells[base + CLASS], cells[base + PRESSURE]
    worst, peer_or_higher, anyone, urgent = 0.0, False, False, False
    for j in range(table.slots):
        b = j * FIELDS
        if j == slot or not cells[b + ENABLED] or cells[b + DEVICE] != device:
            continue
        p, cj, waiting = cells[b + PRESSURE], cells[b + CLASS], cells[b + WAITING]
        active = waiting > 0 or cells[b + RUNNING] > 0 or t - cells[b + LAST_RELEASE] < params.linger_s
        if not active:
            continue
        if cj < cls or (cj == cls and p > own + params.peer_margin):
            worst = max(worst, p)
        if p > theta:
            anyone = True
            if cj <= cls:
                peer_or_higher = True
            if cj < cls and waiting > 0:
                urgent = True
    return Outlook(worst, peer_or_higher, anyone, urgent)


def threat(table: CreditTable, slot: int, t: float, params: CreditParams) -> float:
    """Return the highest pressure that holds ``slot`` back: from active applications of a more urgent
    class, and from active peers of its own class that are more pressured by at least ``peer_margin``."""
    return outlook(table, slot, t, params).threat


def throttle(threat_value: float, floor: float, params: CreditParams) -> float:
    """Return the credit refill rate (GPU seconds per second) under a threat: 1 up to the pressure
    threshold, falling linearly to ``floor`` at pressure 1 (the SLO reached) and beyond."""
    theta = params.pressure_threshold
    if threat_value <= theta:
        return 1.0
    fall = min(1.0, (threat_value - theta) / (1.0 - theta))
    return 1.0 - (1.0 - floor) * fall


def refill(
    table: CreditTable, slot: int, t: float, params: CreditParams, seen: Outlook | None = None
) -> float:
    """Refill the slot's credit up to ``t`` at its current rate; return the rate (GPU s per s).

    HIGH refills at 1, MEDIUM at ``throttle(threat)`` and LOW at 1, or 0 while another active
    application is pressured.
    """
    seen = seen or outlook(table, slot, t, params)
    cls = table.get(slot, CLASS)
    if cls == Priority.HIGH:
        rate = 1.0
    elif cls == Priority.MEDIUM:
        rate = throttle(seen.threat, params.medium_floor, params)
    else:
        rate = 0.0 if seen.pressured_any else 1.0
    elapsed = max(0.0, t - table.get(slot, BUCKET_T))
    table.set(slot, BUCKET, min(params.burst_s, table.get(slot, BUCKET) + rate * elapsed))
    table.set(slot, BUCKET_T, t)
    table.set(slot, THROTTLE, rate)
    return rate


def decide(table: CreditTable, slot: int, t: float, waited_s: float, params: CreditParams) -> Grant:
    """Return whether (and why) the slot may start a step at ``t`` after waiting ``waited_s``.

    Refills the slot's credit as a side effect. Rules, in order: HIGH always runs; LOW runs only
    when no other pressured application is active; MEDIUM runs on its own credit unless a pressured
    more urgent application is waiting; otherwise credit is lent when no pressured application of
    the same or a more urgent class is active; after ``max_wait_s`` the step runs anyway.
    """
    cls = table.get(slot, CLASS)
    if cls == Priority.HIGH:
        refill(table, slot, t, params, Outlook(0.0, False, False, False))
        return Grant.RESERVED
    seen = outlook(table, slot, t, params)
    refill(table, slot, t, params, seen)
    if cls == Priority.LOW:
        if not seen.pressured_any:
            return Grant.LENT
    else:
        if table.get(slot, BUCKET) > 0 and not seen.urgent_waiting:
            return Grant.CREDIT
        if not seen.pressured_peer_or_higher:
            return Grant.LENT
    if waited_s >= params.max_wait_s:
        return Grant.FORCED
    return Grant.WAIT


def begin_wait(table: CreditTable, slot: int) -> None:
    """Record that a step of the slot is waiting at the gate."""
    table.add(slot, WAITING, 1)


def admit(table: CreditTable, slot: int, grant: Grant, waited_s: float) -> None:
    """Record an admitted step: it stops waiting and starts running."""
    table.add(slot, WAITING, -1)
    table.add(slot, RUNNING, 1)
    table.add(slot, GRANTS, 1)
    table.add(slot, _GRANT_FIELD[grant], 1)
    if waited_s > 0:
        table.add(slot, DELAYED_N, 1)
        table.add(slot, WAIT_S, waited_s)


def finish(table: CreditTable, slot: int, t: float, duration_s: float, params: CreditParams) -> None:
    """Record a finished step: charge its duration to the slot's credit (which may go negative)."""
    # Charged before the refill so that credit earned during the step is not lost to the burst cap.
    table.add(slot, BUCKET, -duration_s)
    refill(table, slot, t, params)
    end_step(table, slot, t, duration_s)


def end_step(table: CreditTable, slot: int, t: float, duration_s: float) -> None:
    """Record that a step of the slot has ended at ``t`` after running ``duration_s``."""
    table.add(slot, RUNNING, -1)
    table.add(slot, STEP_S, duration_s)
    table.set(slot, LAST_RELEASE, t)


def decide_by_priority(table: CreditTable, slot: int, t: float, waited_s: float, params: GateTiming) -> Grant:
    """Return whether (and why) the slot may start a step at ``t`` under static priority (the priority
    scheduler): HIGH always runs (``RESERVED``); any other class runs when no application of a more
    urgent class on its device is active (``LENT``: the device is free of more urgent work), and after
    ``max_wait_s`` anyway (``FORCED``). Applications of one class are not ordered among themselves.
    No pressure, credit or latency is read: the rule has no feedback."""
    cells = table.cells
    base = slot * FIELDS
    device, cls = cells[base + DEVICE], cells[base + CLASS]
    if cls == Priority.HIGH:
        return Grant.RESERVED
    for j in range(table.slots):
        b = j * FIELDS
        if j == slot or not cells[b + ENABLED] or cells[b + DEVICE] != device or cells[b + CLASS] >= cls:
            continue
        if is_active(table, j, t, params):
            return Grant.FORCED if waited_s >= params.max_wait_s else Grant.WAIT
    return Grant.LENT


def normalised_latency(metrics: Mapping[str, Any], slos: Sequence[SLO]) -> float | None:
    """Return a request's worst latency relative to its SLOs (1.0 = exactly at the SLO).

    A metric the request lacks counts as a miss at twice the SLO (e.g. no first token came back);
    None when the application has no SLO.
    """
    if not slos:
        return None
    return max(float(metrics[s.metric]) / s.threshold_s if s.metric in metrics else 2.0 for s in slos)


def pressure(history: Sequence[float], params: CreditParams) -> float:
    """Return the SLO pressure from the latest normalised latencies (quantile over ``window``)."""
    recent = history[-params.window :]
    return percentile(recent, params.quantile) if recent else params.initial_pressure
