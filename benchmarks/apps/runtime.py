"""Process-level settings shared by the model-running applications (called first thing in ``load``)."""

from __future__ import annotations

import os
from typing import Any

from benchmarks.platform import Accelerator, PlatformFacts, accelerator


def default_threads() -> int:
    """Return the CPU threads a backend uses unless told otherwise: every core this process may use."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:
        return os.cpu_count() or 1


def share_cpu_politely() -> None:
    """Make OpenMP threads sleep rather than spin while they wait (unless the user set a policy).

    Must run before torch or CTranslate2 is imported. Applications of one run share the CPU cores, and
    OpenMP's default busy-wait burns the core another application needs: measured on a 2-core machine,
    two tiny image generators went from 10 ms to 0.7 s per denoising step; with passive waiting, 20 ms.
    """
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")


def setup_torch(
    torch: Any, device: str, threads: int | None, facts: PlatformFacts | None = None
) -> tuple[Accelerator, int]:
    """Set torch's CPU threads (``threads``, else ``default_threads()``) and return (the accelerator,
    threads); the torch device to move tensors to is ``accelerator.torch_device``.

    ``device`` is the unit's ``gpu`` or ``cpu``; where ``gpu`` runs is ``benchmarks.platform.accelerator``'s
    decision (CUDA, else Metal on Apple silicon; ``facts`` injects the machine's facts). A torch build
    that cannot use that accelerator is a ValueError that says so (rather than torch's own error at the
    first tensor moved).
    """
    count = threads or default_threads()
    torch.set_num_threads(count)
    chosen = accelerator(device, facts)
    if chosen.kind == "cuda" and not torch.cuda.is_available():
        raise ValueError(
            f"device: gpu ({chosen.label}), but this torch build sees no CUDA device (a CPU-only build?)"
        )
    if chosen.kind == "mps" and not torch.backends.mps.is_available():
        raise ValueError(
            "device: gpu on Apple silicon, but this torch build cannot use Metal (torch.backends.mps is "
            "unavailable: macOS 12.3 or newer and an arm64 build of torch are needed)"
        )
    return chosen, count


def synchronize(torch: Any, chosen: Accelerator) -> None:
    """Wait for the accelerator's queued work (a step's end is then its real end); no-op on the CPU."""
    if chosen.kind == "cuda":
        torch.cuda.synchronize()
    elif chosen.kind == "mps":
        torch.mps.synchronize()
