"""Process-level settings shared by the model-running applications (called first thing in ``load``)."""

from __future__ import annotations

import os
from typing import Any


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


def setup_torch(torch: Any, device: str, threads: int | None) -> tuple[str, int]:
    """Set torch's CPU threads (``threads``, else ``default_threads()``) and return (torch device, threads).

    ``device`` is the unit's ``gpu`` or ``cpu``; ``gpu`` on a torch build that sees no CUDA device is a
    ValueError that says so (rather than torch's own error at the first tensor moved).
    """
    count = threads or default_threads()
    torch.set_num_threads(count)
    if device == "gpu" and not torch.cuda.is_available():
        raise ValueError("device: gpu, but this torch build sees no CUDA device (a CPU-only build?)")
    return ("cuda" if device == "gpu" else "cpu"), count
