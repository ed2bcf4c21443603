"""What the NVML and GPM sources share: loading pynvml, initialising it, finding the visible GPUs.

Both sources take the pynvml module as a parameter (default: import it) so that tests can replay
outputs recorded on a real GPU through the same code.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from benchmarks.monitor.base import SourceUnavailable
from benchmarks.platform import visible_gpus


@dataclass(frozen=True)
class Gpu:
    index: int
    handle: Any
    name: str

    @property
    def entity(self) -> str:
        return f"gpu{self.index}"


def load_nvml(nvml: Any) -> Any:
    """Return the pynvml module to use (the given one, else an import); SourceUnavailable when missing."""
    if nvml is not None:
        return nvml
    try:
        import pynvml
    except ImportError as exc:
        raise SourceUnavailable(f"nvidia-ml-py is not installed ({exc}); pip install nvidia-ml-py") from exc
    return pynvml


def nvml_error(exc: BaseException) -> str:
    """Return an NVML error as ``<ErrorClass>: <message>`` (e.g. ``NVMLError_LibraryNotFound: ...``)."""
    return f"{type(exc).__name__}: {exc}"


def init_gpus(nvml: Any) -> list[Gpu]:
    """Initialise NVML and return the visible GPUs; SourceUnavailable (NVML shut down) when there are none."""
    try:
        nvml.nvmlInit()
    except nvml.NVMLError as exc:
        raise SourceUnavailable(nvml_error(exc)) from exc
    try:
        gpus = [Gpu(i, handle, name) for i, handle, name in visible_gpus(nvml)]
    except nvml.NVMLError as exc:
        nvml.nvmlShutdown()
        raise SourceUnavailable(nvml_error(exc)) from exc
    if not gpus:
        nvml.nvmlShutdown()
        raise SourceUnavailable("NVML found no GPU visible to this process (CUDA_VISIBLE_DEVICES?)")
    return gpus
