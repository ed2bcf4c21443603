"""Before a run: can this workflow run on this machine (devices, models, files), and on which device."""

from __future__ import annotations

from benchmarks.apps import app_type
from benchmarks.apps.base import arrival_offsets
from benchmarks.files import UNRESTRICTED, FilePolicy
from benchmarks.platform import gpus
from benchmarks.spec.model import Application, Workflow


class PreflightError(RuntimeError):
    """The run cannot start on this machine (missing GPU, model or file); nothing was started."""

    def __init__(self, problems: list[str]) -> None:
        self.problems = problems
        super().__init__("the run cannot start:\n" + "\n".join(f"  {p}" for p in problems))


def resolve_device(unit: Application) -> str:
    """Return ``gpu`` or ``cpu``: the device a unit runs on here (recorded as the node's ``device``).

    ``auto`` takes the GPU when one is visible; ``gpu`` stays on the GPU, except that a unit whose
    type does no GPU work (Sleep, Synthetic's CPU load) runs on the CPU when no GPU is visible.
    """
    if unit.device == "cpu":
        return "cpu"
    if gpus():
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
    problems: list[str] = []
    for name, unit in workflow.applications.items():
        if resolve_device(unit) == "gpu" and not gpus():
            problems.append(
                f"unit '{name}' asks for device: gpu, but no NVIDIA GPU is visible here "
                "(NVML found none); use device: cpu or auto, or run it on a GPU worker"
            )
        check = app_type(unit).check
        if check is not None:
            # File problems already name the field and the unit.
            problems.extend(
                p if f"of unit '{name}'" in p else f"unit '{name}': {p}" for p in check(unit, files)
            )
        if unit.arrival.kind == "trace":
            try:
                arrival_offsets(unit, unit.warmup_requests + unit.num_requests, 0, files)
            except ValueError as exc:
                problems.append(str(exc))
    return problems
