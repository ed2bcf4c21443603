"""The shape every application plug-in has: its declaration (``AppType``) and its driver (``Driver``).

An application module declares ``APP = AppType(...)`` and a ``Driver`` subclass. The module must stay
cheap to import (the spec loader imports it to validate keys): heavy libraries (torch, llama_cpp, diffusers,
faster_whisper) are imported inside ``Driver.load``, which runs in the application's own process.
"""

from __future__ import annotations

import random
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Literal

from benchmarks.clock import now
from benchmarks.files import UNRESTRICTED, FileAccessError, FilePolicy, where
from benchmarks.metrics import QualityMeasure
from benchmarks.models import Format, check_model
from benchmarks.spec.model import DATA_FILE, Application, AppOptions
from benchmarks.status import RequestStatus

if TYPE_CHECKING:
    from benchmarks.schedulers.base import Gate


@dataclass(frozen=True)
class AppType:
    """Declaration of one application type, registered in ``benchmarks.apps.APP_TYPES``."""

    name: str
    aliases: tuple[str, ...]
    options: type[AppOptions]
    slo_metrics: tuple[str, ...]
    default_slo: tuple[str, ...]
    default_priority: str
    default_num_requests: int
    driver: str
    default_model: str | None = None
    needs_model: bool = False
    # What one record is: a request, or a piece of a stream (a chunk) whose count is not known ahead.
    record: str = "request"
    description: str = ""
    # Checks this machine before a run starts (model and data files, read through the file access
    # policy); returns problems as sentences.
    check: Callable[[Application, FilePolicy], list[str]] | None = None
    # Whether a unit of this type does any work on the GPU when placed there (None: always). A unit
    # that does none (Sleep, Synthetic's CPU load) runs on the CPU where no GPU is visible, even with
    # ``device: gpu``: the original ConsumerBench's configs put Sleep units on the GPU.
    uses_gpu: Callable[[Application], bool] | None = None
    # The quality figures the result summarises from this type's request records (docs/metrics.md).
    quality: tuple[QualityMeasure, ...] = ()
    # Default SLOs that depend on a unit's options (ImageGen's image SLO: its steps x the step SLO),
    # after ``default_slo``; given the options, possibly unvalidated (then it must not fail).
    option_slo: Callable[[Any], tuple[str, ...]] | None = None
    # A model server (LLMServer): its node serves other units and is no application of the result.
    serves: bool = False
    # Whether a unit of this type may send its requests to a model server (``server:``).
    server_client: bool = False

    def default_slos(self, options: Any) -> tuple[str, ...]:
        """Return the SLOs a unit of this type gets when it gives none, for its ``options``."""
        return self.default_slo + (self.option_slo(options) if self.option_slo is not None else ())


@dataclass
class RequestRecord:
    """One request (or audio chunk) as measured inside the application process.

    Times are on the shared monotonic clock. Latency metrics count from ``arrival``: for a closed
    loop that is when the request was sent, for an open loop when it was due, so queueing counts, and
    the scheduler gate's holds count too. ``metrics["gate_wait"]`` is the part of the request the gate
    held it back (seconds; 0 under a scheduler that never holds).
    """

    index: int
    arrival: float
    start: float = 0.0
    end: float = 0.0
    status: RequestStatus = RequestStatus.OK
    warmup: bool = False
    metrics: dict[str, float] = field(default_factory=dict)
    info: dict[str, Any] = field(default_factory=dict)
    series: dict[str, list[float]] = field(default_factory=dict)
    error: str | None = None

    def to_event(self) -> dict[str, Any]:
        """Return the record as the plain dict sent over the event pipe."""
        return {
            "index": self.index,
            "arrival": self.arrival,
            "start": self.start,
            "end": self.end,
            "status": self.status,
            "warmup": self.warmup,
            "metrics": self.metrics,
            "info": self.info,
            "series": self.series,
            "error": self.error,
        }


class AppStopped(Exception):
    """Raised inside a driver when the runner asked the application to stop (background or cancel)."""


