"""The shape every scheduler has.

A scheduler lives on two sides. In the runner process, ``Scheduler`` prepares the run (an MPS
daemon, an arbiter's shared memory), gives each application process its environment and a picklable
``GateSpec``, is polled while the run goes on and is told of every finished request. In each
application process, ``GateSpec.open()`` returns the ``Gate`` that every GPU step passes through.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

from pydantic import BaseModel, ConfigDict

if TYPE_CHECKING:
    from benchmarks.spec.model import Workflow


class Gate(Protocol):
    """Admission control for one GPU step of one application."""

    def acquire(self, app: str, kind: str) -> float:
        """Block until ``app`` may run a step of ``kind``; return the seconds the gate held it back
        (0.0 when it was admitted at once): the time the scheduler cost this step."""

    def release(self, app: str, kind: str) -> None:
        """Report that the step has finished."""


class GateSpec(ABC):
    """Picklable recipe for a ``Gate``, sent to the application process."""

    @abstractmethod
    def open(self) -> Gate:
        """Return the gate to use inside the application process."""


class OpenGate:
    """A gate that never waits (greedy's gate, and the base of gates that only watch)."""

    def acquire(self, app: str, kind: str) -> float:
        return 0.0

    def release(self, app: str, kind: str) -> None:
        return None


class OpenGateSpec(GateSpec):
    """The recipe of an ``OpenGate``."""

    def open(self) -> Gate:
        return OpenGate()


class SchedulerError(RuntimeError):
    """The scheduler cannot serve this run on this machine (e.g. MPS absent); the message says why."""


class SchedulerParams(BaseModel):
    """Base of every scheduler's parameters: frozen, unknown parameters refused, no inf or NaN.

    Each scheduler declares its own subclass as ``Params`` (each field with a default, a range and a
    description); the registry validates a workflow's ``scheduler:`` mapping against it and the
    result records its ``model_dump()`` (the effective parameters, defaults filled in).
    """

    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)

    @classmethod
    def names(cls) -> tuple[str, ...]:
        """Return the parameters' names, each class's own before those it inherits: a scheduler's
        distinctive parameters first, the timing it shares with its siblings after them."""
        ordered: list[str] = []
        for klass in cls.__mro__:
            for name in vars(klass).get("__annotations__", {}):
                if name in cls.model_fields and name not in ordered:
                    ordered.append(name)
        return tuple(ordered)


@dataclass(frozen=True)
class NodePlan:
    """What a scheduler knows about a node when the run starts."""

    name: str
    unit: str
    device: str
    priority: str
    mps: int | None
    background: bool
    # The unit's device-memory cap (gpu_memory_limit_mb), enforced by the MPS-based schedulers.
    memory_limit_mb: int | None = None


class Scheduler(ABC):
    """One policy for sharing the device among the applications of a run."""

    name: ClassVar[str]
    description: ClassVar[str]
    Params: ClassVar[type[SchedulerParams]] = SchedulerParams
    # True for the schedulers built on NVIDIA MPS: a platform without an NVIDIA GPU cannot run them
    # (the launch form offers them only where the platform has one).
    needs_nvidia_gpu: ClassVar[bool] = False

    def __init__(self, params: SchedulerParams | None = None) -> None:
        """``params`` must be an instance of the class's ``Params`` (its defaults when None)."""
        self.params = params if params is not None else self.Params()
        if not isinstance(self.params, self.Params):
            raise TypeError(f"{self.name} takes {self.Params.__name__}, not {type(params).__name__}")

    @classmethod
    def spec_problems(cls, workflow: Workflow) -> list[str]:
        """Return sentences for what in a workflow this scheduler can never serve (checked when the
        workflow is loaded with this scheduler as its default, and when a run is launched); empty
        when it can."""
        return []

    def start(self, workflow: Workflow, nodes: Mapping[str, NodePlan]) -> None:
        """Prepare the run before any application process starts; raise SchedulerError if impossible."""
        return None

    def env_for(self, node: NodePlan) -> dict[str, str]:
        """Return environment variables for the node's application process."""
        return {}

    @abstractmethod
    def gate_for(self, node: NodePlan) -> GateSpec:
        """Return the gate recipe for the node's application process."""

    def on_request_end(self, node: str, record: Mapping[str, Any]) -> None:
        """Feedback after every finished request (latency against the SLO)."""
        return None

    def poll(self) -> None:
        """Called by the runner's loop several times a second."""
        return None

    def describe(self) -> dict[str, Any]:
        """Return what the result bundle records about this scheduler's run: its name, its effective
        parameters (``params``, defaults filled in) and what the scheduler adds of its own."""
        return {"name": self.name, "params": self.params.model_dump(mode="json")}

    def stop(self) -> None:
        """Tear down whatever ``start`` set up; called even when the run failed."""
        return None
