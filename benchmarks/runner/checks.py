"""Before a run: can this workflow run on this machine (devices, models, files), and on which device."""

from __future__ import annotations

from benchmarks.apps import app_type
from benchmarks.apps.base import arrival_offsets
from benchmarks.files import UNRESTRICTED, FilePolicy
from benchmarks.models import random_twin
from benchmarks.platform import NO_GPU, has_gpu
from benchmarks.spec.graph import concurrent_sets_max
from benchmarks.spec.model import Application, Path_, Workflow


class PreflightError(RuntimeError):
    """The run cannot start on this machine (missing GPU, model or file); nothing was started."""

    def __init__(self, problems: list[str]) -> None:
        self.problems = problems
        super().__init__("the run cannot start:\n" + "\n".join(f"  {p}" for p in problems))


def resolve_device(unit: Application, gpu: bool | None = None) -> str:
    """Return ``gpu`` or ``cpu``: the device a unit runs on here (recorded as the node's ``device``),
    or on a machine that has a GPU or not (``gpu``; default: this one).

    ``auto`` takes the GPU when there is one (an NVIDIA GPU, or Apple silicon's Metal:
    ``benchmarks.platform.has_gpu``; a model server's client stays on the CPU: its model runs in the
    server); ``gpu`` stays on the GPU, except that a unit whose
    type does no GPU work (Sleep, Synthetic's CPU load) runs on the CPU when no GPU is visible.
    """
    if unit.device == "cpu" or unit.server is not None:  # a server's client runs no model here
        return "cpu"
    if has_gpu() if gpu is None else gpu:
        return "gpu"
    uses_gpu = app_type(unit).uses_gpu
    if unit.device == "gpu" and (uses_gpu is None or uses_gpu(unit)):
        return "gpu"
    return "cpu"


def preflight(workflow: Workflow, files: FilePolicy = UNRESTRICTED) -> list[str]:
    """Return the problems that stop this workflow from running here (devices, models, files).

    Files are read through ``files``; when it refuses a path, those refusals are all that is
    returned and nothing is read.
    """
    refused = [message for _, message in files.workflow_problems(workflow)]
    if refused:
        return refused
    return [
        # File problems already name the field and the unit.
        message if f"unit '{name}'" in message else f"unit '{name}': {message}"
        for name, unit in workflow.applications.items()
        for _, message in machine_problems(unit, files)
    ] + memory_problems(workflow)


def cpu_model_bytes(workflow: Workflow, gpu: bool | None = None) -> dict[str, int]:
    """Return, for each node that loads a random model (``NAME@random``) on the CPU, the memory its
    weights take there (``RandomModel.memory_bytes``) times its sessions (each loads its own copy).
    ``gpu``: whether the machine has a GPU (``resolve_device``; default: this one).

    A model server's clients load nothing (their model is the server's node, counted once); models read
    from files are left out (their size is the file's, which the run does not need to guess).
    """
    need = {}
    for name in workflow.nodes:
        unit = workflow.unit_of(name)
        model = unit.model or ""
        twin = random_twin(model) if model.endswith("@random") else None
        if twin is not None and unit.server is None and resolve_device(unit, gpu) == "cpu":
            need[name] = twin.memory_bytes("cpu") * unit.concurrency
    return need


def memory_problems(
    workflow: Workflow,
    available_bytes: int | None = None,
    *,
    gpu: bool | None = None,
    machine: str | None = None,
    alone_too: bool = False,
) -> list[str]:
    """Return the problem, as one sentence, when the random models of nodes that can run at the same
    time on the CPU do not fit together in the memory available (``available_bytes``, default: what
    psutil reports now); empty when they fit.

    The largest such set is the DAG's maximum-weight set of nodes that may overlap
    (``concurrent_sets_max``), weighted by ``cpu_model_bytes``. One model alone that does not fit is the
    unit's own problem (``benchmarks.models.check_model``) and is not repeated here unless
    ``alone_too``. For another machine (the web's launch, for a platform): ``gpu`` says whether it has
    a GPU, ``machine`` how the sentence names its memory ("platform 'lab-1' has 16.0 GB in all").
    """
    need = cpu_model_bytes(workflow, gpu)
    if not need:
        return []
    total, chosen = concurrent_sets_max(workflow, need)
    if available_bytes is None:
        import psutil

        available_bytes = int(psutil.virtual_memory().available)
    alone = len(chosen) == 1 and workflow.unit_of(chosen[0]).concurrency == 1
    if total <= available_bytes or (alone and not alone_too):
        return []
    parts = []
    for name in sorted(chosen):
        unit = workflow.unit_of(name)
        sessions = f" x {unit.concurrency} sessions" if unit.concurrency > 1 else ""
        parts.append(f"{name} ({unit.model}{sessions}, {need[name] / 1e9:.1f} GB)")
    has = machine or f"this machine has {available_bytes / 1e9:.1f} GB available"
    if alone:
        return [
            f"node {parts[0]} loads a random model on the CPU and {has}; use device: gpu or a smaller model"
        ]
    return [
        f"nodes that can run at the same time load random models on the CPU that need about "
        f"{total / 1e9:.1f} GB of memory together, and {has}: {', '.join(parts)}; "
        "make some depend_on the others, use device: gpu or smaller models"
    ]


def machine_problems(unit: Application, files: FilePolicy = UNRESTRICTED) -> list[tuple[Path_, str]]:
    """Return (path inside the unit, message) for what stops one unit from running on this machine.

    The device, then the type's own check (model and data files, read through ``files``), then an
    arrival trace. A unit with a file that ``files`` refuses is not read at all: it returns nothing
    here (the refusal is the file policy's problem, ``FilePolicy.unit_problems``).
    """
    if files.unit_problems(unit):
        return []
    problems: list[tuple[Path_, str]] = []
    if resolve_device(unit) == "gpu" and not has_gpu():
        problems.append((("device",), f"unit '{unit.name}' asks for {NO_GPU}"))
    check = app_type(unit).check
    if check is not None:
        problems.extend(((), p) for p in check(unit, files))
    if unit.arrival.kind == "trace":
        try:
            arrival_offsets(unit, unit.warmup_requests + unit.num_requests, 0, files)
        except ValueError as exc:
            problems.append((("arrival", "trace"), str(exc)))
    return problems