# What an application does with an output holding NaN or inf (ImageGen's images, LiveCaptions' chunks):
# fail the request and the node (nonfinite_failure says why), or record it (served and timed as any
# other, info.finite false).
NonFinite = Literal["fail", "record"]


def nonfinite_failure(what: str, where: Sequence[str]) -> str:
    """Return the error of a request whose output held NaN or inf: ``what`` ("image 3") and ``where``
    (the stages whose values were not finite, in words)."""
    return (
        f"{what} is not finite: NaN or inf in the {' and the '.join(where)}, so its times are not those "
        "of real work (a model overflowing in float16, or matrix products gone wrong under an MPS share: "
        "docs/schedulers.md); nonfinite: record serves and times such outputs"
    )


class RequestFailed(Exception):
    """Raised inside ``run_request`` when the request cannot be served, with the reason as message:
    the request is recorded with status ``error`` and that reason, then the node fails with it."""


@dataclass
class AppContext:
    """What the runner hands a driver in its process: event emission, the scheduler gate, stop flag."""

    node: str
    emit: Callable[..., None]
    gate: Gate
    stop_requested: Callable[[], bool]
    device: str
    out_dir: Path
    seed: int
    session: int = 0
    sessions: int = 1
    # What the driver may read (benchmarks.files): unrestricted on the CLI, the allowed roots on a server.
    files: FilePolicy = UNRESTRICTED
    # The base URL of the model server the unit names (``server:``), once its node answers.
    server_url: str | None = None
    # A private folder for what must stay out of the bundle (a server's log); the runner removes it
    # after the run, so a killed process leaves nothing behind. None: make and remove your own.
    scratch_dir: Path | None = None
    # Seconds this session's steps were held back at the scheduler's gate so far (GpuStep adds to it).
    gate_wait: float = 0.0

    def gpu_step(self, kind: str) -> GpuStep:
        """Wrap one GPU step (decode step, denoising step, audio chunk) in the scheduler gate; the
        seconds the gate holds it back are added to ``gate_wait``.

        A model server's client does no GPU step (the server does, in its own process): its steps
        only honour a stop request.
        """
        return GpuStep(self, kind)

    def send_record(self, record: RequestRecord) -> None:
        """Report a finished request (or chunk) to the runner, tagged with its session if several."""
        if self.sessions > 1:
            record.info.setdefault("session", self.session)
        self.emit("request_end", record=record.to_event())


class GpuStep:
    """The context of one gated GPU step (``AppContext.gpu_step``): a stop request is honoured on entry,
    the gate is acquired on entry and released on exit, whatever the step raised. A plain class, not a
    generator-based context manager: it is entered once per token, and costs a third as much."""

    __slots__ = ("ctx", "gated", "kind")

    def __init__(self, ctx: AppContext, kind: str) -> None:
        self.ctx = ctx
        self.kind = kind
        self.gated = False

    def __enter__(self) -> None:
        ctx = self.ctx
        if ctx.stop_requested():
            raise AppStopped
        if ctx.server_url is None:
            held = ctx.gate.acquire(ctx.node, self.kind)
            self.gated = True
            if held:
                ctx.gate_wait += held

    def __exit__(self, *exc: object) -> None:
        if self.gated:
            self.gated = False
            self.ctx.gate.release(self.ctx.node, self.kind)


def check_unit(
    unit: Application,
    files: FilePolicy,
    formats: tuple[Format, ...],
    *inputs: Callable[[], object],
    more: Callable[[], list[str]] = list,
) -> list[str]:
    """Return the problems that stop a model-backed unit on this machine, as sentences: the
    ``AppType.check`` of each driver that loads a model.

    A model that the file access policy refuses is the only problem reported (nothing else of the
    unit is read then). A unit that names a ``server`` has no model of its own to check. Otherwise:
    the model's problems (catalogue, format, device), then ``more()``
    (the driver's own checks), then the message of each of ``inputs`` that fails (each reads one
    input of the unit and raises ValueError, FileAccessError included, when it is bad).
    """
    problems: list[str] = []
    if unit.server is None:  # a server's client uses the server's model
        try:
            files.check_unit_model(unit)
        except FileAccessError as exc:
            return [str(exc)]
        problems = check_model(unit.model, formats, unit.type, unit.device, files.model_search())
    problems += more()
    for read in inputs:
        try:
            read()
        except ValueError as exc:
            problems.append(str(exc))
    return problems


