"""Registry of schedulers: one module per policy, each a ``Scheduler`` subclass with its ``Params``."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from benchmarks.schedulers.base import Scheduler, SchedulerError, SchedulerParams
from benchmarks.schedulers.credit import CreditScheduler
from benchmarks.schedulers.credit_mps import CreditMpsScheduler
from benchmarks.schedulers.greedy import GreedyScheduler
from benchmarks.schedulers.partition import PartitionScheduler
from benchmarks.schedulers.priority import PriorityScheduler
from benchmarks.spec.model import suggest

if TYPE_CHECKING:
    from benchmarks.spec.model import Workflow

SCHEDULERS: dict[str, type[Scheduler]] = {
    cls.name: cls
    for cls in (GreedyScheduler, PartitionScheduler, PriorityScheduler, CreditScheduler, CreditMpsScheduler)
}


def schedulers_for(gpus: Sequence[Mapping[str, Any]]) -> list[str]:
    """Return the names of the schedulers a platform with these GPUs (its fingerprint's ``gpus``) can
    run: every one with an NVIDIA GPU, those that need none (no MPS) without."""
    return [name for name, cls in SCHEDULERS.items() if gpus or not cls.needs_nvidia_gpu]


# How pydantic's range errors read here: "must be <= 1 (got 1.5)".
_BOUND_WORDS = {
    "greater_than": ("gt", ">"),
    "greater_than_equal": ("ge", ">="),
    "less_than": ("lt", "<"),
    "less_than_equal": ("le", "<="),
}


class SchedulerParamError(ValueError):
    """Parameters a scheduler does not take or values out of their range; ``problems`` holds
    ``(parameter, sentence)`` pairs, e.g. ``("pressure_threshold", "must be < 1 (got 1.5)")``."""

    def __init__(self, scheduler: str, problems: list[tuple[str, str]]) -> None:
        self.scheduler = scheduler
        self.problems = problems
        super().__init__("; ".join(f"scheduler.{param}: {message}" for param, message in problems))


def param_problems(name: str, values: Mapping[str, Any]) -> list[tuple[str, str]]:
    """Return ``(parameter, sentence)`` for every parameter of ``values`` that scheduler ``name``
    does not take or whose value is out of range; empty when they are all fine. ``name`` must be
    registered."""
    try:
        scheduler_params(name, values)
    except SchedulerParamError as exc:
        return exc.problems
    return []


def scheduler_params(name: str, values: Mapping[str, Any]) -> SchedulerParams:
    """Return scheduler ``name``'s validated parameters (defaults for what ``values`` leaves out).

    Raises SchedulerError for an unknown scheduler and SchedulerParamError naming each bad parameter
    with its allowed range or, for an unknown one, the parameters the scheduler takes.
    """
    cls = scheduler_class(name)
    known = cls.Params.names()
    problems: list[tuple[str, str]] = []
    for key in values:
        if key not in known:
            takes = f"{name} takes: {', '.join(known)}" if known else f"{name} takes no parameters"
            problems.append((str(key), f"unknown parameter{suggest(str(key), known)}; {takes}"))
    try:
        params = cls.Params.model_validate({k: v for k, v in values.items() if k in known})
    except ValidationError as exc:
        problems += [
            (".".join(str(p) for p in err["loc"]), _sentence(err, cls.Params)) for err in exc.errors()
        ]
        raise SchedulerParamError(name, problems) from None
    if problems:
        raise SchedulerParamError(name, problems)
    return params


def _sentence(err: Any, params: type[SchedulerParams]) -> str:
    """Return a pydantic error as ``must be < 1 (got 1.5; allowed: > 0 and < 1)``, or its own
    message with the value."""
    got = f" (got {err['input']!r})"
    if err["type"] in _BOUND_WORDS:
        key, word = _BOUND_WORDS[err["type"]]
        allowed = param_range(params, str(err["loc"][0]))
        return f"must be {word} {_number(err['ctx'][key])} (got {err['input']!r}; allowed: {allowed})"
    message = str(err["msg"]).removeprefix("Value error, ")
    return f"{message[:1].lower()}{message[1:]}{got}"


def param_range(params: type[SchedulerParams], name: str) -> str:
    """Return a parameter's allowed range in words, e.g. ``> 0 and < 1`` (``any`` when unbounded)."""
    parts = []
    for bound in params.model_fields[name].metadata:
        for key, word in _BOUND_WORDS.values():
            if getattr(bound, key, None) is not None:
                parts.append(f"{word} {_number(getattr(bound, key))}")
    return " and ".join(parts) or "any"


def _number(value: Any) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


def scheduler_label(name: str, params: Mapping[str, Any]) -> str:
    """Return a scheduler with the parameters that differ from its defaults, e.g.
    ``credit (pressure_threshold=0.4)``, or the bare name (also for an unknown scheduler's)."""
    cls = SCHEDULERS.get(name)
    defaults = cls.Params().model_dump(mode="json") if cls else {}
    changed = [f"{k}={v}" for k, v in params.items() if k not in defaults or defaults[k] != v]
    return f"{name} ({', '.join(changed)})" if changed else name


def scheduler_class(name: str) -> type[Scheduler]:
    """Return the registered scheduler class ``name``; raise SchedulerError naming the known ones."""
    try:
        return SCHEDULERS[name]
    except KeyError:
        raise SchedulerError(f"unknown scheduler '{name}'; known: {', '.join(SCHEDULERS)}") from None


def get_scheduler(name: str, params: Mapping[str, Any] | None = None) -> Scheduler:
    """Return a fresh scheduler instance by name with ``params`` (its defaults where absent).

    Raises SchedulerError for an unknown name and SchedulerParamError for bad parameters.
    """
    return scheduler_class(name)(scheduler_params(name, params or {}))


def effective_choice(
    workflow: Workflow, name: str | None = None, overrides: Mapping[str, Any] | None = None
) -> tuple[str, dict[str, Any]]:
    """Return the scheduler a run uses and its effective parameters (defaults filled in, JSON-ready).

    ``name`` (None: the workflow's) picks the scheduler; the workflow's own ``scheduler:`` parameters
    apply only when it is the workflow's scheduler; ``overrides`` (e.g. ``--scheduler-param``) win.
    Raises SchedulerError or SchedulerParamError.
    """
    chosen = name or workflow.scheduler
    base = workflow.scheduler_params if chosen == workflow.scheduler else {}
    params = scheduler_params(chosen, {**base, **(overrides or {})})
    return chosen, params.model_dump(mode="json")


def scheduler_for(
    workflow: Workflow, name: str | None = None, overrides: Mapping[str, Any] | None = None
) -> Scheduler:
    """Return the scheduler instance for a run of ``workflow`` (``effective_choice`` says which)."""
    chosen, params = effective_choice(workflow, name, overrides)
    return get_scheduler(chosen, params)


__all__ = [
    "SCHEDULERS",
    "Scheduler",
    "SchedulerError",
    "SchedulerParamError",
    "SchedulerParams",
    "effective_choice",
    "get_scheduler",
    "param_problems",
    "scheduler_class",
    "scheduler_for",
    "scheduler_label",
    "scheduler_params",
]