def read_trace(unit: Application, files: FilePolicy) -> list[float]:
    """Return the arrival times of a unit's trace file (one number per line, blank lines skipped).

    Raises FileAccessError naming the field, the unit and the line of a bad entry, never its text.
    """
    at = where(unit.name, "arrival.trace")
    text = files.read_text(unit.arrival.trace or "", DATA_FILE, at)
    times: list[float] = []
    for n, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            times.append(float(line))
        except ValueError:
            raise FileAccessError(f"{at}, line {n}: expected one arrival time (seconds) per line") from None
    if not times:
        raise FileAccessError(f"{at}: the trace holds no arrival times")
    return times


def arrival_offsets(
    unit: Application, count: int, seed: int, files: FilePolicy = UNRESTRICTED
) -> list[float] | None:
    """Return open-loop arrival offsets (seconds from the first request) or None for a closed loop."""
    arrival = unit.arrival
    kind = arrival.kind
    if kind == "closed":
        return None
    if kind == "fixed":
        return [i / arrival.rate for i in range(count)] if arrival.rate else None
    if kind == "poisson":
        rng = random.Random(arrival.seed if arrival.seed is not None else seed)
        offsets, t = [], 0.0
        for _ in range(count):
            offsets.append(t)
            t += rng.expovariate(arrival.rate or 1.0)
        return offsets
    times = read_trace(unit, files)
    if len(times) < count:
        raise FileAccessError(
            f"{where(unit.name, 'arrival.trace')}: the trace holds {len(times)} arrival times for "
            f"{count} requests (warm-up included)"
        )
    return [t - times[0] for t in times[:count]]


class Driver(ABC):
    """One application's life cycle: ``load()``, a stream of requests, ``close()``.

    The default ``run`` issues ``num_requests`` requests (plus warm-up) following the unit's arrival
    process and calls ``run_request`` for each; streaming applications override ``run``.
    """

    APP: ClassVar[AppType]

    def __init__(self, unit: Application, ctx: AppContext) -> None:
        self.unit = unit
        self.ctx = ctx
        self.options: Any = unit.options

    @abstractmethod
    def load(self) -> dict[str, Any]:
        """Load the model; return a description of what was loaded (path and sha256, or random + config)."""

    def payloads(self) -> Sequence[Any]:
        """Return the request inputs (prompts, captions, questions); cycled when fewer than requests."""
        return [None]

    def planned_records(self) -> int:
        """Return how many records (warm-up left out) this session will report if it runs to the end;
        called after ``load()``."""
        return self.unit.num_requests

    def run_request(self, record: RequestRecord, payload: Any) -> None:
        """Serve one request, filling ``record.metrics`` / ``info`` / ``series``."""
        raise NotImplementedError(f"{type(self).__name__} must implement run_request or override run")

    def close(self) -> None:
        """Release the model and any resources (called even after a failure)."""
        return None

    def gate_wait_s(self) -> float:
        """Return the seconds this session was held back at the scheduler's gate over the whole run
        (warm-up and interrupted requests included; a model server: its batches)."""
        return self.ctx.gate_wait

    def overlaps_requests(self) -> bool:
        """Return whether this session's requests may be in flight together (an open loop then sends
        each one when it is due): a model server's client, whose server queues and batches them. A
        model of the process's own serves one request at a time, so there a request due while another
        runs waits its turn (its latency counts from when it was due). Called after ``load()``."""
        return False

    def run(self) -> None:
        """Issue the unit's requests following its arrival process and report each one.

        A closed loop sends one request at a time (after the think time). An open loop sends each
        request when it is due; where the driver ``overlaps_requests``, whether or not the earlier ones
        have finished, up to the arrival's ``in_flight_cap`` at once, each in a thread of its own.
        """
        unit = self.unit
        total = unit.warmup_requests + unit.num_requests
        payloads = list(self.payloads()) or [None]
        offsets = arrival_offsets(unit, total, self.ctx.seed, self.ctx.files)
        if offsets is not None and self.overlaps_requests() and unit.arrival.in_flight_cap > 1:
            self._run_open(offsets, payloads, unit.arrival.in_flight_cap)
            return
        t0 = now()
        think = unit.arrival.think_time_s
        for i in range(total):
            if self.ctx.stop_requested():
                raise AppStopped
            if offsets is not None:
                due = t0 + offsets[i]
                _sleep_until(due, self.ctx.stop_requested)
                arrival = due
            else:
                arrival = now()
            self._serve(i, arrival, payloads[i % len(payloads)])
            if offsets is None and think > 0 and i + 1 < total:
                _sleep_until(now() + think, self.ctx.stop_requested)

    def _serve(self, index: int, arrival: float, payload: Any) -> None:
        """Serve request ``index`` (due at ``arrival``) and report its record; re-raise AppStopped and
        RequestFailed after reporting the request as interrupted or failed."""
        record = RequestRecord(index=index, arrival=arrival, warmup=index < self.unit.warmup_requests)
        self.ctx.emit("request_start", index=index, arrival=arrival)
        record.start = now()
        # Requests in flight together (an open loop) are a model server's client's, which no gate holds.
        held = self.ctx.gate_wait
        try:
            self.run_request(record, payload)
        except AppStopped:
            record.end = now()
            record.status = RequestStatus.INTERRUPTED
            self.ctx.send_record(gate_waited(record, self.ctx.gate_wait - held))
            raise
        except RequestFailed as exc:
            record.end = now()
            record.status = RequestStatus.ERROR
            record.error = str(exc)
            self.ctx.send_record(gate_waited(record, self.ctx.gate_wait - held))
            raise
        record.end = now()
        record.metrics.setdefault("e2e", record.end - record.arrival)
        self.ctx.send_record(gate_waited(record, self.ctx.gate_wait - held))

    def _run_open(self, offsets: Sequence[float], payloads: Sequence[Any], cap: int) -> None:
        """Send each request when it is due, in a thread of its own, with at most ``cap`` in flight;
        once one fails or is stopped, send no more, wait for those in flight and re-raise its error."""
        slots = threading.BoundedSemaphore(cap)
        failures: list[BaseException] = []
        stop = self.ctx.stop_requested

        def halted() -> bool:
            return bool(failures) or stop()

        def serve(index: int, due: float) -> None:
            try:
                self._serve(index, due, payloads[index % len(payloads)])
            except BaseException as exc:
                failures.append(exc)
            finally:
                slots.release()

        threads: list[threading.Thread] = []
        t0 = now()
        try:
            for i, offset in enumerate(offsets):
                due = t0 + offset
                _sleep_until(due, halted)
                # At the cap: the request waits for a slot; its latency still counts from ``due``.
                while not slots.acquire(timeout=0.05):
                    if halted():
                        raise AppStopped
                if halted():
                    slots.release()
                    raise AppStopped
                thread = threading.Thread(target=serve, args=(i, due), name=f"request-{i}", daemon=True)
                threads.append(thread)
                thread.start()
        except AppStopped:
            pass
        finally:
            for thread in threads:
                thread.join()
        # The first error that is not a stop wins: a failed request fails the node.
        errors = [e for e in failures if not isinstance(e, AppStopped)] or failures
        if errors:
            raise errors[0]
        if stop():
            raise AppStopped


def gate_waited(record: RequestRecord, held: float) -> RequestRecord:
    """Return ``record`` with ``metrics["gate_wait"]``: the seconds the scheduler's gate held it back."""
    record.metrics["gate_wait"] = held
    return record


def _sleep_until(deadline: float, stop_requested: Callable[[], bool]) -> None:
    """Sleep until ``deadline`` in short slices so that a stop request is honoured promptly."""
    while True:
        left = deadline - now()
        if left <= 0:
            return
        if stop_requested():
            raise AppStopped
        time.sleep(min(left, 0.05))
